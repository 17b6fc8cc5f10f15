import ArgumentParser
import BlueZSim
import Foundation
import ProximityBenchmarking
import ProximityCore

/// `ranging-bench`: the node's ranging pipeline against AltBeacon iOS, the Android Beacon Library
/// and room-assistant on the same simulated traces. See docs/ranging.md.
@main
struct RangingBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ranging-bench",
        abstract: "Ranging benchmark: the node's pipeline against the anchors' schemes on the same simulated walks."
    )

    @Option(help: "Shadowing σ in dB. Repeat for several.")
    var sigma: [Double] = [4, 6, 8]

    @Option(help: "Seeds per condition.")
    var seeds = 24

    @Option(help: "The first seed. Reports use seeds from 1; the node's defaults were tuned on seeds 1001–1048.")
    var seedBase: UInt64 = 1

    @Option(help: "Path-loss exponent of the simulated radio. Repeat for several.")
    var exponent: [Double] = [2.0, 2.5]

    @Option(help: "Advertising interval in seconds. Repeat for several.")
    var interval: [Double] = [0.1, 1.0]

    @Option(help: "Packet loss probability.")
    var loss = 0.1

    @Option(name: .customLong("radio"), help: ArgumentHelp(
        "Which radio model: simple (each --sigma, with --loss) and realistic (bluez-sim's realistic preset, its own σ and losses). " +
            "Repeat for several.",
        valueName: "model"))
    var radioKinds: [RadioKind] = [.simple, .realistic]

    @Option(help: "Measured power (RSSI at 1 m) of the walker, dBm.")
    var measuredPower = -59.0

    @Flag(help: "Also run the node's table with each filter, and each filter alone (the node's distance model, plain thresholds).")
    var filters = false

    @Flag(help: "Print the results as one JSON object.")
    var json = false

    @Option(name: .customLong("node"), help: ArgumentHelp(
        "Override one node parameter, key=value: q, r, outlier, adapt, h, k, mq, mt (the Kalman filter's), margin, dwell, staleGaps, " +
            "minStale, share, memory, clear. For tuning; without it the node is RangingConfiguration().",
        visibility: .hidden))
    var nodeOverrides: [String] = []

    @Option(help: ArgumentHelp(
        "Print the ticks of one trace kind (walk, steps, boundary, departure) for the first seed and σ, then stop.",
        visibility: .hidden))
    var dump: TraceKind?

    @Option(parsing: .upToNextOption, help: ArgumentHelp(
        "Run every pipeline on these recordings (proximityctl record's CSV; docs/ranging.md, \"Record and replay\") " +
            "instead of simulated traces.",
        valueName: "file.csv"))
    var replay: [String] = []

    @Flag(help: "With --replay: also print every pipeline's zone at each report, beside the live node's.")
    var zones = false

    func validate() throws {
        guard seeds > 0 else { throw ValidationError("--seeds must be positive") }
        guard sigma.allSatisfy({ $0 >= 0 && $0.isFinite }) else { throw ValidationError("--sigma must be 0 or more") }
        guard exponent.allSatisfy({ $0 > 0 }) else { throw ValidationError("--exponent must be positive") }
        guard interval.allSatisfy({ (0.02...10.24).contains($0) }) else { throw ValidationError("--interval must be in 0.02...10.24 s") }
        guard (0..<1).contains(loss) else { throw ValidationError("--loss must be in 0..<1") }
        _ = try Self.nodeConfiguration(nodeOverrides)
        if zones && replay.isEmpty { throw ValidationError("--zones goes with --replay") }
    }

    var specs: [PipelineSpec] {
        var specs = [
            Pipelines.node { [nodeOverrides] in (try? Self.nodeConfiguration(nodeOverrides)) ?? RangingConfiguration() },
            Pipelines.altBeaconIOS,
            Pipelines.androidBeaconLibrary,
            Pipelines.roomAssistant,
            // The node with the stale rule it had before the hole model (issue 13): the same
            // traces, so "departure no later than before" and the gain in unknowns are measured.
            Pipelines.node("node, old stale", role: .reference) { [nodeOverrides] in
                var c = (try? Self.nodeConfiguration(nodeOverrides)) ?? RangingConfiguration()
                c.staleShare = 1
                return c
            },
        ]
        if filters {
            // The node's table with each filter (same model, hysteresis and departure rule)...
            func node(_ name: String, _ filter: @escaping @Sendable () -> any RSSIFilter) -> PipelineSpec {
                Pipelines.node(name, role: .filterOnly) {
                    var c = RangingConfiguration()
                    c.makeFilter = filter
                    return c
                }
            }
            specs += [
                node("node/plain kalman") {
                    KalmanRSSIFilter(processNoisePerSecond: 4, measurementNoise: 16, noiseAdaptation: 0, changeThreshold: .infinity)
                },
                node("node/mean of 10") { MeanOfLastFilter(count: 10) },
                node("node/trimmed 20 s") { TrimmedRunningAverageFilter(window: 20) },
                node("node/ra kalman") { RoomAssistantKalmanFilter() },
            ]
            // ...and each filter alone: the node's distance model, plain thresholds.
            specs += [
                Pipelines.filterOnly("kalman only") { KalmanRSSIFilter() },
                Pipelines.filterOnly("mean of 10 only") { MeanOfLastFilter(count: 10) },
                Pipelines.filterOnly("trimmed 20 s only") { TrimmedRunningAverageFilter(window: 20) },
                Pipelines.filterOnly("ra kalman only") { RoomAssistantKalmanFilter() },
            ]
        }
        return specs
    }

    static func nodeConfiguration(_ overrides: [String]) throws -> RangingConfiguration {
        guard !overrides.isEmpty else { return RangingConfiguration() }
        var c = RangingConfiguration()
        var filter = KalmanRSSIFilter()
        for o in overrides {
            let parts = o.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let v = Double(parts[1]) else { throw ValidationError("--node wants key=number, not \(o)") }
            switch parts[0] {
            case "q": filter.processNoisePerSecond = v
            case "r": filter.measurementNoise = v
            case "outlier": filter.outlierSigmas = v
            case "margin": c.hysteresisMargin = v
            case "dwell": c.dwell = v
            case "adapt": filter.noiseAdaptation = v
            case "h": filter.changeThreshold = v
            case "k": filter.changeSlack = v
            case "mq": filter.maneuverNoise = v
            case "mt": filter.maneuverTime = v
            case "staleGaps": c.staleGaps = v
            case "minStale": c.minimumStale = v
            case "share": c.staleShare = v
            case "memory": c.gapMemory = v
            case "holeGaps": c.holeGaps = v
            case "minHole": c.minimumHole = v
            case "clear": c.clearInterval = v
            default: throw ValidationError("--node: no parameter \(parts[0])")
            }
        }
        let f = filter
        c.makeFilter = { f }
        return c
    }

    func run() throws {
        if !replay.isEmpty { return try runReplay() }
        let seedList = (0..<UInt64(seeds)).map { seedBase + $0 }
        var results: [ConditionResult] = []
        let specs = specs
        if let dump {
            let condition = RadioCondition(sigma: sigma[0], exponent: exponent[0], interval: interval[0], loss: loss,
                                           measuredPower: measuredPower, kind: radioKinds[0].kind)
            print(dumpTrace(dump, condition: condition, seed: seedBase, specs: specs))
            return
        }
        var conditions: [RadioCondition] = []
        for kind in radioKinds.map(\.kind) {
            for exponent in exponent {
                for interval in interval {
                    // The realistic preset has its own σ and losses: one condition per exponent and interval.
                    for sigma in kind == .simple ? sigma : [RadioParameters.realistic.shadowingSigma] {
                        conditions.append(RadioCondition(sigma: sigma, exponent: exponent, interval: interval, loss: loss,
                                                         measuredPower: measuredPower, kind: kind))
                    }
                }
            }
        }
        for condition in conditions {
            let (tallies, clearTimer) = evaluate(condition: condition, seeds: seedList, specs: specs)
            let summaries = zip(specs, tallies).map { Summary(spec: $0, tally: $1) }
            let node = summaries[0]
            let verdicts = summaries.filter { $0.role == .baseline }.map { Verdict(node: node, baseline: $0) }
            let departures = clearTimer.departures + Array(repeating: TraceSet.departureAfter, count: clearTimer.missedDepartures)
            let result = ConditionResult(
                condition: condition, seeds: seedList, summaries: summaries,
                altBeaconIOSClearTimerDeparture: DepartureOnly(
                    rule: "AltBeacon iOS 0.2: found-devices list cleared every 10 s by a free-running timer",
                    median: percentile(departures, 0.5), p90: percentile(departures, 0.9), max: departures.max(),
                    missed: clearTimer.missedDepartures),
                verdicts: verdicts)
            results.append(result)
            if !json { print(Table.render(result)) }
        }
        if json {
            try printJSON(results)
        } else {
            print(overall(results))
        }
    }

    /// One line per condition: met, or which requirement against which baseline is not.
    func overall(_ results: [ConditionResult]) -> String {
        var out = "verdict (default node against each baseline: distance error, zone accuracy, flaps on its own boundaries, " +
            "median lag, median departure):\n"
        for r in results {
            var misses: [String] = []
            for v in r.verdicts {
                if v.distanceError == false { misses.append("distance vs \(v.baseline)") }
                if !v.zoneAccuracy {
                    misses.append("zones vs \(v.baseline) (\(format(v.zoneAccuracyDifference, 2)) ± " +
                                  "\(format(v.zoneAccuracyDifferenceHalfWidth, 2)) pt)")
                }
                if !v.flapsOwn { misses.append("flaps vs \(v.baseline)") }
                if !v.lag { misses.append("lag vs \(v.baseline)") }
                if v.departure == false { misses.append("departure vs \(v.baseline)") }
            }
            out += "  \(Table.padRight(r.condition.label(), 44)) "
                + (misses.isEmpty ? "MET" : "not met: " + misses.joined(separator: ", ")) + "\n"
        }
        let realistic = results.filter { $0.condition.kind == .realistic }
        if !realistic.isEmpty {
            out += "goals on the realistic preset (zones ≥ best baseline + 3 pt; own-boundary flaps ≤ ¼ of the fewest of a baseline; " +
                "unknown while present < 2 %; median departure ≤ the old stale rule's):\n"
            for r in realistic { out += "  \(Table.padRight(r.condition.label(), 44)) " + Goals(r).line + "\n" }
        }
        return out
    }
}

extension TraceKind: ExpressibleByArgument {}

/// The radio models `--radio` offers here: fleet-bench's `calibrated` is not one of them.
enum RadioKind: String, CaseIterable, ExpressibleByArgument {
    case simple, realistic

    var kind: RadioCondition.Kind {
        switch self {
        case .simple: .simple
        case .realistic: .realistic
        }
    }
}
