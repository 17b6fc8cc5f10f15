import BlueZSim
import DBusKit
import Foundation
import ProximityAPI
import ProximityTesting
import ProximityTrust
import Testing

/// `proximityctl irks enroll`, end to end on bluez-sim: a phone pairs with the node's box in the
/// window the command opens, the command reads the IRK bluetoothd stored for the bond, adds it
/// with AddIRK, removes the bond, and the node ranges the phone as irk:NAME at its rotating
/// addresses. The agent it registers takes calls from bluetoothd only, and the window closes.
@Suite("proximityctl irks enroll", .serialized)
struct IRKEnrollTests {
    static let anna = try! IdentityResolvingKey(hex: "ec0234a357c8ad05341010a60a397d9b")
    static let bob = try! IdentityResolvingKey(hex: "00112233445566778899aabbccddeeff")

    @Test("enroll: the phone pairs (passkey shown), the key is read from the bond and added, the bond removed, irk:anna-phone ranged within the command; a stranger's agent call refused; after the window nobody pairs")
    func enroll() async throws {
        var scenario = NodeAcceptanceTests.scenario(seed: 27, [(0, 0)])
        scenario.privateDevices = [
            PrivateDeviceSpec(name: "anna", irk: Self.anna, rotation: 3, trajectory: Trajectory(fixed: Position(x: 1, y: 0))),
            PrivateDeviceSpec(name: "bob", irk: Self.bob, rotation: 3, trajectory: Trajectory(fixed: Position(x: 1.5, y: 0))),
        ]
        let storage = FileManager.default.temporaryDirectory.appendingPathComponent("enroll-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: storage) }
        try await withNodes(scenario, storage: storage) { sim, daemons in
            daemons["alpha"] = try await sim.startDaemon("alpha")
            let ctl = BuiltProducts.path("proximityctl")
            let enroll = try ManagedProcess(ctl, ["irks", "enroll", "anna-phone", "--bus", sim.address("alpha"), "--window", "60",
                                                  "--bluetooth-storage", storage.appendingPathComponent("alpha").path])
            try await enroll.waitForOutput(containing: "within 60 s", timeout: .seconds(30))
            #expect(enroll.stdout.contains("pair with \"proximityd alpha\""), "\(enroll.stdout)")

            // The agent answers bluetoothd only.
            let stranger = try await sim.buses["alpha"]!.connect()
            let owner = try await Self.connection(of: enroll.pid, on: stranger)
            do {
                _ = try await stranger.call(destination: owner, path: "/org/proximityd_bluez/agent", interface: "org.bluez.Agent1",
                                            member: "RequestAuthorization", [.objectPath("/org/bluez/hci0/dev_11_22_33_44_55_66")])
                Issue.record("the agent took a stranger's call")
            } catch let error as DBusError {
                #expect(error.name.rawValue == "org.bluez.Error.NotPermitted", "\(error)")
            }
            await stranger.close()

            // The phone pairs from its settings: the name it lists is the one printed.
            let shown = try await sim.control("PairDevice", [.string("anna"), .string("alpha")])
            #expect(shown.first?.string == "proximityd alpha")
            let status = try await enroll.waitForExit(timeout: .seconds(60))
            #expect(status == 0, "\(enroll.stdout)\n\(enroll.stderr)")
            let out = enroll.stdout
            #expect(out.contains("Passkey: "), "\(out)")
            #expect(out.contains("anna-phone enrolled after"), "\(out)")
            #expect(out.contains("irk:anna-phone seen"), "\(out)")
            #expect(!out.contains(Hex.text(Self.anna.bytes)) && !enroll.stderr.contains(Hex.text(Self.anna.bytes)), "the key is never shown")
            if let seen = out.split(separator: "\n").first(where: { $0.contains("irk:anna-phone seen") }) {
                print("enroll: \(seen)")
            }
            #expect(try await sim.property("alpha", "IRKs") == "a{ss} 1 \"anna-phone\" \"bus\"")
            #expect(try await sim.ranging("alpha")["irk:anna-phone"] != nil)

            // The bond is gone, from bluetoothd and from its storage.
            let identity = try #require(sim.scenario.privateDevice(named: "anna")).identityAddress
            let bondDir = storage.appendingPathComponent("alpha/AA:00:00:00:00:01/\(identity)")
            #expect(!FileManager.default.fileExists(atPath: bondDir.path), "the bond was not removed")
            let objects = try await sim.busctl("alpha", ["call", "org.bluez", "/", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects"]).stdout
            #expect(!objects.contains(identity), "bluetoothd still has the phone at its identity address")

            // The window is closed: no agent, so Bob's phone cannot pair.
            do {
                _ = try await sim.control("PairDevice", [.string("bob"), .string("alpha")])
                Issue.record("bob paired after the window")
            } catch let error as DBusError {
                #expect(error.message.contains("not list it") || error.message.contains("no agent"), "\(error)")
            }
        }
    }

    /// The unique name of the connection process `pid` holds on the bus.
    static func connection(of pid: Int32, on bus: DBusConnection) async throws -> BusName {
        let names = try await bus.callBus("ListNames").first?.arrayElements?.compactMap(\.string) ?? []
        for name in names where name.hasPrefix(":") {
            let reply = try? await bus.callBus("GetConnectionUnixProcessID", [.string(name)])
            if case .uint32(let p)? = reply?.first, Int32(p) == pid { return try BusName(name) }
        }
        throw TestKitError("no connection of process \(pid)")
    }
}
