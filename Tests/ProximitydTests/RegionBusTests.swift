import DBusKit
import Foundation
import ProximityAPI
import ProximityCore
import ProximityNode
import NodeTesting
import ProximityTesting
import Testing
import SimTesting

/// RegionMonitor1 and Region1 on a node with no radio: introspection, every bad input with its
/// named error and nothing changed, the limit, config regions, and regions kept across restarts.
@Suite("regions on the bus", .serialized)
struct RegionBusTests {
    static let fleet = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"

    static func monitor(_ box: Box, _ method: String, _ arguments: [String] = []) async throws -> CommandResult {
        try await box.busctl(["call", "org.proximityd", "/org/proximityd", "org.proximityd.RegionMonitor1", method] + arguments)
    }

    static func interfaceElement(_ xml: String, _ name: String) -> String? {
        guard let start = xml.range(of: "<interface name=\"\(name)\">"),
              let end = xml.range(of: "</interface>", range: start.upperBound..<xml.endIndex) else { return nil }
        return xml[start.lowerBound..<end.upperBound].split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    /// `dbus/<interface>.xml`'s interface element against the one the running daemon returned
    /// from `Introspect` (`live`), which DBusKit generates from ProximityAPI's declarations.
    /// With `PROXIMITYD_WRITE_DBUS_XML=1` the file's element is written from the live one instead
    /// (its header comment kept): how a new method's XML is made.
    static func checkInterfaceFile(_ interface: String, live: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let url = repositoryRoot.appendingPathComponent("dbus/\(interface).xml")
        var file = try String(contentsOf: url, encoding: .utf8)
        if ProcessInfo.processInfo.environment["PROXIMITYD_WRITE_DBUS_XML"] == "1",
           let old = file.range(of: "<interface name=\"\(interface)\">").flatMap({ start in
               file.range(of: "</interface>", range: start.upperBound..<file.endIndex).map { start.lowerBound..<$0.upperBound } }),
           let new = live.range(of: "<interface name=\"\(interface)\">").flatMap({ start in
               live.range(of: "</interface>", range: start.upperBound..<live.endIndex).map { start.lowerBound..<$0.upperBound } }) {
            file.replaceSubrange(old, with: live[new])
            try file.write(to: url, atomically: true, encoding: .utf8)
        }
        let expected = try #require(interfaceElement(file, interface), "dbus/\(interface).xml has no interface element",
                                    sourceLocation: sourceLocation)
        #expect(interfaceElement(live, interface) == expected,
                "dbus/\(interface).xml differs from the daemon's Introspect; PROXIMITYD_WRITE_DBUS_XML=1 writes it", sourceLocation: sourceLocation)
    }

    @Test("RequestState answers and signals, but writes no event log entry and runs no rule, however often it is called")
    func requestStateWritesNothing() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            // A rule that marks the region events it sees in the profile.
            let rule = #"{"on": ["region"], "when": {"key": "event.region", "op": "eq", "value": "fleet"}, "do": [{"set": {"a.seen": "{%event.type%}"}}]}"#
            #expect(try await box.busctl(["call", "org.proximityd", "/org/proximityd", "org.proximityd.Profile1", "AddRule", "ss", "count", rule]).status == 0)
            let signals = SignalLog(try await box.observer.subscribe(MatchRule(sender: "org.proximityd", interface: "org.proximityd.Region1",
                                                                               member: "StateDetermined")))
            // No peer here: after its exit period of 1 s the region goes from unknown to outside,
            // a determined event of its own. Then nothing changes it any more.
            #expect(try await Self.monitor(box, "StartMonitoring", ["sa{sv}", "fleet", "1", "ExitPeriod", "d", "1"]).status == 0)
            try await signals.wait(timeout: .seconds(30), "StateDetermined(outside)") { $0.body.first?.string == "outside" }
            func events() async throws -> String {
                try await box.busctl(["call", "org.proximityd", "/org/proximityd", "org.proximityd.EventLog1", "GetEvents", "tdu", "0", "0", "1000"]).stdout
            }
            let attributes = try await box.busctl(["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.Profile1", "Attributes"]).stdout
            #expect(attributes.contains("\"a.seen\" \"determined\""), "the rule ran on the region's determined: \(attributes)")
            #expect(try await box.busctl(["call", "org.proximityd", "/org/proximityd", "org.proximityd.Profile1", "RemoveAttribute", "s", "a.seen"]).status == 0)
            let before = try await events()
            #expect(before.contains("\"determined\""), "the region's determined events are logged: \(before)")
            let mark = signals.count
            for _ in 0 ..< 50 {
                #expect(try await Self.monitor(box, "RequestState", ["s", "fleet"]).stdout.trimmed == "s \"outside\"")
            }
            try await signals.wait(from: mark + 49, timeout: .seconds(10), "the 50th StateDetermined") { $0.member == "StateDetermined" }
            #expect(try await events() == before, "RequestState wrote to the event log")
            let after = try await box.busctl(["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.Profile1", "Attributes"]).stdout
            #expect(!after.contains("a.seen"), "a rule ran on RequestState: \(after)")
            await daemon.stop()
        }
    }

    @Test("dbus/org.proximityd.RegionMonitor1.xml and Region1.xml match what the daemon returns from Introspect")
    func introspection() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            #expect(try await Self.monitor(box, "StartMonitoring", ["sa{sv}", "kitchen", "0"]).status == 0)
            for (path, interface) in [("/org/proximityd", "org.proximityd.RegionMonitor1"),
                                      ("/org/proximityd/regions/kitchen", "org.proximityd.Region1")] {
                let reply = try await box.observer.call(destination: "org.proximityd", path: ObjectPath(path), interface: .introspectable,
                                                        member: "Introspect")
                try Self.checkInterfaceFile(interface, live: try #require(reply.first?.string))
            }
            await daemon.stop()
        }
    }

    @Test("StartMonitoring, replace, RequestState, GetMonitoredRegions, StopMonitoring, StopMonitoringAll: objects follow before each reply")
    func lifecycle() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            let signals = SignalLog(try await box.observer.subscribe(MatchRule(sender: "org.proximityd", interface: "org.proximityd.Region1")))
            defer { signals.cancel() }
            #expect(try await Self.monitor(box, "StartMonitoring", ["sa{sv}", "fleet", "3", "UUID", "s", Self.fleet.uppercased(),
                                                                     "Major", "q", "7", "Within", "s", "near"]).status == 0)
            // The object is there when the call returns, its matcher normalised.
            let matcher = try await box.busctl(["get-property", "org.proximityd", "/org/proximityd/regions/fleet", "org.proximityd.Region1",
                                                "Matcher", "Source", "State"])
            #expect(matcher.stdout.trimmed == "a{sv} 3 \"Major\" q 7 \"UUID\" s \"\(Self.fleet)\" \"Within\" s \"near\"\ns \"bus\"\ns \"unknown\"",
                    "\(matcher)")
            try await signals.wait("StateDetermined(unknown)") {
                $0.member == "StateDetermined" && $0.body.first?.string == "unknown"
            }
            let mark = signals.count
            #expect(try await Self.monitor(box, "RequestState", ["s", "fleet"]).stdout.trimmed == "s \"unknown\"")
            // Sent before the reply, but to another connection: no order between the two here.
            try await signals.wait(from: mark, "RequestState's StateDetermined") { $0.member == "StateDetermined" }
            // An identifier that needs escaping, and a replacement of fleet with another matcher.
            #expect(try await Self.monitor(box, "StartMonitoring", ["sa{sv}", "kitchen door/1", "1", "Kind", "s", "node"]).status == 0)
            #expect(try await Self.monitor(box, "StartMonitoring", ["sa{sv}", "fleet", "1", "UUID", "s", Self.fleet]).status == 0)
            #expect(try await Self.monitor(box, "GetMonitoredRegions").stdout.trimmed
                    == "ao 2 \"/org/proximityd/regions/fleet\" \"\(ProximityBus.regionPath("kitchen door/1").rawValue)\"")
            #expect(try await box.busctl(["get-property", "org.proximityd", ProximityBus.regionPath("kitchen door/1").rawValue,
                                          "org.proximityd.Region1", "Identifier"]).stdout.trimmed == "s \"kitchen door/1\"")
            // GetRegion escapes the identifier for the client.
            #expect(try await Self.monitor(box, "GetRegion", ["s", "kitchen door/1"]).stdout.trimmed
                    == "o \"\(ProximityBus.regionPath("kitchen door/1").rawValue)\"")
            #expect(try await Self.monitor(box, "StopMonitoring", ["s", "fleet"]).status == 0)
            let gone = try await box.busctl(["get-property", "org.proximityd", "/org/proximityd/regions/fleet", "org.proximityd.Region1", "State"])
            #expect(gone.status != 0 && gone.stderr.contains("Unknown object"), "\(gone)")
            #expect(try await Self.monitor(box, "StopMonitoringAll").status == 0)
            #expect(try await Self.monitor(box, "GetMonitoredRegions").stdout.trimmed == "ao 0")
            await daemon.stop()
        }
    }

    @Test("every bad input gets a named error and changes nothing")
    func badInput() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            #expect(try await Self.monitor(box, "StartMonitoring", ["sa{sv}", "kept", "1", "UUID", "s", Self.fleet]).status == 0)
            // With gdbus, which prints the error's name: each case's name and message.
            let invalid = "org.proximityd.Error.InvalidArguments"
            let uuid = "<'\(Self.fleet)'>"
            let cases: [(String, [String], String, String)] = [
                ("StartMonitoring", ["''", "{}"], invalid, "the region identifier is empty"),
                ("StartMonitoring", ["x", "{'Nope': <'1'>}"], invalid, "unknown matcher key \"Nope\""),
                ("StartMonitoring", ["x", "{'UUID': <'not-a-uuid'>}"], invalid, "UUID must be a UUID"),
                ("StartMonitoring", ["x", "{'UUID': <uint32 3>}"], invalid, "UUID must be a string, not the integer 3"),
                ("StartMonitoring", ["x", "{'Major': <uint16 3>}"], invalid, "Major needs UUID"),
                ("StartMonitoring", ["x", "{'UUID': \(uuid), 'Major': <int32 70000>}"], invalid,
                 "Major must be an integer in 0...65535, not 70000"),
                ("StartMonitoring", ["x", "{'Within': <'unknown'>}"], invalid, "Within must be immediate, near or far"),
                ("StartMonitoring", ["x", "{'ExitPeriod': <0.0>}"], invalid, "ExitPeriod must be a number of seconds in 1...86400"),
                ("StartMonitoring", ["x", "{'ExitPeriod': <true>}"], invalid, "ExitPeriod must be a number of seconds, not the boolean true"),
                ("StartMonitoring", ["x", "{'Verified': <'yes'>}"], invalid, "Verified must be true or false, not the string \"yes\""),
                ("StartMonitoring", ["x", "{'Kind': <true>}"], invalid, "Kind must be a string, not the boolean true"),
                ("StartMonitoring", ["kept", "{'UUID': \(uuid), 'ID1': \(uuid)}"], invalid, "ID1 cannot go with UUID"),
                ("StopMonitoring", ["nope"], "org.proximityd.Error.DoesNotExist", "no region \"nope\" is monitored"),
                ("RequestState", ["nope"], "org.proximityd.Error.DoesNotExist", "no region \"nope\" is monitored"),
                ("GetRegion", ["nope"], "org.proximityd.Error.DoesNotExist", "no region \"nope\" is monitored"),
                ("GetRegion", ["''"], invalid, "the region identifier is empty"),
                ("StartMonitoring", ["x"], "org.freedesktop.DBus.Error.InvalidArgs", "expecting 'sa{sv}'"),
            ]
            for (method, arguments, name, message) in cases {
                let result = try await runCommand("gdbus", ["call", "--address", box.address, "--dest", "org.proximityd",
                                                            "--object-path", "/org/proximityd",
                                                            "--method", "org.proximityd.RegionMonitor1.\(method)"] + arguments)
                #expect(result.status != 0 && result.stderr.contains("\(name): ") && result.stderr.contains(message),
                        "\(method) \(arguments): \(result)")
            }
            #expect(try await Self.monitor(box, "GetMonitoredRegions").stdout.trimmed == "ao 1 \"/org/proximityd/regions/kept\"")
            #expect(try await box.busctl(["get-property", "org.proximityd", "/org/proximityd/regions/kept", "org.proximityd.Region1",
                                          "Matcher"]).stdout.trimmed == "a{sv} 1 \"UUID\" s \"\(Self.fleet)\"")
            #expect(daemon.isRunning)
            await daemon.stop()
        }
    }

    @Test("regions added over the bus survive SIGTERM and SIGKILL, with their state file written before each reply")
    func persistence() async throws {
        try await withBox { box in
            var daemon = try await box.startDaemon()
            #expect(try await Self.monitor(box, "StartMonitoring", ["sa{sv}", "a", "1", "Kind", "s", "ibeacon"]).status == 0)
            let file = box.stateDirectory.appendingPathComponent("regions.json")
            #expect(try String(contentsOf: file, encoding: .utf8).contains("\"identifier\" : \"a\""))
            daemon.signal(SIGKILL)
            _ = try await daemon.waitForExit(timeout: .seconds(10))
            daemon = try await box.startDaemon()
            #expect(try await Self.monitor(box, "GetMonitoredRegions").stdout.trimmed == "ao 1 \"/org/proximityd/regions/a\"")
            #expect(try await Self.monitor(box, "StartMonitoring", ["sa{sv}", "b", "1", "Within", "s", "far"]).status == 0)
            await daemon.stop()
            daemon = try await box.startDaemon()
            #expect(try await Self.monitor(box, "GetMonitoredRegions").stdout.trimmed
                    == "ao 2 \"/org/proximityd/regions/a\" \"/org/proximityd/regions/b\"")
            #expect(try await box.busctl(["get-property", "org.proximityd", "/org/proximityd/regions/b", "org.proximityd.Region1",
                                          "Matcher"]).stdout.trimmed == "a{sv} 1 \"Within\" s \"far\"")
            await daemon.stop()
            // A corrupt file stops the start with a clear error, and is left alone.
            try Data("{not json".utf8).write(to: file)
            let broken = try ManagedProcess(BuiltProducts.path("proximityd"),
                                            ["run", "--bus", box.address, "--state-dir", box.stateDirectory.path])
            _ = try await broken.waitForExit(timeout: .seconds(20))
            #expect(broken.exitStatus == 78, "\(broken.stderr)")
            #expect(broken.stderr.contains("regions.json is corrupt"), "\(broken.stderr)")
            #expect(try String(contentsOf: file, encoding: .utf8) == "{not json")
        }
    }
}

/// The limit and regions of the configuration, in this process.
@Suite("regions: the limit and the config file's regions", .serialized)
struct RegionLimitTests {
    @Test("the limit refuses a new region with LimitReached; config regions cannot be stopped or replaced over the bus (NotPermitted)")
    func limitAndConfig() async throws {
        try await withSimBoxes(twoBoxes(distance: 1), time: .simulated) { boxes in
            var matcher = RegionMatcher()
            matcher.kind = .node
            try await withNode("alpha", on: boxes, configure: { configuration in
                configuration.regionMonitor.maxRegions = 2
                configuration.regions = [Region(identifier: "from-config", matcher: matcher, source: .config)]
            }) { node in
                let client = try await boxes.client("alpha")
                func call(_ member: MemberName, _ arguments: [DBusValue]) async -> ErrorName? {
                    do {
                        _ = try await client.call(destination: "org.proximityd", path: "/org/proximityd", interface: "org.proximityd.RegionMonitor1",
                                                  member: member, arguments)
                        return nil
                    } catch let error as DBusError { return error.name } catch { return "other" }
                }
                let empty = DBusValue.dictionary(key: .string, value: .variant, [])
                #expect(await call("StartMonitoring", [.string("one"), empty]) == nil)
                #expect(await call("StartMonitoring", [.string("two"), empty]) == ProximityBus.Errors.limitReached)
                #expect(await call("StartMonitoring", [.string("one"), empty]) == nil, "a redefinition is not a new region")
                #expect(await call("StopMonitoring", [.string("from-config")]) == ProximityBus.Errors.notPermitted)
                #expect(await call("StartMonitoring", [.string("from-config"), empty]) == ProximityBus.Errors.notPermitted)
                #expect(await call("StopMonitoringAll", []) == nil)
                #expect(await node.engine.read { $0.monitoredRegions } == ["from-config"])
                let source = try await client.getProperty(destination: "org.proximityd", path: ProximityBus.regionPath("from-config"),
                                                          interface: "org.proximityd.Region1", name: "Source")
                #expect(source.unwrapped.string == "config")
                await client.close()
            }
        }
    }
}
