import Foundation
import ProximityBenchmarking
import ProximityCore

/// Lags of one kind of move: a missed switch counts as the whole hold (censored, pessimistic).
struct LagSummary: Codable, Sendable {
    var median: Double?
    var p90: Double?
    var moves: Int
    var missed: Int
    /// Moves not scored because the room already was the target when the move started.
    var early: Int

    init(lags: [Double], missed: Int, early: Int) {
        let all = lags + Array(repeating: TraceSet.hold, count: missed)
        median = percentile(all, 0.5)
        p90 = percentile(all, 0.9)
        moves = all.count
        self.missed = missed
        self.early = early
    }
}

struct PointSummary: Codable, Sendable {
    var point: String
    var midpoint: Bool
    var bounces: Int
    var hours: Double
    var bouncesPerHour: Double
    /// Percent of the scored time in a room other than the nearest box's (not_home excluded).
    var wrongRoomPercent: Double
    /// Percent of the scored time not_home.
    var notHomePercent: Double
    /// Bounces by the reason the rule gave (`nearer`, `stale`, `away`, `arrived`).
    var bouncesByReason: [String: Int]

    init(_ point: String, midpoint: Bool, _ s: Tally.Stand) {
        self.point = point
        self.midpoint = midpoint
        bounces = s.bounces
        hours = s.hours
        bouncesPerHour = s.perHour
        wrongRoomPercent = s.seconds > 0 ? s.wrongSeconds / s.seconds * 100 : 0
        notHomePercent = s.seconds > 0 ? s.awaySeconds / s.seconds * 100 : 0
        bouncesByReason = s.reasons
    }
}

/// One rule's figures for one street scenario (``TraceKind/street``).
struct StreetSummary: Codable, Sendable {
    /// "from room" or "from nowhere".
    var scenario: String
    var traces: Int
    var hours: Double
    /// Changes into a room after leaving room A (from room) or from the start (from nowhere).
    var bounces: Int
    var bouncesPerHour: Double
    var bouncesByLayout: [String: Int]
    /// Seconds from reaching the street to the last change to not_home (0: never in a room), over
    /// the traces that end not_home.
    var notHomeMedian: Double?
    var notHomeP90: Double?
    var notHomeMax: Double?
    /// Traces that end in a room.
    var misses: Int
    /// Traces not_home later than the bound, or never (misses included).
    var overBound: Int
    /// Percent of the time after the bound spent in a room.
    var lateRoomPercent: Double

    init(_ scenario: String, _ s: Tally.Street, bound: Double) {
        self.scenario = scenario
        traces = s.traces
        hours = s.hours
        bounces = s.bounces
        bouncesPerHour = s.hours > 0 ? Double(s.bounces) / s.hours : 0
        bouncesByLayout = s.bouncesByLayout
        notHomeMedian = percentile(s.notHome, 0.5)
        notHomeP90 = percentile(s.notHome, 0.9)
        notHomeMax = s.notHome.max()
        misses = s.misses
        overBound = s.misses + s.notHome.filter { $0 > bound }.count
        lateRoomPercent = s.lateSeconds > 0 ? s.lateRoomSeconds / s.lateSeconds * 100 : 0
    }
}

/// One rule's figures for one condition.
struct Summary: Codable, Sendable {
    var rule: String
    var role: RuleSpec.Role
    var points: [PointSummary]
    var byLayout: [String: [PointSummary]]
    var offMidpointBounces: Int
    var offMidpointPerHour: Double
    var midpointBounces: Int
    var midpointPerHour: Double
    var walk: LagSummary
    var teleport: LagSummary
    var allMoves: LagSummary
    var moveBounces: Int
    var street: [StreetSummary]

    static let pointOrder = ["10 %", "25 %", "40 %", "50 %", "centre"]

    static let streetOrder = ["from room", "from nowhere"]

    init(spec: RuleSpec, tally t: Tally, layouts: [Layout], streetBound: Double) {
        rule = spec.name
        role = spec.role
        func isMid(_ p: String) -> Bool { p == "50 %" || p == "centre" }
        points = Self.pointOrder.compactMap { p in t.stand[p].map { PointSummary(p, midpoint: isMid(p), $0) } }
        byLayout = [:]
        for layout in layouts {
            byLayout[layout.name] = Self.pointOrder.compactMap { p in
                t.standByLayout["\(layout.name)|\(p)"].map { PointSummary(p, midpoint: isMid(p), $0) }
            }
        }
        var off = Tally.Stand(), mid = Tally.Stand()
        for (p, s) in t.stand { if isMid(p) { mid.add(s) } else { off.add(s) } }
        offMidpointBounces = off.bounces
        offMidpointPerHour = off.perHour
        midpointBounces = mid.bounces
        midpointPerHour = mid.perHour
        walk = LagSummary(lags: t.lags[.walk] ?? [], missed: t.missed[.walk] ?? 0, early: t.early[.walk] ?? 0)
        teleport = LagSummary(lags: t.lags[.teleport] ?? [], missed: t.missed[.teleport] ?? 0, early: t.early[.teleport] ?? 0)
        allMoves = LagSummary(lags: (t.lags[.walk] ?? []) + (t.lags[.teleport] ?? []),
                              missed: (t.missed[.walk] ?? 0) + (t.missed[.teleport] ?? 0),
                              early: (t.early[.walk] ?? 0) + (t.early[.teleport] ?? 0))
        moveBounces = t.moveBounces
        street = Self.streetOrder.compactMap { p in t.street[p].map { StreetSummary(p, $0, bound: streetBound) } }
    }
}

/// The goals of issue 14 for one condition: the fleet's rule against the baselines.
struct Goals: Codable, Sendable {
    /// No bounce at 10, 25 and 40 % of the way.
    var zeroOffMidpoint: Bool
    var offMidpointBounces: Int
    /// Fewer bounces per hour at the midpoints (50 %, the triangle's centre) than every baseline
    /// (or none for all).
    var fewestAtMidpoint: Bool
    var midpointPerHour: Double
    var fewestBaseline: String
    var fewestBaselinePerHour: Double
    /// Median lag over all moves no slower than Bermuda's.
    var lagNoSlowerThanBermuda: Bool
    var lagMedian: Double?
    var bermudaLagMedian: Double?
    var met: Bool

    init?(_ summaries: [Summary]) {
        guard let fleet = summaries.first(where: { $0.role == .fleet }) else { return nil }
        let baselines = summaries.filter { $0.role == .baseline }
        guard let fewest = baselines.min(by: { $0.midpointPerHour < $1.midpointPerHour }),
              let bermuda = baselines.first(where: { $0.rule == "bermuda" }) else { return nil }
        offMidpointBounces = fleet.offMidpointBounces
        zeroOffMidpoint = fleet.offMidpointBounces == 0
        midpointPerHour = fleet.midpointPerHour
        fewestBaseline = fewest.rule
        fewestBaselinePerHour = fewest.midpointPerHour
        fewestAtMidpoint = fleet.midpointPerHour < fewest.midpointPerHour || (fleet.midpointBounces == 0 && fewest.midpointBounces == 0)
        lagMedian = fleet.allMoves.median
        bermudaLagMedian = bermuda.allMoves.median
        lagNoSlowerThanBermuda = (lagMedian ?? .infinity) <= (bermudaLagMedian ?? .infinity)
        met = zeroOffMidpoint && fewestAtMidpoint && lagNoSlowerThanBermuda
    }

    var line: String {
        func mark(_ ok: Bool) -> String { ok ? "met" : "MISSED" }
        func s(_ x: Double?) -> String { x.map { format($0, 1) } ?? "n/a" }
        return "off-midpoint bounces \(offMidpointBounces) (\(mark(zeroOffMidpoint))); "
            + "midpoint \(format(midpointPerHour, 2))/h vs \(fewestBaseline) \(format(fewestBaselinePerHour, 2))/h "
            + "(\(mark(fewestAtMidpoint))); "
            + "median lag \(s(lagMedian)) s vs bermuda \(s(bermudaLagMedian)) s (\(mark(lagNoSlowerThanBermuda)))"
    }
}

/// The street goal (issue 23): the fleet's rule never puts a device out in the street into a room
/// (no bounce) and has it not_home within the bound of reaching the street, in every trace.
struct StreetGoal: Codable, Sendable {
    var bound: Double
    var bounces: Int
    var traces: Int
    var overBound: Int
    var worst: Double?
    var met: Bool

    init?(_ summaries: [Summary], bound: Double) {
        guard let fleet = summaries.first(where: { $0.role == .fleet }), !fleet.street.isEmpty else { return nil }
        self.bound = bound
        bounces = fleet.street.map(\.bounces).reduce(0, +)
        traces = fleet.street.map(\.traces).reduce(0, +)
        overBound = fleet.street.map(\.overBound).reduce(0, +)
        worst = fleet.street.compactMap(\.notHomeMax).max()
        met = bounces == 0 && overBound == 0
    }

    var line: String {
        func mark(_ ok: Bool) -> String { ok ? "met" : "MISSED" }
        return "street: bounces \(bounces) (\(mark(bounces == 0))); not_home within \(format(bound, 0)) s of reaching the street in "
            + "\(traces - overBound) of \(traces) traces (\(mark(overBound == 0)); latest \(worst.map { format($0, 1) + " s" } ?? "n/a"))"
    }
}

struct ConditionResult: Codable, Sendable {
    var condition: RadioCondition
    var seeds: [UInt64]
    var layouts: [String]
    /// Scored hours of standing at each point of each layout (seeds × minutes).
    var standHoursPerPoint: Double
    /// Reports published per device-second the node ranged it (the throttle's effect).
    var reportsPerRangedSecond: Double
    var fleetConfiguration: FleetConfigurationJSON
    var summaries: [Summary]
    var goals: Goals?
    var streetGoal: StreetGoal?
}

struct FleetConfigurationJSON: Codable, Sendable {
    var staleAfter: Double
    var awayAfter: Double
    var margin: Double
    var evidence: Double
    var settle: Double
    var homeDistance: Double
    var homeReports: Int
    var homeWindow: Double
    init(_ c: RoomDecider.Configuration) {
        settle = c.settle
        homeDistance = c.homeDistance
        homeReports = c.homeReports
        homeWindow = c.homeWindow
        staleAfter = c.staleAfter
        awayAfter = c.awayAfter
        margin = c.margin
        evidence = c.evidence
    }
}

extension Table {
    static func render(_ r: ConditionResult) -> String {
        var out = "== \(r.condition.label(namingSimple: true)); seeds \(seedRange(r.seeds)); " +
            "layouts: \(r.layouts.joined(separator: ", "))\n"
        let hours = (r.summaries.first?.points ?? []).map { "\($0.point) \(format($0.hours, 0)) h" }.joined(separator: ", ")
        out += "   standing after a \(format(TraceSet.warmup, 0)) s warm-up, all layouts: \(hours); "
            + "reports per ranged second \(format(r.reportsPerRangedSecond, 3))\n"
        let points = Summary.pointOrder.filter { p in r.summaries.first?.points.contains { $0.point == p } ?? false }
        out += "   bounces per hour while standing (wrong room %, at 10/25/40 %)\n"
        out += "   " + padRight("rule", 24) + points.map { pad($0, 9) }.joined() + pad("off-mid", 10) + pad("mid", 8)
            + pad("wrong%", 8) + pad("away%", 7) + "\n"
        for s in r.summaries {
            out += "   " + padRight(s.rule, 24)
            for p in points {
                let x = s.points.first { $0.point == p }
                out += cell(x?.bouncesPerHour, 2, width: 9)
            }
            out += cell(s.offMidpointPerHour, 2, width: 10) + cell(s.midpointPerHour, 2, width: 8)
            let off = s.points.filter { !$0.midpoint }
            let wrong = off.isEmpty ? nil : off.map(\.wrongRoomPercent).reduce(0, +) / Double(off.count)
            let away = s.points.isEmpty ? nil : s.points.map(\.notHomePercent).reduce(0, +) / Double(s.points.count)
            out += cell(wrong, 1, width: 8) + cell(away, 2, width: 7) + "\n"
        }
        out += "   lag to switch rooms after a move, s (walk: from crossing the midpoint; teleport: from the jump)\n"
        out += "   " + padRight("rule", 24) + pad("walk med", 9) + pad("p90", 6) + pad("miss", 5) + pad("early", 6)
            + pad("tele med", 9) + pad("p90", 6) + pad("miss", 5) + pad("all med", 9) + pad("p90", 6) + pad("extra", 6) + "\n"
        for s in r.summaries {
            out += "   " + padRight(s.rule, 24)
                + cell(s.walk.median, 1, width: 9) + cell(s.walk.p90, 1, width: 6) + pad("\(s.walk.missed)", 5) + pad("\(s.walk.early)", 6)
                + cell(s.teleport.median, 1, width: 9) + cell(s.teleport.p90, 1, width: 6) + pad("\(s.teleport.missed)", 5)
                + cell(s.allMoves.median, 1, width: 9) + cell(s.allMoves.p90, 1, width: 6) + pad("\(s.moveBounces)", 6) + "\n"
        }
        if r.summaries.contains(where: { !$0.street.isEmpty }) {
            out += "   out in the street, 13–16 m from the nearest boxes (standing and wandering; not_home: s from reaching it)\n"
            out += "   " + padRight("rule", 24) + padRight("  scenario", 15) + pad("traces", 7) + pad("bounces/h", 10) + pad("n", 5)
                + pad("not_home med", 13) + pad("p90", 7) + pad("max", 7) + pad("never", 6) + pad("late", 5) + pad("room%", 7) + "\n"
            for s in r.summaries {
                for x in s.street {
                    out += "   " + padRight(s.rule, 24) + padRight("  " + x.scenario, 15) + pad("\(x.traces)", 7)
                        + cell(x.bouncesPerHour, 2, width: 10)
                        + pad("\(x.bounces)", 5) + cell(x.notHomeMedian, 1, width: 13) + cell(x.notHomeP90, 1, width: 7)
                        + cell(x.notHomeMax, 1, width: 7) + pad("\(x.misses)", 6) + pad("\(x.overBound)", 5)
                        + cell(x.lateRoomPercent, 1, width: 7) + "\n"
                }
            }
        }
        if let g = r.goals { out += "   goals: \(g.line)\n" }
        if let g = r.streetGoal { out += "   goal: \(g.line)\n" }
        return out
    }

    /// The bounces per hour of every rule by layout and point.
    static func renderByLayout(_ r: ConditionResult) -> String {
        var out = "   bounces per hour by layout\n"
        for layout in r.layouts {
            let points = r.summaries.first?.byLayout[layout]?.map(\.point) ?? []
            out += "   " + padRight(layout, 24) + points.map { pad($0, 9) }.joined() + "\n"
            for s in r.summaries {
                out += "     " + padRight(s.rule, 22)
                var reasons: [String: Int] = [:]
                for p in points {
                    let x = s.byLayout[layout]?.first { $0.point == p }
                    out += cell(x?.bouncesPerHour, 2, width: 9)
                    reasons.merge(x?.bouncesByReason ?? [:], uniquingKeysWith: +)
                }
                out += "   " + reasons.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + "\n"
            }
        }
        return out
    }
}
