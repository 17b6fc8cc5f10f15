import Foundation
import ProximityCore
import Testing

/// The alert engine on a manual clock, starting with the seed's "Albert" walk-through.
@Suite struct AlertEngineTests {
    static let fleet = UUID(uuidString: "f7826da6-4fa2-4e98-8024-bc5b71e0893e")!

    static func beacon(_ minor: UInt16) -> BeaconIdentity { .iBeacon(uuid: fleet, major: 1, minor: minor, measuredPower: -59) }

    static func peer(_ minor: UInt16, _ zone: Proximity, _ distance: Double, at t: Timestamp) -> PeerSnapshot {
        PeerSnapshot(identifier: beacon(minor).peerID, kind: .ibeacon, address: "C0:00:00:00:00:0\(minor)", beacon: beacon(minor),
                        proximity: zone, distance: distance, rssi: -60, lastSeen: t)
    }

    /// Beacon1 and Beacon2: range near, strategy `=`, action popup.
    static func alert(_ minor: UInt16, parameters: AlertParameters = AlertParameters(range: .near, comparison: .equal)) -> Alert {
        var m = RegionMatcher()
        m.uuid = fleet
        m.major = 1
        m.minor = minor
        return Alert(identifier: "beacon\(minor)", content: AlertContent(title: "Beacon\(minor)", action: "popup"),
                     parameters: parameters, targets: m)
    }

    static let b1 = AlertTargetKey(alert: "beacon1", peer: beacon(1).peerID)
    static let b2 = AlertTargetKey(alert: "beacon2", peer: beacon(2).peerID)

    static func offers(_ events: [AlertEvent]) -> [AlertTargetKey] {
        events.compactMap { if case .offered(let k) = $0 { k } else { nil } }
    }

    @Test("Albert: step 1 (far), 2A (near: Beacon1 offered, accepted; Beacon2 ready, not offered), 2B (done: Beacon2 offered), 3 (Beacon1 far: reset 60 s later), 4 (done, back near Beacon1: offered again)")
    func albert() throws {
        var engine = AlertEngine()
        _ = engine.add(Self.alert(1))
        _ = engine.add(Self.alert(2))
        func ready(_ k: AlertTargetKey) -> Bool { engine.targets[k]?.readyForAction ?? false }
        func status(_ k: AlertTargetKey) -> ActionStatus? { engine.targets[k]?.actionStatus }

        // Step 1: Albert in the far region of both.
        var events = engine.update([Self.peer(1, .far, 8, at: 1), Self.peer(2, .far, 9, at: 1)], at: 1)
        #expect(!ready(Self.b1) && !ready(Self.b2))
        #expect(Self.offers(events).isEmpty && engine.current == nil)

        // Step 2A: near both; Beacon1 is the closer: offered, then accepted.
        events = engine.update([Self.peer(1, .near, 1.5, at: 2), Self.peer(2, .near, 2.2, at: 2)], at: 2)
        #expect(ready(Self.b1) && ready(Self.b2))
        #expect(Self.offers(events) == [Self.b1])
        #expect(try engine.accept(Self.b1, at: 2) == [.status(Self.b1, .inProgress)])
        #expect(!ready(Self.b1) && ready(Self.b2) && status(Self.b1) == .inProgress)
        events = engine.update([Self.peer(1, .near, 1.5, at: 3), Self.peer(2, .near, 2.2, at: 3)], at: 3)
        #expect(Self.offers(events).isEmpty, "nothing else while Beacon1 is in progress")

        // Step 2B: Albert closes the popup: Beacon1 done, Beacon2 offered; its alert is triggered.
        events = try engine.done(Self.b1, at: 3.5)
        #expect(events == [.status(Self.b1, .done), .offered(Self.b2)])
        _ = try engine.accept(Self.b2, at: 3.5)
        #expect(!ready(Self.b1) && status(Self.b1) == .done)
        #expect(!ready(Self.b2) && status(Self.b2) == .inProgress)

        // Step 3: Beacon1 far, Beacon2 near. Beacon1's done resets 60 s after its condition stopped.
        events = engine.update([Self.peer(1, .far, 6, at: 10), Self.peer(2, .near, 2.2, at: 10)], at: 10)
        #expect(events.contains(.condition(Self.b1, valid: false)))
        #expect(!ready(Self.b1) && status(Self.b1) == .done, "done until maxTimeBeforeReset has passed")
        #expect(!ready(Self.b2) && status(Self.b2) == .inProgress)
        events = engine.update([Self.peer(1, .far, 6, at: 69.9), Self.peer(2, .near, 2.2, at: 69.9)], at: 69.9)
        #expect(status(Self.b1) == .done)
        events = engine.update([Self.peer(1, .far, 6, at: 70), Self.peer(2, .near, 2.2, at: 70)], at: 70)
        #expect(events.contains(.status(Self.b1, .waitingForAction)))
        #expect(!ready(Self.b1) && status(Self.b1) == .waitingForAction, "reset, not ready: far")
        #expect(status(Self.b2) == .inProgress)

        // Step 4: Albert closes Beacon2's popup and walks back near Beacon1: Beacon1 offered.
        events = try engine.done(Self.b2, at: 70.5)
        #expect(events == [.status(Self.b2, .done)], "Beacon1 is far: nothing to offer yet")
        events = engine.update([Self.peer(1, .near, 1.2, at: 71), Self.peer(2, .near, 2.5, at: 71)], at: 71)
        #expect(ready(Self.b1) && !ready(Self.b2) && status(Self.b2) == .done)
        #expect(Self.offers(events) == [Self.b1])
    }

    @Test("the default strategies at each zone", arguments: [
        (RangeComparison.equal, [Proximity.immediate: false, .near: true, .far: false, .unknown: false]),
        (.nearerOrEqual, [.immediate: true, .near: true, .far: false, .unknown: false]),
        (.fartherOrEqual, [.immediate: false, .near: true, .far: true, .unknown: false]),
    ])
    func defaultStrategies(_ comparison: RangeComparison, _ expected: [Proximity: Bool]) {
        for (zone, valid) in expected {
            #expect(comparison.holds(zone, range: .near) == valid, "\(comparison.rawValue) at \(zone)")
            var engine = AlertEngine()
            _ = engine.add(Self.alert(1, parameters: AlertParameters(range: .near, comparison: comparison)))
            _ = engine.update([Self.peer(1, zone, 1, at: 0)], at: 0)
            #expect((engine.targets[Self.b1]?.readyForAction ?? false) == valid)
        }
    }

    @Test("an unknown strategy key falls back to the default strategy, with one warning")
    func unknownKey() {
        var engine = AlertEngine()
        _ = engine.add(Self.alert(1, parameters: AlertParameters(range: .near, strategy: "nope")))
        let first = engine.update([Self.peer(1, .near, 1, at: 0)], at: 0)
        let second = engine.update([Self.peer(1, .near, 1, at: 1)], at: 1)
        #expect(first.filter { if case .unknownStrategy = $0 { true } else { false } } == [.unknownStrategy(alert: "beacon1", key: "nope")])
        #expect(!second.contains(.unknownStrategy(alert: "beacon1", key: "nope")))
        #expect(engine.targets[Self.b1]?.readyForAction == true && engine.targets[Self.b1]?.strategy == "range")
    }

    @Test("the time strategy: valid after 60 s seen continuously; a gap of more than 3 s starts again")
    func timeStrategy() {
        var engine = AlertEngine()
        _ = engine.add(Self.alert(1, parameters: AlertParameters(range: .near, comparison: .equal, strategy: "time")))
        var t = 0.0
        while t < 59.5 {
            _ = engine.update([Self.peer(1, .near, 1, at: t)], at: t)
            #expect(engine.targets[Self.b1]?.conditionValid == false, "t=\(t)")
            t += 1
        }
        // Not in the reports at 60 and 61, back at 62: 3 s since 59, not more, the detection goes on.
        for gapT in [60.0, 61] { _ = engine.update([], at: gapT) }
        _ = engine.update([Self.peer(1, .near, 1, at: 62)], at: 62)
        #expect(engine.targets[Self.b1]?.conditionValid == true, "seen since 0, gaps of at most 3 s")
        // Away 4 s: a new detection, 60 s again.
        for gapT in [63.0, 64, 65] { _ = engine.update([], at: gapT) }
        _ = engine.update([Self.peer(1, .near, 1, at: 66.5)], at: 66.5)
        #expect(engine.targets[Self.b1]?.conditionValid == false)
        t = 67.5
        while t < 126.5 {
            _ = engine.update([Self.peer(1, .near, 1, at: t)], at: t)
            #expect(engine.targets[Self.b1]?.conditionValid == false, "t=\(t)")
            t += 1
        }
        _ = engine.update([Self.peer(1, .near, 1, at: 126.5)], at: 126.5)
        #expect(engine.targets[Self.b1]?.conditionValid == true, "60 s after the new detection began at 66.5")
    }

    @Test("decline offers the next closest; the declined one comes back only after its condition stopped and held again")
    func decline() throws {
        var engine = AlertEngine()
        _ = engine.add(Self.alert(1))
        _ = engine.add(Self.alert(2))
        _ = engine.update([Self.peer(1, .near, 1, at: 0), Self.peer(2, .near, 2, at: 0)], at: 0)
        #expect(engine.current == Self.b1)
        #expect(try engine.decline(Self.b1, at: 0.5) == [.offered(Self.b2)])
        #expect(try engine.done(Self.b2, at: 0.5) == [.status(Self.b2, .done)], "Beacon1 was declined: not offered again")
        _ = engine.update([Self.peer(1, .far, 5, at: 1), Self.peer(2, .near, 2, at: 1)], at: 1)
        let back = engine.update([Self.peer(1, .near, 1, at: 2), Self.peer(2, .near, 2, at: 2)], at: 2)
        #expect(Self.offers(back) == [Self.b1])
        #expect(throws: AlertCommandError.notOffered(Self.b2)) { try engine.accept(Self.b2, at: 2) }
    }

    @Test("an alert in progress is removed and done when its target leaves the report or its condition; an offer is just taken back")
    func removal() throws {
        var engine = AlertEngine()
        _ = engine.add(Self.alert(1))
        _ = engine.update([Self.peer(1, .near, 1, at: 0)], at: 0)
        _ = try engine.accept(Self.b1, at: 0.5)
        let gone = engine.update([], at: 1)
        #expect(gone.contains(.removed(Self.b1, reason: .notDetected)) && gone.contains(.status(Self.b1, .done)))
        #expect(engine.current == nil)

        var other = AlertEngine()
        _ = other.add(Self.alert(1))
        _ = other.update([Self.peer(1, .near, 1, at: 0)], at: 0)
        let far = other.update([Self.peer(1, .far, 5, at: 1)], at: 1)
        #expect(far.contains(.removed(Self.b1, reason: .conditionNotValid)))
        #expect(other.targets[Self.b1]?.actionStatus == .waitingForAction, "only offered: still waiting")
    }

    @Test("a done target whose condition holds again before the reset stays done")
    func noResetWhileValid() throws {
        var engine = AlertEngine()
        _ = engine.add(Self.alert(1, parameters: AlertParameters(range: .near, maxTimeBeforeReset: 5)))
        _ = engine.update([Self.peer(1, .near, 1, at: 0)], at: 0)
        _ = try engine.accept(Self.b1, at: 0.5)
        _ = try engine.done(Self.b1, at: 0.5)
        _ = engine.update([Self.peer(1, .far, 5, at: 1)], at: 1)
        _ = engine.update([Self.peer(1, .near, 1, at: 4)], at: 4)
        let events = engine.update([Self.peer(1, .near, 1, at: 10)], at: 10)
        #expect(engine.targets[Self.b1]?.actionStatus == .done && Self.offers(events).isEmpty)
        _ = engine.update([Self.peer(1, .far, 5, at: 11)], at: 11)
        _ = engine.update([Self.peer(1, .far, 5, at: 15.9)], at: 15.9)
        #expect(engine.targets[Self.b1]?.actionStatus == .done)
        _ = engine.update([Self.peer(1, .far, 5, at: 16)], at: 16)
        #expect(engine.targets[Self.b1]?.actionStatus == .waitingForAction, "5 s after the condition stopped at 11")
    }

    @Test("a restored alert in progress stays in progress while the table fills; a restored done is not offered")
    func restore() {
        var engine = AlertEngine()
        _ = engine.add(Self.alert(1))
        _ = engine.add(Self.alert(2))
        engine.restore(AlertEngine.Saved(targets: [Self.b1: .init(status: .inProgress, invalidSince: nil),
                                                   Self.b2: .init(status: .done, invalidSince: nil)]), at: 100)
        #expect(engine.current == Self.b1)
        let empty = engine.update([], at: 101)
        #expect(!empty.contains { if case .removed = $0 { true } else { false } }, "\(empty)")
        let back = engine.update([Self.peer(1, .near, 1, at: 102), Self.peer(2, .near, 2, at: 102)], at: 102)
        #expect(Self.offers(back).isEmpty && engine.targets[Self.b1]?.actionStatus == .inProgress)
        #expect(engine.targets[Self.b2]?.actionStatus == .done)
        // After the grace, an in-progress target out of the table is taken back as usual.
        let gone = engine.update([], at: 120)
        #expect(gone.contains(.removed(Self.b1, reason: .notDetected)) && engine.targets[Self.b1]?.actionStatus == .done)
    }

    @Test("what is saved restores the same: statuses, reset deadlines, cooldowns; a done time-strategy target still near re-fires nothing")
    func savedRoundTrip() throws {
        var parameters = AlertParameters(range: .near, strategy: "time", maxTimeBeforeReset: 60, cooldown: 600)
        var engine = AlertEngine()
        _ = engine.add(Self.alert(1, parameters: parameters))
        parameters.strategy = nil
        _ = engine.add(Self.alert(2, parameters: parameters))
        var t: Timestamp = 0
        func near(_ minors: [UInt16]) -> [PeerSnapshot] { minors.map { Self.peer($0, .near, Double($0), at: t) } }
        var offered: [AlertTargetKey] = []
        while t <= 62 {
            offered += Self.offers(engine.update(near([1, 2]), at: t))
            if let c = engine.current { _ = try engine.accept(c, at: t); _ = try engine.done(c, at: t) }
            t += 1
        }
        #expect(offered == [Self.b2, Self.b1], "Beacon2 at once, Beacon1 after its 60 s dwell")
        // Beacon2 walks away at 63: its reset is due at 123.
        _ = engine.update(near([1]), at: 63)
        let saved = engine.saved
        #expect(saved.targets[Self.b1] == .init(status: .done, invalidSince: nil))
        #expect(saved.targets[Self.b2] == .init(status: .done, invalidSince: 63))
        #expect(saved.acceptedAt.count == 2)

        // A restart at 70, on a clock whose times are the same.
        var again = AlertEngine()
        _ = again.add(Self.alert(1, parameters: AlertParameters(range: .near, strategy: "time", maxTimeBeforeReset: 60, cooldown: 600)))
        _ = again.add(Self.alert(2, parameters: parameters))
        again.restore(saved, at: 70)
        var after: [AlertEvent] = []
        for s in stride(from: 70.0, through: 200, by: 1) { after += again.update([Self.peer(1, .near, 1, at: s)], at: s) }
        #expect(Self.offers(after).isEmpty, "Beacon1 stayed near: done, never reset; \(after)")
        #expect(again.targets[Self.b1]?.actionStatus == .done)
        #expect(after.contains(.status(Self.b2, .waitingForAction)), "Beacon2's deadline kept")
        // Beacon2 comes back within its cooldown: ready, but not offered.
        let back = again.update([Self.peer(2, .near, 2, at: 201)], at: 201)
        #expect(Self.offers(back).isEmpty && again.targets[Self.b2]?.readyForAction == true)
    }

    @Test("an outside strategy decides by its answers; dropped, its targets fall back to the default strategy")
    func external() {
        var parameters = AlertParameters(range: .far, comparison: .equal, strategy: "crowd")
        var engine = AlertEngine()
        engine.register(.external(key: "crowd"))
        _ = engine.add(Self.alert(1, parameters: parameters))
        var events = engine.update([Self.peer(1, .near, 1, at: 1)], at: 1)
        #expect(engine.targets[Self.b1]?.strategy == "crowd" && Self.offers(events).isEmpty)
        #expect(engine.targets(decidedBy: "crowd").map(\.key) == [Self.b1])
        events = engine.apply(verdicts: [Self.b1: true], from: "crowd", at: 1.2)
        #expect(events == [.condition(Self.b1, valid: true), .offered(Self.b1)])
        events = engine.apply(verdicts: [Self.b1: false], from: "crowd", at: 1.5)
        #expect(events == [.condition(Self.b1, valid: false), .removed(Self.b1, reason: .conditionNotValid)])
        engine.unregister("crowd")
        events = engine.update([Self.peer(1, .far, 6, at: 2)], at: 2)
        #expect(engine.targets[Self.b1]?.strategy == "range")
        #expect(Self.offers(events) == [Self.b1], "far = far under the default strategy")
        parameters.strategy = nil
    }
}

extension AlertEngineTests {
    @Test("a strategy registered while its alert is on offer keeps the offer until its first answer")
    func registeredWhileOffered() {
        var engine = AlertEngine()
        _ = engine.add(Self.alert(1, parameters: AlertParameters(range: .near, strategy: "crowd")))
        let offered = engine.update([Self.peer(1, .near, 1, at: 1)], at: 1)
        #expect(Self.offers(offered) == [Self.b1], "the default strategy while crowd is unknown")
        engine.register(.external(key: "crowd"))
        let switched = engine.update([Self.peer(1, .near, 1, at: 2)], at: 2)
        #expect(!switched.contains { if case .removed = $0 { true } else { false } }, "\(switched)")
        #expect(engine.current == Self.b1 && engine.targets[Self.b1]?.strategy == "crowd")
        #expect(engine.apply(verdicts: [Self.b1: false], from: "crowd", at: 2.1).contains(.removed(Self.b1, reason: .conditionNotValid)))
    }

    @Test("SetActionStatus inProgress: becomes the current alert when none is; refused while another is")
    func forcedInProgress() throws {
        var engine = AlertEngine()
        _ = engine.add(Self.alert(1))
        _ = engine.add(Self.alert(2))
        _ = engine.update([Self.peer(1, .far, 8, at: 1), Self.peer(2, .far, 9, at: 1)], at: 1)
        _ = try engine.setStatus(Self.b2, .inProgress, at: 1.5)
        #expect(engine.current == Self.b2)
        #expect(throws: AlertCommandError.anotherCurrent(Self.b2)) { try engine.setStatus(Self.b1, .inProgress, at: 1.5) }
        #expect(try engine.done(Self.b2, at: 1.6) == [.status(Self.b2, .done)])
        #expect(engine.current == nil)
    }
}

/// Alerts as clients write them: parts by name, checked.
@Suite struct AlertDefinitionTests {
    static let match = Alert.Value.matcher(["UUID": .text("f7826da6-4fa2-4e98-8024-bc5b71e0893e"), "Major": .integer(1)])

    @Test("every part read, written back the same")
    func roundTrip() throws {
        let parts: [(Alert.Key, Alert.Value)] = [
            (.title, .text("Hello")), (.description, .text("d")), (.textToSpeech, .text("hi")), (.thumbnail, .text("/t.png")),
            (.action, .text("webview")), (.url, .text("https://example.org")), (.uri, .text("app://x")), (.extra, .map(["k": "v"])),
            (.range, .text("immediate")), (.comparison, .text("<=")), (.strategy, .text("time")), (.maxTimeBeforeReset, .integer(5)),
            (.cooldown, .number(30)), (.capCount, .integer(3)), (.capWindow, .number(3600)), (.days, .text("fri-mon")),
            (.start, .text("22:00")), (.end, .text("02:30")), (.outside, .text("drop")), (.match, Self.match),
        ]
        let alert = try Alert.parse(identifier: "a", parts)
        #expect(alert.parameters.range == .immediate && alert.parameters.comparison == .nearerOrEqual)
        #expect(alert.parameters.cap == AlertCap(count: 3, window: 3600))
        #expect(alert.parameters.schedule == AlertSchedule(days: [5, 6, 7, 1], start: 22 * 60, end: 150, outside: .drop))
        #expect(alert.content.extra == ["k": "v"] && alert.targets.major == 1)
        #expect(try Alert.parse(identifier: "a", alert.parts) == alert)
    }

    @Test("bad parts are refused, naming the part", arguments: [
        ([(Alert.Key.range, Alert.Value.text("close"))], "Range must be one of immediate, near, far, not \"close\""),
        ([(.range, .text("unknown"))], "Range must be one of immediate, near, far, not \"unknown\""),
        ([(.comparison, .text("<"))], "Comparison must be one of =, <=, >=, not \"<\""),
        ([(.maxTimeBeforeReset, .number(-1))], "MaxTimeBeforeReset must be from 0 to 2592000 seconds, not -1.0"),
        ([(.maxTimeBeforeReset, .text("60"))], "MaxTimeBeforeReset must be a number of seconds, not the string \"60\""),
        ([(.capCount, .integer(2))], "CapWindow is missing: a cap needs both CapCount and CapWindow"),
        ([(.days, .text("mon-fry"))], "Days \"fry\" is not a day of the week (mon, tue, wed, thu, fri, sat, sun)"),
        ([(.start, .text("9:00"))], "Start must be a time of day HH:MM (00:00 to 24:00), not \"9:00\""),
        ([(.strategy, .text("my strategy"))], "Strategy \"my strategy\" has \" \": a strategy key has letters, digits, '-', '_' and '.' only"),
        ([(.outside, .text("keep"))], "Outside must be hold or drop, not \"keep\""),
    ])
    func refused(_ parts: [(Alert.Key, Alert.Value)], _ message: String) {
        #expect(throws: AlertDefinitionError.self) { try Alert.parse(identifier: "a", parts + [(.match, Self.match)]) }
        do { _ = try Alert.parse(identifier: "a", parts + [(.match, Self.match)]) } catch { #expect(error.description == message) }
    }

    @Test("the target matcher is required, and cannot narrow by zone")
    func matcher() {
        do { _ = try Alert.parse(identifier: "a", []) } catch { #expect(error.key == .match) }
        do { _ = try Alert.parse(identifier: "a", [(.match, .matcher(["Within": .text("near")]))]) } catch {
            #expect(error.description == "Match cannot have Within (an alert's range and strategy say when it is ready)")
        }
        do { _ = try Alert.parse(identifier: "a", [(.match, .matcher(["Major": .integer(1)]))]) } catch {
            #expect(error.key == .match && error.problem.contains("UUID"), "\(error)")
        }
    }
}

/// The gates beyond the seed: cooldown, cap, schedule. Each combines with any range strategy.
@Suite struct AlertGateTests {
    typealias T = AlertEngineTests

    /// Runs a target near, then far long enough to reset (5 s), `times` times, accepting and
    /// closing each offer; returns the times of the offers.
    static func cycle(_ engine: inout AlertEngine, from start: Timestamp, times: Int, period: Double,
                      local: LocalTime? = nil) throws -> [Timestamp] {
        var offers: [Timestamp] = []
        var t = start
        for _ in 0..<times {
            let events = engine.update([T.peer(1, .near, 1, at: t)], at: t, local: local)
            if T.offers(events) == [T.b1] {
                offers.append(t)
                _ = try engine.accept(T.b1, at: t)
                _ = try engine.done(T.b1, at: t)
            }
            _ = engine.update([T.peer(1, .far, 5, at: t + 1)], at: t + 1, local: local)
            _ = engine.update([T.peer(1, .far, 5, at: t + 6)], at: t + 6, local: local)
            t += period
        }
        return offers
    }

    @Test("cooldown: at most one alert per target per period, though the reset allows more")
    func cooldown() throws {
        var engine = AlertEngine()
        _ = engine.add(T.alert(1, parameters: AlertParameters(range: .near, maxTimeBeforeReset: 5, cooldown: 30)))
        let offers = try Self.cycle(&engine, from: 0, times: 8, period: 10)
        #expect(offers == [0, 30, 60])
    }

    @Test("cap: at most N alerts per window")
    func cap() throws {
        var engine = AlertEngine()
        _ = engine.add(T.alert(1, parameters: AlertParameters(range: .near, maxTimeBeforeReset: 5, cap: AlertCap(count: 2, window: 60))))
        let offers = try Self.cycle(&engine, from: 0, times: 10, period: 10)
        #expect(offers == [0, 10, 60, 70])
    }

    @Test("schedule: outside it a ready target is held, then offered when it opens; or dropped (done)")
    func schedule() throws {
        let weekdays = AlertSchedule(days: Set(1...5), start: 9 * 60, end: 17 * 60, outside: .hold)
        #expect(weekdays.isOpen(at: LocalTime(weekday: 1, minute: 9 * 60)) && !weekdays.isOpen(at: LocalTime(weekday: 1, minute: 17 * 60)))
        #expect(!weekdays.isOpen(at: LocalTime(weekday: 6, minute: 10 * 60)))
        let night = AlertSchedule(days: [5], start: 22 * 60, end: 2 * 60)
        #expect(night.isOpen(at: LocalTime(weekday: 5, minute: 23 * 60)) && night.isOpen(at: LocalTime(weekday: 6, minute: 60)))
        #expect(!night.isOpen(at: LocalTime(weekday: 5, minute: 60)))

        var held = AlertEngine()
        _ = held.add(T.alert(1, parameters: AlertParameters(range: .near, schedule: weekdays)))
        let early = held.update([T.peer(1, .near, 1, at: 0)], at: 0, local: LocalTime(weekday: 1, minute: 8 * 60 + 59))
        #expect(T.offers(early).isEmpty && held.targets[T.b1]?.readyForAction == true)
        let opened = held.update([T.peer(1, .near, 1, at: 60)], at: 60, local: LocalTime(weekday: 1, minute: 9 * 60))
        #expect(T.offers(opened) == [T.b1])

        var dropped = AlertEngine()
        _ = dropped.add(T.alert(1, parameters: AlertParameters(range: .near, schedule: AlertSchedule(days: Set(1...5), start: 540, end: 1020, outside: .drop))))
        let saturday = dropped.update([T.peer(1, .near, 1, at: 0)], at: 0, local: LocalTime(weekday: 6, minute: 600))
        #expect(saturday.contains(.status(T.b1, .done)) && T.offers(saturday).isEmpty)
        let monday = dropped.update([T.peer(1, .near, 1, at: 1)], at: 1, local: LocalTime(weekday: 1, minute: 600))
        #expect(T.offers(monday).isEmpty, "dropped: done until it resets")
    }
}
