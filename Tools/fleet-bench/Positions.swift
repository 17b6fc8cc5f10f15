import ArgumentParser
import BlueZSim
import Foundation
import ProximityBenchmarking
import ProximityCore

/// The positions benchmark (`fleet-bench --positions`, docs/positioning.md, Benchmarks): devices
/// walking and standing on three floor plans, what each node hears of them from bluez-sim's radio
/// model, played through `PositionReplay` (each node's own ranging table and MQTT rate control,
/// exactly as live), and each estimator scored against the truth.

/// What the positioning knows of the radios' offsets.
enum PositionsOffsets: String, CaseIterable, Sendable {
    /// Nothing: every node's receive offset and the device's transmit offset unknown (the realistic
    /// preset draws each N(0, 6 dB)).
    case uncalibrated
    /// The true offsets: each node's receive offset in `PathLossModel.rxOffsets`, and the device's
    /// transmit offset in the measured power the nodes range it with (so the nodes' distances are
    /// right too) and, for the grid, a device offset known to 0.5 dB.
    case oracle
    /// The nodes' true receive offsets only (what a self-calibration of the nodes can reach at
    /// best: a tracked phone is not in the plan, its offset stays unknown).
    case oracleNodes = "oracle-nodes"
    /// The nodes' offsets as the fleet's self-calibration fits them after 10 minutes of the nodes
    /// hearing each other (``selfCalibratedModel(plan:seed:radio:minutes:)``).
    case selfCalibrated = "self-calibrated"

    var label: String {
        switch self {
        case .uncalibrated: "uncalibrated"
        case .oracle: "oracle (true offsets)"
        case .oracleNodes: "oracle, nodes only"
        case .selfCalibrated: "self-calibrated, 10 min"
        }
    }
}

/// The path-loss model the fleet's self-calibration fits from 10 minutes of the plan's nodes
/// hearing each other on `seed`'s installation, as live: each node advertises (bluez-sim's radio
/// between the nodes, each node's own transmit and receive offsets drawn as for a device), every
/// other node ranges it with its own table, its report reaches the fleet when the MQTT rate
/// control lets it, and ``FleetCalibration`` averages and fits (`proximity-fleet run --plan`).
func selfCalibratedModel(plan: FloorPlan, seed: UInt64, radio: RadioModel, minutes: Double = 10) -> PathLossModel? {
    let duration = minutes * 60
    let root = SeededGenerator(seed: seed)
    let nodes = plan.nodes.map { (name: $0.name, position: Position($0.position)) }
    var calibration = FleetCalibration(plan: plan)
    // Receiver → its table and rate control; the samples of every transmitter, merged in time.
    var heard: [String: [(t: Double, transmitter: String, rssi: Double)]] = [:]
    for (j, transmitter) in nodes.enumerated() {
        let listeners = nodes.enumerated().filter { $0.offset != j }.map(\.element)
        let samples = receptions(of: transmitter.name, along: Trajectory(fixed: transmitter.position), by: listeners, duration: duration,
                                 radio: radio, installation: seed, realisticLabel: "positions ",
                                 rng: root.derived("self-calibration \(transmitter.name)"))
        for (i, listener) in listeners.enumerated() {
            for s in samples[i] { heard[listener.name, default: []].append((s.t, transmitter.name, s.rssi)) }
        }
    }
    for (receiver, samples) in heard {
        var node = NodeReporter(name: receiver, hearings: true)
        var k = 0
        let ordered = samples.sorted { $0.t < $1.t }
        for second in 1 ... Int(duration) {
            let t = Double(second)
            while k < ordered.count, ordered[k].t <= t {
                node.hear(ordered[k].transmitter, rssi: ordered[k].rssi, at: ordered[k].t, measuredPower: -59)
                k += 1
            }
            for (transmitter, h) in node.hearings(at: t, seconds: true).published {
                calibration.hear(receiver: receiver, transmitter: transmitter, rssi: h.rssi, stated: h.measuredPower,
                                 samples: h.samples, at: t)
            }
        }
    }
    guard calibration.refit(at: duration) || calibration.fit != nil else { return nil }
    return calibration.model
}

/// One estimator as the benchmark runs it.
struct PositionerSpec: Sendable {
    enum Role: String, Sendable {
        case fleet, baseline, reference
    }

    var name: String
    var role: Role
    /// The grid's outside weight, when the estimator is a grid filter (its grid is built for it).
    var outsideWeight: Double?
    /// Makes a device's estimator for a plan, its grid and the offsets' model. `known` is the
    /// model with whatever offsets the condition knows (nil: uncalibrated, the nodes' distances).
    var make: @Sendable (_ plan: FloorPlan, _ grid: PositioningGrid, _ known: PathLossModel?, _ deviceKnown: Bool) -> any Positioner
}

/// The scores of one estimator over every seed and device of a plan, condition and offsets case.
struct PositionsCell: Sendable {
    var score = PositionScore()
    /// Per seed: the median error (for the spread across seeds).
    var seedMedians: [Double] = []
    /// Per seed: how late the walker's positions come (``LatenessScore/bestLag``), seconds.
    var lags: [Double] = []
}

struct PositionsRun {
    var plans: [PositionsPlan]
    var conditions: [RadioCondition]
    var offsets: [PositionsOffsets]
    var seeds: [UInt64]
    var minutes: Double
    var specs: [PositionerSpec]
    /// Seconds of each device's trace not scored (the filters' start).
    var warmup = 30.0
    /// Print every row of these estimators (names) for the first seed (`--dump-positions`).
    var dump: Set<String> = []
    /// Whether the positioning reads the nodes' hearings of each second (as `proximity-fleet`
    /// does from nodes that publish them) or their published peer reports (`--inputs reports`).
    var seconds = true

    /// plan → condition label → offsets → spec name → cell.
    typealias Results = [String: [String: [PositionsOffsets: [String: PositionsCell]]]]

    func evaluate(progress: Bool) -> Results {
        var results: Results = [:]
        for p in plans {
            var grids: [Double: PositioningGrid] = [:]
            for w in Set(specs.map { $0.outsideWeight ?? GridPositioner.Configuration().outsideWeight }) {
                grids[w] = PositioningGrid(plan: p.plan, outsideWeight: w)
            }
            for condition in conditions {
                let radio = condition.model
                let realistic = radio.parameters.realistic
                for seed in seeds {
                    let root = SeededGenerator(seed: seed)
                    for kind in PositionsDeviceKind.allCases {
                        let device = "tag-\(kind.rawValue)"
                        var pathRng = root.derived("positions \(p.name) \(kind.rawValue) path")
                        let duration = minutes * 60
                        let trajectory = p.path(kind: kind, duration: duration, rng: &pathRng)
                        let nodes = p.plan.nodes.map { (name: $0.name, position: Position($0.position)) }
                        let heard = receptions(of: device, along: trajectory, by: nodes, duration: duration, radio: radio,
                                               installation: seed, realisticLabel: "positions \(p.name) ",
                                               rng: root.derived("positions \(p.name) \(kind.rawValue) \(condition.interval)"))
                        var samples: [TraceSample] = []
                        for (i, list) in heard.enumerated() {
                            for s in list { samples.append(TraceSample(time: s.t, node: nodes[i].name, device: device, rssi: s.rssi)) }
                        }
                        let tx = realistic.isOff ? 0 : realistic.deviceOffset(seed: seed, device: device, role: "tx")
                        var rx: [String: Double] = [:]
                        for n in p.plan.nodes {
                            rx[n.name] = realistic.isOff ? 0 : -realistic.deviceOffset(seed: seed, device: n.name, role: "rx")
                        }
                        for mode in offsets {
                            var configuration = PositionReplay.Configuration()
                            configuration.seconds = seconds
                            var known: PathLossModel?
                            var deviceKnown = false
                            switch mode {
                            case .uncalibrated: break
                            case .oracle:
                                configuration.measuredPower += tx
                                known = PathLossModel(exponent: p.plan.pathLossExponent, rxOffsets: rx)
                                deviceKnown = true
                            case .oracleNodes:
                                known = PathLossModel(exponent: p.plan.pathLossExponent, rxOffsets: rx)
                            case .selfCalibrated:
                                guard let model = selfCalibratedModel(plan: p.plan, seed: seed, radio: radio) else { continue }
                                known = model
                            }
                            for spec in specs {
                                let plan = p.plan
                                let grid = grids[spec.outsideWeight ?? GridPositioner.Configuration().outsideWeight]!
                                let rows = PositionReplay.play(samples, plan: plan,
                                                               configuration: configuration) { [known, deviceKnown] _ in
                                    spec.make(plan, grid, known, deviceKnown)
                                }
                                var cell = results[p.name, default: [:]][condition.label(namingSimple: true),
                                                                         default: [:]][mode, default: [:]][spec.name] ?? PositionsCell()
                                var own = PositionScore()
                                var lateness = LatenessScore(maxLag: 10)
                                for row in rows where row.time >= warmup {
                                    let truth = PlanPoint(trajectory.position(at: row.time))
                                    if dump.contains(spec.name), seed == seeds.first {
                                        let e = row.estimate
                                        let room = { (r: Int?) in r.map { plan.rooms[$0].name } ?? "-" }
                                        print("dump \(p.name) \(condition.interval) \(mode.rawValue) \(spec.name) \(row.device) "
                                              + "t=\(format(row.time, 0)) truth \(format(truth.x, 1)),\(format(truth.y, 1)) "
                                              + "\(room(plan.room(x: truth.x, y: truth.y, floor: 0)))"
                                              + " est \(e.map { format($0.position.x, 1) + "," + format($0.position.y, 1) + " ±" + format($0.uncertainty, 1) } ?? "-") \(room(e?.room)) err \(e.map { format($0.position.distance2D(to: truth), 1) } ?? "-")")
                                    }
                                    own.add(device: row.device, estimate: row.estimate, truth: truth, plan: plan)
                                    if kind == .walker, let e = row.estimate {
                                        lateness.add(e.position) { k in PlanPoint(trajectory.position(at: row.time - Double(k))) }
                                    }
                                }
                                cell.score.merge(own)
                                cell.seedMedians.append(own.median)
                                if let lag = lateness.bestLag { cell.lags.append(Double(lag)) }
                                results[p.name, default: [:]][condition.label(namingSimple: true),
                                                              default: [:]][mode, default: [:]][spec.name] = cell
                            }
                        }
                    }
                    if progress {
                        FileHandle.standardError.write(
                            Data("positions: \(p.name) \(condition.label(namingSimple: true)) seed \(seed) done\n".utf8))
                    }
                }
            }
        }
        return results
    }
}

/// The estimators: the fleet's grid filter (with `fleet` as its configuration) and the baselines,
/// with the baselines' parameters as tuned (on seeds 1001+, never the reported ones).
func positionerSpecs(fleet: GridPositioner.Configuration, variants: [(String, GridPositioner.Configuration)], rankSigma: Double,
                     centroidPower: Double) -> [PositionerSpec] {
    func grid(_ c: GridPositioner.Configuration) -> @Sendable (FloorPlan, PositioningGrid, PathLossModel?, Bool) -> any Positioner {
        { plan, grid, known, deviceKnown in
            var c = c
            if deviceKnown { c.deviceSigma = 0.5 }
            return GridPositioner(grid: grid, model: known ?? PathLossModel(exponent: plan.pathLossExponent), configuration: c)
        }
    }
    var specs = [
        PositionerSpec(name: "fleet", role: .fleet, outsideWeight: fleet.outsideWeight, make: grid(fleet)),
        PositionerSpec(name: "espresense", role: .baseline) { plan, _, known, _ in
            MultilaterationPositioner(plan: plan, rankSigma: rankSigma, model: known)
        },
        PositionerSpec(name: "centroid", role: .baseline) { plan, _, known, _ in
            WeightedCentroidPositioner(plan: plan, model: known, power: centroidPower)
        },
        PositionerSpec(name: "nearest", role: .baseline) { plan, _, known, _ in NearestNodePositioner(plan: plan, model: known) },
    ]
    for (name, c) in variants { specs.append(PositionerSpec(name: name, role: .reference, outsideWeight: c.outsideWeight, make: grid(c))) }
    return specs
}

/// `--grid key=value,…`: the grid filter's configuration from the defaults.
func gridConfiguration(_ text: String) throws -> GridPositioner.Configuration {
    var c = GridPositioner.Configuration()
    for part in text.split(separator: ",") {
        let kv = part.split(separator: "=", maxSplits: 1).map(String.init)
        guard kv.count == 2, let v = Double(kv[1]) else { throw PositionsError("--grid wants key=number, not \(part)") }
        switch kv[0] {
        case "sigma": c.sigma = v
        case "device": c.deviceSigma = v
        case "temper": c.temper = v
        case "speed": c.speed = v
        case "recovery": c.recovery = v
        case "move": c.moveShare = v
        case "huber": c.huber = v
        case "outside": c.outsideWeight = v
        case "margin": c.room.margin = v
        case "hold": c.room.hold = v
        case "minimum": c.room.minimum = v
        case "confident": c.room.confident = v
        case "keep": c.room.keep = v
        case "evidence": c.room.evidence = v
        case "smoothing": c.room.smoothing = v
        case "drift": c.drift = v
        case "start": c.startRate = v
        case "stop": c.stopRate = v
        case "drift-time": c.driftTime = v
        case "deadband": c.driftDeadband = v
        default: throw PositionsError("--grid: no parameter \(kv[0])")
        }
    }
    return c
}

struct PositionsError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// The ESPresense-style baseline's rank width and the centroid's power, as tuned on seeds
/// 1001–1004 (`--rank-sigma` 0.15, 0.25, 0.35, 0.5, 1, 2; `--centroid-power` 1, 2, 3, 4; the
/// sum of the uncalibrated medians over the plans and the realistic conditions): see
/// docs/positioning.md, Benchmarks. Its own default, 0.5, is worse on every plan.
let positionsRankSigma = 0.15
let positionsCentroidPower = 2.0

enum PositionsPlanName: String, CaseIterable, ExpressibleByArgument {
    case house, office, corridor

    func plan(exponent: Double) -> PositionsPlan {
        switch self {
        case .house: .house(exponent: exponent)
        case .office: .office(exponent: exponent)
        case .corridor: .corridor(exponent: exponent)
        }
    }
}

/// What the positioning reads from the nodes (`--inputs`).
enum PositionsInputs: String, CaseIterable, ExpressibleByArgument {
    /// Each node's hearings of each second (`<prefix>/hearings`).
    case seconds
    /// The peer reports: the zone filter's level, let through by the rate control.
    case reports
}

enum PositionsOffsetsArgument: String, CaseIterable, ExpressibleByArgument {
    case uncalibrated, oracle, oracleNodes = "oracle-nodes", selfCalibrated = "self-calibrated"

    var offsets: PositionsOffsets {
        switch self {
        case .uncalibrated: .uncalibrated
        case .oracle: .oracle
        case .oracleNodes: .oracleNodes
        case .selfCalibrated: .selfCalibrated
        }
    }
}

extension FleetBench {
    func positionConditions() throws -> [RadioCondition] {
        try positionRadios.map { text in
            let parts = text.split(separator: ":").map(String.init)
            guard parts.count == 2, let kind = RadioCondition.Kind(rawValue: parts[0]), kind != .calibrated,
                  let interval = Double(parts[1]),
                  RadioParameters.advertisingIntervalRange.contains(interval) else {
                throw ValidationError("--position-radio wants simple|realistic:SECONDS (0.02...10.24), not \(text)")
            }
            return RadioCondition(sigma: kind == .simple ? sigma : RadioParameters.realistic.shadowingSigma, exponent: exponent,
                                  interval: interval, loss: loss, measuredPower: measuredPower, kind: kind)
        }
    }

    func runPositions() throws {
        let started = clock()
        let fleet = try gridOverrides.first.map(gridConfiguration) ?? GridPositioner.Configuration()
        let variants = try gridOverrides.dropFirst().map { ("fleet " + $0, try gridConfiguration($0)) }
        var run = PositionsRun(
            plans: plans.map { $0.plan(exponent: planExponent ?? exponent) }, conditions: try positionConditions(),
            offsets: offsets.map(\.offsets), seeds: (0 ..< UInt64(positionSeeds)).map { seedBase + $0 }, minutes: positionMinutes,
            specs: positionerSpecs(fleet: fleet, variants: variants, rankSigma: rankSigma, centroidPower: centroidPower))
        run.dump = Set(dumpPositions)
        run.seconds = inputs == .seconds
        var companionGoals: [PositionsReport.Goal] = []
        if companionSeeds > 0 {
            let specs = run.specs
            let companion = CompanionScenario.evaluate(specs: specs, seeds: (0 ..< UInt64(companionSeeds)).map { seedBase + $0 })
            let (text, goals) = CompanionScenario.render(companion, specs: specs, seeds: companionSeeds)
            print(text)
            companionGoals = goals
        }
        let results = run.evaluate(progress: progress)
        print("Positions, from the nodes' \(inputs == .seconds ? "hearings of each second" : "peer reports"): " +
              "seeds \(run.seeds.first!)–\(run.seeds.last!); simulated path-loss exponent \(format(exponent, 1)), " +
              "the plans' \(format(planExponent ?? exponent, 1)); espresense rank σ \(format(rankSigma, 2)), " +
              "centroid 1/d^\(format(centroidPower, 1))")
        print(PositionsReport.render(run, results))
        print("goals (the fleet uncalibrated; issue 30, item 7, and issue 24, item 7):")
        for g in companionGoals + PositionsReport.goals(run, results) {
            print("  " + (g.met.map { $0 ? "met: " : "MISSED: " } ?? "not run: ") + g.line)
        }
        let cpu = Double(clock() - started) / Double(CLOCKS_PER_SEC)
        print("CPU time \(format(cpu, 1)) s")
    }
}
