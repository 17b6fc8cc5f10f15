import BlueZ
import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import ProximityTrust
import Testing
import SimTesting

extension BlueZBusTests {
    /// A phone pairs with a box on bluez-sim (`PairDevice`): the box's pairing agent
    /// (``PairingAgent``) is asked, lets one device through, refuses others and anyone but
    /// bluetoothd; the bond is stored as bluetoothd stores it, with the IRK least significant byte
    /// first; a bonded phone's later addresses come in under its identity address; a restarted
    /// bluetoothd still has the bond; `RemoveDevice` deletes it.
    @Suite struct PairingBusTests {
        static let anna = try! IdentityResolvingKey(hex: "ec0234a357c8ad05341010a60a397d9b")
        static let bob = try! IdentityResolvingKey(hex: "00112233445566778899aabbccddeeff")

        static func scenario() -> Scenario {
            var s = twoBoxes(seed: 11)
            s.privateDevices = [
                PrivateDeviceSpec(name: "anna", irk: anna, rotation: 1, trajectory: Trajectory(fixed: Position(x: 1, y: 0))),
                PrivateDeviceSpec(name: "bob", irk: bob, rotation: 1, trajectory: Trajectory(fixed: Position(x: 1.5, y: 0))),
            ]
            return s
        }

        static func pair(_ rig: SimBoxes, _ device: String) async throws -> String {
            try await rig.control("PairDevice", [.string(device), .string("alpha")]).first?.string ?? ""
        }

        static func expectRefused(_ rig: SimBoxes, _ device: String, _ reason: String, sourceLocation: SourceLocation = #_sourceLocation) async {
            do {
                let shown = try await pair(rig, device)
                Issue.record("\(device) paired (shown \(shown)); expected: \(reason)", sourceLocation: sourceLocation)
            } catch let error as DBusError {
                #expect(error.message.contains(reason), "\(error)", sourceLocation: sourceLocation)
            } catch {
                Issue.record("\(error)", sourceLocation: sourceLocation)
            }
        }

        @Test func phonePairsOnce() async throws {
            let storage = FileManager.default.temporaryDirectory.appendingPathComponent("pairing-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: storage) }
            try await withSimBoxes(Self.scenario(), storage: storage) { rig in
                let alpha = try await rig.client("alpha")
                let bluez = Adapter(connection: alpha, path: adapterPath)

                // Not listed until the box advertises connectable and discoverable, with a name.
                await Self.expectRefused(rig, "anna", "the phone does not list it")
                let ad = try await Advertisement.export(on: alpha, at: "/test/enroll", plan: Advertisement.pairablePlan(name: "enroll test"))
                try await ad.register(with: bluez.advertisingManager)
                // Listed, but nobody to ask: bluetoothd refuses.
                await Self.expectRefused(rig, "anna", "has no agent")

                let agent = try await PairingAgent.export(on: alpha, capability: .noInputNoOutput)
                let events = EventRecorder(recording: agent.events)
                let manager = AgentManager(connection: alpha)
                try await manager.register(agent.path, capability: .noInputNoOutput)
                await expectThrows(BlueZCallError.alreadyExists("Already Exists")) {
                    try await manager.register(agent.path, capability: .noInputNoOutput)
                }
                // Registered but not the default: incoming pairings go to the default agent only.
                await Self.expectRefused(rig, "anna", "has no agent")
                try await manager.requestDefault(agent.path)

                // Anyone but bluetoothd is refused, and lets nobody through.
                let stranger = try await rig.client("alpha")
                do {
                    _ = try await stranger.call(destination: alpha.uniqueName, path: agent.path, interface: PairingAgent.interface,
                                                member: "RequestAuthorization", [.objectPath("/org/bluez/hci0/dev_11_22_33_44_55_66")])
                    Issue.record("a stranger's RequestAuthorization was taken")
                } catch let error as DBusError {
                    #expect(error.name == BlueZCallers.notPermitted, "\(error)")
                }
                #expect(agent.acceptedDevice == nil)

                // Anna pairs (Just Works: the agent is asked to authorise): the phone lists the name.
                let mirror = RunningMirror.start(on: try await rig.client("alpha"))
                #expect(try await Self.pair(rig, "anna") == "enroll test")
                try await events.require("anna accepted") { if case .accepted = $0 { true } else { false } }
                let annaSpec = try #require(rig.scenario.privateDevice(named: "anna"))
                let identity = annaSpec.identityAddress
                try await mirror.log.until("anna bonded at her identity address", timeout: .seconds(10)) {
                    await mirror.mirror.devices(on: adapterPath).contains { $0.paired && $0.address == identity && $0.addressType == "public" }
                }
                let bonded = try #require(await mirror.mirror.devices(on: adapterPath).first { $0.address == identity })

                // Stored as bluetoothd stores it: 0700 directories, a 0600 file, the key reversed.
                let info = BondStore.infoPath(storage: storage.appendingPathComponent("alpha").path, adapter: "AA:00:00:00:00:01", device: identity)
                let text = try BondStore.readInfo(at: info)
                #expect(text.contains("Key=9B7D390AA6101034" + "05ADC857A33402EC"), "\(text)")
                #expect(try BondStore.storedIdentityResolvingKey(info: text) == "9B7D390AA6101034" + "05ADC857A33402EC")
                #expect(try FileManager.default.attributesOfItem(atPath: info)[.posixPermissions] as? Int == 0o600)
                let dir = (info as NSString).deletingLastPathComponent
                #expect(try FileManager.default.attributesOfItem(atPath: dir)[.posixPermissions] as? Int == 0o700)

                // One device per enrollment: Bob is refused while the agent is there (the passkey
                // case, where the agent cannot refuse, is proximityctl's: IRKEnrollTests).
                await Self.expectRefused(rig, "bob", "refused the pairing")
                try await events.require("bob refused") { if case .refused = $0 { true } else { false } }

                // Bonded: the kernel resolves the phone's new addresses, so reports come in under the
                // identity address and no device appears for an address of Anna's.
                try await bluez.startDiscovery()
                try await mirror.log.until("a report under anna's identity address", timeout: .seconds(10)) {
                    await mirror.mirror.device(at: bonded.path)?.rssi != nil
                }
                let annaAddresses = await mirror.mirror.devices(on: adapterPath).filter { device in
                    IdentityResolvingKey.addressBytes(device.address).map { Self.anna.resolves($0) } ?? false
                }
                #expect(annaAddresses.isEmpty, "\(annaAddresses.map(\.address))")
                try await bluez.stopDiscovery()

                // A restarted bluetoothd loads the bond again.
                try await rig.control("RestartBluetoothd", [.string("alpha")])
                try await mirror.log.until("the bond back after the restart, the adapter on", timeout: .seconds(10)) {
                    let powered = await mirror.mirror.adapter(at: adapterPath)?.powered == true
                    let devices = await mirror.mirror.devices(on: adapterPath)
                    return powered && devices.contains { $0.paired && $0.address == identity }
                }
                let again = try #require(await mirror.mirror.devices(on: adapterPath).first { $0.address == identity })
                // RemoveDevice deletes the keys.
                try await bluez.removeDevice(again.path)
                #expect(!FileManager.default.fileExists(atPath: dir))
                await mirror.stop()
                await stranger.close()
                await alpha.close()
            }
        }
    }
}
