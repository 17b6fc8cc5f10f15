import BlueZSim
import DBusKit
import Foundation
import ProximityAPI
import ProximityNode
import ProximityTesting
import Testing

@Suite("proximityd on a private bus, seen by busctl, dbus-send, gdbus and proximityctl")
struct DaemonBusTests {
    @Test("busctl introspects, reads properties and calls GetPeers and GetManagedObjects")
    func busctl() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            let identity = try String(contentsOf: box.stateDirectory.appendingPathComponent("identity"), encoding: .utf8).trimmed

            let introspect = try await box.busctl(["introspect", "org.proximityd", "/org/proximityd", "org.proximityd.Node1"])
            #expect(introspect.status == 0, "\(introspect)")
            for member in [".GetPeers", ".Identifier", ".ServiceUUID", ".Name", ".Advertising", ".Discovering"] {
                #expect(introspect.stdout.contains(member), "\(member) missing:\n\(introspect.stdout)")
            }
            let id = try await box.busctl(["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "Identifier"])
            #expect(id.stdout.trimmed == "s \"\(identity)\"")
            let uuid = try await box.busctl(["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "ServiceUUID"])
            #expect(uuid.stdout.trimmed == "s \"\(NodeConfiguration.defaultServiceUUID.lowercased)\"")
            let flags = try await box.busctl(["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.Node1",
                                              "Name", "Advertising", "Discovering"])
            #expect(flags.stdout.trimmed == "s \"test-box\"\nb false\nb false", "\(flags)")
            let peers = try await box.busctl(["call", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "GetPeers"])
            #expect(peers.stdout.trimmed == "ao 0")
            let managed = try await box.busctl(["call", "org.proximityd", "/org/proximityd",
                                                "org.freedesktop.DBus.ObjectManager", "GetManagedObjects"])
            // Without BlueZ: no peers, and nothing for BlueZ: what a client enumerates is the API.
            #expect(managed.stdout.trimmed == "a{oa{sa{sv}}} 0", "\(managed)")
            // The advertisement and the GATT application (its service, the identity, hello and
            // challenge characteristics), exported at start in their own tree, registered once
            // BlueZ appears.
            let forBlueZ = try await box.busctl(["call", "org.proximityd", "/org/proximityd_bluez",
                                                 "org.freedesktop.DBus.ObjectManager", "GetManagedObjects"])
            #expect(forBlueZ.stdout.trimmed.hasPrefix("a{oa{sa{sv}}} 5 \"/org/proximityd_bluez/advertisement0\""), "\(forBlueZ)")
            #expect(forBlueZ.stdout.contains("\"/org/proximityd_bluez/gatt/service0/char1\""), "\(forBlueZ)")
            #expect(forBlueZ.stdout.contains("\"/org/proximityd_bluez/gatt/service0/char2\""), "\(forBlueZ)")
            let tree = try await box.busctl(["tree", "org.proximityd"])
            #expect(tree.stdout.contains("/org/proximityd"), "\(tree)")
            await daemon.stop()
            #expect(daemon.exitStatus == 0, "\(daemon.stderr)")
        }
    }

    @Test("dbus-send and gdbus read the node")
    func dbusSendAndGdbus() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            let send = try await runCommand("dbus-send", ["--bus=\(box.address)", "--print-reply", "--dest=org.proximityd",
                                                          "/org/proximityd", "org.freedesktop.DBus.Properties.Get",
                                                          "string:org.proximityd.Node1", "string:ServiceUUID"])
            #expect(send.stdout.contains("variant       string \"\(NodeConfiguration.defaultServiceUUID.lowercased)\""), "\(send)")
            let gdbus = try await runCommand("gdbus", ["introspect", "--address", box.address, "--dest", "org.proximityd",
                                                       "--object-path", "/org/proximityd"])
            #expect(gdbus.stdout.contains("interface org.proximityd.Node1"), "\(gdbus)")
            #expect(gdbus.stdout.contains("readonly s Identifier"), "\(gdbus)")
            let call = try await runCommand("gdbus", ["call", "--address", box.address, "--dest", "org.proximityd",
                                                      "--object-path", "/org/proximityd", "--method", "org.proximityd.Node1.GetPeers"])
            #expect(call.stdout.trimmed == "(@ao [],)", "\(call)")
            await daemon.stop()
        }
    }

    @Test("dbus/org.proximityd.Node1.xml and AlertManager1.xml match what the daemon returns from Introspect on /org/proximityd")
    func introspectionMatchesFile() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            let reply = try await box.observer.call(destination: "org.proximityd", path: "/org/proximityd",
                                                    interface: .introspectable, member: "Introspect")
            let live = try #require(reply.first?.string)
            for interface in ["org.proximityd.Node1", "org.proximityd.AlertManager1"] {
                try RegionBusTests.checkInterfaceFile(interface, live: live)
            }
            await daemon.stop()
        }
    }

    @Test("dbus/org.proximityd.Alert1.xml matches what the daemon returns from Introspect on an alert's target (an iBeacon on bluez-sim)")
    func alertIntrospectionMatchesFile() async throws {
        let fleet = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"
        let scenario = Scenario(seed: 11, boxes: [
            BoxSpec(name: "desk", address: "AA:00:00:00:00:01", trajectory: Trajectory(fixed: Position(x: 0, y: 0))),
        ])
        try await withNodes(scenario) { sim, daemons in
            daemons["desk"] = try await sim.startDaemon("desk")
            _ = try await sim.control(["AddBeacon", "s", """
                {"name": "beacon1", "address": "C0:00:00:00:00:01", "ibeacon": {"uuid": "\(fleet)", "major": 1, "minor": 1}, "position": [1, 0]}
                """])
            // An empty matcher: every peer is a target, as docs/dbus-api.md shows it.
            let added = try await sim.busctl("desk", ["call", "org.proximityd", "/org/proximityd", "org.proximityd.AlertManager1",
                                                      "AddAlert", "sa{sv}", "a1", "1", "Match", "a{sv}", "0"])
            #expect(added.status == 0, "\(added)")
            let path = ProximityBus.alertPath(alert: "a1", target: "ibeacon:\(fleet):1:1")
            try await sim.until("desk", "the beacon is a1's target", timeout: .seconds(20)) {
                try await sim.busctl("desk", ["call", "org.proximityd", "/org/proximityd", "org.proximityd.AlertManager1", "GetAlerts"])
                    .stdout.contains(path.rawValue)
            }
            let observer = try await sim.buses["desk"]!.connect()
            let reply = try await observer.call(destination: "org.proximityd", path: path, interface: .introspectable, member: "Introspect")
            await observer.close()
            try RegionBusTests.checkInterfaceFile("org.proximityd.Alert1", live: try #require(reply.first?.string))
        }
    }

    @Test("bad calls get the standard error names and the node keeps running")
    func badCalls() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            let cases: [([String], String)] = [
                (["call", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "Nope"], "Unknown method 'Nope'"),
                (["call", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "GetPeers", "s", "x"],
                 "Invalid arguments 's' to call org.proximityd.Node1.GetPeers(), expecting ''."),
                (["set-property", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "Identifier", "s", "x"],
                 "Property 'Identifier' is not writable."),
                (["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "Nope"], "Unknown property 'Nope'"),
                (["call", "org.proximityd", "/org/proximityd/nothing", "org.proximityd.Node1", "GetPeers"],
                 "Unknown object '/org/proximityd/nothing'."),
                (["call", "org.proximityd", "/org/proximityd", "org.proximityd.Nope1", "GetPeers"], "Unknown interface"),
            ]
            for (arguments, message) in cases {
                let result = try await box.busctl(arguments)
                #expect(result.status != 0)
                #expect(result.stderr.contains(message), "\(arguments): \(result)")
            }
            let still = try await box.busctl(["call", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "GetPeers"])
            #expect(still.stdout.trimmed == "ao 0")
            #expect(daemon.isRunning)
            await daemon.stop()
        }
    }

    @Test("proximityctl status, as text and JSON, and when the node is not running")
    func proximityctl() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            let identity = try String(contentsOf: box.stateDirectory.appendingPathComponent("identity"), encoding: .utf8).trimmed
            let text = try await runCommand(BuiltProducts.path("proximityctl"), ["status", "--bus", box.address])
            #expect(text.status == 0, "\(text)")
            #expect(text.stdout.contains("Identifier:   \(identity)"), "\(text)")
            #expect(text.stdout.contains("Peers:        0"))
            #expect(text.stdout.contains("Clear after:  10 s") && text.stdout.contains("1 m RSSI:     -59 dBm"), "\(text)")
            #expect(text.stdout.contains("Path loss n:  2\n") && text.stdout.contains("RSSI offset:  0 dB"), "\(text)")
            let json = try await runCommand(BuiltProducts.path("proximityctl"), ["status", "--bus", box.address, "--json"])
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
            #expect(object["identifier"] as? String == identity)
            #expect(object["advertising"] as? Bool == false)
            #expect(object["peers"] as? Int == 0)
            #expect(object["clear_interval"] as? Double == 10 && object["measured_power"] as? Int == -59 && object["adapter"] as? String == "hci0")
            await daemon.stop()
            let missing = try await runCommand(BuiltProducts.path("proximityctl"), ["status", "--bus", box.address])
            #expect(missing.status == 69)
            #expect(missing.stderr.trimmed == "proximityctl: error: proximityd is not running on the \(box.address) bus (org.proximityd has no owner)")
            let bad = try await runCommand(BuiltProducts.path("proximityctl"), ["status", "--bus", "nonsense"])
            #expect(bad.status == 64, "\(bad)")
        }
    }

    @Test("two nodes share one bus under different names")
    func twoNodes() async throws {
        try await withBox { box in
            let first = try await box.startDaemon()
            let second = try await box.startDaemon(["--state-dir", box.bus.directory.appendingPathComponent("state2").path],
                                                   busName: "org.proximityd.hci1")
            let a = try await box.busctl(["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "Identifier"])
            let b = try await box.busctl(["get-property", "org.proximityd.hci1", "/org/proximityd", "org.proximityd.Node1", "Identifier"])
            #expect(a.status == 0 && b.status == 0)
            #expect(a.stdout != b.stdout)
            await second.stop()
            await first.stop()
        }
    }
}
