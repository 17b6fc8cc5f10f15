import Foundation
import Testing

@testable import BlueZSim

/// The random streams: reference vectors for the algorithms, determinism, derived streams.
@Suite struct SeededGeneratorTests {
    @Test func xoshiroMatchesTheReferenceVectors() {
        // xoshiro256** from the state (1, 2, 3, 4): the first ten outputs of the reference C code.
        var rng = SeededGenerator(state: (1, 2, 3, 4))
        let expected: [UInt64] = [
            11520, 0, 1_509_978_240, 1_215_971_899_390_074_240, 1_216_172_134_540_287_360,
            607_988_272_756_665_600, 16_172_922_978_634_559_625, 8_476_171_486_693_032_832,
            10_595_114_339_597_558_777, 2_904_607_092_377_533_576,
        ]
        #expect((0..<10).map { _ in rng.next() } == expected)
    }

    @Test func splitMixAndFNVMatchTheirReferences() {
        var splitMix = SplitMix64(state: 0)
        #expect(splitMix.next() == 0xe220_a839_7b1d_cdaf)
        #expect(SeededGenerator.fnv1a64("") == 0xcbf2_9ce4_8422_2325)
        #expect(SeededGenerator.fnv1a64("a") == 0xaf63_dc4c_8601_ec8c)
        #expect(SeededGenerator.fnv1a64("foobar") == 0x8594_4171_f739_67e8)
    }

    /// Pinned outputs: a change here changes every recorded run, so it must be deliberate.
    @Test func seedFortyTwoIsPinned() {
        var rng = SeededGenerator(seed: 42)
        #expect((0..<4).map { _ in rng.next() } == [
            1_546_998_764_402_558_742, 6_990_951_692_964_543_102, 12_544_586_762_248_559_009, 17_057_574_109_182_124_193,
        ])
        var derived = SeededGenerator(seed: 42).derived("adv alpha->bravo")
        #expect(derived.seed == 5_100_795_058_960_273_575)
        #expect((0..<2).map { _ in derived.next() } == [7_551_086_776_080_120_191, 17_504_282_596_213_074_159])
    }

    @Test func sameSeedSameSequence() {
        var a = SeededGenerator(seed: 7), b = SeededGenerator(seed: 7), c = SeededGenerator(seed: 8)
        let sa = (0..<100).map { _ in a.gaussian(mean: 0, sigma: 1) }
        let sb = (0..<100).map { _ in b.gaussian(mean: 0, sigma: 1) }
        let sc = (0..<100).map { _ in c.gaussian(mean: 0, sigma: 1) }
        #expect(sa == sb)
        #expect(sa != sc)
    }

    @Test func derivedStreamsDependOnlyOnSeedAndLabel() {
        let root = SeededGenerator(seed: 99)
        // Drawing from the parent, or deriving other streams first, changes nothing.
        var used = root
        for _ in 0..<1000 { _ = used.next() }
        _ = used.derived("other")
        var first = root.derived("adv alpha->bravo")
        var again = used.derived("adv alpha->bravo")
        #expect((0..<50).map { _ in first.next() } == (0..<50).map { _ in again.next() })

        // Different labels, different streams; nested derivation is stable too.
        var x = root.derived("adv alpha->bravo"), y = root.derived("adv bravo->alpha")
        #expect((0..<10).map { _ in x.next() } != (0..<10).map { _ in y.next() })
        #expect(root.derived("a").derived("b") == SeededGenerator(seed: 99).derived("a").derived("b"))
        #expect(root.derived("a").derived("b") != root.derived("b").derived("a"))
    }

    @Test func derivedStreamsAreUncorrelated() {
        // Neighbouring labels must not give related streams: the correlation of 20 000 pairs of
        // uniforms is within 4 standard errors (1/√N) of zero.
        let n = 20_000
        var a = SeededGenerator(seed: 1).derived("link 1"), b = SeededGenerator(seed: 1).derived("link 2")
        var sum = 0.0
        for _ in 0..<n { sum += (a.unit() - 0.5) * (b.unit() - 0.5) }
        let correlation = sum / Double(n) / (1.0 / 12.0)
        #expect(abs(correlation) < 4 / Double(n).squareRoot())
    }

    @Test func uniformAndGaussianHaveTheirMoments() {
        var rng = SeededGenerator(seed: 3)
        let n = 40_000
        let u = (0..<n).map { _ in rng.uniform(2...5) }
        #expect(u.allSatisfy { (2..<5).contains($0) })
        // Uniform on [2, 5]: mean 3.5, σ = 3/√12; tolerance 4σ/√N.
        #expect(abs(ModelStatistics.mean(u) - 3.5) < 4 * (3 / 12.0.squareRoot()) / Double(n).squareRoot())
        let g = (0..<n).map { _ in rng.gaussian(mean: 10, sigma: 3) }
        #expect(abs(ModelStatistics.mean(g) - 10) < 4 * 3 / Double(n).squareRoot())
        // The sample σ has standard error σ/√(2N).
        #expect(abs(ModelStatistics.standardDeviation(g) - 3) < 4 * 3 / (2 * Double(n)).squareRoot())
        let e = (0..<n).map { _ in rng.exponential(mean: 2) }
        #expect(abs(ModelStatistics.mean(e) - 2) < 4 * 2 / Double(n).squareRoot())
    }

    @Test func chanceIsExactAtTheEnds() {
        var rng = SeededGenerator(seed: 5)
        #expect((0..<1000).allSatisfy { _ in !rng.chance(0) })
        #expect((0..<1000).allSatisfy { _ in rng.chance(1) })
    }
}

@Suite struct TrajectoryTests {
    @Test func fixedIsEverywhereTheSame() {
        let p = Position(x: 1, y: 2, z: 3)
        let t = Trajectory(fixed: p)
        #expect(t.isFixed)
        for time in [-5.0, 0, 1, 1e6, .nan] {
            #expect(t.position(at: time) == p)
        }
    }

    @Test func interpolatesLinearlyAndClampsAtTheEnds() throws {
        let t = try Trajectory(waypoints: [
            Waypoint(time: 10, position: Position(x: 0, y: 0)),
            Waypoint(time: 20, position: Position(x: 10, y: 0, z: 2)),
            Waypoint(time: 30, position: Position(x: 10, y: -10)),
            Waypoint(time: 31, position: Position(x: 10, y: -10)),
        ])
        #expect(t.endTime == 31)
        #expect(t.position(at: 0) == Position(x: 0, y: 0))  // before the first: waits there
        #expect(t.position(at: 10) == Position(x: 0, y: 0))
        #expect(t.position(at: 15) == Position(x: 5, y: 0, z: 1))
        #expect(t.position(at: 20) == Position(x: 10, y: 0, z: 2))
        #expect(t.position(at: 27.5) == Position(x: 10, y: -7.5, z: 0.5))
        #expect(t.position(at: 30.5) == Position(x: 10, y: -10))
        #expect(t.position(at: 1000) == Position(x: 10, y: -10))  // after the last: stays there
    }

    @Test func walksAtConstantSpeed() throws {
        let t = try Trajectory(waypoints: [
            Waypoint(time: 0, position: Position(x: -20, y: 1)),
            Waypoint(time: 40, position: Position(x: 20, y: 1)),
        ])
        for second in 0...40 {
            let p = t.position(at: Double(second))
            #expect(abs(p.x - (-20 + Double(second))) < 1e-12)
            #expect(p.y == 1)
        }
    }

    @Test(arguments: [
        ([] as [Double], "waypoints"),
        ([0, 0], "waypoints[1].t"),
        ([0, 5, 4], "waypoints[2].t"),
        ([0, .infinity], "waypoints[1].t"),
    ])
    func rejectsBadWaypoints(times: [Double], path: String) {
        let waypoints = times.map { Waypoint(time: $0, position: Position(x: 0, y: 0)) }
        #expect(throws: ScenarioError.self) { try Trajectory(waypoints: waypoints) }
        do {
            _ = try Trajectory(waypoints: waypoints)
        } catch {
            #expect(error.path == path)
        }
    }

    @Test func rejectsNonFiniteCoordinates() {
        do {
            _ = try Trajectory(waypoints: [Waypoint(time: 0, position: Position(x: .nan, y: 0))])
            Issue.record("accepted a NaN coordinate")
        } catch {
            #expect(error.path == "waypoints[0].at")
        }
    }
}

/// Sample statistics for the model's tests.
enum ModelStatistics {
    static func mean(_ values: [Double]) -> Double {
        values.reduce(0, +) / Double(values.count)
    }

    static func standardDeviation(_ values: [Double]) -> Double {
        let m = mean(values)
        return (values.reduce(0) { $0 + ($1 - m) * ($1 - m) } / Double(values.count - 1)).squareRoot()
    }
}
