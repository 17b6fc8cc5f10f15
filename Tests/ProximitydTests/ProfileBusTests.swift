import DBusKit
import Foundation
import ProximityAPI
import ProximityTesting
import Testing

/// Profile1 and EventLog1 on a node with no radio: introspection, manual tracking and attributes
/// with their signals and log entries, rules over the bus (added, tested, fired, refused), every
/// bad input named, and the profile and rules across SIGKILL.
@Suite("the profile on the bus", .serialized)
struct ProfileBusTests {
    static func profile(_ box: Box, _ method: String, _ arguments: [String] = []) async throws -> CommandResult {
        try await box.busctl(["call", "org.proximityd", "/org/proximityd", "org.proximityd.Profile1", method] + arguments)
    }

    @Test("dbus/org.proximityd.Profile1.xml and EventLog1.xml match what the daemon returns from Introspect")
    func introspection() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            let reply = try await box.observer.call(destination: "org.proximityd", path: "/org/proximityd", interface: .introspectable,
                                                    member: "Introspect")
            let live = try #require(reply.first?.string)
            for interface in ["org.proximityd.Profile1", "org.proximityd.EventLog1"] {
                try RegionBusTests.checkInterfaceFile(interface, live: live)
            }
            await daemon.stop()
        }
    }

    @Test("TrackBeacon, a rule that fires on it, UpdateAttribute, ClearCurrentBeacon: Attributes, signals and the log in order; kept across SIGKILL")
    func trackAndRules() async throws {
        try await withBox { box in
            var daemon = try await box.startDaemon()
            let signals = SignalLog(try await box.observer.subscribe(MatchRule(sender: "org.proximityd", path: "/org/proximityd")))
            defer { signals.cancel() }
            let rule = #"{"on": "tracking", "when": {"all": [{"key": "a.beacon.major", "op": "eq", "value": 12}, {"key": "a.beacon.prox", "op": "le", "value": 2}]}, "do": [{"signal": {"minor": "{%a.beacon.minor%}"}}, {"set": {"a.visited": "yes"}}], "frequency": "once"}"#
            #expect(try await Self.profile(box, "AddRule", ["ss", "near-12", rule]).status == 0)
            let test = try await Self.profile(box, "TestRule", ["s", "near-12"])
            #expect(test.stdout.hasPrefix("bas false 3 \"false  all of:\" \"  false  a.beacon.major eq \\\"12\\\"  (a.beacon.major is missing)\""), "\(test)")

            #expect(try await Self.profile(box, "TrackBeacon", ["sssya{ss}", "f7826da6-4fa2-4e98-8024-bc5b71e0893e", "12", "7", "2", "1", "site", "museum"]).status == 0)
            let attributes = try await box.busctl(["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.Profile1", "Attributes"])
            #expect(attributes.stdout.trimmed == "a{ss} 5 \"a.beacon.major\" \"12\" \"a.beacon.minor\" \"7\" \"a.beacon.prox\" \"2\" \"a.beacon.uuid\" \"f7826da6-4fa2-4e98-8024-bc5b71e0893e\" \"a.visited\" \"yes\"",
                    "\(attributes)")
            // The signals, in order: Tracked, its Logged, the rule's Logged, RuleFired, the rule's profile change Logged. Sent
            // before the reply, but to another connection: waited for here.
            try await signals.wait("the rule's profile change logged") {
                $0.member == "Logged" && $0.body.count == 5 && $0.body[2].string == "profile"
            }
            let members = signals.messages.filter { ["org.proximityd.Profile1", "org.proximityd.EventLog1"].contains($0.interface?.rawValue ?? "") }
                .map(\.member!.rawValue)
            #expect(members == ["Tracked", "Logged", "Logged", "RuleFired", "Logged"], "\(members)")
            let tracked = signals.messages.first { $0.member == "Tracked" }!.body[0].stringKeyedDictionary?.mapValues { $0.string ?? "" }
            #expect(tracked == ["site": "museum", "a.beacon.uuid": "f7826da6-4fa2-4e98-8024-bc5b71e0893e", "a.beacon.major": "12",
                                "a.beacon.minor": "7", "a.beacon.prox": "2"])
            #expect(try await Self.profile(box, "TestRule", ["s", "near-12"]).stdout.hasPrefix("bas true"))
            // once: a second track does not fire it again.
            #expect(try await Self.profile(box, "TrackBeacon", ["sssya{ss}", "f7826da6-4fa2-4e98-8024-bc5b71e0893e", "12", "7", "1", "0"]).status == 0)
            #expect(try await Self.profile(box, "UpdateAttribute", ["ss", "a.user", "albert"]).status == 0)
            // Signals from the node arrive in order: once this change's entry is here, a RuleFired of the track would be too.
            try await signals.wait("a.user logged") { $0.member == "Logged" && ($0.body.last?.stringKeyedDictionary?["a.user"]) != nil }
            #expect(signals.messages.filter { $0.member == "RuleFired" }.count == 1)

            // SIGKILL: the attributes, the rule and its having fired are kept.
            daemon.signal(SIGKILL)
            _ = try await daemon.waitForExit(timeout: .seconds(10))
            daemon = try await box.startDaemon()
            let after = try await box.busctl(["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.Profile1", "Attributes"])
            #expect(after.stdout.contains("\"a.user\" \"albert\"") && after.stdout.contains("\"a.beacon.prox\" \"1\""), "\(after)")
            #expect(try await Self.profile(box, "GetRules").stdout.contains("near-12"))
            let mark = signals.count
            #expect(try await Self.profile(box, "TrackBeacon", ["sssya{ss}", "f7826da6-4fa2-4e98-8024-bc5b71e0893e", "12", "7", "2", "0"]).status == 0)
            #expect(try await Self.profile(box, "UpdateAttribute", ["ss", "a.marker", "1"]).status == 0)
            try await signals.wait(from: mark, "a.marker logged") {
                $0.member == "Logged" && ($0.body.last?.stringKeyedDictionary?["a.marker"]) != nil
            }
            #expect(!signals.messages.dropFirst(mark).contains { $0.member == "RuleFired" }, "once, even across a restart")
            #expect(try await Self.profile(box, "RemoveAttribute", ["s", "a.marker"]).status == 0)
            #expect(try await Self.profile(box, "ClearCurrentBeacon").status == 0)
            let cleared = try await box.busctl(["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.Profile1", "Attributes"])
            #expect(cleared.stdout.trimmed == "a{ss} 2 \"a.user\" \"albert\" \"a.visited\" \"yes\"", "\(cleared)")
            // The log, read back: the story in order.
            let log = try await box.observer.call(destination: "org.proximityd", path: "/org/proximityd", interface: "org.proximityd.EventLog1",
                                                  member: "GetEvents", [.uint64(0), .double(0), .uint32(100)])
            let story = (log.first?.arrayElements ?? []).compactMap(LogEntryValue.init).map { "\($0.source).\($0.type)" }
            #expect(story == ["tracking.tracked", "rule.fired", "profile.changed", "tracking.tracked", "profile.changed", "tracking.tracked",
                              "profile.changed", "profile.changed", "tracking.cleared"], "\(story)")
            await daemon.stop()
        }
    }

    @Test("every bad input gets a named error and changes nothing")
    func badInput() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            #expect(try await Self.profile(box, "UpdateAttribute", ["ss", "a.kept", "1"]).status == 0)
            let invalid = "org.proximityd.Error.InvalidArguments"
            let missing = "org.proximityd.Error.DoesNotExist"
            let cases: [(String, [String], String, String)] = [
                ("UpdateAttribute", ["''", "'x'"], invalid, "the attribute key is empty"),
                ("UpdateAttribute", ["'a.x'", "'\(String(repeating: "v", count: 5000))'"], invalid, "the value is longer than 4096 bytes"),
                ("RemoveAttribute", ["'a.nope'"], missing, "no attribute \"a.nope\""),
                ("TrackBeacon", ["'u'", "'1'", "'2'", "byte 7", "{}"], invalid, "prox must be 0 (unknown), 1 (immediate), 2 (near) or 3 (far)"),
                ("AddRule", ["''", "'{}'"], invalid, "the rule identifier is empty"),
                ("AddRule", ["'r'", "'not json'"], invalid, "rule \"r\": is not valid JSON"),
                ("AddRule", ["'r'", #"'{"when": {"key": "a", "op": "is", "value": "1"}, "do": [{"log": {}}]}'"#], invalid,
                 "rule \"r\": when.op: must be one of eq, ne, ex, nx, gt, ge, lt, le, co, nc, sw, ew, within"),
                ("AddRule", ["'r'", #"'{"when": {"key": "a", "op": "eq", "value": "1"}}'"#], invalid, "a rule needs do: (its actions)"),
                ("RemoveRule", ["'nope'"], missing, "no rule \"nope\" is defined"),
                ("TestRule", ["'nope'"], missing, "no rule \"nope\" is defined"),
                ("TrackBeacon", ["'u'"], "org.freedesktop.DBus.Error.InvalidArgs", "expecting 'sssya{ss}'"),
                ("TrackBeacon", ["'u'", "'1'", "'2'", "byte 1", "{'site': 'a', 'site': 'b'}"], invalid, "data: \"site\" is given twice"),
            ]
            for (method, arguments, name, message) in cases {
                let result = try await runCommand("gdbus", ["call", "--address", box.address, "--dest", "org.proximityd",
                                                            "--object-path", "/org/proximityd",
                                                            "--method", "org.proximityd.Profile1.\(method)"] + arguments)
                #expect(result.status != 0 && result.stderr.contains("\(name): ") && result.stderr.contains(message),
                        "\(method) \(arguments): \(result)")
            }
            let events = try await runCommand("gdbus", ["call", "--address", box.address, "--dest", "org.proximityd", "--object-path", "/org/proximityd",
                                                        "--method", "org.proximityd.EventLog1.GetEvents", "0", "nan", "10"])
            #expect(events.status != 0 && events.stderr.contains("\(invalid): "), "\(events)")
            let attributes = try await box.busctl(["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.Profile1", "Attributes"])
            #expect(attributes.stdout.trimmed == "a{ss} 1 \"a.kept\" \"1\"")
            #expect(try await Self.profile(box, "GetRules").stdout.trimmed == "a{ss} 0")
            #expect(daemon.isRunning)
            await daemon.stop()
        }
    }

    @Test("rules and tracking of the config file: NotPermitted over the bus, reloaded with Node1.Reload; a corrupt profile.json stops the start")
    func configRules() async throws {
        try await withBox { box in
            let config = box.stateDirectory.deletingLastPathComponent().appendingPathComponent("proximityd.yaml")
            try """
                rules:
                  - identifier: greet
                    on: [profile]
                    when: {key: a.user, op: ex}
                    do:
                      - signal: {hello: "{%a.user%}"}
                """.write(to: config, atomically: true, encoding: .utf8)
            let daemon = try await box.startDaemon(["--config", config.path])
            let signals = SignalLog(try await box.observer.subscribe(MatchRule(sender: "org.proximityd", interface: "org.proximityd.Profile1",
                                                                              member: "RuleFired")))
            defer { signals.cancel() }
            for (method, arguments) in [("RemoveRule", ["greet"]), ("AddRule", ["greet", #"{"when": {"key": "a", "op": "ex"}, "do": [{"log": {}}]}"#])] {
                let result = try await runCommand("gdbus", ["call", "--address", box.address, "--dest", "org.proximityd",
                                                            "--object-path", "/org/proximityd",
                                                            "--method", "org.proximityd.Profile1.\(method)"] + arguments)
                #expect(result.status != 0 && result.stderr.contains("org.proximityd.Error.NotPermitted: ") && result.stderr.contains("config file"),
                        "\(result)")
            }
            #expect(try await Self.profile(box, "UpdateAttribute", ["ss", "a.user", "albert"]).status == 0)
            let greeted = try await signals.wait("RuleFired greet") { _ in true }
            #expect(greeted.body[1].stringKeyedDictionary?["hello"]?.string == "albert")
            try """
                tracking:
                  heartbeat: 30
                rules:
                  - identifier: bye
                    on: [profile]
                    when: {key: a.user, op: nx}
                    do:
                      - signal: {bye: "yes"}
                """.write(to: config, atomically: true, encoding: .utf8)
            #expect(try await box.busctl(["call", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "Reload"]).status == 0)
            let rules = try await Self.profile(box, "GetRules").stdout
            #expect(rules.contains("\"bye\"") && !rules.contains("\"greet\"") && rules.contains("\\\"source\\\":\\\"config\\\""), "\(rules)")
            #expect(try await Self.profile(box, "RemoveAttribute", ["s", "a.user"]).status == 0)
            try await signals.wait(from: 1, "RuleFired bye") { _ in true }
            #expect(signals.messages.map { $0.body.first?.string } == ["greet", "bye"])
            await daemon.stop()

            try Data("{not json".utf8).write(to: box.stateDirectory.appendingPathComponent("profile.json"))
            let broken = try ManagedProcess(BuiltProducts.path("proximityd"),
                                            ["run", "--bus", box.address, "--state-dir", box.stateDirectory.path, "--config", "/dev/null"])
            _ = try await broken.waitForExit(timeout: .seconds(20))
            #expect(broken.exitStatus == 78 && broken.stderr.contains("profile.json is corrupt"), "\(broken.stderr)")
        }
    }
}
