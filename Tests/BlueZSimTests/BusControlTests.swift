import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import Testing
import SimTesting

/// The control service (`org.proximityd.BlueZSim` on every box bus) and what it does to BlueZ.
@Suite(.serialized) struct BusControlTests {
    func control(_ connection: DBusConnection, _ member: MemberName, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await connection.call(destination: ControlService.busName, path: ControlService.objectPath,
                                  interface: ControlService.interfaceName, member: member, arguments)
    }

    /// org.bluez drops and comes back under a new owner, with the adapter and nothing else.
    @Test func restartBluetoothd() async throws {
        try await withSimBoxes(twoBoxes(), time: .simulated) { sim in
            let beta = try await sim.client("beta")
            let ad = try await TestAdvertisement(on: beta, properties: peripheralAdvertisement(discoverable: true))
            try await ad.register(beta)
            let alpha = try await sim.client("alpha")
            try await alpha.adapter("StartDiscovery")
            await sim.advance(1)
            #expect(try await alpha.managedObjects()[betaPath] != nil)
            let owners = SignalLog(try await alpha.subscribe(MatchRule(sender: .bus, interface: .bus, member: "NameOwnerChanged",
                                                                      arg0: BlueZ.service.rawValue)))
            let oldOwner = try await alpha.nameOwner(of: BlueZ.service)

            _ = try await control(alpha, "RestartBluetoothd", [.string("alpha")])
            try await owners.wait { $0.body.count == 3 && $0.body[2].string == "" }
            let back = try await owners.wait { $0.body.count == 3 && $0.body[2].string != "" }
            #expect(back.body[2].string != oldOwner?.rawValue)
            let objects = try await alpha.managedObjects()
            #expect(objects[adapterPath]?[BlueZ.adapterInterface.rawValue]?["Discovering"] == .boolean(false))
            #expect(objects.keys.allSatisfy { !$0.rawValue.contains("dev_") })
            // As bluetoothd 5.66: the adapter comes back off, and bluetoothd powers it itself;
            // a client's Powered meanwhile is Busy.
            #expect(objects[adapterPath]?[BlueZ.adapterInterface.rawValue]?["Powered"] == .boolean(false))
            await expectError("org.bluez.Error.Busy", "") {
                _ = try await alpha.bluez(adapterPath, "org.freedesktop.DBus.Properties", "Set",
                                         [.string(BlueZ.adapterInterface.rawValue), .string("Powered"), .variant(.boolean(true))])
            }
            await sim.advance(0.2)
            #expect(try await alpha.managedObjects()[adapterPath]?[BlueZ.adapterInterface.rawValue]?["Powered"] == .boolean(true))
            // The control service stayed.
            #expect(try await control(alpha, "GetState").first?.string?.contains("\"alpha\"") == true)
            await alpha.close()
            await beta.close()
        }
    }

    @Test func powerMoveBeaconsAndErrors() async throws {
        try await withSimBoxes(twoBoxes(), time: .simulated) { sim in
            let alpha = try await sim.client("alpha")
            let log = try await SignalLog.bluez(alpha)
            try await alpha.adapter("SetDiscoveryFilter", [.vardict(["Transport": .string("le")])])
            try await alpha.adapter("StartDiscovery")
            _ = try await control(alpha, "AddBeacon", [.string("""
                {"name": "door", "address": "C0:00:00:00:00:07", "position": [1, 0],
                 "ibeacon": {"uuid": "f7826da6-4fa2-4e98-8024-bc5b71e0893e", "major": 1, "minor": 7}}
                """)])
            await sim.advance(1)
            let door: ObjectPath = "/org/bluez/hci0/dev_C0_00_00_00_00_07"
            try await log.wait { $0.isInterfacesAdded(door) }

            // Power off: discovery ends, the beacon (temporary, not connectable) goes.
            _ = try await control(alpha, "SetPowered", [.string("alpha"), .boolean(false)])
            try await log.wait { $0.isChange(adapterPath, BlueZ.adapterInterface) && $0.changed["Powered"] == .boolean(false) }
            try await log.wait { $0.isInterfacesRemoved(door) }
            await expectError("org.bluez.Error.NotReady", "Resource Not Ready") { try await alpha.adapter("StartDiscovery") }
            _ = try await control(alpha, "SetPowered", [.string("alpha"), .boolean(true)])
            try await log.wait { $0.isChange(adapterPath, BlueZ.adapterInterface) && $0.changed["Powered"] == .boolean(true) }

            _ = try await control(alpha, "MoveBox", [.string("beta"), .double(5), .double(5), .double(0)])
            let state = try await control(alpha, "GetState").first?.string ?? ""
            #expect(state.contains("\"position\":[5,5,0]"))

            await expectError("org.proximityd.BlueZSim.Error.UnknownBox") {
                _ = try await control(alpha, "MoveBox", [.string("gamma"), .double(0), .double(0), .double(0)])
            }
            await expectError("org.proximityd.BlueZSim.Error.UnknownBeacon") {
                _ = try await control(alpha, "RemoveBeacon", [.string("window")])
            }
            await expectError("org.proximityd.BlueZSim.Error.InvalidArguments") {
                _ = try await control(alpha, "AddBeacon", [.string("{\"name\": \"x\"}")])
            }
            await expectError("org.proximityd.BlueZSim.Error.InvalidArguments") {
                _ = try await control(alpha, "Configure", [.vardict(["PacketLoss": .double(2)])])
            }
            _ = try await control(alpha, "Configure", [.vardict(["ConnectionFailureRate": .double(0.3)])])
            _ = try await control(alpha, "RemoveBeacon", [.string("door")])
            await alpha.close()
        }
    }

    /// `bluez-sim ctl` against a running `bluez-sim` executable.
    @Test func executableAndCtl() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("bluez-sim-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let scenario = dir.appendingPathComponent("s.yaml")
        try """
            seed: 3
            boxes:
              - {name: alpha, address: "AA:00:00:00:00:01", position: [0, 0]}
              - {name: beta, address: "AA:00:00:00:00:02", position: [3, 0]}
            """.write(to: scenario, atomically: true, encoding: .utf8)
        let exe = BuiltProducts.path("bluez-sim")
        let sim = try ManagedProcess(exe, ["--scenario", scenario.path, "--json", "--runtime-dir", dir.path])
        try await sim.waitForOutput(containing: "\n", timeout: .seconds(20))
        let document = try JSONSerialization.jsonObject(with: Data(sim.stdout.utf8)) as? [String: Any]
        let boxes = try #require(document?["boxes"] as? [[String: String]])
        #expect(boxes.map { $0["name"] } == ["alpha", "beta"])
        let bus = try #require(boxes.first?["bus"])
        #expect(try String(contentsOf: dir.appendingPathComponent("alpha.address"), encoding: .utf8) == bus + "\n")

        let list = try await runCommand("bluetoothctl", ["list"], environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus], timeout: .seconds(20))
        #expect(list.stdout.contains("Controller AA:00:00:00:00:01 alpha [default]"), "\(list)")

        let move = try await runCommand(exe, ["ctl", "--bus", bus, "move", "beta", "7", "1"])
        #expect(move.status == 0, "\(move)")
        let status = try await runCommand(exe, ["ctl", "--bus", bus, "status"])
        #expect(status.stdout.contains("\"position\":[7,1,0]"), "\(status)")
        let power = try await runCommand(exe, ["ctl", "--bus", bus, "power", "beta", "off"])
        #expect(power.status == 0, "\(power)")
        let failures = try await runCommand(exe, ["ctl", "--bus", bus, "failures", "--connect", "0.3"])
        #expect(failures.status == 0, "\(failures)")
        let bad = try await runCommand(exe, ["ctl", "--bus", bus, "move", "gamma", "1", "1"])
        #expect(bad.status == 1)
        #expect(bad.stderr.contains("org.proximityd.BlueZSim.Error.UnknownBox"))
        let restart = try await runCommand(exe, ["ctl", "--bus", bus, "restart-bluetoothd", "alpha"])
        #expect(restart.status == 0, "\(restart)")

        sim.signal(SIGTERM)
        #expect(try await sim.waitForExit(timeout: .seconds(10)) == 0)
    }
}
