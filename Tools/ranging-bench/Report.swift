import Foundation
import ProximityBenchmarking

/// One pipeline's figures for one condition (the JSON output, and the table's source).
struct Summary: Codable, Sendable {
    var pipeline: String
    var role: PipelineRole
    var zoneTruth: ZoneTruth
    var departureRule: String?
    var distanceErrorMean: Double?
    var distanceErrorMedian: Double?
    var distanceErrorP90: Double?
    /// Mean |log10(estimate / truth)|.
    var logErrorMean: Double?
    var zoneAccuracy: Double
    var flapsPerMinute3m: Double
    var flapsPerMinute05m: Double
    var flapsPerMinuteOwn: Double
    var ownBoundaries: [Double]
    var lagMedian: Double?
    var lagP90: Double?
    var lagMean: Double?
    var changes: Int
    var missedChanges: Int
    var departureMedian: Double?
    var departureP90: Double?
    var departureMax: Double?
    var missedDepartures: Int
    var falseUnknownPerHour: Double
    /// The share of report ticks, in percent, that say unknown while the walker advertises (after
    /// its first report).
    var unknownWhilePresentPercent: Double
    var wrongZoneTicksAfterChange: Int
    var wrongZoneTicksSteady: Int
    var wrongZoneTicksByKind: [String: Int]
    var zoneAccuracyBySeed: [Double]

    init(spec: PipelineSpec, tally t: Tally) {
        pipeline = spec.name
        role = spec.role
        zoneTruth = spec.truth
        departureRule = spec.departureRule
        if spec.hasDistance {
            distanceErrorMean = mean(t.distanceErrors)
            distanceErrorMedian = percentile(t.distanceErrors, 0.5)
            distanceErrorP90 = percentile(t.distanceErrors, 0.9)
            logErrorMean = mean(t.logErrors)
        }
        zoneAccuracy = t.zoneTicks == 0 ? 0 : Double(t.zoneHits) / Double(t.zoneTicks)
        flapsPerMinute3m = t.minutes3 == 0 ? 0 : Double(t.flaps3) / t.minutes3
        flapsPerMinute05m = t.minutes05 == 0 ? 0 : Double(t.flaps05) / t.minutes05
        flapsPerMinuteOwn = t.minutesOwn == 0 ? 0 : Double(t.flapsOwn) / t.minutesOwn
        ownBoundaries = t.ownBoundaries
        // A missed change counts as the whole hold in the percentiles (censored, pessimistic).
        let lags = t.lags + Array(repeating: TraceSet.stepHold, count: t.missedChanges)
        lagMedian = percentile(lags, 0.5)
        lagP90 = percentile(lags, 0.9)
        lagMean = mean(lags)
        changes = lags.count
        missedChanges = t.missedChanges
        if spec.departureRule != nil {
            let departures = t.departures + Array(repeating: TraceSet.departureAfter, count: t.missedDepartures)
            departureMedian = percentile(departures, 0.5)
            departureP90 = percentile(departures, 0.9)
            departureMax = departures.max()
        }
        missedDepartures = t.missedDepartures
        wrongZoneTicksAfterChange = t.wrongAfterChange
        wrongZoneTicksSteady = t.wrongSteady
        wrongZoneTicksByKind = t.wrongByKind
        zoneAccuracyBySeed = t.accuracyBySeed
        falseUnknownPerHour = t.presentTicks == 0 ? 0 : Double(t.falseUnknownTicks) / Double(t.presentTicks) * 3600
        unknownWhilePresentPercent = t.presentTicks == 0 ? 0 : Double(t.falseUnknownTicks) / Double(t.presentTicks) * 100
    }
}

/// Node against one baseline, one condition.
struct Verdict: Codable, Sendable {
    var baseline: String
    var distanceError: Bool?
    var zoneAccuracy: Bool
    var flapsOwn: Bool
    var flapsNominal: Bool
    var lag: Bool
    var departure: Bool?
    /// Node minus baseline zone accuracy, percentage points: the mean of the per-seed paired
    /// differences and the half-width of its ≈95% interval (1.96 standard errors).
    var zoneAccuracyDifference: Double
    var zoneAccuracyDifferenceHalfWidth: Double
    /// Every requirement: distance error, zone accuracy, flaps on its own boundaries, lag and
    /// departure (the nominal-boundary flaps are shown, not required: see docs/ranging.md).
    var met = false

    /// Fewer flaps, or none for both.
    static func fewer(_ a: Double, _ b: Double) -> Bool { a < b || (a == 0 && b == 0) }

    init(node: Summary, baseline b: Summary) {
        baseline = b.pipeline
        if let mine = node.distanceErrorMean, let theirs = b.distanceErrorMean { distanceError = mine < theirs }
        zoneAccuracy = node.zoneAccuracy > b.zoneAccuracy
        let differences = zip(node.zoneAccuracyBySeed, b.zoneAccuracyBySeed).map { ($0 - $1) * 100 }
        let m = mean(differences) ?? 0
        let variance = differences.count > 1
            ? differences.map { ($0 - m) * ($0 - m) }.reduce(0, +) / Double(differences.count - 1) : 0
        zoneAccuracyDifference = m
        zoneAccuracyDifferenceHalfWidth = 1.96 * (variance / Double(max(1, differences.count))).squareRoot()
        flapsOwn = Self.fewer(node.flapsPerMinuteOwn, b.flapsPerMinuteOwn)
        flapsNominal = Self.fewer(node.flapsPerMinute3m + node.flapsPerMinute05m, b.flapsPerMinute3m + b.flapsPerMinute05m)
        lag = (node.lagMedian ?? .infinity) <= (b.lagMedian ?? .infinity)
        if let mine = node.departureMedian, let theirs = b.departureMedian { departure = mine <= theirs }
        met = (distanceError ?? true) && zoneAccuracy && flapsOwn && lag && (departure ?? true)
    }
}

struct ConditionResult: Codable, Sendable {
    var condition: RadioCondition
    var seeds: [UInt64]
    var summaries: [Summary]
    var altBeaconIOSClearTimerDeparture: DepartureOnly
    var verdicts: [Verdict]
}

struct DepartureOnly: Codable, Sendable {
    var rule: String
    var median: Double?
    var p90: Double?
    var max: Double?
    var missed: Int
}

extension Table {
    static func render(_ result: ConditionResult) -> String {
        var out = "== \(result.condition.label()); seeds \(seedRange(result.seeds))\n"
        out += padRight("pipeline", 20) + pad("err mean", 9) + pad("med", 6) + pad("p90", 6) + pad("log10", 7)
            + pad("zone%", 7) + pad("flap/min 3m", 12) + pad("0.5m", 6) + pad("own", 6)
            + pad("lag med", 8) + pad("p90", 6) + pad("miss", 5) + pad("depart med", 11) + pad("max", 6)
            + pad("unk%", 6) + "\n"
        for s in result.summaries {
            out += padRight(s.pipeline, 20)
            out += cell(s.distanceErrorMean, 2, width: 9) + cell(s.distanceErrorMedian, 2, width: 6)
                + cell(s.distanceErrorP90, 2, width: 6) + cell(s.logErrorMean, 3, width: 7)
            out += cell(s.zoneAccuracy * 100, 1, width: 7)
            out += cell(s.flapsPerMinute3m, 2, width: 12) + cell(s.flapsPerMinute05m, 2, width: 6)
                + cell(s.flapsPerMinuteOwn, 2, width: 6)
            out += cell(s.lagMedian, 1, width: 8) + cell(s.lagP90, 1, width: 6) + pad("\(s.missedChanges)", 5)
            out += cell(s.departureMedian, 1, width: 11) + cell(s.departureMax, 1, width: 6)
            out += cell(s.unknownWhilePresentPercent, 2, width: 6)
            out += "\n"
        }
        let c = result.altBeaconIOSClearTimerDeparture
        out += "   departure, altbeacon-ios 0.2 clear timer (10 s, free-running): median \(c.median.map { format($0, 1) } ?? "n/a") s, " +
            "max \(c.max.map { format($0, 1) } ?? "n/a") s\n"
        for s in result.summaries where s.role != .filterOnly {
            let own = s.ownBoundaries.map { format($0, 2) }.joined(separator: ", ")
            out += "   \(padRight(s.pipeline, 19)) own boundaries [\(own)] m" + (s.departureRule.map { "; departure: \($0)" } ?? "") + "\n"
        }
        for v in result.verdicts {
            func mark(_ b: Bool?) -> String { b.map { $0 ? "yes" : "NO" } ?? "n/a" }
            out += "   node vs \(padRight(v.baseline, 19)): distance \(mark(v.distanceError)), zones \(mark(v.zoneAccuracy)) "
                + "(\(v.zoneAccuracyDifference >= 0 ? "+" : "")\(format(v.zoneAccuracyDifference, 2)) ± "
                + "\(format(v.zoneAccuracyDifferenceHalfWidth, 2)) pt), "
                + "flaps own \(mark(v.flapsOwn)) (nominal \(mark(v.flapsNominal))), lag \(mark(v.lag)), departure \(mark(v.departure))"
                + " => \(v.met ? "MET" : "NOT MET")\n"
        }
        return out
    }
}

/// Issue 13's goals for the realistic preset, for one condition: the node against the best
/// baseline in each figure, and against its own old stale rule for departure.
struct Goals {
    var zones: (node: Double, best: Double, name: String)
    var flaps: (node: Double, best: Double, name: String)
    var unknown: Double
    var departure: (node: Double?, old: Double?)

    init(_ r: ConditionResult) {
        let node = r.summaries.first { $0.role == .node }!
        let baselines = r.summaries.filter { $0.role == .baseline }
        let byZones = baselines.max { $0.zoneAccuracy < $1.zoneAccuracy }!
        let byFlaps = baselines.min { $0.flapsPerMinuteOwn < $1.flapsPerMinuteOwn }!
        zones = (node.zoneAccuracy * 100, byZones.zoneAccuracy * 100, byZones.pipeline)
        flaps = (node.flapsPerMinuteOwn, byFlaps.flapsPerMinuteOwn, byFlaps.pipeline)
        unknown = node.unknownWhilePresentPercent
        departure = (node.departureMedian, r.summaries.first { $0.role == .reference }?.departureMedian)
    }

    var line: String {
        func mark(_ ok: Bool) -> String { ok ? "met" : "MISSED" }
        let gain = zones.node - zones.best
        var parts = [
            "zones \(format(zones.node, 1)) vs \(zones.name) \(format(zones.best, 1)) " +
                "(\(gain >= 0 ? "+" : "")\(format(gain, 1)) pt: \(mark(gain >= 3)))",
            "flaps \(format(flaps.node, 2))/min vs \(flaps.name) \(format(flaps.best, 2)) (\(mark(flaps.node <= flaps.best / 4)))",
            "unknown \(format(unknown, 2)) % (\(mark(unknown < 2)))",
        ]
        if let mine = departure.node, let old = departure.old {
            parts.append("departure \(format(mine, 1)) s vs \(format(old, 1)) s before (\(mark(mine <= old)))")
        }
        return parts.joined(separator: "; ")
    }
}
