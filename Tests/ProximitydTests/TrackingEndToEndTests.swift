import BlueZSim
import DBusKit
import Foundation
import ProximityAPI
import ProximityTesting
import Testing
import SimTesting

/// Tracking into the profile, a rule, and the event log, on bluez-sim in real time: an iBeacon
/// comes from far to immediate and goes; a bus client watches `Attributes`, `RuleFired` and
/// `Logged`.
@Suite("tracking end to end on bluez-sim", .serialized)
struct TrackingEndToEndTests {
    static let fleet = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"

    static func scenario() -> Scenario {
        var radio = RadioParameters()
        radio.shadowingSigma = 1
        radio.packetLoss = 0.05
        return Scenario(seed: 31, radio: radio, boxes: [
            BoxSpec(name: "kiosk", address: "AA:00:00:00:00:01", trajectory: Trajectory(fixed: Position(x: -12, y: 0))),
        ])
    }

    static let tag = """
        {"name": "tag", "address": "C0:00:00:00:00:07", "ibeacon": {"uuid": "\(fleet)", "major": 12, "minor": 7, "measured_power": -59}, "position": [0, 0]}
        """

    func attributes(_ sim: SimBoxes) async throws -> String {
        try await sim.busctl("kiosk", ["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.Profile1", "Attributes"]).stdout.trimmed
    }

    static func expected(prox: Int) -> String {
        "a{ss} 4 \"a.beacon.major\" \"12\" \"a.beacon.minor\" \"7\" \"a.beacon.prox\" \"\(prox)\" \"a.beacon.uuid\" \"\(fleet)\""
    }

    @Test("an iBeacon from far to immediate and away: the four attributes with the right prox at each stage, none after; a rule fires once as it comes near; the log holds the tracking and rule events in order")
    func walk() async throws {
        try await withNodes(Self.scenario()) { sim, daemons in
            daemons["kiosk"] = try await sim.startDaemon("kiosk", ["--clear-interval", "3"])
            let observer = try await sim.buses["kiosk"]!.connect()
            let signals = SignalLog(try await observer.subscribe(MatchRule(sender: "org.proximityd", path: "/org/proximityd")))
            defer { signals.cancel() }
            let rule = #"{"on": ["tracking"], "when": {"all": [{"key": "a.beacon.major", "op": "eq", "value": "12"}, {"key": "a.beacon.prox", "op": "le", "value": 2}]}, "do": [{"signal": {"minor": "{%a.beacon.minor%}"}}], "frequency": "once"}"#
            let add = try await sim.busctl("kiosk", ["call", "org.proximityd", "/org/proximityd", "org.proximityd.Profile1", "AddRule", "ss", "near-12", rule])
            #expect(add.status == 0, "\(add)")
            _ = try await sim.control(["AddBeacon", "s", Self.tag])

            for (x, prox) in [(-12.0, 3), (-1.5, 2), (-0.2, 1)] {
                _ = try await sim.control("MoveBox", [.string("kiosk"), .double(x), .double(0), .double(0)])
                try await sim.until("kiosk", "a.beacon.prox \(prox) at \(x) m", timeout: .seconds(20)) {
                    try await attributes(sim) == Self.expected(prox: prox)
                }
                print("tracking end to end: at \(-x) m, prox \(prox)")
            }
            _ = try await sim.control(["RemoveBeacon", "s", "tag"])
            try await sim.until("kiosk", "no attributes once the beacon is gone", timeout: .seconds(30)) { try await attributes(sim) == "a{ss} 0" }

            let fired = signals.messages.filter { $0.member == "RuleFired" }
            #expect(fired.count == 1 && fired.first?.body.first?.string == "near-12", "\(fired.map(\.description))")
            #expect(fired.first.map { $0.body[1].stringKeyedDictionary?.mapValues { $0.string ?? "" } } == ["minor": "7"])

            // The log: tracked 3 (maybe again), 2, the rule, 1 (maybe 0), cleared; in this order.
            let events = try await sim.busctl("kiosk", ["--json=short", "call", "org.proximityd", "/org/proximityd", "org.proximityd.EventLog1",
                                                        "GetEvents", "tdu", "0", "0", "1000"])
            let entries = try Self.entries(events.stdout)
            let story = entries.filter { ["tracking", "rule"].contains($0.source) }.map { entry -> String in
                entry.source == "rule" ? "rule \(entry.data["rule"] ?? "")" : "\(entry.type) \(entry.data["a.beacon.prox"] ?? "")"
            }
            print("tracking end to end: the log says \(story)")
            let compact = story.reduce(into: [String]()) { if $0.last != $1 { $0.append($1) } }
            #expect(compact.first == "tracked 3" && compact.last == "cleared ", "\(story)")
            let near = try #require(compact.firstIndex(of: "tracked 2"))
            #expect(compact[near + 1] == "rule near-12" && compact[near + 2] == "tracked 1", "\(story)")
            #expect(entries.map(\.seq) == Array(entries.map(\.seq).sorted()), "numbered in order")
            await observer.close()
        }
    }

    @Test("rules on region and alert events: a region entered fires a rule that offers an alert whose own condition does not hold; an alert offered fires a rule; all logged in order")
    func regionAndAlertTriggers() async throws {
        try await withNodes(Self.scenario()) { sim, daemons in
            daemons["kiosk"] = try await sim.startDaemon("kiosk")
            let observer = try await sim.buses["kiosk"]!.connect()
            let signals = SignalLog(try await observer.subscribe(MatchRule(sender: "org.proximityd", path: "/org/proximityd")))
            defer { signals.cancel() }
            func call(_ interface: String, _ arguments: [String]) async throws {
                let result = try await sim.busctl("kiosk", ["call", "org.proximityd", "/org/proximityd", "org.proximityd.\(interface)"] + arguments)
                #expect(result.status == 0, "\(arguments): \(result)")
            }
            // The alert is for far targets: the tag, near, never makes it ready by itself.
            try await call("AlertManager1", ["AddAlert", "sa{sv}", "welcome", "3", "Title", "s", "Welcome", "Range", "s", "far",
                                             "Match", "a{sv}", "1", "UUID", "s", Self.fleet])
            try await call("RegionMonitor1", ["StartMonitoring", "sa{sv}", "hall", "1", "UUID", "s", Self.fleet])
            try await call("Profile1", ["AddRule", "ss", "on-enter",
                                        #"{"on": "region", "when": {"all": [{"key": "event.type", "op": "eq", "value": "entered"}, {"key": "event.region", "op": "eq", "value": "hall"}]}, "do": [{"offer-alert": "welcome"}, {"log": {"why": "entered {%event.region%}"}}]}"#])
            try await call("Profile1", ["AddRule", "ss", "on-offer",
                                        #"{"on": "alert", "when": {"key": "event.type", "op": "eq", "value": "offered"}, "do": [{"signal": {"alert": "{%event.alert%}"}}]}"#])
            _ = try await sim.control("MoveBox", [.string("kiosk"), .double(-1), .double(0), .double(0)])
            _ = try await sim.control(["AddBeacon", "s", Self.tag])
            let offer = try await signals.wait(timeout: .seconds(30), "AlertReady for welcome") { $0.member == "AlertReady" }
            #expect(offer.body.first?.objectPath == ProximityBus.alertPath(alert: "welcome", target: "ibeacon:\(Self.fleet):12:7"))
            let fired = try await signals.wait(timeout: .seconds(5), "RuleFired on-offer") { $0.member == "RuleFired" }
            #expect(fired.body.first?.string == "on-offer" && fired.body[1].stringKeyedDictionary?["alert"]?.string == "welcome")
            let condition = try await sim.busctl("kiosk", ["get-property", "org.proximityd", offer.body[0].objectPath!.rawValue,
                                                           "org.proximityd.Alert1", "ConditionValid"])
            #expect(condition.stdout.trimmed == "b false", "offered by the rule, not by its condition")

            let events = try await sim.busctl("kiosk", ["--json=short", "call", "org.proximityd", "/org/proximityd", "org.proximityd.EventLog1",
                                                        "GetEvents", "tdu", "0", "0", "1000"])
            let story = try Self.entries(events.stdout).filter { $0.source != "tracking" && !($0.source == "region" && $0.type == "determined") }
                .map { "\($0.source).\($0.type)\($0.data["rule"].map { " \($0)" } ?? "")" }
            #expect(Array(story.prefix(5)) == ["region.entered", "rule.fired on-enter", "rule.log on-enter", "alert.offered", "rule.fired on-offer"],
                    "\(story)")
            await observer.close()
        }
    }

    static func entries(_ json: String) throws -> [LogEntryValue] {
        struct Reply: Decodable {
            struct Entry: Decodable {
                let seq: UInt64, time: Double, source: String, type: String, data: [String: String]
                init(from decoder: any Decoder) throws {
                    var c = try decoder.unkeyedContainer()
                    seq = try c.decode(UInt64.self)
                    time = try c.decode(Double.self)
                    source = try c.decode(String.self)
                    type = try c.decode(String.self)
                    data = try c.decode([String: String].self)
                }
            }
            let data: [[Entry]]
        }
        let reply = try JSONDecoder().decode(Reply.self, from: Data(json.utf8))
        return reply.data[0].map { LogEntryValue(seq: $0.seq, time: $0.time, source: $0.source, type: $0.type, data: $0.data) }
    }

    @Test("SIGKILL during a stream of events: the log reads back whole, and holds every event whose Logged signal a client saw")
    func sigkill() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            let seen = SignalLog(try await box.observer.subscribe(MatchRule(sender: "org.proximityd", interface: "org.proximityd.EventLog1")))
            defer { seen.cancel() }
            // A client streams profile changes as fast as the node takes them.
            let writer = Task {
                var i = 0
                while !Task.isCancelled {
                    i += 1
                    _ = try? await box.observer.call(destination: "org.proximityd", path: "/org/proximityd", interface: "org.proximityd.Profile1",
                                                     member: "UpdateAttribute", [.string("a.counter"), .string("\(i)")], timeout: .seconds(2))
                }
            }
            try await seen.wait(from: 199, timeout: .seconds(30), "200 events") { _ in true }
            daemon.signal(SIGKILL)
            _ = try await daemon.waitForExit(timeout: .seconds(10))
            writer.cancel()
            let announced = seen.messages.compactMap { message -> UInt64? in
                if case .uint64(let seq)? = message.body.first { return seq } else { return nil }
            }
            let file = box.stateDirectory.appendingPathComponent("events.jsonl")
            let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
            // Whole lines, each one JSON; at most the last torn.
            let parsed = lines.dropLast().map { try? JSONSerialization.jsonObject(with: Data($0.utf8)) }
            #expect(parsed.allSatisfy { $0 != nil }, "a corrupt line before the end")
            let restarted = try await box.startDaemon()
            let reply = try await box.observer.call(destination: "org.proximityd", path: "/org/proximityd", interface: "org.proximityd.EventLog1",
                                                    member: "GetEvents", [.uint64(0), .double(0), .uint32(10_000)])
            let logged = Set((reply.first?.arrayElements ?? []).compactMap(LogEntryValue.init).map(\.seq))
            let missing = announced.filter { !logged.contains($0) }
            #expect(missing.isEmpty, "announced but not in the log: \(missing)")
            print("tracking end to end: \(announced.count) events announced before SIGKILL, \(logged.count) in the log after the restart")
            await restarted.stop()
        }
    }
}
