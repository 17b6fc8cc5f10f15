import Foundation
import ProximityCore
import Testing

/// Feeds every node's distance at each whole second from `from` through `to` (nodes in name order),
/// then ticks; returns every decision. `distances` gives the nodes reporting at a time (a node
/// missing from the dictionary sends nothing then).
private func drive(_ rule: inout some RoomRule, device: String = "phone", from: Int, to: Int,
                   _ distances: (Double) -> [String: Double]) -> [RoomDecision] {
    var decisions: [RoomDecision] = []
    guard from <= to else { return [] }
    for second in from...to {
        let t = Double(second)
        for (node, d) in distances(t).sorted(by: { $0.key < $1.key }) {
            decisions += rule.observe(device: device, node: node, distance: d, at: t)
        }
        decisions += rule.tick(at: t)
    }
    return decisions
}

/// A deterministic noise source: uniform in [−1, 1) from a 64-bit LCG.
private struct Noise {
    var state: UInt64
    mutating func next() -> Double {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Double(state >> 11) * 0x1p-53 * 2 - 1
    }
}

@Suite("RoomDecider: the fleet's room decision")
struct RoomDeciderTests {
    /// No settling time unless a test asks for it: the CUSUM then shows from the start.
    static let configuration = RoomDecider.Configuration(staleAfter: 15, awayAfter: 60, margin: 0.3, evidence: 1.5, settle: 0)

    func decider(_ c: RoomDecider.Configuration = configuration) -> RoomDecider { RoomDecider(configuration: c) }

    @Test("the first report gives the device a room at once; a second node does not move it without evidence")
    func arrival() {
        var rule = decider()
        let r1 = rule.observe(device: "phone", node: "A", distance: 2, at: 0)
        #expect(r1
            == [RoomDecision(device: "phone", room: "A", previous: nil, at: 0, reason: .arrived)])
        let r2 = rule.observe(device: "phone", node: "B", distance: 1, at: 0)
        #expect(r2.isEmpty)
        #expect(rule.room(of: "phone") == "A")
        #expect(rule.readings(of: "phone") == [NodeReading(node: "B", distance: 1, at: 0), NodeReading(node: "A", distance: 2, at: 0)])
        #expect(rule.devices == ["phone"])
        #expect(rule.room(of: "watch") == nil)
    }

    @Test("far from every node (13 to 16 m from both, beyond the home distance): no room while far, not_home after the away time, never a bounce")
    func farFromEveryNode() {
        // A site with calibrated nodes sets the home distance to its size (the default, 30 m, is
        // for uncalibrated ones). One report alone votes here (the street with strays: below).
        let home10 = RoomDecider.Configuration(staleAfter: 15, awayAfter: 60, margin: 0.3, evidence: 1.5, settle: 0, homeDistance: 10,
                                               homeReports: 1)
        var rule = decider(home10)
        var noise = Noise(state: 7)
        // In the kitchen first, 1.5 m from A.
        var decisions = drive(&rule, from: 0, to: 20) { _ in ["A": 1.5, "B": 12] }
        #expect(decisions.map(\.room) == ["A"])
        // Out in the street: both nodes hear it 13 to 16 m away, whichever looks nearer changing.
        decisions = drive(&rule, from: 21, to: 120) { _ in ["A": 14.5 + 1.5 * noise.next(), "B": 14.5 + 1.5 * noise.next()] }
        #expect(decisions.map(\.room) == [nil], "\(decisions)")
        #expect(decisions.first?.reason == .away && decisions.first!.at >= 20 + 60 && decisions.first!.at <= 20 + 61, "\(decisions)")
        // A device first heard only from afar never gets a room.
        var other = decider(home10)
        #expect(drive(&other, device: "tag", from: 0, to: 90) { _ in ["A": 15, "B": 13] }.isEmpty)
        #expect(other.room(of: "tag") == nil && other.readings(of: "tag").count == 2)
        // The home distance is a setting: at 20 m, the same street is a room again.
        var wide = decider(.init(staleAfter: 15, awayAfter: 60, margin: 0.3, evidence: 1.5, settle: 0, homeDistance: 20))
        #expect(drive(&wide, device: "tag", from: 0, to: 5) { _ in ["A": 15, "B": 13] }.map(\.room) == ["A"])
        #expect(RoomDecider.Configuration(homeDistance: 0.5).problem == "homeDistance must be in 1...1000 m")
    }

    @Test("the street with stray near reports: the room never changes, not_home within the away time and the vote's flip; one report alone would keep it home")
    func streetWithStrays() {
        let home10 = RoomDecider.Configuration(staleAfter: 15, awayAfter: 60, margin: 0.3, evidence: 1.5, settle: 0, homeDistance: 10)
        #expect(home10.homeReports == 9 && home10.homeWindow == 60)
        // 13 to 16 m from both nodes, and now and then a wild report well inside the home distance.
        func street(seed: UInt64) -> (Double) -> [String: Double] {
            var noise = Noise(state: seed)
            return { t in
                let s = Int(t)
                return ["A": s % 11 == 0 ? 6 : 14.5 + 1.5 * noise.next(), "B": s % 7 == 0 ? 5 : 14.5 + 1.5 * noise.next()]
            }
        }
        var rule = decider(home10)
        #expect(drive(&rule, from: 0, to: 20) { _ in ["A": 1.5, "B": 12] }.map(\.room) == ["A"])
        let out = drive(&rule, from: 21, to: 600, street(seed: 11))
        // Leaving at 21: A's vote (its last 9 reports) turns far at its fifth far report, 26 (its
        // stray at 22 is near), so the last near vote is at 25 and not_home comes at 85, the away
        // time after it; no room change before or after, B's strays notwithstanding.
        #expect(out == [RoomDecision(device: "phone", room: nil, previous: "A", at: 85, reason: .away)], "\(out)")
        #expect(rule.room(of: "phone") == nil)
        // The same street with one report voting: each stray restarts the away time, and the strays
        // of B take the room.
        var single = decider(.init(staleAfter: 15, awayAfter: 60, margin: 0.3, evidence: 1.5, settle: 0, homeDistance: 10, homeReports: 1))
        _ = drive(&single, from: 0, to: 20) { _ in ["A": 1.5, "B": 12] }
        let kept = drive(&single, from: 21, to: 600, street(seed: 11))
        #expect(!kept.contains { $0.reason == .away } && single.room(of: "phone") != nil, "\(kept)")
        // First heard in the street, strays and all: never a room.
        var tag = decider(home10)
        #expect(drive(&tag, device: "tag", from: 1, to: 600, street(seed: 5)).isEmpty)
        #expect(RoomDecider.Configuration(homeReports: 0).problem == "homeReports must be in 1...15")
        #expect(RoomDecider.Configuration(homeWindow: 0.5).problem == "homeWindow must be in 1...600 s")
    }

    @Test("a device standing 4 m from two nodes with noisy estimates (an eighth of them beyond the home distance, outliers at 40 m) stays home for two hours")
    func standingWithNoiseStaysHome() {
        var rule = decider(.init(staleAfter: 25, awayAfter: 60, margin: 0.3, evidence: 2, settle: 10, homeDistance: 10))
        var noise = Noise(state: 3)
        var decisions: [RoomDecision] = []
        // Each node reports every 5 s (its heartbeat), B 2 s after A; the service ticks every second.
        for second in 0...7200 {
            let t = Double(second)
            for (node, phase) in [("A", 0), ("B", 2)] where second % 5 == phase {
                let u = noise.next()
                let d = second % 65 == phase ? 40 : 4 * exp(1.2 * u)
                decisions += rule.observe(device: "phone", node: node, distance: d, at: t)
            }
            decisions += rule.tick(at: t)
        }
        #expect(!decisions.contains { $0.room == nil }, "\(decisions.filter { $0.room == nil })")
        #expect(rule.room(of: "phone") != nil)
    }

    @Test("for the settling time after arriving, the device follows the nearest fresh report; then hysteresis")
    func settling() {
        var rule = decider(.init(staleAfter: 15, awayAfter: 60, margin: 0.3, evidence: 1.5, settle: 10))
        let r3 = rule.observe(device: "phone", node: "B", distance: 3, at: 0)
        #expect(r3.map(\.room) == ["B"])
        // A reports a little nearer at 0.5: no margin while settling.
        let r4 = rule.observe(device: "phone", node: "A", distance: 2.9, at: 0.5)
        #expect(r4
            == [RoomDecision(device: "phone", room: "A", previous: "B", at: 0.5, reason: .arrived)])
        let r5 = rule.observe(device: "phone", node: "B", distance: 2.8, at: 9.9)
        #expect(r5.map(\.room) == ["B"])
        // Settled at 10: B's 1 % advantage (far below k) no longer moves it.
        let r6 = drive(&rule, from: 10, to: 100) { _ in ["A": 2.8, "B": 2.9] }
        #expect(r6.isEmpty)
        #expect(rule.room(of: "phone") == "B")
    }

    @Test("a clear move switches within a second: ln(7) − k is far above h per second")
    func clearMove() {
        var rule = decider()
        let before = drive(&rule, from: 0, to: 20) { _ in ["A": 1, "B": 7] }
        #expect(before.map(\.room) == ["A"])
        // At 21 the reports say the device is at B: evidence ln(7/1) − 0.3 = 1.65 a second ≥ h = 1.5.
        let after = drive(&rule, from: 21, to: 40) { _ in ["A": 7, "B": 1] }
        #expect(after == [RoomDecision(device: "phone", room: "B", previous: "A", at: 22, reason: .nearer)])
        #expect(rule.evidence(of: "phone").values.allSatisfy { $0 == 0 })
    }

    @Test("a constant advantage x > k switches after h / (x − k) seconds, not before")
    func evidenceTime() {
        var rule = decider(.init(staleAfter: 15, awayAfter: 60, margin: 0.3, evidence: 1.55, settle: 0))
        let r7 = rule.observe(device: "phone", node: "A", distance: 4, at: 0)
        #expect(r7.map(\.room) == ["A"])
        // B is nearer by x = 0.4 from t = 1: 0.1 of evidence a second, 1.55 at t = 16.5.
        let b = 4 * exp(-0.4)
        let decisions = drive(&rule, from: 1, to: 30) { _ in ["A": 4, "B": b] }
        #expect(decisions == [RoomDecision(device: "phone", room: "B", previous: "A", at: 17, reason: .nearer)])
    }

    @Test("an advantage below the margin never switches, however long it lasts")
    func belowMargin() {
        var rule = decider()
        let decisions = drive(&rule, from: 0, to: 7200) { _ in ["A": 4, "B": 4 * exp(-0.29)] }
        #expect(decisions.map(\.room) == ["A"])
        #expect(rule.evidence(of: "phone").values.allSatisfy { $0 == 0 })
    }

    @Test("noise around the midpoint does not bounce (nearest-in-range does, on the same reports)")
    func midpointNoise() {
        var noise = Noise(state: 14)
        var stream: [Double: [String: Double]] = [:]
        for s in 0...3600 {
            // Each node's log-distance within ±0.2 of ln 4: the log ratio swings by up to ±0.4.
            stream[Double(s)] = ["A": 4 * exp(0.2 * noise.next()), "B": 4 * exp(0.2 * noise.next())]
        }
        var fleet = decider()
        let decisions = drive(&fleet, from: 0, to: 3600) { stream[$0]! }
        #expect(decisions.count == 1)
        var nearest = NearestInRange()
        let flips = drive(&nearest, from: 0, to: 3600) { stream[$0]! }
        #expect(flips.count > 100)
    }

    @Test("a stale room hands over at once to the nearest fresh node")
    func staleIncumbent() {
        var rule = decider()
        // A (1 m) falls silent after 10; B (3 m) and C (5 m) go on.
        let decisions = drive(&rule, from: 0, to: 40) { t in
            var d = ["B": 3.0, "C": 5.0]
            if t <= 10 { d["A"] = 1 }
            return d
        }
        #expect(decisions == [
            RoomDecision(device: "phone", room: "A", previous: nil, at: 0, reason: .arrived),
            // A's last report is 15 s old at 25: stale.
            RoomDecision(device: "phone", room: "B", previous: "A", at: 25, reason: .stale),
        ])
    }

    @Test("with no node reporting, the room holds until the away limit, then not_home")
    func away() {
        var rule = decider()
        let r8 = drive(&rule, from: 0, to: 10) { _ in ["A": 1, "B": 3] }
        #expect(r8.map(\.room) == ["A"])
        let r9 = drive(&rule, from: 11, to: 69) { _ in [:] }
        #expect(r9.isEmpty)
        #expect(rule.room(of: "phone") == "A")
        let r10 = rule.tick(at: 70)
        #expect(r10 == [RoomDecision(device: "phone", room: nil, previous: "A", at: 70, reason: .away)])
        #expect(rule.room(of: "phone") == nil)
        #expect(rule.devices.isEmpty)
        // Back: the nearest at once.
        let r11 = rule.observe(device: "phone", node: "B", distance: 2, at: 100)
        #expect(r11
            == [RoomDecision(device: "phone", room: "B", previous: nil, at: 100, reason: .arrived)])
    }

    @Test("forget(node:) drops the node's reports: its devices move to the nearest fresh node; without one they stay until away")
    func forgetNode() {
        var rule = decider()
        _ = drive(&rule, from: 0, to: 10) { _ in ["A": 1, "B": 3] }
        let r12 = rule.forget(node: "A", at: 10.5)
        #expect(r12 == [RoomDecision(device: "phone", room: "B", previous: "A", at: 10.5, reason: .stale)])
        #expect(rule.readings(of: "phone").map(\.node) == ["B"])
        let r13 = rule.forget(node: "B", at: 11)
        #expect(r13.isEmpty)
        #expect(rule.readings(of: "phone").isEmpty)
        #expect(rule.room(of: "phone") == "B")
        let r14 = rule.tick(at: 69)
        #expect(r14.isEmpty)
        let r15 = rule.tick(at: 70)
        #expect(r15.map(\.room) == [nil])
    }

    @Test("a challenger whose reports went stale starts its evidence again")
    func challengerStale() {
        var rule = decider(.init(staleAfter: 15, awayAfter: 60, margin: 0.3, evidence: 1.55, settle: 0))
        let b = 4 * exp(-0.4)  // 0.1 of evidence a second while fresh
        // B reports once at 1: its report counts until 16, 1.5 of evidence, short of h.
        var decisions = drive(&rule, from: 0, to: 29) { t in t == 1 ? ["A": 4, "B": b] : ["A": 4] }
        #expect(decisions.map(\.room) == ["A"])
        #expect(rule.evidence(of: "phone")["B"] == nil)
        // From 30 every 5 s: from nothing again, h is reached at 45.5 (not at 30.5).
        decisions = drive(&rule, from: 30, to: 60) { t in Int(t) % 5 == 0 ? ["A": 4, "B": b] : ["A": 4] }
        #expect(decisions == [RoomDecision(device: "phone", room: "B", previous: "A", at: 46, reason: .nearer)])
    }

    @Test("a report older than the node's last one is ignored; time never goes back")
    func oldReport() {
        var rule = decider()
        _ = rule.observe(device: "phone", node: "A", distance: 1, at: 10)
        let r16 = rule.observe(device: "phone", node: "A", distance: 9, at: 5)
        #expect(r16.isEmpty)
        #expect(rule.readings(of: "phone") == [NodeReading(node: "A", distance: 1, at: 10)])
        #expect(rule.readings(of: "phone").first?.age(at: 12) == 2)
    }

    @Test("devices are decided independently")
    func twoDevices() {
        var rule = decider()
        _ = rule.observe(device: "phone", node: "A", distance: 1, at: 0)
        _ = rule.observe(device: "watch", node: "B", distance: 1, at: 0)
        #expect(rule.room(of: "phone") == "A")
        #expect(rule.room(of: "watch") == "B")
        #expect(rule.devices == ["phone", "watch"])
    }

    @Test("configuration limits")
    func limits() {
        #expect(RoomDecider.Configuration().problem == nil)
        #expect(RoomDecider.Configuration(staleAfter: 0.5).problem != nil)
        #expect(RoomDecider.Configuration(staleAfter: 30, awayAfter: 20).problem != nil)
        #expect(RoomDecider.Configuration(margin: -0.1).problem != nil)
        #expect(RoomDecider.Configuration(evidence: .nan).problem != nil)
        #expect(RoomDecider.Configuration(settle: 601).problem != nil)
        #expect(RoomRuleKind.allCases.map { $0.make().name } == ["fleet", "nearest", "bermuda"])
    }
}

@Suite("RoomDecider baselines: nearest-in-range and Bermuda's rule")
struct RoomDeciderBaselineTests {
    @Test("nearest-in-range: the smallest distance heard within 60 s, at once, without hysteresis")
    func nearest() {
        var rule = NearestInRange()
        let r17 = rule.observe(device: "phone", node: "A", distance: 4, at: 0)
        #expect(r17.map(\.room) == ["A"])
        let r18 = rule.observe(device: "phone", node: "B", distance: 3.99, at: 1)
        #expect(r18
            == [RoomDecision(device: "phone", room: "B", previous: "A", at: 1, reason: .nearer)])
        let r19 = rule.observe(device: "phone", node: "B", distance: 4.01, at: 2)
        #expect(r19.map(\.room) == ["A"])
        // A's report is 60 s old at 60: out of range, B's (at 2) still in.
        let r20 = rule.tick(at: 59.9)
        #expect(r20.isEmpty)
        let r21 = rule.tick(at: 60)
        #expect(r21.map(\.room) == ["B"])
        let r22 = rule.tick(at: 62)
        #expect(r22.map(\.room) == [nil])
        #expect(rule.devices.isEmpty)
    }

    @Test("Bermuda: decides at each cycle; a challenger at pd ≥ 0.30 wins outright")
    func bermudaOutright() {
        var rule = BermudaRule()
        let r23 = rule.observe(device: "phone", node: "A", distance: 4, at: 0.5)
        #expect(r23.isEmpty)
        let r24 = rule.tick(at: 1)
        #expect(r24.map(\.room) == ["A"])
        // pd = |2.9 − 4| / 3.45 = 0.319.
        let r25 = rule.observe(device: "phone", node: "B", distance: 2.9, at: 1.5)
        #expect(r25.isEmpty)
        let r26 = rule.tick(at: 2)
        #expect(r26 == [RoomDecision(device: "phone", room: "B", previous: "A", at: 2, reason: .nearer)])
    }

    @Test("Bermuda: at 0.15 < pd < 0.30 a challenger wins after more than 3 cycles steadily nearer; at pd < 0.15 never")
    func bermudaHistorical() {
        // pd = 0.8 / 3.6 = 0.22: B's 4th cycle (2, 3, 4, 5).
        var rule = BermudaRule()
        var decisions = drive(&rule, from: 1, to: 10) { t in t < 1.5 ? ["A": 4] : ["A": 4, "B": 3.2] }
        #expect(decisions.map(\.room) == ["A", "B"])
        #expect(decisions.last?.at == 5)
        // pd = 0.5 / 3.75 = 0.13.
        rule = BermudaRule()
        decisions = drive(&rule, from: 1, to: 100) { t in t < 1.5 ? ["A": 4] : ["A": 4, "B": 3.5] }
        #expect(decisions.map(\.room) == ["A"])
    }

    @Test("Bermuda's smoothing: a retreat is followed slowly, one faster than 3 m/s not at all; an approach at once")
    func bermudaSmoothing() {
        var rule = BermudaRule()
        _ = drive(&rule, from: 1, to: 25) { _ in ["A": 1] }
        // 1 → 3 m in a second: the mean over 20 cycles of the running minimum, (3 + 19 × 1) / 20.
        _ = drive(&rule, from: 26, to: 26) { _ in ["A": 3] }
        #expect(abs(rule.readings(of: "phone")[0].distance - 1.1) < 1e-9)
        var fast = BermudaRule()
        _ = drive(&fast, from: 1, to: 25) { _ in ["A": 1] }
        _ = drive(&fast, from: 26, to: 26) { _ in ["A": 5] }  // 4 m/s: discarded
        #expect(fast.readings(of: "phone")[0].distance == 1)
        _ = drive(&rule, from: 27, to: 27) { _ in ["A": 0.5] }
        #expect(rule.readings(of: "phone")[0].distance == 0.5)
        // Without smoothing, the report itself.
        var raw = BermudaRule(smoothingSamples: 1)
        _ = drive(&raw, from: 1, to: 25) { _ in ["A": 1] }
        _ = drive(&raw, from: 26, to: 26) { _ in ["A": 3] }
        #expect(raw.readings(of: "phone")[0].distance == 3)
    }

    @Test("Bermuda: a node loses its distance 30 s after its last report; a report over 10 s old cannot win")
    func bermudaTimeouts() {
        var rule = BermudaRule()
        _ = drive(&rule, from: 1, to: 10) { _ in ["A": 2] }
        let r27 = rule.tick(at: 40)
        #expect(r27.isEmpty)
        let r28 = rule.tick(at: 41)
        #expect(r28 == [RoomDecision(device: "phone", room: nil, previous: "A", at: 41, reason: .away)])
        var late = BermudaRule()
        _ = drive(&late, from: 1, to: 10) { _ in ["A": 4] }
        _ = late.observe(device: "phone", node: "B", distance: 1, at: 10.5)
        _ = late.observe(device: "phone", node: "A", distance: 4, at: 21)
        let r29 = late.tick(at: 21)
        #expect(r29.isEmpty)
        #expect(late.room(of: "phone") == "A")
    }
}

@Suite("ReportThrottle: ESPresense's rate control")
struct ReportThrottleTests {
    @Test("at most once per 5 s, sooner when the distance moved by 0.5 m")
    func rate() {
        var throttle = ReportThrottle()
        let r30 = throttle.offer(device: "phone", distance: 3, at: 0)
        #expect(r30)
        let r31 = throttle.offer(device: "phone", distance: 3.4, at: 1)
        #expect(!r31)
        let r32 = throttle.offer(device: "phone", distance: 2.6, at: 4.9)
        #expect(!r32)
        let r33 = throttle.offer(device: "phone", distance: 3, at: 5)
        #expect(r33)         // heartbeat
        let r34 = throttle.offer(device: "phone", distance: 3.5, at: 5.5)
        #expect(r34)     // moved 0.5 m
        let r35 = throttle.offer(device: "phone", distance: 3.125, at: 6)
        #expect(!r35)    // 0.375 from 3.5
        #expect(throttle.published["phone"] == ReportThrottle.Published(distance: 3.5, at: 5.5))
        // Another device has its own schedule.
        let r36 = throttle.offer(device: "watch", distance: 3, at: 6)
        #expect(r36)
    }

    @Test("a device the node lost is published at once when it is ranged again")
    func forget() {
        var throttle = ReportThrottle()
        let r37 = throttle.offer(device: "phone", distance: 3, at: 0)
        #expect(r37)
        throttle.forget(device: "phone")
        let r38 = throttle.offer(device: "phone", distance: 3, at: 1)
        #expect(r38)
    }

    @Test("heartbeat 0 or skip distance 0 publishes everything; limits")
    func limits() {
        var every = ReportThrottle(configuration: .init(heartbeat: 0, skipDistance: 0.5))
        let r39 = every.offer(device: "phone", distance: 3, at: 0)
        #expect(r39)
        let r40 = every.offer(device: "phone", distance: 3, at: 0.1)
        #expect(r40)
        #expect(ReportThrottle.Configuration(heartbeat: -1).problem != nil)
        #expect(ReportThrottle.Configuration(skipDistance: .infinity).problem != nil)
        #expect(ReportThrottle.Configuration().problem == nil)
    }
}

@Suite("PeerPublishing: what a node's report publishes")
struct PeerPublishingTests {
    static func peer(_ distance: Double, _ zone: Proximity = .near) -> PeerSnapshot {
        PeerSnapshot(identifier: PeerID("phone"), kind: .ibeacon, address: "AA:BB:CC:DD:EE:01", beacon: nil, proximity: zone, distance: distance,
                     rssi: -60, lastSeen: 0)
    }

    static func kinds(_ publications: [PeerPublishing.Publication]) -> [String] {
        publications.map {
            switch $0 {
            case .report: "report"
            case .compatibility: "compatibility"
            case .gone: "gone"
            }
        }
    }

    @Test("issue 34: with compatibility forms, a device standing still goes out in them every 2 s (mqtt_room's 5 s timeout never passes) and natively every 5 s; none without them; gone once")
    func compatibilityHeartbeat() {
        var publishing = PeerPublishing(throttle: .init(heartbeat: 5, skipDistance: 0.5), compatibility: true)
        var kinds: [String] = []
        for t in 0..<11 { kinds += Self.kinds(publishing.publications(peers: [Self.peer(2)], removed: [], at: Double(t))) }
        #expect(kinds == ["report", "compatibility", "compatibility", "report", "compatibility", "compatibility", "report"], "\(kinds)")
        // A move: both at once, and the heartbeat counts from there.
        #expect(Self.kinds(publishing.publications(peers: [Self.peer(4)], removed: [], at: 11)) == ["report"])
        #expect(Self.kinds(publishing.publications(peers: [Self.peer(4)], removed: [], at: 12)).isEmpty)
        #expect(Self.kinds(publishing.publications(peers: [Self.peer(4)], removed: [], at: 13)) == ["compatibility"])
        #expect(Self.kinds(publishing.publications(peers: [Self.peer(4, .unknown)], removed: [], at: 14)) == ["gone"])
        #expect(Self.kinds(publishing.publications(peers: [Self.peer(4, .unknown)], removed: [], at: 15)).isEmpty)

        var plain = PeerPublishing(throttle: .init(heartbeat: 5, skipDistance: 0.5))
        var natives: [String] = []
        for t in 0..<11 { natives += Self.kinds(plain.publications(peers: [Self.peer(2)], removed: [], at: Double(t))) }
        #expect(natives == ["report", "report", "report"])
    }
}
