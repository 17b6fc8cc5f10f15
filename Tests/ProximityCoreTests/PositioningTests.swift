import Foundation
@testable import ProximityCore
import Testing

/// The positioning's pieces on a small house: four nodes in the corners of a 10 × 8 m floor with
/// four rooms, RSSI made with the path-loss model (noise-free or seeded), time passed in.
@Suite struct PositioningTests {
    static let plan = FloorPlan(
        nodes: [
            .init(name: "a", position: PlanPoint(x: 0.5, y: 0.5, z: 2)), .init(name: "b", position: PlanPoint(x: 9.5, y: 0.5, z: 2)),
            .init(name: "c", position: PlanPoint(x: 9.5, y: 7.5, z: 2)), .init(name: "d", position: PlanPoint(x: 0.5, y: 7.5, z: 2)),
        ],
        rooms: [
            .init(name: "kitchen", floor: 0, polygon: [.init(x: 0, y: 0), .init(x: 5, y: 0), .init(x: 5, y: 4), .init(x: 0, y: 4)]),
            .init(name: "hall", floor: 0, polygon: [.init(x: 5, y: 0), .init(x: 10, y: 0), .init(x: 10, y: 4), .init(x: 5, y: 4)]),
            .init(name: "study", floor: 0, polygon: [.init(x: 5, y: 4), .init(x: 10, y: 4), .init(x: 10, y: 8), .init(x: 5, y: 8)]),
            .init(name: "living", floor: 0, polygon: [.init(x: 0, y: 4), .init(x: 5, y: 4), .init(x: 5, y: 8), .init(x: 0, y: 8)]),
        ])

    /// What each node hears from a device at `p` whose transmitter is `offset` dB off, with the
    /// model's exponent; `noise` dB of seeded Gaussian noise per node.
    static func hearings(at p: PlanPoint, offset: Double = 0, noise: Double = 0, seed: inout UInt64, t: Double,
                         exponent: Double = FloorPlan.defaultPathLossExponent) -> [NodeHearing] {
        plan.nodes.map { node in
            let d = max(PathLossModel.minimumDistance, node.position.distance(to: p))
            let rssi = -59 + offset - 10 * exponent * log10(d) + noise * gaussian(&seed)
            return NodeHearing(node: node.name, rssi: rssi, spread: 2, samples: 10, measuredPower: -59,
                               distance: pow(10, (-59 - rssi) / 20), time: t)
        }
    }

    static func gaussian(_ seed: inout UInt64) -> Double {
        func uniform() -> Double {
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            return (Double(seed >> 11) + 0.5) / Double(1 << 53)
        }
        return (-2 * log(uniform())).squareRoot() * cos(2 * .pi * uniform())
    }

    @Test("rooms: a point is in the polygon holding it, the smallest of nested ones; the plan's problems")
    func rooms() {
        #expect(Self.plan.room(x: 1, y: 1, floor: 0).map { Self.plan.rooms[$0].name } == "kitchen")
        #expect(Self.plan.room(x: 7, y: 6, floor: 0).map { Self.plan.rooms[$0].name } == "study")
        #expect(Self.plan.room(x: 12, y: 6, floor: 0) == nil)
        var nested = Self.plan
        nested.rooms.append(.init(name: "pantry", floor: 0, polygon: [.init(x: 0, y: 0), .init(x: 1.5, y: 0), .init(x: 1.5, y: 1.5), .init(x: 0, y: 1.5)]))
        #expect(nested.room(x: 1, y: 1, floor: 0).map { nested.rooms[$0].name } == "pantry")
        #expect(Self.plan.problems.isEmpty)
        var bad = Self.plan
        bad.rooms.append(.init(name: "hall", floor: 0, polygon: [.init(x: 0, y: 0), .init(x: 1, y: 1)]))
        bad.floors = [.init(name: "ground", z: 0 ... 3), .init(name: "first", z: 2.5 ... 6)]
        #expect(bad.problems == ["room \"hall\" is given twice", "room \"hall\" has 2 corners; at least 3",
                                 "floors \"ground\" and \"first\" overlap in height"])
    }

    @Test("Nelder–Mead finds the minimum of a shifted bowl and of Rosenbrock's valley")
    func nelderMead() {
        let bowl = NelderMead.minimize({ x in pow(x[0] - 3, 2) + 2 * pow(x[1] + 1, 2) }, from: [0, 0], step: [1, 1], tolerance: 1e-12, maxIterations: 1000)
        #expect(abs(bowl[0] - 3) < 1e-3 && abs(bowl[1] + 1) < 1e-3, "\(bowl)")
        let valley = NelderMead.minimize({ x in pow(1 - x[0], 2) + 100 * pow(x[1] - x[0] * x[0], 2) }, from: [-1, 1], step: [0.5, 0.5],
                                         tolerance: 1e-14, maxIterations: 5000)
        #expect(abs(valley[0] - 1) < 1e-2 && abs(valley[1] - 1) < 1e-2, "\(valley)")
    }

    @Test("noise-free RSSI from a device 8 dB louder than it says: the grid filter lands on it (the offset cancels)")
    func deviceOffsetCancels() throws {
        let grid = PositioningGrid(plan: Self.plan, outsideWeight: 0.2)
        let truth = PlanPoint(x: 3, y: 2.5, z: 1)
        var seed: UInt64 = 1
        var fleet = GridPositioner(grid: grid, model: PathLossModel())
        var estimate: PositionEstimate?
        for t in 0 ..< 10 {
            estimate = fleet.estimate(Self.hearings(at: truth, offset: 8, seed: &seed, t: Double(t)), at: Double(t))
        }
        let e = try #require(estimate)
        #expect(e.position.distance2D(to: truth) < 0.6, "\(e)")
        #expect(e.room.map { Self.plan.rooms[$0].name } == "kitchen")
        // The spread says what the model's 4.5 dB of static shadowing allows, not the noise-free truth.
        #expect(e.uncertainty > 0.3 && e.uncertainty < 3, "\(e.uncertainty)")
        // Nobody hears it: no estimate.
        #expect(fleet.estimate([], at: 11) == nil)
    }

    @Test("with 5 dB of noise on a walk through the house (seeded), the grid filter beats multilateration by a fifth, is within a tenth of the weighted centroid, and is at most 3 s late")
    func noisyWalk() {
        let grid = PositioningGrid(plan: Self.plan, outsideWeight: 0.2)
        var errors: [String: [Double]] = [:]
        var lateness = LatenessScore(maxLag: 10)
        for run in 0 ..< 6 {
            var seed = UInt64(100 + run)
            let offset = 6 * Self.gaussian(&seed)
            var positioners: [any Positioner] = [GridPositioner(grid: grid, model: PathLossModel()),
                                                 MultilaterationPositioner(plan: Self.plan, model: PathLossModel()),
                                                 WeightedCentroidPositioner(plan: Self.plan, model: PathLossModel())]
            for t in 0 ..< 60 {
                // Around the house at 0.3 m/s.
                func truth(_ t: Int) -> PlanPoint {
                    let s = Double(t) * 0.3
                    return s < 7 ? PlanPoint(x: 1.5 + s, y: 2, z: 1) : PlanPoint(x: 8.5, y: min(6.5, 2 + (s - 7)), z: 1)
                }
                let h = Self.hearings(at: truth(t), offset: offset, noise: 5, seed: &seed, t: Double(t))
                for i in positioners.indices {
                    if let e = positioners[i].estimate(h, at: Double(t)), t >= 10 {
                        errors[positioners[i].name, default: []].append(e.position.distance2D(to: truth(t)))
                        if i == 0 { lateness.add(e.position) { k in truth(t - k) } }
                    }
                }
            }
        }
        func median(_ a: [Double]) -> Double { a.sorted()[a.count / 2] }
        let fleet = median(errors["fleet"]!), ml = median(errors["espresense"]!), centroid = median(errors["centroid"]!)
        print("positioning walk: median error fleet \(fleet) m, espresense \(ml) m, centroid \(centroid) m")
        #expect(fleet < 0.8 * ml && fleet < 1.1 * centroid, "fleet \(fleet), espresense \(ml), centroid \(centroid)")
        #expect((lateness.bestLag ?? 99) <= 3, "the fleet's positions fit the truth best \(lateness.bestLag ?? -1) s before")
    }

    @Test("room choice: a lead within the margin, or one that comes and goes, keeps the room; a clear lead moves it once its evidence is in; only the belief inside rooms votes; a room that loses its hold gives way to none, not to a room short of confidence")
    func hysteresis() {
        var rooms = RoomHysteresis()
        var c = RoomHysteresis.Configuration()
        c.margin = 0.2
        c.evidence = 0.8
        c.hold = 2
        c.confident = 0.6
        c.keep = 0.3
        #expect(rooms.update(mass: [0.4, 0.3], at: 0, configuration: c) == nil)   // 57 % of the inside: not confident
        #expect(rooms.update(mass: [0.3, 0.1], at: 1, configuration: c) == 0)     // 75 % of the inside (60 % outside every room)
        #expect(rooms.update(mass: [0.4, 0.5], at: 2, configuration: c) == 0)     // lead 0.11 < margin
        #expect(rooms.update(mass: [0.1, 0.9], at: 3, configuration: c) == 0)     // lead 0.8: 0.6 of evidence
        #expect(rooms.update(mass: [0.6, 0.4], at: 4, configuration: c) == 0)     // gone again: evidence back to 0.2
        #expect(rooms.update(mass: [0.6, 0.4], at: 5, configuration: c) == 0)     // and to none
        #expect(rooms.update(mass: [0.1, 0.9], at: 6, configuration: c) == 0)     // 0.6
        #expect(rooms.update(mass: [0.1, 0.9], at: 7, configuration: c) == 1)     // 1.2 ≥ 0.8: moved
        #expect(rooms.update(mass: [0.5, 0.3, 0.2], at: 8, configuration: c) == 1)  // a third room: none confident; 0.3 holds
        #expect(rooms.update(mass: [0.5, 0.2, 0.3], at: 9, configuration: c) == 1)  // 0.2 < keep: weak since 9
        #expect(rooms.update(mass: [0.5, 0.2, 0.3], at: 10, configuration: c) == 1)
        #expect(rooms.update(mass: [0.5, 0.2, 0.3], at: 11, configuration: c) == nil)  // weak for 2 s and room 0 at 50 %: unknown
        #expect(rooms.update(mass: [0.7, 0.2, 0.1], at: 12, configuration: c) == 0)   // from none, the first confident room at once
        #expect(rooms.update(mass: [0.01, 0.01, 0.01], at: 13, configuration: c) == 0)  // below the minimum inside rooms: not yet held
        #expect(rooms.update(mass: [0.01, 0.01, 0.01], at: 15, configuration: c) == nil)
        // A device that stands (a tenth of its belief walking) gathers evidence and weakness at a
        // tenth of the pace: a clear lead (0.6 beyond the margin) for 8 s gathers 0.48 and does not
        // move it; one second walking adds 0.6, and it moves.
        #expect(rooms.update(mass: [0.9, 0.1], at: 20, configuration: c) == 0)
        for t in 21 ... 28 { #expect(rooms.update(mass: [0.1, 0.9], at: Double(t), configuration: c, walking: 0.1) == 0) }
        #expect(rooms.update(mass: [0.1, 0.9], at: 29, configuration: c, walking: 1) == 1)
    }
}

/// The replay: each node's own ranging and rate control, then the positioning, once a second.
/// How late estimates are, against the truth a few seconds before.
@Suite struct LatenessScoreTests {
    @Test("estimates 4 s behind a walk at 1 m/s are closest to the truth 4 s before (0 m there, 4 m at the same moment); a device standing still is 0 s late")
    func lag() {
        var walk = LatenessScore()
        for t in 20 ... 120 {
            walk.add(PlanPoint(x: Double(t - 4), y: 0, z: 1)) { PlanPoint(x: Double(t - $0), y: 0, z: 1) }
        }
        #expect(walk.bestLag == 4 && walk.median(atLag: 4) == 0 && walk.median(atLag: 0) == 4)
        var still = LatenessScore()
        for t in 0 ... 60 { still.add(PlanPoint(x: 1, y: 2, z: 1)) { _ in PlanPoint(x: 1.5, y: 2, z: 1) }; _ = t }
        #expect(still.bestLag == 0 && abs(still.median(atLag: 0) - 0.5) < 1e-9)
        #expect(LatenessScore().bestLag == nil)
    }
}

@Suite struct PositionReplayTests {
    /// A device standing in the kitchen for 40 s, then walking to the study and standing there;
    /// each node samples it 5 times a second with 4 dB of noise, its transmitter 4 dB off.
    static func trace(seed: UInt64) -> [TraceSample] {
        var seed = seed
        var samples: [TraceSample] = []
        for tenth in 0 ..< 1000 {
            let t = Double(tenth) / 10
            let p: PlanPoint = t < 40 ? PlanPoint(x: 2, y: 2, z: 1)
                : t < 55 ? PlanPoint(x: 2 + (t - 40) / 15 * 6, y: 2 + (t - 40) / 15 * 4, z: 1) : PlanPoint(x: 8, y: 6, z: 1)
            for (i, node) in PositioningTests.plan.nodes.enumerated() where tenth % 2 == i % 2 {
                let d = max(0.3, node.position.distance(to: p))
                let rssi = -55 - 10 * 2.5 * log10(d) + 4 * PositioningTests.gaussian(&seed)
                samples.append(TraceSample(time: t, node: node.name, device: "tag", rssi: rssi.rounded(), truth: p))
            }
        }
        return samples
    }

    static func truth(_ samples: [TraceSample], at t: Double) -> PlanPoint? {
        samples.last { $0.time <= t }?.truth
    }

    @Test("a recorded walk: an estimate a second, placed in the right rooms; scored against the truth")
    func walk() {
        let plan = PositioningTests.plan
        let grid = PositioningGrid(plan: plan, outsideWeight: 0.2)
        let samples = Self.trace(seed: 7)
        var shuffle = SeededShuffle(state: 42)
        let rows = PositionReplay.play(samples.shuffled(using: &shuffle), plan: plan) { _ in
            GridPositioner(grid: grid, model: PathLossModel(exponent: plan.pathLossExponent))
        }
        #expect(rows.count == 100 && rows.allSatisfy { $0.device == "tag" })
        #expect(rows.first?.time == 1 && rows.last?.time == 100)
        var score = PositionScore()
        for row in rows where row.time >= 5 { score.add(device: row.device, estimate: row.estimate, truth: Self.truth(samples, at: row.time), plan: plan) }
        print("replay walk: median \(score.median) m, p90 \(score.p90) m, rooms \(score.roomAccuracy), changes/min \(score.changesPerMinute) vs \(score.trueChangesPerMinute)")
        #expect(score.median < 1.5 && score.roomAccuracy > 0.8, "\(score.median) \(score.roomAccuracy)")
        #expect(score.changesPerMinute <= 3 * max(score.trueChangesPerMinute, 0.7))
        let kitchen = rows.filter { $0.time >= 10 && $0.time < 40 }.compactMap(\.estimate?.room).map { plan.rooms[$0].name }
        #expect(Set(kitchen) == ["kitchen"], "\(kitchen)")
    }

    @Test("each estimate rests only on samples up to its time: a trace cut at 50 s gives the same first 50 rows")
    func causal() {
        let plan = PositioningTests.plan
        let grid = PositioningGrid(plan: plan, outsideWeight: 0.2)
        let samples = Self.trace(seed: 3)
        let make: @Sendable (String) -> any Positioner = { _ in GridPositioner(grid: grid, model: PathLossModel()) }
        let full = PositionReplay.play(samples, plan: plan, positioner: make)
        let cut = PositionReplay.play(samples.filter { $0.time <= 50 }, plan: plan, positioner: make)
        #expect(cut.count == 50)
        #expect(Array(full.prefix(50)) == cut)
    }
}

/// A seeded generator, so the trace's rows come in any order of nodes and times, the same each run.
struct SeededShuffle: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return state
    }
}

/// The room published with a position holds it.
@Suite struct RoomHoldsPositionTests {
    @Test("a device by the wall between two rooms, its belief's mean on one side and its room the other: the position published is inside its room")
    func positionInsideRoom() {
        let plan = FloorPlan(nodes: [.init(name: "a", position: PlanPoint(x: 1, y: 2, z: 1)), .init(name: "b", position: PlanPoint(x: 9, y: 2, z: 1))],
                             rooms: [.init(name: "west", floor: 0, polygon: [.init(x: 0, y: 0), .init(x: 5, y: 0), .init(x: 5, y: 4), .init(x: 0, y: 4)]),
                                     .init(name: "east", floor: 0, polygon: [.init(x: 5, y: 0), .init(x: 10, y: 0), .init(x: 10, y: 4), .init(x: 5, y: 4)])],
                             pathLossExponent: 2)
        let grid = PositioningGrid(plan: plan, outsideWeight: 0.2)
        var filter = GridPositioner(grid: grid, model: PathLossModel(plan: plan))
        func hear(x: Double, at t: Double) -> PositionEstimate? {
            let hearings = plan.nodes.map { node in
                let d = max(0.3, PlanPoint(x: x, y: 2, z: 1).distance(to: node.position))
                return NodeHearing(node: node.name, rssi: -59 - 20 * log10(d), spread: 1, samples: 10, distance: d, time: t)
            }
            return filter.estimate(hearings, at: t)
        }
        var checked = 0
        for t in 0 ..< 30 { _ = hear(x: 2, at: Double(t)) }
        // Walking east across the wall: every estimate with a room lies in it.
        for (i, x) in stride(from: 2.0, through: 8, by: 0.25).enumerated() {
            guard let e = hear(x: x, at: 30 + Double(i)), let room = e.room else { continue }
            #expect(plan.room(x: e.position.x, y: e.position.y, floor: 0) == room, "t \(30 + i): \(e)")
            checked += 1
        }
        #expect(checked > 15)
    }
}
