import Foundation

/// One node's last distance report of a device, as the fleet service holds it.
public struct NodeReading: Sendable, Hashable {
    /// The node (one per room) that sent the report.
    public var node: String
    /// Metres, as the node's ranging estimated it.
    public var distance: Double
    /// When the report was received, seconds (the fleet service's clock).
    public var at: Double

    public init(node: String, distance: Double, at: Double) {
        self.node = node
        self.distance = distance
        self.at = at
    }

    /// Seconds since the report at `t` (0 for a report from the future).
    public func age(at t: Double) -> Double { max(0, t - at) }
}

/// A device's room changed: to `room` (nil: `not_home`) from `previous` (nil: it was not home, or
/// not yet known), at `at`.
public struct RoomDecision: Sendable, Hashable {
    /// Why the room changed.
    public enum Reason: String, Sendable, Hashable, Codable, CaseIterable {
        /// The device had no room (first report, or back from not_home), or got it less than the
        /// settling time ago: the nearest node with a fresh report.
        case arrived
        /// Another node was nearer for long enough (each rule has its own test).
        case nearer
        /// The room's node stopped reporting the device (its last report is stale, or the node was
        /// forgotten): the nearest node with a fresh report.
        case stale
        /// No node has reported the device for the away limit.
        case away
    }

    public var device: String
    /// The new room: the name of its node. Nil: `not_home`.
    public var room: String?
    public var previous: String?
    public var at: Double
    public var reason: Reason

    public init(device: String, room: String?, previous: String?, at: Double, reason: Reason) {
        self.device = device
        self.room = room
        self.previous = previous
        self.at = at
        self.reason = reason
    }
}

/// A way of deciding each device's room from the nodes' distance reports: ``RoomDecider`` (the
/// fleet's), and the baselines ``NearestInRange`` (room-assistant) and ``BermudaRule`` (Bermuda).
/// Pure value types: time is passed in, in seconds, and must not go back (an earlier time is taken
/// as the latest seen).
///
/// A room is the name of the node in it (one node per room); mapping nodes to room names is the
/// caller's business.
public protocol RoomRule: Sendable {
    /// A short name for reports and `--rule` options.
    var name: String { get }
    /// Takes one node's distance report of a device; returns the room changes it caused (at most
    /// one, for that device).
    mutating func observe(device: String, node: String, distance: Double, at t: Double) -> [RoomDecision]
    /// Moves time on (call it about once a second): staleness, not_home, and changes that need
    /// time rather than a new report. Returns the changes, by device.
    mutating func tick(at t: Double) -> [RoomDecision]
    /// A node went offline: its reports are dropped now, and devices in its room move to the
    /// nearest node with a fresh report (or stay until the away limit if there is none).
    mutating func forget(node: String, at t: Double) -> [RoomDecision]
    /// The device's room; nil: not_home (or never reported).
    func room(of device: String) -> String?
    /// The last report of the device from each node, nearest first (for a live table). Reports
    /// are dropped at the away limit, or when their node is forgotten; a stale one is listed but
    /// does not count (see its age).
    func readings(of device: String) -> [NodeReading]
    /// Every device the rule holds, sorted.
    var devices: [String] { get }
    /// Takes back a device's room from before a restart (the fleet service's retained message),
    /// as of `t`, unless the rule already holds the device. What the rule then does with it is
    /// its own: ``RoomDecider`` keeps it as the incumbent.
    mutating func restore(device: String, room: String?, at t: Double)
}

extension RoomRule {
    /// The baselines start from nothing after a restart.
    public mutating func restore(device: String, room: String?, at t: Double) {}
}

/// The fleet service's room decision: each device is in the room of the nearest node, with
/// hysteresis, and `not_home` once no node has reported it for ``Configuration/awayAfter``.
///
/// The rule works on the last report from each node and its age, since reports arrive irregularly
/// (rate-controlled: ``ReportThrottle``). For the incumbent room's node I and another node c, both
/// with fresh reports (younger than ``Configuration/staleAfter``), the evidence that c is nearer
/// is the log ratio of their last distances,
///
///     x_c = ln(d_I / d_c)            (0 at the midpoint; ln 2 when c is at half I's distance)
///
/// and a CUSUM integrates its excess over a margin k through time, the last values holding
/// between reports:
///
///     S_c ← max(0, S_c + (x_c − k) · Δt)         switch to c when S_c ≥ h
///
/// So a constant advantage x switches after h / (x − k) seconds: fast for a large, clear one,
/// never for one below k, and noise around the midpoint (x ≈ 0) only drains S. Once switched, the
/// evidence for going back is −x: a device standing still has to see its log ratio swing by 2k
/// and stay there for a while to bounce. Working in log ratios makes the rule the same at every
/// scale (4 m against 5 m is as clear as 0.8 m against 1 m) and cancels the device's own transmit
/// power, common to every node.
///
/// Without a fresh report from the room's node (stale, or the node forgotten) the device moves at
/// once to the nearest node with a fresh one; without any, it keeps its room until the away limit.
/// A device with no room (first report, or back from not_home) takes the nearest node with a fresh
/// report at once, and follows the nearest for ``Configuration/settle`` seconds: its first room
/// rests on whichever node happened to report first.
///
/// Pure; every time is passed in. docs/fleet.md explains the rule ("Room decision") and the
/// benchmark that chose the defaults ("Benchmark").
public struct RoomDecider: RoomRule {
    public struct Configuration: Sendable, Hashable {
        /// A node's report of a device counts for this long, seconds. It should outlast a node's
        /// own silence before it drops a device (its stale limit, at most its clear interval, 10 s)
        /// plus the publisher's heartbeat (``ReportThrottle/Configuration/heartbeat``, 5 s), so that
        /// a hole in reception at the room's node does not move the device: on the benchmark, 15 s
        /// still did, 25 s no longer. Valid: 1...600.
        public var staleAfter: Double
        /// A device no node has reported for this long is not_home, seconds. Valid:
        /// `staleAfter`...86_400.
        public var awayAfter: Double
        /// k: the log-distance advantage a challenger must exceed before it gathers evidence
        /// (0.3 ≈ 26 % nearer; in RSSI terms 2.6 dB at a path-loss exponent of 2). The hysteresis
        /// band is ±k. Valid: 0...3.
        public var margin: Double
        /// h: the evidence a challenger needs, in log-ratio seconds: a constant advantage x takes
        /// h / (x − k) seconds. Valid: 0...100 (0: at the first evaluation after the advantage has
        /// exceeded k for any time).
        public var evidence: Double
        /// For this long after a device gets a room from nothing (it arrives, or starts being
        /// tracked), it follows the nearest node with a fresh report without hysteresis, seconds:
        /// its first room rests on whichever node reported first, not on a comparison, so there is
        /// nothing yet to protect. It should let every node that hears the device report once (a
        /// heartbeat, 5 s, and a little). Valid: 0...600 (0: none).
        public var settle: Double
        /// A node can give the device a room (at arrival, as a challenger, or when the room's node
        /// goes quiet), and keeps it home, only while its recent reports put the device nearer than
        /// this, metres: most of its last ``homeReports`` reports younger than ``homeWindow``
        /// (a tie: the newest decides). A device no node has heard near so for ``awayAfter`` is
        /// not_home: a tag out in the street, 13–16 m from two nodes, neither bounces between their
        /// rooms nor stays home, and a single wild report no longer keeps it. The room's own node
        /// keeps the device on far reports (a far estimate is noisy). Reports stay in the table.
        /// Valid: 1...1000. The default and why: docs/fleet.md ("Far from every node").
        public var homeDistance: Double
        /// How many of a node's last reports vote on whether it hears the device near (odd is
        /// best; 1: the last report alone). Valid: 1...15.
        public var homeReports: Int
        /// Reports older than this, seconds, no longer vote. Valid: 1...600.
        public var homeWindow: Double

        /// The defaults were chosen with `fleet-bench` on its tuning seeds (docs/fleet.md).
        public init(staleAfter: Double = 25, awayAfter: Double = 60, margin: Double = 0.3, evidence: Double = 2,
                    settle: Double = 10, homeDistance: Double = 30, homeReports: Int = 9, homeWindow: Double = 60) {
            self.staleAfter = staleAfter
            self.awayAfter = awayAfter
            self.margin = margin
            self.evidence = evidence
            self.settle = settle
            self.homeDistance = homeDistance
            self.homeReports = homeReports
            self.homeWindow = homeWindow
        }

        public static let staleAfterRange: ClosedRange<Double> = 1...600
        public static let awayAfterLimit = 86_400.0
        public static let marginRange: ClosedRange<Double> = 0...3
        public static let evidenceRange: ClosedRange<Double> = 0...100
        public static let settleRange: ClosedRange<Double> = 0...600
        public static let homeDistanceRange: ClosedRange<Double> = 1...1000
        public static let homeReportsRange: ClosedRange<Int> = 1...15
        public static let homeWindowRange: ClosedRange<Double> = 1...600

        /// Why the configuration is invalid, or nil.
        public var problem: String? {
            if !(staleAfter.isFinite && Self.staleAfterRange.contains(staleAfter)) { return "staleAfter must be in 1...600 s" }
            if !(awayAfter.isFinite && awayAfter >= staleAfter && awayAfter <= Self.awayAfterLimit) {
                return "awayAfter must be in staleAfter...86400 s"
            }
            if !(margin.isFinite && Self.marginRange.contains(margin)) { return "margin must be in 0...3" }
            if !(evidence.isFinite && Self.evidenceRange.contains(evidence)) { return "evidence must be in 0...100" }
            if !(settle.isFinite && Self.settleRange.contains(settle)) { return "settle must be in 0...600 s" }
            if !(homeDistance.isFinite && Self.homeDistanceRange.contains(homeDistance)) { return "homeDistance must be in 1...1000 m" }
            if !Self.homeReportsRange.contains(homeReports) { return "homeReports must be in 1...15" }
            if !(homeWindow.isFinite && Self.homeWindowRange.contains(homeWindow)) { return "homeWindow must be in 1...600 s" }
            return nil
        }
    }

    /// What the decider knows of one device.
    struct Device: Sendable {
        var room: String?
        var readings: [String: NodeReading] = [:]
        /// S_c, by challenger, against the current room.
        var evidence: [String: Double] = [:]
        /// The time the evidence was integrated up to.
        var evaluated: Double
        /// The last report from any node whose recent reports put the device nearer than the home
        /// distance.
        var lastHeard: Double
        /// Each node's last reports (at most ``Configuration/homeReports``, within
        /// ``Configuration/homeWindow``), oldest first, and whether they put the device near at
        /// its last report.
        var recent: [String: [NodeReading]] = [:]
        var near: [String: Bool] = [:]
        /// When the device got its room from nothing.
        var arrived = -Double.infinity
        /// Until then the room taken back after a restart counts as fresh though its node has not
        /// reported yet.
        var restoredUntil = -Double.infinity
    }

    public let configuration: Configuration
    public var name: String { "fleet" }
    private var state: [String: Device] = [:]
    private var now = -Double.infinity

    public init(configuration: Configuration = Configuration()) {
        precondition(configuration.problem == nil, configuration.problem ?? "")
        self.configuration = configuration
    }

    public var devices: [String] { state.keys.sorted() }

    public func room(of device: String) -> String? { state[device]?.room }

    public func readings(of device: String) -> [NodeReading] {
        guard let d = state[device] else { return [] }
        return d.readings.values.sorted { ($0.distance, $0.node) < ($1.distance, $1.node) }
    }

    /// The evidence S_c each challenger has gathered against the device's room (for a live table and
    /// tests).
    public func evidence(of device: String) -> [String: Double] { state[device]?.evidence ?? [:] }

    public mutating func observe(device: String, node: String, distance: Double, at t: Double) -> [RoomDecision] {
        guard distance.isFinite, distance >= 0 else { return [] }
        let reported = t
        let t = advanceClock(t)
        var d = state[device] ?? Device(room: nil, evaluated: t, lastHeard: reported)
        // A report older than the node's last one is out of date.
        if let old = d.readings[node], old.at > reported { return [] }
        integrate(&d, to: t)
        let reading = NodeReading(node: node, distance: max(distance, Self.minimumDistance), at: reported)
        d.readings[node] = reading
        var recent = (d.recent[node] ?? []).filter { reported - $0.at < configuration.homeWindow }
        recent.append(reading)
        if recent.count > configuration.homeReports { recent.removeFirst(recent.count - configuration.homeReports) }
        d.recent[node] = recent
        let near = isNear(recent)
        d.near[node] = near
        if near { d.lastHeard = max(d.lastHeard, reported) }
        let decision = decide(device, &d, at: t)
        state[device] = d
        return decision.map { [$0] } ?? []
    }

    public mutating func tick(at t: Double) -> [RoomDecision] {
        let t = advanceClock(t)
        var decisions: [RoomDecision] = []
        for id in state.keys.sorted() {
            var d = state[id]!
            integrate(&d, to: t)
            if let decision = decide(id, &d, at: t) { decisions.append(decision) }
            state[id] = d.room == nil && d.readings.isEmpty ? nil : d
        }
        return decisions
    }

    public mutating func forget(node: String, at t: Double) -> [RoomDecision] {
        let t = advanceClock(t)
        var decisions: [RoomDecision] = []
        for id in state.keys.sorted() where state[id]!.readings[node] != nil {
            var d = state[id]!
            integrate(&d, to: t)
            d.readings[node] = nil
            d.recent[node] = nil
            d.near[node] = nil
            d.evidence[node] = nil
            if let decision = decide(id, &d, at: t) { decisions.append(decision) }
            state[id] = d.room == nil && d.readings.isEmpty ? nil : d
        }
        return decisions
    }

    /// The room the device had before a restart: the incumbent, which its node's first fresh report
    /// keeps and any other node must beat by the usual evidence; if its node does not report
    /// within ``Configuration/staleAfter``, the nearest node with a fresh report takes over (and
    /// nothing heard for ``Configuration/awayAfter``: not_home). Not-home (`room` nil) restores
    /// nothing.
    public mutating func restore(device: String, room: String?, at t: Double) {
        guard state[device] == nil, let room else { return }
        let t = advanceClock(t)
        var d = Device(room: room, evaluated: t, lastHeard: t)
        d.restoredUntil = t + configuration.staleAfter
        state[device] = d
    }

    /// Forgets a device at once (no decision).
    public mutating func forget(device: String) { state[device] = nil }

    /// Distances are floored here so log ratios stay finite.
    static let minimumDistance = 0.01

    private mutating func advanceClock(_ t: Double) -> Double {
        now = max(now, t)
        return now
    }

    private func isFresh(_ r: NodeReading, at t: Double) -> Bool { t - r.at < configuration.staleAfter }

    /// Whether a node's recent reports (oldest first, the last one just in) put the device nearer
    /// than the home distance: most of them do, or half of them and the newest.
    private func isNear(_ recent: [NodeReading]) -> Bool {
        let home = configuration.homeDistance
        let near = recent.filter { $0.distance < home }.count
        return 2 * near > recent.count || (2 * near == recent.count && (recent.last.map { $0.distance < home } ?? false))
    }

    /// A node whose last report can give the device a room: fresh, and its recent reports near.
    /// (The room's own node keeps it on a fresh report however far: a far estimate is noisy.)
    private func canClaim(_ r: NodeReading, _ d: Device, at t: Double) -> Bool { isFresh(r, at: t) && d.near[r.node] == true }

    /// A node that can gather evidence against the room: its last report nearer than the home
    /// distance, and, unless the room's own node still hears the device near (the device is home,
    /// and the evidence alone decides between rooms, as quickly as before the vote), its recent
    /// reports near too: a device out of every room is not taken by a challenger's stray report.
    private func canChallenge(_ r: NodeReading, _ d: Device) -> Bool {
        guard r.distance < configuration.homeDistance else { return false }
        return d.room.map { d.near[$0] == true } == true || d.near[r.node] == true
    }

    /// Runs every challenger's CUSUM from `d.evaluated` to `t` on the last values, over the part of
    /// the interval in which both its report and the room's are fresh.
    private func integrate(_ d: inout Device, to t: Double) {
        defer { d.evaluated = max(d.evaluated, t) }
        guard t > d.evaluated, let room = d.room, let incumbent = d.readings[room] else { return }
        let stale = configuration.staleAfter
        for (node, r) in d.readings where node != room && canChallenge(r, d) {
            let end = min(t, incumbent.at + stale, r.at + stale)
            let dt = end - max(d.evaluated, r.at)
            guard dt > 0 else { continue }
            let x = Foundation.log(incumbent.distance / r.distance)
            d.evidence[node] = max(0, (d.evidence[node] ?? 0) + (x - configuration.margin) * dt)
        }
    }

    /// The device's room after what it knows at `t`, and the decision if it changed.
    private func decide(_ id: String, _ d: inout Device, at t: Double) -> RoomDecision? {
        func change(to room: String?, _ reason: RoomDecision.Reason) -> RoomDecision? {
            let previous = d.room
            d.room = room
            d.evidence = [:]
            guard previous != room else { return nil }
            return RoomDecision(device: id, room: room, previous: previous, at: t, reason: reason)
        }
        d.readings = d.readings.filter { t - $0.value.at < configuration.awayAfter }
        if d.recent.count != d.readings.count {
            d.recent = d.recent.filter { d.readings[$0.key] != nil }
            d.near = d.near.filter { d.readings[$0.key] != nil }
        }
        if t - d.lastHeard >= configuration.awayAfter {
            return change(to: nil, .away)
        }
        let nearest = d.readings.values.filter { canClaim($0, d, at: t) }.min { ($0.distance, $0.node) < ($1.distance, $1.node) }
        guard let room = d.room else {
            d.arrived = t
            return nearest.flatMap { change(to: $0.node, .arrived) }
        }
        if t - d.arrived < configuration.settle {
            return nearest.flatMap { change(to: $0.node, .arrived) }
        }
        guard d.readings[room].map({ isFresh($0, at: t) }) ?? (t < d.restoredUntil) else {
            // The room's node has gone quiet: the nearest node with a fresh report, if any.
            return nearest.flatMap { change(to: $0.node, .stale) }
        }
        // A challenger whose report went stale, or far, starts again from nothing.
        for node in d.evidence.keys where !(d.readings[node].map { isFresh($0, at: t) && canChallenge($0, d) } ?? false) {
            d.evidence[node] = nil
        }
        let h = configuration.evidence
        let winner = d.evidence.filter { $0.value > 0 && $0.value >= h }
            .max { ($0.value, $1.key) < ($1.value, $0.key) }
        return winner.flatMap { change(to: $0.key, .nearer) }
    }
}
