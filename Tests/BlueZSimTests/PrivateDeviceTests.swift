import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import ProximityTrust
import Testing
import SimTesting

/// Private devices (`private_devices:`): phones that advertise from a resolvable private address
/// made from their identity resolving key, and change it every `rotation` seconds.
@Suite(.serialized) struct PrivateDeviceTests {
    /// The Core specification's sample IRK (Vol 3 Part H Appendix D.7).
    static let irkHex = "ec0234a357c8ad05341010a60a397d9b"
    static let irk = try! IdentityResolvingKey(hex: irkHex)
    static let box = #"{ name: a, address: "02:00:00:00:00:01", position: [0, 0] }"#

    func error(_ text: String, format: ScenarioFormat = .yaml) -> ScenarioError? {
        do {
            _ = try Scenario.parse(text, format: format)
            return nil
        } catch {
            return error
        }
    }

    // MARK: The scenario file

    @Test func parsedWithDefaults() throws {
        let scenario = try Scenario.parse("""
            boxes: [\(Self.box)]
            private_devices:
              - name: phone
                irk: \(Self.irkHex)
                position: [1, 0]
              - name: watch
                irk: "00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF"
                rotation: 5
                advertising_interval: 0.5
                tx_offset: -6
                waypoints: [{ t: 0, at: [0, 1] }, { t: 10, at: [5, 1] }]
            """, format: .yaml)
        let phone = try #require(scenario.privateDevice(named: "phone"))
        #expect(phone.irk == Self.irk)
        #expect(phone.rotation == 900 && phone.rotation == PrivateDeviceSpec.defaultRotation)
        #expect(phone.advertisingInterval == nil && phone.txOffset == 0)
        #expect(phone.trajectory.position(at: 100) == Position(x: 1, y: 0))
        let watch = try #require(scenario.privateDevice(named: "watch"))
        #expect(watch.irk.bytes == [0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF])
        #expect(watch.rotation == 5 && watch.advertisingInterval == 0.5 && watch.txOffset == -6)
        #expect(watch.trajectory.position(at: 5) == Position(x: 2.5, y: 1))

        // JSON says the same; a scenario without private devices has none.
        let json = try Scenario.parse("""
            {"boxes": [{"name": "a", "address": "02:00:00:00:00:01", "position": [0, 0]}],
             "private_devices": [{"name": "phone", "irk": "\(Self.irkHex)", "rotation": 60, "position": [1, 0]}]}
            """, format: .json)
        #expect(json.privateDevices == [PrivateDeviceSpec(name: "phone", irk: Self.irk, rotation: 60,
                                                          trajectory: Trajectory(fixed: Position(x: 1, y: 0)))])
        #expect(try Scenario.parse("boxes: [\(Self.box)]", format: .yaml).privateDevices.isEmpty)
    }

    /// Each bad entry names its path, and the line and column of the value (or of the key, for an
    /// unknown key), as the beacons' errors do.
    @Test(arguments: [
        // (label, body of the entry after `name: phone`, path, line, column)
        ("irk not hex", "irk: ec0234a357c8ad05341010a60a397d9x\n    position: [1, 0]", "private_devices[0].irk", 4, 10),
        ("irk too short", "irk: ec0234a357c8ad05341010a60a397d9\n    position: [1, 0]", "private_devices[0].irk", 4, 10),
        ("irk a list", "irk: [1, 2]\n    position: [1, 0]", "private_devices[0].irk", 4, 10),
        ("irk missing", "position: [1, 0]", "private_devices[0].irk", 3, 5),
        ("unknown key", "irk: \(irkHex)\n    position: [1, 0]\n    address: \"C0:00:00:00:00:01\"", "private_devices[0].address", 6, 5),
        ("rotation zero", "irk: \(irkHex)\n    rotation: 0\n    position: [1, 0]", "private_devices[0].rotation", 5, 15),
        ("rotation above an hour", "irk: \(irkHex)\n    rotation: 3601\n    position: [1, 0]", "private_devices[0].rotation", 5, 15),
        ("rotation a string", "irk: \(irkHex)\n    rotation: often\n    position: [1, 0]", "private_devices[0].rotation", 5, 15),
        ("rotation quoted", "irk: \(irkHex)\n    rotation: \"5\"\n    position: [1, 0]", "private_devices[0].rotation", 5, 15),
        ("no position", "irk: \(irkHex)", "private_devices[0]", 3, 5),
        ("position and waypoints", "irk: \(irkHex)\n    position: [1, 0]\n    waypoints: [{ t: 0, at: [0, 0] }]", "private_devices[0]", 3, 5),
        ("waypoints not increasing", "irk: \(irkHex)\n    waypoints: [{ t: 0, at: [0, 0] }, { t: 0, at: [1, 0] }]",
         "private_devices[0].waypoints[1].t", 5, 44),
        ("interval zero", "irk: \(irkHex)\n    position: [1, 0]\n    advertising_interval: 0", "private_devices[0].advertising_interval", 6, 27),
        ("tx_offset above 60 dB", "irk: \(irkHex)\n    position: [1, 0]\n    tx_offset: 61", "private_devices[0].tx_offset", 6, 16),
    ] as [(String, String, String, Int, Int)])
    func badEntry(_ label: String, _ body: String, _ path: String, _ line: Int, _ column: Int) throws {
        let text = "boxes: [\(Self.box)]\nprivate_devices:\n  - name: phone\n    \(body)\n"
        let bad = try #require(error(text), "\(label): parsed")
        #expect(bad.path == path, "\(label): \(bad)")
        #expect(bad.line == line && bad.column == column, "\(label): \(bad)")
    }

    @Test func namesAndKeysAreUnique() throws {
        let phone = "{ name: phone, irk: \(Self.irkHex), position: [1, 0] }"
        let takenByBox = try #require(error("boxes: [\(Self.box)]\nprivate_devices:\n  - { name: a, irk: \(Self.irkHex), position: [1, 0] }\n"))
        #expect(takenByBox.path == "private_devices[0].name" && takenByBox.line == 3 && takenByBox.column == 13)
        #expect(takenByBox.message == "duplicate name \"a\" (also boxes[0])")
        let takenByBeacon = try #require(error("""
            boxes: [\(Self.box)]
            beacons: [{ name: phone, address: "C0:00:00:00:00:01", position: [0, 1], eddystone_url: { url: "https://a.com" } }]
            private_devices: [\(phone)]
            """))
        #expect(takenByBeacon.path == "private_devices[0].name" && takenByBeacon.line == 3)
        let twice = try #require(error("""
            boxes: [\(Self.box)]
            private_devices:
              - \(phone)
              - { name: tablet, irk: "EC0234A357C8AD05341010A60A397D9B", position: [2, 0] }
            """))
        #expect(twice.path == "private_devices[1].irk" && twice.line == 4 && twice.column == 26)
        #expect(twice.message == "duplicate irk (also private_devices[0]): one key is one device")
        let notAList = try #require(error("boxes: [\(Self.box)]\nprivate_devices: \(phone)\n"))
        #expect(notAList.path == "private_devices" && notAList.line == 2 && notAList.column == 18)
        let unknownTopLevel = try #require(error("boxes: [\(Self.box)]\nprivate_device: [\(phone)]\n"))
        #expect(unknownTopLevel.path == "private_device" && unknownTopLevel.line == 2 && unknownTopLevel.column == 1)
    }

    @Test func fileLineColumn() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("private-devices-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("phone.yaml")
        try "boxes: [\(Self.box)]\nprivate_devices:\n  - name: phone\n    irk: 0123456789abcdef\n    position: [1, 0]\n"
            .write(to: file, atomically: true, encoding: .utf8)
        do {
            _ = try Scenario.load(from: file)
            Issue.record("loaded a bad file")
        } catch {
            #expect(error.description == "\(file.path):4:10: private_devices[0].irk: an IRK is 32 hexadecimal digits (16 bytes, most significant first), e.g. ec0234a357c8ad05341010a60a397d9b, or its 16 bytes in base64 as the Keychain shows them, e.g. m305CqYQEDQFrchXozQC7A==")
        }
    }

    @Test func validatedInCode() throws {
        var scenario = twoBoxes()
        scenario.privateDevices = [PrivateDeviceSpec(name: "phone", irk: Self.irk, rotation: 0.5, trajectory: Trajectory(fixed: Position(x: 1, y: 0)))]
        #expect(throws: ScenarioError(path: "private_devices[0].rotation", message: "must be 1...3600 s, not 0.5")) { try scenario.validate() }
        scenario.privateDevices[0].rotation = 1
        try scenario.validate()
        scenario.privateDevices[0].name = "beta"
        #expect(throws: ScenarioError(path: "private_devices[0].name", message: "duplicate name \"beta\" (also boxes[1])")) {
            try scenario.validate()
        }
    }

    // MARK: On the air

    /// One phone 1 m from alpha, changing address every 5 s.
    static func scenario(seed: UInt64) -> Scenario {
        var scenario = twoBoxes(seed: seed)
        scenario.privateDevices = [PrivateDeviceSpec(name: "phone", irk: irk, rotation: 5, trajectory: Trajectory(fixed: Position(x: 0, y: 1)))]
        return scenario
    }

    /// The random-address devices alpha's bluetoothd shows (`GetManagedObjects`), by address.
    static func randomDevices(_ connection: DBusConnection) async throws -> [String: [String: DBusValue]] {
        var devices: [String: [String: DBusValue]] = [:]
        for (_, interfaces) in try await connection.managedObjects() {
            guard let device = interfaces[BlueZ.deviceInterface.rawValue], device["AddressType"] == .string("random"),
                  let address = device["Address"]?.string else { continue }
            devices[address] = device
        }
        return devices
    }

    /// Alpha discovers for 16 simulated seconds; at 2.5, 7.5, 12.5 and 16 s the addresses it has
    /// seen, in the order they first appeared. The air is advanced synchronously and
    /// `GetManagedObjects` reads bluetoothd's mirror, so each snapshot is the state at that time.
    static func addressesSeen(seed: UInt64) async throws -> [[String]] {
        try await withSimBoxes(scenario(seed: seed), time: .simulated) { sim in
            let alpha = try await sim.client("alpha")
            try await alpha.adapter("StartDiscovery")
            var order: [String] = []
            var snapshots: [[String]] = []
            var now = 0.0
            for t in [2.5, 7.5, 12.5, 16] {
                await sim.advance(t - now)
                now = t
                let devices = try await randomDevices(alpha)
                for address in devices.keys.sorted() where !order.contains(address) { order.append(address) }
                #expect(Set(devices.keys) == Set(order), "a device vanished at \(t) s")
                snapshots.append(order)
            }
            await alpha.close()
            return snapshots
        }
    }

    /// What a scanning adapter sees: a new Device1 every 5 s, its AddressType "random", its
    /// address an RPA of the phone's IRK; each rotation adds exactly one.
    @Test func aNewRandomAddressEveryRotation() async throws {
        let snapshots = try await Self.addressesSeen(seed: 7)
        #expect(snapshots.map(\.count) == [1, 2, 3, 4], "\(snapshots)")
        let addresses = try #require(snapshots.last)
        #expect(Set(addresses).count == 4)
        for address in addresses {
            let bytes = try #require(IdentityResolvingKey.addressBytes(address))
            #expect(bytes[0] >> 6 == 0b01, "\(address) is not in the RPA form")
            #expect(Self.irk.resolves(bytes), "\(address) does not resolve with the phone's IRK")
            #expect(IdentityResolvingKey.addressText(bytes) == address)
        }
        // Another key does not resolve them.
        let other = try IdentityResolvingKey(hex: "00112233445566778899aabbccddeeff")
        #expect(!addresses.contains { other.resolves(IdentityResolvingKey.addressBytes($0)!) })
    }

    /// The same seed gives the same addresses in the same order; another seed, others.
    @Test func reproducibleFromTheSeed() async throws {
        let first = try await Self.addressesSeen(seed: 7)
        let again = try await Self.addressesSeen(seed: 7)
        let other = try await Self.addressesSeen(seed: 8)
        #expect(first == again)
        #expect(first.last?.count == 4 && other.last?.count == 4)
        #expect(Set(first.last ?? []).isDisjoint(with: other.last ?? []))
    }

    /// The Device1 object of an old address: its properties, and it stops being heard, so BlueZ
    /// removes it after the temporary timeout (30 s) as it does a beacon that went out of range,
    /// while the phone goes on under newer addresses. GetState tells the current address.
    @Test func oldAddressesExpire() async throws {
        try await withSimBoxes(Self.scenario(seed: 7), time: .simulated) { sim in
            let alpha = try await sim.client("alpha")
            let log = try await SignalLog.bluez(alpha)
            try await alpha.adapter("StartDiscovery")
            await sim.advance(1)
            let devices = try await Self.randomDevices(alpha)
            let (first, device) = try #require(devices.first)
            #expect(devices.count == 1)
            #expect(device["Alias"] == .string(first.replacingOccurrences(of: ":", with: "-")))
            #expect(device["RSSI"] == .int16(-59))
            #expect(device["ManufacturerData"]?.dictEntries?.first?.key == .uint16(0x004C))
            #expect(device["Name"] == nil && device["UUIDs"] == .strings([]))
            let state = try #require(try await sim.control("GetState").first?.string)
            #expect(state.contains(#""private_devices":[{"address":"\#(first)""#), "\(state)")
            #expect(!state.contains(#""beacons":[{"#))
            // A beacon added at run time cannot take its name; it is not a beacon to remove.
            await expectError("org.proximityd.BlueZSim.Error.InvalidArguments", #"the name "phone" is taken"#) {
                try await sim.control("AddBeacon", [.string(#"{"name": "phone", "address": "C0:00:00:00:00:09", "position": [0, 0], "eddystone_url": {"url": "https://a.com"}}"#)])
            }
            await expectError("org.proximityd.BlueZSim.Error.UnknownBeacon") { try await sim.control("RemoveBeacon", [.string("phone")]) }

            // Heard until just before 5 s: removed 30 s later, before 35.5 s, not before 34.5 s.
            let firstPath = BlueZ.devicePath(adapter: "hci0", address: first)
            await sim.advance(33.5)
            #expect(try await Self.randomDevices(alpha)[first] != nil)
            await sim.advance(1)
            try await log.wait { $0.isInterfacesRemoved(firstPath) }
            let later = try await Self.randomDevices(alpha)
            // 35.5 s: the addresses of 5, 10, …, 35 s remain.
            #expect(later[first] == nil && later.count == 7, "\(later.keys.sorted())")
            await alpha.close()
        }
    }
}
