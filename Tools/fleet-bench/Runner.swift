import BlueZSim
import Foundation
import ProximityBenchmarking
import ProximityCore

/// One rule as the benchmark runs it.
struct RuleSpec: Sendable {
    enum Role: String, Codable, Sendable {
        /// The fleet's rule with its defaults.
        case fleet
        /// A baseline the goals compare against.
        case baseline
        /// Shown for reference (a variant), not part of the goals.
        case reference
    }

    var name: String
    var role: Role
    /// Fed the nodes' compatibility stream (`room_presence`, ESPresense: the native reports and a
    /// heartbeat of ``PeerPublishing/compatibilityHeartbeat``), as `mqtt_room` reads it; the
    /// others read the native reports.
    var compatibility = false
    var make: @Sendable () -> any RoomRule
}

/// The fleet service's tick: once a second.
let fleetTickInterval = 1.0

/// Feeds a report stream to a fresh rule, with the fleet service's ticks in between; returns the
/// room it decided over time as changes, starting with (0, nil).
func decide(_ reports: [Report], duration: Double, rule: inout any RoomRule, tickPhase: Double) -> [Change] {
    var changes: [Change] = [Change(t: 0, room: nil, reason: nil)]
    func take(_ decisions: [RoomDecision]) {
        for d in decisions where d.device == Trace.device { changes.append(Change(t: d.at, room: d.room, reason: d.reason)) }
    }
    var tick = tickPhase
    var i = 0
    while tick <= duration {
        while i < reports.count, reports[i].t <= tick {
            take(rule.observe(device: Trace.device, node: reports[i].node, distance: reports[i].distance, at: reports[i].t))
            i += 1
        }
        take(rule.tick(at: tick))
        tick += fleetTickInterval
    }
    return changes
}

/// A room change as the benchmark records it.
struct Change: Sendable {
    var t: Double
    var room: String?
    var reason: RoomDecision.Reason?
}

/// The room at `t` from a change list.
func room(at t: Double, _ changes: [Change]) -> String? {
    var room: String?
    for c in changes {
        if c.t > t { break }
        room = c.room
    }
    return room
}

/// What one rule did over the traces of one condition (all seeds, all layouts).
struct Tally: Sendable {
    struct Stand: Sendable {
        var bounces = 0
        var hours = 0.0
        /// Seconds in a room that is not the nearest box's, and not_home, after the warm-up.
        var wrongSeconds = 0.0
        var awaySeconds = 0.0
        var seconds = 0.0
        /// Bounces by the decision's reason.
        var reasons: [String: Int] = [:]
    }

    /// By stand point label ("10 %", …, "centre").
    var stand: [String: Stand] = [:]
    /// By layout and point, for the per-layout table.
    var standByLayout: [String: Stand] = [:]
    var lags: [TraceKind: [Double]] = [:]
    var missed: [TraceKind: Int] = [:]
    /// Moves where the room already was the target when the move started (not scored for lag).
    var early: [TraceKind: Int] = [:]
    /// Room changes during the holds after a move's switch (more changes than the one the move
    /// needs).
    var moveBounces = 0
    /// By street scenario ("from room", "from nowhere").
    var street: [String: Street] = [:]

    /// What a rule did with a device out in the street, 13–16 m from the nearest boxes.
    struct Street: Sendable {
        var traces = 0
        /// Changes into a room after the device left room A (from room) or from the start (from
        /// nowhere): every one is a bounce, the device being in no room.
        var bounces = 0
        var hours = 0.0
        /// Seconds from reaching the street to the last change to not_home, for every trace that
        /// ends not_home (0: never in a room in the street).
        var notHome: [Double] = []
        /// Traces that end in a room.
        var misses = 0
        /// Seconds in a room, and in all, from reaching the street plus the goal's bound on.
        var lateRoomSeconds = 0.0
        var lateSeconds = 0.0
        /// Bounces by layout.
        var bouncesByLayout: [String: Int] = [:]
    }
}

/// The street goal's bound: not_home within the away time plus this, from reaching the street.
let streetGraceBeyondAway = 30.0

/// Scores one rule's changes on one trace into `tally`. `bound`: the street goal's time to
/// not_home, seconds after reaching the street.
func score(_ trace: Trace, _ changes: [Change], into tally: inout Tally, streetBound bound: Double) {
    switch trace.kind {
    case .street:
        var s = tally.street[trace.point, default: Tally.Street()]
        let from = trace.leave ?? 0
        s.traces += 1
        s.hours += (trace.duration - from) / 3600
        let bounces = changes.filter { $0.t > from && $0.room != nil }.count
        s.bounces += bounces
        s.bouncesByLayout[trace.layout.name, default: 0] += bounces
        if room(at: trace.duration, changes) != nil {
            s.misses += 1
        } else if let last = changes.dropFirst().last(where: { $0.room == nil }) {
            s.notHome.append(max(0, last.t - trace.streetStart))
        } else {
            s.notHome.append(0)
        }
        // Seconds in a room after the bound.
        var t = trace.streetStart + bound
        var current = room(at: t, changes)
        for c in changes where c.t > t {
            if current != nil { s.lateRoomSeconds += c.t - t }
            t = c.t
            current = c.room
        }
        if current != nil { s.lateRoomSeconds += max(0, trace.duration - t) }
        s.lateSeconds += max(0, trace.duration - trace.streetStart - bound)
        tally.street[trace.point] = s
    case .stand:
        let start = TraceSet.warmup
        var s = Tally.Stand()
        s.bounces = changes.filter { $0.t > start }.count
        for c in changes where c.t > start { s.reasons[c.reason?.rawValue ?? "none", default: 0] += 1 }
        s.hours = (trace.duration - start) / 3600
        let right = trace.layout.nearest(to: trace.trajectory.position(at: 0))
        // Piecewise-constant room: sum the seconds it was wrong or away.
        var t = start
        var current = room(at: start, changes)
        for c in changes where c.t > start {
            let span = c.t - t
            if current == nil { s.awaySeconds += span } else if !right.contains(current!) { s.wrongSeconds += span }
            t = c.t
            current = c.room
        }
        let span = trace.duration - t
        if current == nil { s.awaySeconds += span } else if !right.contains(current!) { s.wrongSeconds += span }
        s.seconds = trace.duration - start
        tally.stand[trace.point, default: Tally.Stand()].add(s)
        tally.standByLayout["\(trace.layout.name)|\(trace.point)", default: Tally.Stand()].add(s)
    case .walk, .teleport:
        for move in trace.moves {
            if room(at: move.start, changes) == move.target {
                tally.early[trace.kind, default: 0] += 1
                continue
            }
            if let hit = changes.first(where: { $0.t >= move.start && $0.t < move.end && $0.room == move.target }) {
                tally.lags[trace.kind, default: []].append(hit.t - move.reference)
                tally.moveBounces += changes.filter { $0.t > hit.t && $0.t < move.end }.count
            } else {
                tally.missed[trace.kind, default: 0] += 1
            }
        }
    }
}

extension Tally.Stand {
    mutating func add(_ o: Tally.Stand) {
        bounces += o.bounces
        hours += o.hours
        wrongSeconds += o.wrongSeconds
        awaySeconds += o.awaySeconds
        seconds += o.seconds
        reasons.merge(o.reasons, uniquingKeysWith: +)
    }

    var perHour: Double { hours > 0 ? Double(bounces) / hours : 0 }
}

/// The traces of one seed in one layout.
func traces(layout: Layout, seed: UInt64, radio: RadioModel, standScored: Double, streetScored: Double) -> [Trace] {
    let root = SeededGenerator(seed: seed)
    var phases = root.derived("phases \(layout.name)")
    var list: [Trace] = TraceSet.standFractions.map { TraceSet.stand(layout, fraction: $0, scored: standScored) }
    if layout.boxes.count > 2 && layout.name.contains("triangle") { list.append(TraceSet.centre(layout, scored: standScored)) }
    list.append(TraceSet.walk(layout, rng: &phases))
    list.append(TraceSet.teleport(layout, rng: &phases))
    if streetScored > 0 {
        var street = root.derived("street \(layout.name)")
        list.append(TraceSet.street(layout, fromRoom: true, scored: streetScored, rng: &street))
        list.append(TraceSet.street(layout, fromRoom: false, scored: streetScored, rng: &street))
    }
    // The installation (device offsets, shadowing fields) is the seed's: the same in every layout's
    // traces of that seed; every trace's time-varying parts have their own streams.
    for i in list.indices {
        list[i].simulate(radio, installation: seed, rng: root.derived("\(layout.name) \(list[i].label)"))
    }
    return list
}

/// One condition over all seeds and layouts: every rule on the same report streams.
func evaluate(condition: RadioCondition, seeds: [UInt64], layouts: [Layout], specs: [RuleSpec], standScored: Double,
              streetScored: Double, streetBound: Double, throttle: ReportThrottle.Configuration, dumpBounces: Bool = false,
              dumpHome: Double? = nil) -> (tallies: [Tally], reports: Int, ranged: Int) {
    let radio = condition.model
    var tallies = Array(repeating: Tally(), count: specs.count)
    var reportCount = 0, rangedCount = 0
    for seed in seeds {
        for layout in layouts {
            let root = SeededGenerator(seed: seed)
            for trace in traces(layout: layout, seed: seed, radio: radio, standScored: standScored, streetScored: streetScored) {
                let rng = root.derived("nodes \(layout.name) \(trace.label)")
                let calibration = condition.kind == .calibrated ? (radio.parameters.realistic, seed) : nil
                let (reports, ranged) = publishedReports(trace, measuredPower: condition.measuredPower, throttle: throttle,
                                                         calibration: calibration, rng: rng)
                let compatibility = specs.contains(where: \.compatibility)
                    ? publishedReports(trace, measuredPower: condition.measuredPower, throttle: throttle, calibration: calibration,
                                       rng: rng, compatibility: true).reports
                    : []
                reportCount += reports.count
                rangedCount += ranged
                if let w = dumpHome, trace.kind == .stand || trace.kind == .street {
                    print("home \(condition.label(namingSimple: true)) | \(seed) \(layout.name) \(trace.kind.rawValue) \(trace.point) "
                          + homeStatistics(reports, trace: trace, window: w))
                }
                var tickRng = rng.derived("fleet tick")
                let phase = tickRng.uniform(0...fleetTickInterval)
                for (k, spec) in specs.enumerated() {
                    var rule = spec.make()
                    let changes = decide(spec.compatibility ? compatibility : reports, duration: trace.duration, rule: &rule,
                                         tickPhase: phase)
                    score(trace, changes, into: &tallies[k], streetBound: streetBound)
                    if dumpBounces, k == 0, trace.kind == .street {
                        print("seed \(seed) \(layout.name) street \(trace.point) (street at \(format(trace.streetStart, 1))): "
                              + changes.dropFirst().map { "\(format($0.t, 1)) \($0.room ?? "-") \($0.reason?.rawValue ?? "")" }
                                  .joined(separator: "; "))
                    }
                    if dumpBounces, k == 0, trace.kind == .stand {
                        if changes.contains(where: { $0.t > TraceSet.warmup }) {
                            print("seed \(seed) \(layout.name) \(trace.point) changes: "
                                  + changes.dropFirst().map { "\(format($0.t, 1)) \($0.room ?? "-") \($0.reason?.rawValue ?? "")" }
                                      .joined(separator: "; "))
                        }
                        for c in changes where c.t > TraceSet.warmup {
                            print("seed \(seed) \(layout.name) \(trace.point): \(format(c.t, 1)) -> \(c.room ?? "not_home") " +
                                  "(\(c.reason?.rawValue ?? ""))")
                            for r in reports where r.t > c.t - 90 && r.t <= c.t + 30 {
                                print("    \(format(r.t, 1)) \(r.node) \(format(r.distance, 2))")
                            }
                        }
                    }
                }
            }
        }
    }
    return (tallies, reportCount, rangedCount)
}

/// For tuning the home test (`--dump-home W`): each second, m = the least over the nodes of the
/// median of the node's reports in the last W seconds; for a stand trace the highest level m stays
/// at or above for 60 s on end after the warm-up (what would send it away), for a street trace the
/// lowest m from W s after reaching the street (what would keep it home).
func homeStatistics(_ reports: [Report], trace: Trace, window: Double) -> String {
    var m: [(t: Double, m: Double)] = []
    var t = 1.0
    while t <= trace.duration {
        var best = Double.infinity
        for node in trace.layout.boxes.map(\.name) {
            let xs = reports.filter { $0.node == node && $0.t <= t && $0.t > t - window }.map(\.distance).sorted()
            if !xs.isEmpty { best = min(best, xs.count % 2 == 1 ? xs[xs.count / 2] : (xs[xs.count / 2 - 1] + xs[xs.count / 2]) / 2) }
        }
        m.append((t, best))
        t += 1
    }
    switch trace.kind {
    case .street:
        let xs = m.filter { $0.t >= trace.streetStart + window }.map(\.m)
        return "min \(format(xs.min() ?? .infinity, 2)) p05 \(format(percentile(xs, 0.05) ?? 0, 2)) " +
            "med \(format(percentile(xs, 0.5) ?? 0, 2))"
    default:
        let xs = m.filter { $0.t >= TraceSet.warmup }.map(\.m)
        let top = m.filter { $0.t >= TraceSet.warmup + window }.map(\.m).max() ?? 0
        var worst = 0.0
        if xs.count > 60 { for i in 0...(xs.count - 60) { worst = max(worst, xs[i..<(i + 60)].min()!) } }
        return "stay60 \(format(worst, 2)) max \(format(top, 2)) med \(format(percentile(xs, 0.5) ?? 0, 2))"
    }
}
