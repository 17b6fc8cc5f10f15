import BlueZSim
import DBusKit
import Foundation
import ProximityAPI
import ProximityTesting
import Testing
import SimTesting

/// AlertManager1 on a node: every bad input with its named error and nothing changed, alerts of
/// the config file (not removable over the bus, reloaded on SIGHUP), alerts kept across SIGKILL,
/// and a strategy written in Python that decides an alert and is dropped cleanly when killed.
@Suite("alerts on the bus", .serialized)
struct AlertBusTests {
    static let fleet = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"

    static func manager(_ box: Box, _ method: String, _ arguments: [String] = []) async throws -> CommandResult {
        try await box.busctl(["call", "org.proximityd", "/org/proximityd", "org.proximityd.AlertManager1", method] + arguments)
    }

    @Test("every bad input gets a named error and changes nothing")
    func badInput() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            #expect(try await Self.manager(box, "AddAlert", ["sa{sv}", "kept", "2", "Title", "s", "Kept", "Match", "a{sv}", "0"]).status == 0)
            let invalid = "org.proximityd.Error.InvalidArguments"
            let missing = "org.proximityd.Error.DoesNotExist"
            let match = "'Match': <@a{sv} {}>"
            let cases: [(String, [String], String, String)] = [
                ("AddAlert", ["''", "{\(match)}"], invalid, "the alert identifier is empty"),
                ("AddAlert", ["x", "{'Nope': <'1'>, \(match)}"], invalid, "unknown alert key \"Nope\""),
                ("AddAlert", ["x", "{'Title': <'t'>}"], invalid, "Match is missing"),
                ("AddAlert", ["x", "{'Range': <'close'>, \(match)}"], invalid, "Range must be one of immediate, near, far, not \"close\""),
                ("AddAlert", ["x", "{'Comparison': <'<'>, \(match)}"], invalid, "Comparison must be one of =, <=, >="),
                ("AddAlert", ["x", "{'MaxTimeBeforeReset': <true>, \(match)}"], invalid, "not the D-Bus type 'b'"),
                ("AddAlert", ["x", "{'MaxTimeBeforeReset': <-1.0>, \(match)}"], invalid, "MaxTimeBeforeReset must be from 0 to"),
                ("AddAlert", ["x", "{'Match': <{'Within': <'near'>}>}"], invalid, "Match cannot have Within"),
                ("AddAlert", ["x", "{'Match': <{'UUID': <'nope'>}>}"], invalid, "UUID must be a UUID"),
                ("AddAlert", ["x", "{'Days': <'mon-fry'>, \(match)}"], invalid, "\"fry\" is not a day of the week"),
                ("AddAlert", ["x", "{'CapCount': <uint32 2>, \(match)}"], invalid, "CapWindow is missing"),
                ("AddAlert", ["x"], "org.freedesktop.DBus.Error.InvalidArgs", "expecting 'sa{sv}'"),
                // A key given twice inside a nested dictionary, as a D-Bus dictionary may hold it.
                ("AddAlert", ["x", "{'Match': <{'Kind': <'node'>, 'Kind': <'ibeacon'>}>}"], invalid, "Match \"Kind\" is given twice"),
                ("AddAlert", ["x", "{'Extra': <{'room': '1', 'room': '2'}>, \(match)}"], invalid, "Extra \"room\" is given twice"),
                ("RemoveAlert", ["nope"], missing, "no alert \"nope\" is defined"),
                ("Accept", ["'/org/proximityd/alerts/kept/someone'"], missing, "no alert target at /org/proximityd/alerts/kept/someone"),
                ("Decline", ["'/org/proximityd'"], missing, "no alert target at /org/proximityd"),
                ("Done", ["'/org/proximityd/alerts/nope/x'"], missing, "no alert target"),
                ("SetActionStatus", ["'/org/proximityd/alerts/kept/x'", "finished"], invalid,
                 "status must be one of waitingForAction, inProgress, done, not \"finished\""),
                ("GetAlert", ["kept", "someone"], missing, "alert \"kept\" has no target \"someone\""),
                ("AcceptTarget", ["kept", "someone"], missing, "alert \"kept\" has no target \"someone\""),
                ("DeclineTarget", ["nope", "x"], missing, "alert \"nope\" has no target \"x\""),
                ("DoneTarget", ["''", "x"], invalid, "the alert identifier is empty"),
                ("SetTargetActionStatus", ["kept", "x", "finished"], invalid,
                 "status must be one of waitingForAction, inProgress, done, not \"finished\""),
                ("AcceptTarget", ["kept"], "org.freedesktop.DBus.Error.InvalidArgs", "expecting 'ss'"),
                ("UnregisterStrategy", ["'/org/example/none'"], missing, "no strategy is registered at /org/example/none"),
                ("RegisterStrategy", ["'/org/example/none'", "crowd"], "org.proximityd.Error.NotAStrategy",
                 "does not implement org.proximityd.AlertStrategy1"),
                ("RegisterStrategy", ["'/org/example/none'", "range"], "org.proximityd.Error.AlreadyExists", "\"range\" is a built-in strategy"),
                ("RegisterStrategy", ["'/org/example/none'", "my key"], invalid, "a strategy key has letters, digits"),
            ]
            for (method, arguments, name, message) in cases {
                let result = try await runCommand("gdbus", ["call", "--address", box.address, "--dest", "org.proximityd",
                                                            "--object-path", "/org/proximityd",
                                                            "--method", "org.proximityd.AlertManager1.\(method)"] + arguments)
                #expect(result.status != 0 && result.stderr.contains("\(name): ") && result.stderr.contains(message),
                        "\(method) \(arguments): \(result)")
            }
            // Nothing changed: the one alert, as it was; no strategy registered.
            let definitions = try await Self.manager(box, "GetDefinitions")
            #expect(definitions.stdout.trimmed.hasPrefix("a{sa{sv}} 1 \"kept\""), "\(definitions)")
            #expect(definitions.stdout.contains("\"Title\" s \"Kept\""), "\(definitions)")
            #expect(try await box.busctl(["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.AlertManager1",
                                          "Strategies", "Current"]).stdout.trimmed == "as 2 \"range\" \"time\"\no \"/\"")
            #expect(daemon.isRunning)
            await daemon.stop()
        }
    }

    @Test("alerts of the config file: NotPermitted over the bus, reloaded (Node1.Reload, as SIGHUP); bus alerts survive SIGKILL; a corrupt alerts.json stops the start")
    func configAndPersistence() async throws {
        try await withBox { box in
            let config = box.stateDirectory.deletingLastPathComponent().appendingPathComponent("proximityd.yaml")
            try """
                alerts:
                  - identifier: lighthouse
                    title: The Lighthouse
                    range: near
                    match: {uuid: \(Self.fleet), major: 1}
                """.write(to: config, atomically: true, encoding: .utf8)
            var daemon = try await box.startDaemon(["--config", config.path])
            let notPermitted = "org.proximityd.Error.NotPermitted"
            for (method, arguments) in [("RemoveAlert", ["lighthouse"]), ("AddAlert", ["lighthouse", "{'Match': <@a{sv} {}>}"])] {
                let result = try await runCommand("gdbus", ["call", "--address", box.address, "--dest", "org.proximityd",
                                                            "--object-path", "/org/proximityd",
                                                            "--method", "org.proximityd.AlertManager1.\(method)"] + arguments)
                #expect(result.status != 0 && result.stderr.contains("\(notPermitted): ") && result.stderr.contains("config file"), "\(result)")
            }
            #expect(try await Self.manager(box, "AddAlert", ["sa{sv}", "door", "2", "Title", "s", "Door", "Match", "a{sv}", "1",
                                                             "Kind", "s", "node"]).status == 0)
            let file = box.stateDirectory.appendingPathComponent("alerts.json")
            #expect(try String(contentsOf: file, encoding: .utf8).contains("\"identifier\" : \"door\""), "on disk before the reply")

            // Reload: the config's alert changes, a second appears.
            try """
                alerts:
                  - identifier: lighthouse
                    title: The New Lighthouse
                    match: {uuid: \(Self.fleet), major: 1}
                  - identifier: harbour
                    match: {}
                """.write(to: config, atomically: true, encoding: .utf8)
            let reload = try await box.busctl(["call", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "Reload"])
            #expect(reload.status == 0, "\(reload)")
            var definitions = try await Self.manager(box, "GetDefinitions").stdout
            #expect(definitions.contains("\"harbour\"") && definitions.contains("The New Lighthouse") && definitions.contains("\"door\""),
                    "\(definitions)")

            daemon.signal(SIGKILL)
            _ = try await daemon.waitForExit(timeout: .seconds(10))
            daemon = try await box.startDaemon(["--config", config.path])
            definitions = try await Self.manager(box, "GetDefinitions").stdout
            #expect(definitions.contains("\"Title\" s \"Door\"") && definitions.contains("\"Source\" s \"bus\""), "\(definitions)")
            #expect(try await Self.manager(box, "RemoveAlert", ["s", "door"]).status == 0)
            await daemon.stop()

            try Data("{not json".utf8).write(to: file)
            let broken = try ManagedProcess(BuiltProducts.path("proximityd"),
                                            ["run", "--bus", box.address, "--state-dir", box.stateDirectory.path, "--config", "/dev/null"])
            _ = try await broken.waitForExit(timeout: .seconds(20))
            #expect(broken.exitStatus == 78, "\(broken.stderr)")
            #expect(broken.stderr.contains("alerts.json is corrupt"), "\(broken.stderr)")
            #expect(try String(contentsOf: file, encoding: .utf8) == "{not json")
        }
    }

    static func scenario() -> Scenario {
        var radio = RadioParameters()
        radio.shadowingSigma = 1
        return Scenario(seed: 5, radio: radio, boxes: [
            BoxSpec(name: "kiosk", address: "AA:00:00:00:00:01", trajectory: Trajectory(fixed: Position(x: 0, y: 0))),
        ])
    }

    /// The unique name of the one client other than the node and the test's own that owns no
    /// well-known name: the strategy agent, found through the bus.
    func agentName(_ sim: SimBoxes) async throws -> String {
        let strategies = try await sim.busctl("kiosk", ["--unique", "list", "--no-legend"])
        let node = try await sim.busctl("kiosk", ["call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                                  "GetNameOwner", "s", "org.proximityd"]).stdout.split(separator: "\"")[1]
        for line in strategies.stdout.split(separator: "\n") {
            let name = String(line.split(separator: " ").first ?? "")
            guard name.hasPrefix(":"), name != node else { continue }
            let introspection = try await sim.busctl("kiosk", ["introspect", name, "/org/example/strategy"])
            if introspection.status == 0, introspection.stdout.contains("org.proximityd.AlertStrategy1") { return name }
        }
        throw TestKitError("no strategy agent on the bus: \(strategies.stdout)")
    }

    /// The kiosk's node started, an observer of its AlertManager1 signals, and an iBeacon of the
    /// fleet (major 1, `minor`) 1 m away.
    static func kiosk(_ sim: SimBoxes, _ daemons: inout [String: ManagedProcess], beacon name: String,
                      minor: Int) async throws -> (DBusConnection, SignalLog) {
        daemons["kiosk"] = try await sim.startDaemon("kiosk")
        let observer = try await sim.buses["kiosk"]!.connect()
        let log = SignalLog(try await observer.subscribe(MatchRule(sender: "org.proximityd", interface: "org.proximityd.AlertManager1")))
        _ = try await sim.control("AddBeacon", [.string("""
            {"name": "\(name)", "address": "C0:00:00:00:00:0\(minor)", "ibeacon": {"uuid": "\(fleet)", "major": 1, "minor": \(minor), "measured_power": -59}, "position": [1, 0]}
            """)])
        return (observer, log)
    }

    @Test("GetAlert gives a target's object from the alert's and the peer's identifiers; AcceptTarget, DoneTarget, DeclineTarget and SetTargetActionStatus act on it as Accept, Done, Decline and SetActionStatus on the object")
    func byIdentifiers() async throws {
        try await withNodes(Self.scenario()) { sim, daemons in
            let (observer, log) = try await Self.kiosk(sim, &daemons, beacon: "door", minor: 2)
            defer { log.cancel() }
            func manager(_ method: String, _ arguments: [String] = []) async throws -> CommandResult {
                try await sim.busctl("kiosk", ["call", "org.proximityd", "/org/proximityd", "org.proximityd.AlertManager1", method] + arguments)
            }
            // Ready whenever the beacon is seen: far or nearer.
            #expect(try await manager("AddAlert", ["sa{sv}", "door", "4", "Title", "s", "Door", "Range", "s", "far", "Comparison", "s", "<=",
                                                   "Match", "a{sv}", "1", "UUID", "s", Self.fleet]).status == 0)
            let target = "ibeacon:\(Self.fleet):1:2"
            let path = ProximityBus.alertPath(alert: "door", target: target)
            _ = try await log.wait(timeout: .seconds(20), "AlertReady for the door") {
                $0.member == "AlertReady" && $0.body.first?.objectPath == path
            }
            #expect(try await manager("GetAlert", ["ss", "door", target]).stdout.trimmed == "o \"\(path.rawValue)\"")
            func status() async throws -> String {
                try await sim.busctl("kiosk", ["get-property", "org.proximityd", path.rawValue, "org.proximityd.Alert1", "ActionStatus"]).stdout.trimmed
            }
            #expect(try await manager("AcceptTarget", ["ss", "door", target]).status == 0)
            #expect(try await status() == "s \"inProgress\"")
            let declined = try await manager("DeclineTarget", ["ss", "door", target])
            #expect(declined.status != 0 && declined.stderr.contains("is not on offer"), "\(declined)")
            #expect(try await manager("DoneTarget", ["ss", "door", target]).status == 0)
            #expect(try await status() == "s \"done\"")
            #expect(try await manager("SetTargetActionStatus", ["sss", "door", target, "waitingForAction"]).status == 0)
            #expect(try await status() == "s \"waitingForAction\"")
            await observer.close()
        }
    }

    @Test("a strategy in Python (dbus-python) registers, decides one target's alert, and is dropped cleanly when killed; a timeout drops it with Release")
    func pythonStrategy() async throws {
        try await withNodes(Self.scenario()) { sim, daemons in
            let (observer, log) = try await Self.kiosk(sim, &daemons, beacon: "exhibit", minor: 1)
            defer { log.cancel() }
            // The beacon is near; under its default strategy (far, `=`) the alert would never be ready.
            let add = try await sim.busctl("kiosk", ["call", "org.proximityd", "/org/proximityd", "org.proximityd.AlertManager1", "AddAlert",
                                                     "sa{sv}", "crowded", "4", "Title", "s", "Crowded", "Range", "s", "far", "Strategy", "s", "crowd",
                                                     "Match", "a{sv}", "1", "UUID", "s", Self.fleet])
            #expect(add.status == 0, "\(add)")
            let path = ProximityBus.alertPath(alert: "crowded", target: "ibeacon:\(Self.fleet):1:1")
            try await sim.until("kiosk", "the target detected", timeout: .seconds(15)) {
                try await sim.busctl("kiosk", ["get-property", "org.proximityd", path.rawValue, "org.proximityd.Alert1", "Detected", "Strategy"])
                    .stdout.trimmed == "b true\ns \"range\""
            }
            try await daemons["kiosk"]!.waitForOutput(containing: "an alert names a strategy that is not registered", inStderr: true, timeout: .seconds(5))

            let agent = try ManagedProcess("/usr/bin/python3", [repositoryRoot.appendingPathComponent("tests/python/strategy_agent.py").path,
                                                                "--address", sim.address("kiosk"), "--key", "crowd", "--valid", "crowded"])
            defer { agent.signal(SIGKILL) }
            try await agent.waitForOutput(containing: "registered", timeout: .seconds(10))
            let offer = try await log.wait(timeout: .seconds(10), "AlertReady decided by the Python strategy") {
                $0.member == "AlertReady" && $0.body.first?.objectPath == path
            }
            #expect(offer.body.count == 2)
            // The agent printed it before it answered; its output may reach this process later.
            try await agent.waitForOutput(containing: "evaluate 1", timeout: .seconds(5))
            #expect(try await sim.busctl("kiosk", ["get-property", "org.proximityd", path.rawValue, "org.proximityd.Alert1", "Strategy"])
                .stdout.trimmed == "s \"crowd\"")
            // The agent answers the node only.
            let forged = try await sim.busctl("kiosk", ["call", try await agentName(sim), "/org/example/strategy",
                                                        "org.proximityd.AlertStrategy1", "Release"])
            #expect(forged.status != 0 && forged.stderr.contains("only the node may release"), "\(forged)")
            // Only the client that registered it may unregister it.
            let other = try await sim.busctl("kiosk", ["call", "org.proximityd", "/org/proximityd", "org.proximityd.AlertManager1",
                                                       "UnregisterStrategy", "o", "/org/example/strategy"])
            #expect(other.status != 0 && other.stderr.contains("no strategy is registered"), "\(other)")

            // Killed: dropped with a log line; the target falls back to its default strategy, and the
            // offer is taken back (near is not far).
            let mark = log.count
            agent.signal(SIGKILL)
            _ = try await log.wait(from: mark, timeout: .seconds(10), "AlertRemoved once the strategy left") {
                $0.member == "AlertRemoved" && $0.body.first?.objectPath == path && $0.body.last?.string == "condition-not-valid"
            }
            try await daemons["kiosk"]!.waitForOutput(containing: "dropped a strategy", inStderr: true, timeout: .seconds(5))
            #expect(try await sim.busctl("kiosk", ["get-property", "org.proximityd", path.rawValue, "org.proximityd.Alert1", "Strategy"])
                .stdout.trimmed == "s \"range\"")
            #expect(try await sim.busctl("kiosk", ["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.AlertManager1",
                                                   "Strategies"]).stdout.trimmed == "as 2 \"range\" \"time\"")

            // A strategy that never answers is dropped after the timeout, and told with Release.
            let hanging = try ManagedProcess("/usr/bin/python3", [repositoryRoot.appendingPathComponent("tests/python/strategy_agent.py").path,
                                                                  "--address", sim.address("kiosk"), "--key", "crowd", "--hang"])
            defer { hanging.signal(SIGKILL) }
            try await hanging.waitForOutput(containing: "registered", timeout: .seconds(10))
            try await hanging.waitForOutput(containing: "released", timeout: .seconds(10))
            try await daemons["kiosk"]!.waitForOutput(containing: "its Evaluate failed", inStderr: true, timeout: .seconds(5))
            await observer.close()
        }
    }
}
