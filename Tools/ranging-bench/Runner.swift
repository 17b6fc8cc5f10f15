import BlueZSim
import Foundation
import ProximityBenchmarking
import ProximityCore

/// What one pipeline did over the traces of one condition (all seeds).
struct Tally: Sendable {
    var distanceErrors: [Double] = []
    var logErrors: [Double] = []
    var zoneHits = 0
    var zoneTicks = 0
    /// Flaps while standing on the nominal 3 m and 0.5 m boundaries, and on the pipeline's own.
    var flaps3 = 0, minutes3 = 0.0
    var flaps05 = 0, minutes05 = 0.0
    var flapsOwn = 0, minutesOwn = 0.0
    var ownBoundaries: [Double] = []
    var lags: [Double] = []
    var missedChanges = 0
    var departures: [Double] = []
    var missedDepartures = 0
    var falseUnknownTicks = 0
    var presentTicks = 0
    /// Wrong zone ticks within 2 s of a true zone change (lag), and later (noise).
    var wrongAfterChange = 0
    var wrongSteady = 0
    var wrongByKind: [String: Int] = [:]
    /// Zone accuracy of each seed, for paired comparisons.
    var accuracyBySeed: [Double] = []
}

/// The scoring rules, in one place (docs/ranging.md repeats them).
enum Scoring {
    /// Boundary traces count flaps only after this warm-up.
    static let boundaryWarmup = TraceSet.boundaryWarmup

    static func truthZone(_ spec: PipelineSpec, distance d: Double, radio: RadioModel) -> Proximity {
        switch spec.truth {
        case .metres: Pipelines.thresholds.zone(forDistance: d)
        case .ownRSSIThresholds: spec.noiseFreeZone(radio.meanRSSI(distance: d), radio.parameters.measuredPower)
        }
    }

    /// The true distances at which the pipeline's zone changes for a noise-free RSSI: where it has
    /// to decide. For the node at n = 2 these are the nominal 0.5 m and 3 m.
    static func ownBoundaries(_ spec: PipelineSpec, radio: RadioModel) -> [Double] {
        let power = radio.parameters.measuredPower
        func zone(_ d: Double) -> Proximity { spec.noiseFreeZone(radio.meanRSSI(distance: d), power) }
        var result: [Double] = []
        var d = 0.1
        var z = zone(d)
        while d < 60 {
            let next = d * 1.02
            let zNext = zone(next)
            if zNext != z {
                var lo = d, hi = next
                for _ in 0..<50 {
                    let mid = (lo + hi) / 2
                    if zone(mid) == z { lo = mid } else { hi = mid }
                }
                result.append((lo + hi) / 2)
            }
            d = next
            z = zNext
        }
        return result
    }
}

/// Runs traces through pipelines, once-a-second ticks on virtual time.
struct Runner {
    var condition: RadioCondition
    var radio: RadioModel { condition.model }

    /// Feeds `trace` to a fresh pipeline; calls `onTick` after each 1 s report.
    func drive(_ trace: Trace, _ spec: PipelineSpec, onTick: (Double, Proximity, Double?) -> Void) {
        var pipeline = spec.make(condition)
        drive(trace, &pipeline, onTick: onTick)
    }

    func drive(_ trace: Trace, _ pipeline: inout any Pipeline, onTick: (Double, Proximity, Double?) -> Void) {
        pipeline.drive(trace.samples, firstTick: 1, through: trace.duration, onTick: onTick)
    }

    /// Distance error, false unknowns and (for walk and step traces) zone accuracy.
    func scorePresence(_ trace: Trace, _ spec: PipelineSpec, zone: Proximity, distance: Double?, at t: Double,
                       seenYet: inout Bool, into tally: inout Tally) {
        if let silent = trace.silentFrom, t >= silent { return }
        let truth = trace.distance(at: t)
        if let distance {
            tally.distanceErrors.append(abs(distance - truth))
            tally.logErrors.append(abs(log10(max(distance, 1e-3) / truth)))
        }
        if zone != .unknown { seenYet = true }
        if seenYet {
            tally.presentTicks += 1
            if zone == .unknown { tally.falseUnknownTicks += 1 }
        }
        if trace.kind == .walk || trace.kind == .steps {
            tally.zoneTicks += 1
            let expected = Scoring.truthZone(spec, distance: truth, radio: radio)
            if zone == expected {
                tally.zoneHits += 1
            } else {
                // Did the truth change in the last 2 s?
                let recent = stride(from: t - 2, to: t, by: 0.05).contains {
                    Scoring.truthZone(spec, distance: trace.distance(at: $0), radio: radio) != expected
                }
                if recent { tally.wrongAfterChange += 1 } else { tally.wrongSteady += 1 }
                tally.wrongByKind["\(trace.kind.rawValue) \(recent ? "after change" : "steady")", default: 0] += 1
            }
        }
    }

    /// Walk, step and departure traces.
    func run(_ trace: Trace, _ spec: PipelineSpec, into tally: inout Tally) {
        var seenYet = false
        var reports: [(t: Double, zone: Proximity)] = []
        drive(trace, spec) { t, zone, distance in
            scorePresence(trace, spec, zone: zone, distance: distance, at: t, seenYet: &seenYet, into: &tally)
            reports.append((t, zone))
        }
        switch trace.kind {
        case .steps:
            let ends = Array(trace.changeTimes.dropFirst()) + [trace.duration]
            for (change, end) in zip(trace.changeTimes, ends) {
                let before = Scoring.truthZone(spec, distance: trace.distance(at: change - 0.01), radio: radio)
                let after = Scoring.truthZone(spec, distance: trace.distance(at: change + 0.01), radio: radio)
                guard before != after else { continue }
                if let hit = reports.first(where: { $0.t >= change && $0.t < end && $0.zone == after }) {
                    tally.lags.append(hit.t - change)
                } else {
                    tally.missedChanges += 1
                }
            }
        case .departure:
            guard spec.departureRule != nil, let off = trace.silentFrom else { break }
            if let hit = reports.first(where: { $0.t >= off && $0.zone == .unknown }) {
                tally.departures.append(hit.t - off)
            } else {
                tally.missedDepartures += 1
            }
        case .walk, .boundary:
            break
        }
    }

    /// A boundary trace: flaps per minute after the warm-up (every change of the reported zone
    /// between consecutive ticks counts, to or from unknown included).
    func flaps(_ trace: Trace, _ spec: PipelineSpec, tally: inout Tally) -> (flaps: Int, minutes: Double) {
        var seenYet = false
        var last: Proximity?
        var flaps = 0
        drive(trace, spec) { t, zone, distance in
            scorePresence(trace, spec, zone: zone, distance: distance, at: t, seenYet: &seenYet, into: &tally)
            guard t >= Scoring.boundaryWarmup else { return }
            if let last, last != zone { flaps += 1 }
            last = zone
        }
        return (flaps, (trace.duration - Scoring.boundaryWarmup) / 60)
    }
}

/// One condition over all seeds: every pipeline on the same traces.
func evaluate(condition: RadioCondition, seeds: [UInt64], specs: [PipelineSpec]) -> (tallies: [Tally], clearTimer: Tally) {
    let runner = Runner(condition: condition)
    let radio = condition.model
    var tallies = specs.map { spec in
        var t = Tally()
        t.ownBoundaries = Scoring.ownBoundaries(spec, radio: radio)
        return t
    }
    var clearTimer = Tally()
    for seed in seeds {
        // Streams are named by what they drive, not by σ: every σ sees the same deviates, scaled.
        let root = SeededGenerator(seed: seed)
        var phases = root.derived("phases")
        var walk = TraceSet.walk(rng: &phases)
        walk.simulate(radio, rng: root.derived("walk"))
        var steps = TraceSet.steps(rng: &phases)
        steps.simulate(radio, rng: root.derived("steps"))
        var nominal: [Trace] = []
        for d in [3.0, 0.5] {
            var trace = TraceSet.boundary(d)
            trace.simulate(radio, rng: root.derived("boundary \(d)"))
            nominal.append(trace)
        }
        var departures: [Trace] = []
        for d in TraceSet.departureDistances {
            var trace = TraceSet.departure(d, rng: &phases)
            trace.simulate(radio, rng: root.derived("departure \(d)"))
            departures.append(trace)
        }
        var ownTraces: [Double: Trace] = [:]
        func ownTrace(_ d: Double) -> Trace {
            if let trace = ownTraces[d] { return trace }
            var trace = TraceSet.boundary(d)
            trace.simulate(radio, rng: root.derived("boundary own"))
            ownTraces[d] = trace
            return trace
        }

        for (k, spec) in specs.enumerated() {
            var tally = tallies[k]
            let (hits, ticks) = (tally.zoneHits, tally.zoneTicks)
            runner.run(walk, spec, into: &tally)
            runner.run(steps, spec, into: &tally)
            tally.accuracyBySeed.append(Double(tally.zoneHits - hits) / Double(max(1, tally.zoneTicks - ticks)))
            let f3 = runner.flaps(nominal[0], spec, tally: &tally)
            tally.flaps3 += f3.flaps
            tally.minutes3 += f3.minutes
            let f05 = runner.flaps(nominal[1], spec, tally: &tally)
            tally.flaps05 += f05.flaps
            tally.minutes05 += f05.minutes
            for d in tally.ownBoundaries {
                var scratch = Tally()
                let f = runner.flaps(ownTrace(d), spec, tally: &scratch)
                tally.flapsOwn += f.flaps
                tally.minutesOwn += f.minutes
            }
            for trace in departures { runner.run(trace, spec, into: &tally) }
            tallies[k] = tally
        }

        // AltBeacon iOS 0.2's clear timer, departure only.
        for trace in departures {
            var pipeline = Pipelines.altBeaconIOSClearTimer(clearInterval: 10, phase: phases.uniform(0...10))
            var hit: Double?
            runner.drive(trace, &pipeline) { t, zone, _ in
                if hit == nil, let off = trace.silentFrom, t >= off, zone == .unknown { hit = t - off }
            }
            if let hit { clearTimer.departures.append(hit) } else { clearTimer.missedDepartures += 1 }
        }
    }
    return (tallies, clearTimer)
}


/// The ticks of one trace, every pipeline side by side (for looking into a result).
func dumpTrace(_ kind: TraceKind, condition: RadioCondition, seed: UInt64, specs: [PipelineSpec]) -> String {
    let runner = Runner(condition: condition)
    let radio = condition.model
    let root = SeededGenerator(seed: seed)
    var phases = root.derived("phases")
    var trace: Trace
    switch kind {
    case .walk:
        trace = TraceSet.walk(rng: &phases)
        trace.simulate(radio, rng: root.derived("walk"))
    case .steps:
        _ = TraceSet.walk(rng: &phases)
        trace = TraceSet.steps(rng: &phases)
        trace.simulate(radio, rng: root.derived("steps"))
    case .boundary:
        trace = TraceSet.boundary(3)
        trace.simulate(radio, rng: root.derived("boundary 3.0"))
    case .departure:
        // The same phase draws as evaluate(): walk, steps, then the departures in order.
        _ = TraceSet.walk(rng: &phases)
        _ = TraceSet.steps(rng: &phases)
        _ = TraceSet.departure(TraceSet.departureDistances[0], rng: &phases)
        trace = TraceSet.departure(TraceSet.departureDistances[1], rng: &phases)
        trace.simulate(radio, rng: root.derived("departure \(TraceSet.departureDistances[1])"))
    }
    var columns: [[(Proximity, Double?)]] = []
    var times: [Double] = []
    for spec in specs {
        var column: [(Proximity, Double?)] = []
        times = []
        runner.drive(trace, spec) { t, zone, distance in
            column.append((zone, distance))
            times.append(t)
        }
        columns.append(column)
    }
    var out = "t      true    truth     " + specs.map { Table.padRight($0.name, 22) }.joined() + "\n"
    for (i, t) in times.enumerated() {
        let d = trace.distance(at: t)
        out += Table.padRight(format(t, 0), 7) + Table.padRight(format(d, 2), 8)
            + Table.padRight(Pipelines.thresholds.zone(forDistance: d).rawValue, 10)
        for c in columns {
            let (zone, distance) = c[i]
            out += Table.padRight(zone.rawValue + (distance.map { " " + format($0, 2) } ?? ""), 22)
        }
        out += "\n"
    }
    return out
}
