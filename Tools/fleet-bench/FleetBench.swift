import ArgumentParser
import BlueZSim
import Foundation
import ProximityBenchmarking
import ProximityCore

/// `fleet-bench`: room bouncing and switching lag of the fleet's room decision (`RoomDecider`)
/// against room-assistant's nearest-in-range and Bermuda's rule, on the same simulated report
/// streams. See docs/fleet.md.
@main
struct FleetBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet-bench",
        abstract: "Room decision benchmark: bounces while standing still and lag after a move, for the fleet's rule and the baselines."
    )

    @Option(help: "Seeds per condition.")
    var seeds = 24

    @Option(help: "The first seed. Reports use seeds from 1; the fleet's defaults were tuned on seeds 1001–1024.")
    var seedBase: UInt64 = 1

    @Option(name: .customLong("radio"), help: ArgumentHelp(
        "Which radio model: simple (--sigma, --loss), realistic (bluez-sim's realistic preset, its own σ and losses), " +
            "calibrated (realistic, each node calibrated for the device at 1 m). Repeat for several.",
        valueName: "model"))
    var radioKinds: [RadioCondition.Kind] = [.simple, .realistic]

    @Option(help: "Shadowing σ of the simple model, dB.")
    var sigma = 6.0

    @Option(help: "Packet loss probability of the simple model.")
    var loss = 0.1

    @Option(help: "Path-loss exponent of the simulated radio.")
    var exponent = 2.0

    @Option(help: "The device's advertising interval in seconds. Repeat for several.")
    var interval: [Double] = [0.1, 1.0]

    @Option(help: "Measured power (RSSI at 1 m) of the device, dBm.")
    var measuredPower = -59.0

    @Option(help: "Scored minutes of standing still per point, layout and seed (after a 1 min warm-up).")
    var standMinutes = 60.0

    @Option(help: "Scored minutes out in the street (13–16 m from the nearest boxes) per scenario, layout and seed: after standing in a room, and from nowhere; 0 for none.")
    var streetMinutes = 10.0

    @Option(name: .customLong("report-interval"), help: "The nodes' heartbeat, seconds: a device's report goes out at most once per this, unless it moved (the node's mqtt.report-interval, 5 by default).")
    var reportInterval = ReportThrottle.Configuration().heartbeat

    @Option(name: .customLong("mqtt-room"), help: "Add Home Assistant's mqtt_room sensor with this timeout, seconds (its default: 5), as two reference rows: on the nodes' compatibility stream (2 s heartbeat) and on their native reports; repeat for several.")
    var mqttRoom: [Double] = []

    @Option(help: "Layouts: two (A, B 8 m apart), line (A, B, C 8 m apart), triangle (8 m sides). Repeat for several.")
    var layout: [LayoutName] = LayoutName.allCases

    @Flag(help: "Also print the bounces per hour of every layout.")
    var byLayout = false

    @Flag(help: "Print the results as one JSON object.")
    var json = false

    @Option(name: .customLong("fleet"), help: ArgumentHelp(
        "The fleet rule's parameters, key=value[,key=value…]: margin, evidence, stale, away, settle, home, reports, window. " +
            "Repeat for variants (shown as reference rows); the first replaces the defaults. For tuning.",
        visibility: .hidden))
    var fleetOverrides: [String] = []

    @Option(help: ArgumentHelp(
        "Print, for every stand and street trace, the home statistics of a W-second median (for tuning the home distance).",
        visibility: .hidden))
    var dumpHome: Double?

    @Flag(help: ArgumentHelp("Print every bounce of the fleet's rule with the reports around it.", visibility: .hidden))
    var dumpBounces = false

    @Flag(help: "Run the positions benchmark instead (docs/positioning.md, Benchmarks): the fleet's grid filter against ESPresense-style multilateration, the weighted centroid and the nearest node on three floor plans, uncalibrated and with the true offsets.")
    var positions = false

    @Option(help: "Positions: seeds (from --seed-base). Reports use seeds from 1; the estimators were tuned on seeds 1001 and up.")
    var positionSeeds = 12

    @Option(help: "Positions: minutes of each device's trace (a walker and a sitter per plan and seed).")
    var positionMinutes = 10.0

    @Option(name: .customLong("plan"), help: "Positions: floor plans (house, office, corridor). Repeat for several.")
    var plans: [PositionsPlanName] = PositionsPlanName.allCases

    @Option(name: .customLong("position-radio"), help: ArgumentHelp(
        "Positions: radio conditions as model:interval (realistic:0.1, realistic:1, simple:0.1 by default; " +
            "simple uses --sigma and --loss). Repeat for several.",
        valueName: "model:seconds"))
    var positionRadios: [String] = ["realistic:0.1", "realistic:1", "simple:0.1"]

    @Option(help:
        "Positions: what the positioning knows of the offsets (uncalibrated, oracle, oracle-nodes, self-calibrated). Repeat for several.")
    var offsets: [PositionsOffsetsArgument] = [.uncalibrated, .oracle, .oracleNodes, .selfCalibrated]

    @Option(help: "Positions: noise draws of ESPresense Companion's accuracy scenario (0: not run).")
    var companionSeeds = 40

    @Option(help: "Positions: what the positioning reads from the nodes: seconds (their hearings of each second, as proximity-fleet does) or reports (their peer reports).")
    var inputs: PositionsInputs = .seconds

    @Option(help: "Positions: the path-loss exponent the floor plan states (default: the simulated radio's, --exponent).")
    var planExponent: Double?

    @Option(name: .customLong("grid"), help: ArgumentHelp(
        "Positions: the grid filter's parameters, key=value[,key=value…]: sigma, device, temper, speed, move, huber, recovery, " +
            "outside, margin, evidence, hold, minimum, confident, keep, smoothing. Repeat for variants (reference rows); " +
            "the first replaces the defaults. For tuning.",
        visibility: .hidden))
    var gridOverrides: [String] = []

    @Option(help: ArgumentHelp(
        "Positions: the ESPresense-style baseline's weight by rank (its width as a share of the node count; tuned on seeds 1001+).",
        visibility: .hidden))
    var rankSigma = positionsRankSigma

    @Option(help: ArgumentHelp("Positions: the weighted centroid's power of 1/d (tuned on seeds 1001+).", visibility: .hidden))
    var centroidPower = positionsCentroidPower

    @Option(help: ArgumentHelp(
        "Positions: print every estimate of this estimator (fleet, espresense, …) on the first seed. Repeat for several.",
        visibility: .hidden))
    var dumpPositions: [String] = []

    @Flag(help: ArgumentHelp("Positions: progress on standard error.", visibility: .hidden))
    var progress = false

    enum LayoutName: String, CaseIterable, ExpressibleByArgument {
        case two, line, triangle
        var layout: Layout {
            switch self {
            case .two: .two
            case .line: .line
            case .triangle: .triangle
            }
        }
    }

    func validate() throws {
        guard seeds > 0 else { throw ValidationError("--seeds must be positive") }
        guard companionSeeds >= 0 else { throw ValidationError("--companion-seeds must be 0 (not run) or more") }
        guard sigma >= 0, sigma.isFinite else { throw ValidationError("--sigma must be 0 or more") }
        guard exponent > 0 else { throw ValidationError("--exponent must be positive") }
        guard interval.allSatisfy({ RadioParameters.advertisingIntervalRange.contains($0) }) else {
            throw ValidationError("--interval must be in 0.02...10.24 s")
        }
        guard (0..<1).contains(loss) else { throw ValidationError("--loss must be in 0..<1") }
        guard standMinutes > 0 else { throw ValidationError("--stand-minutes must be positive") }
        guard streetMinutes >= 0, streetMinutes.isFinite else { throw ValidationError("--street-minutes must be 0 or more") }
        guard reportInterval.isFinite, ReportThrottle.Configuration.heartbeatRange.contains(reportInterval) else {
            throw ValidationError("--report-interval must be in 0...3600 s")
        }
        guard mqttRoom.allSatisfy({ $0.isFinite && $0 >= 0 }) else {
            throw ValidationError("--mqtt-room must be a number of seconds, 0 or more")
        }
        for o in fleetOverrides { _ = try Self.fleetConfiguration(o) }
        for o in gridOverrides { _ = try gridConfiguration(o) }
        _ = try positionConditions()
        guard positionSeeds > 0, positionMinutes >= 1 else {
            throw ValidationError("--position-seeds must be positive and --position-minutes 1 or more")
        }
    }

    static func fleetConfiguration(_ text: String) throws -> RoomDecider.Configuration {
        var c = RoomDecider.Configuration()
        for part in text.split(separator: ",") {
            let kv = part.split(separator: "=", maxSplits: 1).map(String.init)
            guard kv.count == 2, let v = Double(kv[1]) else { throw ValidationError("--fleet wants key=number, not \(part)") }
            switch kv[0] {
            case "margin", "k": c.margin = v
            case "evidence", "h": c.evidence = v
            case "stale": c.staleAfter = v
            case "away": c.awayAfter = v
            case "settle": c.settle = v
            case "home": c.homeDistance = v
            case "reports": c.homeReports = Int(v)
            case "window": c.homeWindow = v
            default: throw ValidationError("--fleet: no parameter \(kv[0])")
            }
        }
        if let problem = c.problem { throw ValidationError("--fleet \(text): \(problem)") }
        return c
    }

    var specs: [RuleSpec] {
        let variants = fleetOverrides.compactMap { try? Self.fleetConfiguration($0) }
        let fleet = variants.first ?? RoomDecider.Configuration()
        var specs = [
            RuleSpec(name: "fleet", role: .fleet) { RoomDecider(configuration: fleet) },
            RuleSpec(name: "nearest", role: .baseline) { NearestInRange() },
            RuleSpec(name: "bermuda", role: .baseline) { BermudaRule() },
            // Bermuda's area rule on the reported distances alone, without its own smoothing.
            RuleSpec(name: "bermuda, no smoothing", role: .reference) { BermudaRule(smoothingSamples: 1, name: "bermuda, no smoothing") },
        ]
        for timeout in mqttRoom {
            // On what the nodes publish for it now (the compatibility heartbeat), and on the native
            // reports alone, as before it had one.
            specs.append(RuleSpec(name: "mqtt_room, timeout \(format(timeout, 0)) s", role: .reference, compatibility: true) {
                MQTTRoomSensor(timeout: timeout)
            })
            specs.append(RuleSpec(name: "mqtt_room, timeout \(format(timeout, 0)) s, native", role: .reference) {
                MQTTRoomSensor(timeout: timeout)
            })
        }
        for c in variants.dropFirst() {
            let d = RoomDecider.Configuration()
            var name = "fleet"
            if c.margin != d.margin || c.evidence != d.evidence { name += " k=\(format(c.margin, 2)) h=\(format(c.evidence, 2))" }
            if c.staleAfter != d.staleAfter { name += " s=\(format(c.staleAfter, 0))" }
            if c.settle != d.settle { name += " w=\(format(c.settle, 0))" }
            if c.awayAfter != d.awayAfter { name += " away=\(format(c.awayAfter, 0))" }
            if c.homeDistance != d.homeDistance { name += " home=\(format(c.homeDistance, 0))" }
            if c.homeReports != d.homeReports || c.homeWindow != d.homeWindow { name += " \(c.homeReports)/\(format(c.homeWindow, 0))s" }
            specs.append(RuleSpec(name: name, role: .reference) { RoomDecider(configuration: c) })
        }
        return specs
    }

    func run() throws {
        if positions {
            try runPositions()
            return
        }
        let started = clock()
        let seedList = (0..<UInt64(seeds)).map { seedBase + $0 }
        let layouts = layout.map(\.layout)
        let specs = specs
        let fleet = fleetOverrides.first.flatMap { try? Self.fleetConfiguration($0) } ?? RoomDecider.Configuration()
        let streetBound = fleet.awayAfter + streetGraceBeyondAway
        var results: [ConditionResult] = []
        var conditions: [RadioCondition] = []
        for kind in radioKinds {
            for interval in interval {
                conditions.append(RadioCondition(sigma: kind == .simple ? sigma : RadioParameters.realistic.shadowingSigma,
                                                 exponent: exponent, interval: interval, loss: loss, measuredPower: measuredPower,
                                                 kind: kind))
            }
        }
        for condition in conditions {
            let (tallies, reports, ranged) = evaluate(condition: condition, seeds: seedList, layouts: layouts, specs: specs,
                                                      standScored: standMinutes * 60, streetScored: streetMinutes * 60,
                                                      streetBound: streetBound,
                                                      throttle: ReportThrottle.Configuration(heartbeat: reportInterval),
                                                      dumpBounces: dumpBounces, dumpHome: dumpHome)
            let summaries = zip(specs, tallies).map { Summary(spec: $0, tally: $1, layouts: layouts, streetBound: streetBound) }
            let result = ConditionResult(
                condition: condition, seeds: seedList, layouts: layouts.map(\.name),
                standHoursPerPoint: standMinutes / 60 * Double(seeds),
                reportsPerRangedSecond: ranged > 0 ? Double(reports) / Double(ranged) : 0,
                fleetConfiguration: FleetConfigurationJSON(fleet), summaries: summaries, goals: Goals(summaries),
                streetGoal: StreetGoal(summaries, bound: streetBound))
            results.append(result)
            if !json {
                print(Table.render(result))
                if byLayout { print(Table.renderByLayout(result)) }
            }
        }
        if json {
            try printJSON(results)
        } else {
            print("goals (the fleet's rule with its defaults: no bounce at 10/25/40 %; fewer bounces at the midpoints than every " +
                  "baseline; median lag over all moves no slower than Bermuda's):")
            for r in results {
                print("  \(Table.padRight(r.condition.label(namingSimple: true), 46)) "
                      + (r.goals.map { ($0.met ? "MET: " : "NOT MET: ") + $0.line } ?? "n/a"))
            }
            if results.contains(where: { $0.streetGoal != nil }) {
                print("street goal (the fleet's rule: a device 13–16 m from the nearest boxes never goes into a room, and is not_home " +
                      "within the away time + \(format(streetGraceBeyondAway, 0)) s of reaching the street, in every trace):")
                for r in results {
                    print("  \(Table.padRight(r.condition.label(namingSimple: true), 46)) "
                          + (r.streetGoal.map { ($0.met ? "MET: " : "NOT MET: ") + $0.line } ?? "n/a"))
                }
            }
            let cpu = Double(clock() - started) / Double(CLOCKS_PER_SEC)
            print("CPU time \(format(cpu, 1)) s")
        }
    }
}

/// `--radio`: every model of the shared ``RadioCondition``, `calibrated` included.
extension RadioCondition.Kind: ExpressibleByArgument {}
