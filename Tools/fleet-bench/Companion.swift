import BlueZSim
import Foundation
import ProximityBenchmarking
import ProximityCore

/// ESPresense Companion's published accuracy scenario (its `docs/accuracy.md` and
/// `tests/ESPresense.Companion.Simulation/AccuracyHarness`, scenario `baseline_4node_6x4m`),
/// ported: a 6 × 4 m floor, a 4 m living room and a 2 m bedroom (room bounds inclusive, the first
/// declared wins on the shared wall at x = 4), four nodes in the ceiling corners at 2.4 m, each
/// reading RSSI = −59 − 30·log10(d) (d on the floor, as the harness computes it) plus Gaussian
/// noise of σ 2.5 dB, and one sample in ten a multipath burst of −6 dB. Two tracks: a diagonal
/// walk from (0.5, 0.5) through (3, 2) to (5.5, 3.5) and a walk from (1, 2) across the wall to
/// (5, 2), each waypoint pair cut into 30 steps (61 and 121 points).
///
/// The harness solves each point on its own, one reading per node; the fleet tracks, so the
/// points need a time, and a start: the device stands 10 s at the first point, not scored. Two
/// paces: `1 Hz`, each point a second and one reading per node per
/// second (a tag advertising once a second, walking at about 0.1 m/s); `walking`, the same path at
/// 1 m/s with ten readings per node a second (the points scored are then the seconds). Every
/// estimator reads the same samples through the nodes' own tables and hearings of each second
/// (``PositionReplay``), over `seeds` noise draws. The harness's published figures are printed
/// beside them: its NelderMead locator, median 0.60 m, p95 1.33 m and 1.61 m, room mis-id 6.6 %
/// and 22.3 %.
struct CompanionScenario {
    struct Track {
        var name: String
        var points: [PlanPoint]
        /// The harness's published figures for it (NelderMead): median, p95, room mis-id.
        var published: (median: Double, p95: Double, misid: Double)

        /// The harness's points: each segment cut into 30 steps, the last point included.
        var expanded: [PlanPoint] {
            var out: [PlanPoint] = []
            for (a, b) in zip(points, points.dropFirst()) {
                for s in 0 ..< 30 {
                    let f = Double(s) / 30
                    out.append(PlanPoint(x: a.x + (b.x - a.x) * f, y: a.y + (b.y - a.y) * f, z: PositionsPlan.deviceHeight))
                }
            }
            out.append(PlanPoint(x: points.last!.x, y: points.last!.y, z: PositionsPlan.deviceHeight))
            return out
        }
    }

    enum Pace: String, CaseIterable {
        case hertz = "1 Hz"
        case walking = "walking 1 m/s"
    }

    static let tracks = [
        Track(name: "diagonal_walk", points: [PlanPoint(x: 0.5, y: 0.5), PlanPoint(x: 3, y: 2), PlanPoint(x: 5.5, y: 3.5)],
              published: (0.60, 1.33, 0.066)),
        Track(name: "living_to_bedroom", points: [PlanPoint(x: 1, y: 2), PlanPoint(x: 3, y: 2), PlanPoint(x: 3.9, y: 2),
                                                  PlanPoint(x: 4.1, y: 2), PlanPoint(x: 5, y: 2)],
              published: (0.60, 1.61, 0.223)),
    ]

    static let exponent = 3.0
    static let measuredPower = -59.0
    static let sigma = 2.5, burstShare = 0.1, burst = 6.0
    /// Seconds the device stands at its track's first point before it goes, not scored: every
    /// estimator's start (the trackers' belief begins flat; the harness's solver has no start).
    static let settle = 10.0

    static let plan = FloorPlan(
        nodes: [PositionsPlan.node("node-living-nw", 0.2, 3.8, 2.4), PositionsPlan.node("node-living-sw", 0.2, 0.2, 2.4),
                PositionsPlan.node("node-bedroom-ne", 5.8, 3.8, 2.4), PositionsPlan.node("node-bedroom-se", 5.8, 0.2, 2.4)],
        rooms: [PositionsPlan.rect("living", 0, 0, 4, 4), PositionsPlan.rect("bedroom", 4, 0, 6, 4)],
        pathLossExponent: exponent)

    /// The harness's room of a point: bounds inclusive, the first declared room wins.
    static func room(_ p: PlanPoint) -> Int? {
        if p.x >= 0, p.x <= 4, p.y >= 0, p.y <= 4 { return 0 }
        if p.x >= 4, p.x <= 6, p.y >= 0, p.y <= 4 { return 1 }
        return nil
    }

    /// The samples of one track at one pace, and the truth at each whole second.
    static func samples(_ track: Track, pace: Pace, rng: inout SeededGenerator) -> (samples: [TraceSample], truth: (Double) -> PlanPoint?) {
        let points = track.expanded
        var samples: [TraceSample] = []
        // The time of each point, seconds from the start: the device stands ``settle`` seconds at
        // the first point (the trackers' start, not scored), then goes.
        var times: [Double] = [0]
        switch pace {
        case .hertz:
            times = points.indices.map { Double($0) + 0.5 + settle }
        case .walking:
            var t = 0.5 + settle
            times = [t]
            for (a, b) in zip(points, points.dropFirst()) {
                t += a.distance2D(to: b) / 1.0
                times.append(t)
            }
        }
        func position(at t: Double) -> PlanPoint? {
            guard let first = times.first, let last = times.last, t >= 0, t <= last + 0.5 else { return nil }
            guard let i = times.firstIndex(where: { $0 >= t }), i > 0 else { return t <= first ? points.first : points.last }
            let f = (t - times[i - 1]) / max(1e-9, times[i] - times[i - 1])
            let a = points[i - 1], b = points[i]
            return PlanPoint(x: a.x + (b.x - a.x) * f, y: a.y + (b.y - a.y) * f, z: a.z)
        }
        func reading(_ p: PlanPoint, _ node: FloorPlan.Node) -> Double {
            let d = max(0.1, ((p.x - node.position.x) * (p.x - node.position.x)
                              + (p.y - node.position.y) * (p.y - node.position.y)).squareRoot())
            var rssi = measuredPower - 10 * exponent * log10(d) + rng.gaussian(mean: 0, sigma: sigma)
            if rng.uniform(0 ... 1) < burstShare { rssi -= burst }
            return rssi
        }
        switch pace {
        case .hertz:
            for s in 0 ..< Int(settle) {
                for node in plan.nodes {
                    samples.append(TraceSample(time: Double(s) + 0.5, node: node.name, device: "tag", rssi: reading(points[0], node)))
                }
            }
            for (i, p) in points.enumerated() {
                for node in plan.nodes {
                    samples.append(TraceSample(time: times[i], node: node.name, device: "tag", rssi: reading(p, node)))
                }
            }
        case .walking:
            var t = 0.05
            while t <= times.last! {
                if let p = position(at: t) {
                    for node in plan.nodes { samples.append(TraceSample(time: t, node: node.name, device: "tag", rssi: reading(p, node))) }
                }
                t += 0.1
            }
        }
        return (samples, position)
    }

    /// Every estimator's scores on each track and pace, over `seeds` noise draws.
    static func evaluate(specs: [PositionerSpec], seeds: [UInt64]) -> [String: [Pace: [String: (score: PositionScore, misid: Double)]]] {
        var out: [String: [Pace: [String: (score: PositionScore, misid: Double)]]] = [:]
        let grid = PositioningGrid(plan: plan, outsideWeight: GridPositioner.Configuration().outsideWeight)
        let known = PathLossModel(plan: plan)
        for track in tracks {
            for pace in Pace.allCases {
                for spec in specs {
                    var score = PositionScore()
                    var misid = 0, rooms = 0
                    for seed in seeds {
                        var rng = SeededGenerator(seed: seed).derived("companion \(track.name) \(pace.rawValue)")
                        let (samples, truth) = Self.samples(track, pace: pace, rng: &rng)
                        var configuration = PositionReplay.Configuration()
                        configuration.measuredPower = measuredPower
                        // The harness knows every node's calibration (-59 dBm at 1 m, exponent 3).
                        let rows = PositionReplay.play(samples, plan: plan, configuration: configuration) { _ in
                            spec.make(plan, grid, known, false)
                        }
                        var own = PositionScore()
                        for row in rows where row.time - 0.5 >= settle {
                            guard let p = truth(row.time - 0.5), row.estimate != nil else { continue }
                            own.add(device: "tag", estimate: row.estimate, truth: p, plan: plan)
                            if let room = Self.room(p) {
                                rooms += 1
                                if row.estimate?.room != room { misid += 1 }
                            }
                        }
                        score.merge(own)
                    }
                    out[track.name, default: [:]][pace, default: [:]][spec.name] =
                        (score, rooms == 0 ? .nan : Double(misid) / Double(rooms))
                }
            }
        }
        return out
    }

    static func render(_ results: [String: [Pace: [String: (score: PositionScore, misid: Double)]]], specs: [PositionerSpec],
                       seeds: Int) -> (String, [PositionsReport.Goal]) {
        var out = "\nESPresense Companion's accuracy scenario (baseline_4node_6x4m: 6 × 4 m, two rooms, four ceiling-corner nodes; " +
            "σ 2.5 dB, 10 % bursts of −6 dB), \(seeds) noise draws\n"
        out += Table.padRight("track", 19) + Table.padRight("pace", 15) + Table.padRight("estimator", 24) + Table.pad("median m", 9)
            + Table.pad("p95 m", 7)
            + Table.pad("mis-id", 8) + Table.pad("wrong", 7) + Table.pad("unknown", 8) + "\n"
        var goals: [PositionsReport.Goal] = []
        for track in tracks {
            out += Table.padRight(track.name, 19) + Table.padRight("per point", 15) + Table.padRight("Companion (published)", 24)
                + Table.pad(format(track.published.median, 2), 9) + Table.pad(format(track.published.p95, 2), 7)
                + Table.pad(format(track.published.misid * 100, 1) + "%", 8) + "\n"
            for pace in Pace.allCases {
                for spec in specs {
                    guard let r = results[track.name]?[pace]?[spec.name] else { continue }
                    let s = r.score
                    out += Table.padRight(track.name, 19) + Table.padRight(pace.rawValue, 15) + Table.padRight(spec.name, 24)
                        + Table.pad(format(s.median, 2), 9) + Table.pad(format(s.p95, 2), 7) + Table.pad(format(r.misid * 100, 1) + "%", 8)
                        + Table.pad(format(s.wrongRoom * 100, 1) + "%", 7) + Table.pad(format(s.unknownRoom * 100, 1) + "%", 8) + "\n"
                }
                if let fleet = results[track.name]?[pace]?["fleet"] {
                    let p = track.published
                    goals.append(PositionsReport.Goal(
                        met: fleet.score.median < p.median && fleet.score.p95 < p.p95 && fleet.misid < p.misid,
                        line: "Companion \(track.name), \(pace.rawValue): median \(format(fleet.score.median, 2)) m " +
                            "(< \(format(p.median, 2))), p95 \(format(fleet.score.p95, 2)) m (< \(format(p.p95, 2))), " +
                            "room mis-id \(format(fleet.misid * 100, 1)) % (< \(format(p.misid * 100, 1)) %)"))
                }
            }
        }
        out += "mis-id: seconds not in the true room, unknown included (the harness's measure); wrong: in the other room; " +
            "unknown: in none.\n"
        return (out, goals)
    }
}
