import BlueZSim
import Foundation
import NodeTesting
import ProximityTesting
import Testing
import SimTesting

/// `busctl --json=short`, how people script busctl, over everything a client of `org.proximityd`
/// is meant to see: `GetManagedObjects`, every property of every object it lists, and every method
/// a user can call (issue 34). The objects exported for BlueZ live in their own tree
/// (`/org/proximityd_bluez`), so nothing BlueZ-only (the advertisement's `a{qv}`, which systemd
/// 252's busctl cannot print as JSON) is in the way.
@Suite("busctl --json reads the node's API", .serialized)
struct BusJSONTests {
    static let uuid = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"
    static let door = "ibeacon:\(uuid):1:1"

    /// One `busctl --json=short` call on alpha: it succeeds, and what it prints is JSON (nothing
    /// for a method that returns nothing).
    static func json(_ sim: SimBoxes, _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) async throws -> Any? {
        let result = try await sim.busctl("alpha", ["--json=short"] + arguments)
        #expect(result.status == 0, "busctl \(arguments.joined(separator: " ")): \(result)", sourceLocation: sourceLocation)
        let out = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !out.isEmpty else { return nil }
        let parsed = try? JSONSerialization.jsonObject(with: Data(out.utf8), options: [.fragmentsAllowed])
        #expect(parsed != nil, "not JSON: busctl \(arguments.joined(separator: " ")): \(out)", sourceLocation: sourceLocation)
        return parsed
    }

    /// `busctl --json=short call` on the node's root object.
    static func call(_ sim: SimBoxes, _ interface: String, _ method: String, _ arguments: [String] = [],
                     sourceLocation: SourceLocation = #_sourceLocation) async throws -> Any? {
        try await json(sim, ["call", "org.proximityd", "/org/proximityd", "org.proximityd.\(interface)", method] + arguments,
                       sourceLocation: sourceLocation)
    }

    /// The `data` of a reply: `{"type": "...", "data": [...]}`.
    static func data(_ reply: Any?) -> [Any] { (reply as? [String: Any])?["data"] as? [Any] ?? [] }

    @Test("issue 34: busctl --json=short prints GetManagedObjects of org.proximityd, every property of every object it lists and every method's reply as JSON; the BlueZ callbacks are in their own tree")
    func everything() async throws {
        var scenario = NodeAcceptanceTests.scenario(seed: 9, [(0, 0), (3, 0)])
        scenario.beacons = [
            BeaconSpec(name: "door", address: "C0:00:00:00:00:01",
                       frame: .iBeacon(uuid: UUID(uuidString: Self.uuid)!, major: 1, minor: 1, measuredPower: -59),
                       trajectory: Trajectory(fixed: Position(x: 1, y: 0))),
        ]
        try await withNodes(scenario) { sim, daemons in
            daemons["alpha"] = try await sim.startDaemon("alpha")
            daemons["bravo"] = try await sim.startDaemon("bravo")
            let bravo = try await sim.identifier("bravo")
            try await sim.waitRanging("alpha", "alpha ranges the door and bravo", timeout: .seconds(60)) { Set($0.keys) == [Self.door, bravo] }

            // Every method a user can call with busctl, with arguments that work on this fleet.
            // (AlertStrategy1 is a client's interface; RegisterStrategy and UnregisterStrategy are
            // for a client that serves it.)
            var called: Set<String> = []
            func call(_ interface: String, _ method: String, _ arguments: [String] = [],
                      sourceLocation: SourceLocation = #_sourceLocation) async throws -> Any? {
                called.insert("\(interface).\(method)")
                return try await Self.call(sim, interface, method, arguments, sourceLocation: sourceLocation)
            }
            #expect(Self.data(try await call("Node1", "GetPeers")).first as? [String] != nil)
            #expect(Self.data(try await call("Node1", "GetRanging")).first as? [String: String] != nil)
            #expect(Self.data(try await call("Node1", "GetIdentities")).first as? [String: String] != nil)
            #expect((Self.data(try await call("Node1", "GetPeer", ["s", Self.door])).first as? String)?.hasPrefix("/org/proximityd/peers/") == true)
            _ = try await call("Node1", "SetPeerName", ["ss", Self.door, "The door"])
            _ = try await call("Node1", "AddIRK", ["ss", "anna-phone", "ec0234a357c8ad05341010a60a397d9b"])
            _ = try await call("Node1", "RemoveIRK", ["s", "anna-phone"])
            _ = try await call("Node1", "SetMeasuredPower", ["sn", Self.door, "--", "-60"])
            _ = try await call("Node1", "ResetMeasuredPower", ["s", Self.door])
            _ = try await call("Node1", "StartRecording", ["as", "1", Self.door])
            // A recording belongs to the connection that started it: busctl's is gone, and so is
            // the recording. The answer is a named error.
            let stop = try await sim.busctl("alpha", ["--json=short", "call", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "StopRecording"])
            #expect(stop.status != 0 && stop.stderr.contains("is not recording"), "\(stop)")
            called.insert("Node1.StopRecording")
            _ = try await call("Node1", "Reload")

            _ = try await call("RegionMonitor1", "StartMonitoring", ["sa{sv}", "fleet", "2", "UUID", "s", Self.uuid, "Within", "s", "far"])
            #expect(Self.data(try await call("RegionMonitor1", "RequestState", ["s", "fleet"])).first as? String != nil)
            #expect(Self.data(try await call("RegionMonitor1", "GetMonitoredRegions")).first as? [String] != nil)
            #expect(Self.data(try await call("RegionMonitor1", "GetRegion", ["s", "fleet"])).first as? String == "/org/proximityd/regions/fleet")
            _ = try await call("RegionMonitor1", "StartMonitoring", ["sa{sv}", "gone", "1", "Kind", "s", "eddystone"])
            _ = try await call("RegionMonitor1", "StopMonitoring", ["s", "gone"])

            // Four alerts on the door, offered one at a time (Current): each way of answering one.
            for name in ["a1", "a2", "a3", "a4"] {
                _ = try await call("AlertManager1", "AddAlert", ["sa{sv}", name, "4", "Title", "s", name, "Range", "s", "far", "Comparison", "s", "<=",
                                                                 "Match", "a{sv}", "1", "UUID", "s", Self.uuid])
            }
            _ = try await call("AlertManager1", "AddAlert", ["sa{sv}", "museum", "2", "Title", "s", "Welcome", "Match", "a{sv}", "1", "URLDomain", "s", "example.org"])
            #expect(Self.data(try await call("AlertManager1", "GetAlerts")).first as? [String] != nil)
            #expect(Self.data(try await call("AlertManager1", "GetDefinitions")).first as? [String: Any] != nil)
            var answered: Set<String> = []
            /// The alert on offer, once there is one not answered yet: its object, alert and target.
            func offered() async throws -> (path: String, alert: String, target: String) {
                var current = "/"
                try await sim.until("alpha", "an alert is offered", timeout: .seconds(60)) {
                    let value = try await Self.json(sim, ["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.AlertManager1", "Current"])
                    current = (value as? [String: Any])?["data"] as? String ?? "/"
                    return current != "/" && !answered.contains(current)
                }
                answered.insert(current)
                let alert = try await Self.json(sim, ["get-property", "org.proximityd", current, "org.proximityd.Alert1", "Alert"])
                let target = try await Self.json(sim, ["get-property", "org.proximityd", current, "org.proximityd.Alert1", "Target"])
                return (current, (alert as? [String: Any])?["data"] as? String ?? "", (target as? [String: Any])?["data"] as? String ?? "")
            }
            let first = try await offered()
            #expect(Self.data(try await call("AlertManager1", "GetAlert", ["ss", first.alert, first.target])).first as? String == first.path)
            _ = try await call("AlertManager1", "Accept", ["o", first.path])
            _ = try await call("AlertManager1", "Done", ["o", first.path])
            _ = try await call("AlertManager1", "Decline", ["o", try await offered().path])
            let third = try await offered()
            _ = try await call("AlertManager1", "AcceptTarget", ["ss", third.alert, third.target])
            _ = try await call("AlertManager1", "DoneTarget", ["ss", third.alert, third.target])
            let fourth = try await offered()
            _ = try await call("AlertManager1", "DeclineTarget", ["ss", fourth.alert, fourth.target])
            _ = try await call("AlertManager1", "SetActionStatus", ["os", first.path, "done"])
            _ = try await call("AlertManager1", "SetTargetActionStatus", ["sss", third.alert, third.target, "done"])

            _ = try await call("Profile1", "UpdateAttribute", ["ss", "a.user", "albert"])
            _ = try await call("Profile1", "UpdateAttribute", ["ss", "a.role", "visitor"])
            _ = try await call("Profile1", "RemoveAttribute", ["s", "a.role"])
            _ = try await call("Profile1", "TrackBeacon", ["sssya{ss}", Self.uuid, "1", "1", "2", "1", "site", "home"])
            _ = try await call("Profile1", "ClearCurrentBeacon")
            _ = try await call("Profile1", "AddRule", ["ss", "near-1", #"{"on": "tracking", "when": {"key": "a.beacon.major", "op": "eq", "value": 1}, "do": [{"log": {}}]}"#])
            #expect(Self.data(try await call("Profile1", "GetRules")).first as? [String: String] != nil)
            #expect(Self.data(try await call("Profile1", "TestRule", ["s", "near-1"])).first is Bool)
            _ = try await call("Profile1", "AddRule", ["ss", "gone", #"{"when": {"key": "a.user", "op": "eq", "value": "x"}, "do": [{"log": {}}]}"#])
            _ = try await call("Profile1", "RemoveRule", ["s", "gone"])
            #expect(Self.data(try await call("EventLog1", "GetEvents", ["tdu", "0", "0", "100"])).first as? [Any] != nil)

            // Every method of the node's interfaces (dbus/*.xml) was called (the last ones below).
            let declared = try Self.declaredMethods().subtracting(["AlertStrategy1.Evaluate", "AlertStrategy1.Release",
                                                                   "AlertManager1.RegisterStrategy", "AlertManager1.UnregisterStrategy"])

            // The whole tree: the peers, the region, the alert's targets; nothing for BlueZ.
            let managed = try #require(Self.data(try await Self.json(sim, ["call", "org.proximityd", "/org/proximityd",
                                                                           "org.freedesktop.DBus.ObjectManager", "GetManagedObjects"]))
                .first as? [String: [String: [String: Any]]])
            let interfaces = Set(managed.values.flatMap(\.keys))
            #expect(interfaces.isSuperset(of: ["org.proximityd.Peer1", "org.proximityd.Region1", "org.proximityd.Alert1"]), "\(interfaces)")
            #expect(!interfaces.contains { $0.hasPrefix("org.bluez.") }, "\(interfaces)")
            #expect(!managed.keys.contains { $0.hasPrefix("/org/proximityd_bluez") })
            // Every property of every object, one get-property each, and the root's.
            var objects = managed.mapValues { Array($0.keys) }
            objects["/org/proximityd"] = ["org.proximityd.Node1", "org.proximityd.AlertManager1", "org.proximityd.Profile1"]
            var properties = 0
            for (path, names) in objects.sorted(by: { $0.key < $1.key }) {
                for interface in names where interface.hasPrefix("org.proximityd.") {
                    let all = try #require(Self.data(try await Self.json(sim, ["call", "org.proximityd", path, "org.freedesktop.DBus.Properties",
                                                                              "GetAll", "s", interface])).first as? [String: Any])
                    for name in all.keys.sorted() {
                        let value = try await Self.json(sim, ["get-property", "org.proximityd", path, interface, name])
                        #expect((value as? [String: Any])?["data"] != nil, "\(path) \(interface) \(name): \(String(describing: value))")
                        properties += 1
                    }
                }
            }
            #expect(properties > 40, "\(properties) properties read")

            _ = try await call("AlertManager1", "RemoveAlert", ["s", "museum"])
            _ = try await call("RegionMonitor1", "StopMonitoringAll")
            #expect(declared.subtracting(called).isEmpty, "not called: \(declared.subtracting(called).sorted())")

            // BlueZ's callbacks: their own tree and object manager.
            let forBlueZ = try await sim.busctl("alpha", ["call", "org.proximityd", "/org/proximityd_bluez",
                                                          "org.freedesktop.DBus.ObjectManager", "GetManagedObjects"])
            #expect(forBlueZ.stdout.contains("\"/org/proximityd_bluez/advertisement0\" 1 \"org.bluez.LEAdvertisement1\""), "\(forBlueZ)")
        }
    }

    /// `Interface.Method` for every method in `dbus/org.proximityd.*.xml`.
    static func declaredMethods() throws -> Set<String> {
        var methods: Set<String> = []
        let directory = repositoryRoot.appendingPathComponent("dbus")
        for file in try FileManager.default.contentsOfDirectory(atPath: directory.path) where file.hasSuffix(".xml") {
            let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            let interface = file.replacingOccurrences(of: "org.proximityd.", with: "").replacingOccurrences(of: ".xml", with: "")
            for part in text.components(separatedBy: "<method name=\"").dropFirst() {
                methods.insert("\(interface).\(part.prefix { $0 != "\"" })")
            }
        }
        return methods
    }
}
