import Foundation
@testable import ProximityCore
import Testing

/// The calibration fit on hearings at known distances: what it recovers, and what does not wreck it.
@Suite struct CalibrationTests {
    /// Eight nodes on a 12 × 9 m floor, each with a receive bias and a transmit power of its own.
    static let positions: [(String, Double, Double)] = [("a", 0, 0), ("b", 6, 0), ("c", 12, 0), ("d", 0, 9), ("e", 6, 9), ("f", 12, 9),
                                                        ("g", 3, 4.5), ("h", 9, 4.5)]
    static let bias: [String: Double] = ["a": 4, "b": -5, "c": 1, "d": -2, "e": 7, "f": -6, "g": 0, "h": 3]
    static let power: [String: Double] = ["a": -61, "b": -55, "c": -59, "d": -63, "e": -57, "f": -60, "g": -58, "h": -62]

    static func observations(exponent: Double = 2.8, noise: Double = 2, outliers: Double = 0, seed: UInt64,
                             moved: String? = nil) -> [Calibration.Observation] {
        var seed = seed
        var out: [Calibration.Observation] = []
        for (rx, rxX, rxY) in positions {
            for (tx, txX, txY) in positions where tx != rx {
                for _ in 0 ..< 5 {
                    // A moved node is 4 m from where the plan says: the truth uses where it is.
                    let dx = (rx == moved ? rxX + 4 : rxX) - (tx == moved ? txX + 4 : txX), dy = rxY - txY
                    let trueDistance = (dx * dx + dy * dy).squareRoot()
                    let planDistance = ((rxX - txX) * (rxX - txX) + dy * dy).squareRoot()
                    var rssi = power[tx]! + bias[rx]! - exponent * 10 * log10(trueDistance) + noise * PositioningTests.gaussian(&seed)
                    if outliers > 0, Self.uniform(&seed) < outliers { rssi += 15 }   // a few hearings through a bad path
                    out.append(.init(receiver: rx, transmitter: tx, distance: planDistance, rssi: rssi, stated: -59, weight: 1))
                }
            }
        }
        return out
    }

    static func uniform(_ seed: inout UInt64) -> Double {
        seed = seed &* 6364136223846793005 &+ 1442695040888963407
        return Double(seed >> 11) / Double(1 << 53)
    }

    /// The fitted biases' differences against the truth's, worst case (only differences matter).
    static func offsetError(_ fit: Calibration.Fit, excluding: String? = nil) -> Double {
        let names = bias.keys.filter { $0 != excluding }
        let fittedMean = names.map { -fit.rxOffsets[$0]! }.reduce(0, +) / Double(names.count)
        let trueMean = names.map { bias[$0]! }.reduce(0, +) / Double(names.count)
        return names.map { abs((-fit.rxOffsets[$0]! - fittedMean) - (bias[$0]! - trueMean)) }.max()!
    }

    @Test("clean hearings: the receivers' biases (up to a common shift), the transmit powers and the exponent come back")
    func recovers() throws {
        let fit = try #require(Calibration.fit(Self.observations(seed: 1)))
        #expect(Self.offsetError(fit) < 1.0, "\(fit.rxOffsets)")
        #expect(abs(fit.exponent - 2.8) < 0.2, "\(fit.exponent)")
        // Transmit powers and receive biases trade off by a common shift: each power comes back
        // up to the shift the biases took.
        let shift = Self.bias.values.reduce(0, +) / 8 + fit.rxOffsets.values.reduce(0, +) / 8
        for (name, p) in Self.power { #expect(abs(fit.txPowers[name]! - (p + shift)) < 1.5, "\(name): \(fit.txPowers[name]!) vs \(p + shift)") }
        #expect(fit.rms < 2.5)
    }

    @Test("5 % of hearings 15 dB off and a node moved 4 m: the others' biases still come back within 2 dB, and the moved node stands out in its residuals")
    func robust() throws {
        let fit = try #require(Calibration.fit(Self.observations(outliers: 0.05, seed: 2, moved: "g")))
        #expect(Self.offsetError(fit, excluding: "g") < 2, "\(fit.rxOffsets)")
        let worst = try #require(fit.nodeResiduals.max { $0.value.median < $1.value.median })
        #expect(worst.key == "g", "\(fit.nodeResiduals.mapValues(\.median))")
        // Without the reweighting (a least squares fit), the same data is off by more.
        let plain = try #require(Calibration.fit(Self.observations(outliers: 0.05, seed: 2, moved: "g"), iterations: 1))
        #expect(Self.offsetError(plain, excluding: "g") > Self.offsetError(fit, excluding: "g"))
    }

    @Test("hearings that push the exponent out of its range: fixed at the bound and the offsets fitted around it (the residuals as small as the bound allows); said so; the hold-out residual is the hearings' own noise")
    func bounded() throws {
        // A site that loses 1 dB a decade: the fit may not follow it below 1.5.
        let flat = Self.observations(exponent: 1.0, noise: 0.5, seed: 9)
        let fit = try #require(Calibration.fit(flat, holdout: true))
        #expect(fit.exponentAtBound && fit.exponent == 1.5, "\(fit.exponent)")
        // Around the bound, the offsets take up what they can: what is left is the exponent's
        // error over the distances' spread (10 log10 of 3 to 15 m), not the offsets' wreck.
        #expect(fit.rms < 3, "\(fit.rms)")
        // An exponent inside the range: not at a bound, and the hearings it did not use are
        // predicted about as well as their noise (2 dB) allows.
        let clean = try #require(Calibration.fit(Self.observations(seed: 3), holdout: true))
        #expect(!clean.exponentAtBound)
        let holdout = try #require(clean.holdoutRMS)
        #expect(holdout > 1 && holdout < 3.5, "\(holdout)")
        // Too few hearings for a hold-out: none.
        #expect(Calibration.fit(Array(Self.observations(seed: 3).prefix(4)), holdout: true)?.holdoutRMS == nil)
    }

    @Test("nothing to fit: nil; one pair: the priors keep it finite")
    func degenerate() throws {
        #expect(Calibration.fit([]) == nil)
        let one = try #require(Calibration.fit([.init(receiver: "a", transmitter: "b", distance: 3, rssi: -70)]))
        #expect(one.exponent.isFinite && one.rxOffsets["a"]!.isFinite && (1.5 ... 4.5).contains(one.exponent))
    }
}

/// The calibration kept up from the nodes hearing each other, on an injected clock.
@Suite struct FleetCalibrationTests {
    static let plan = FloorPlan(nodes: CalibrationTests.positions.map { FloorPlan.Node(name: $0.0, position: PlanPoint(x: $0.1, y: $0.2, z: 2)) },
                                rooms: [.init(name: "all", floor: 0, polygon: [.init(x: 0, y: 0), .init(x: 12, y: 0), .init(x: 12, y: 9), .init(x: 0, y: 9)])])

    /// A minute of every node hearing every other once a second; `extra` dB on what `blocked` receives.
    static func minute(_ calibration: inout FleetCalibration, from start: Double, seed: inout UInt64, blocked: String? = nil, extra: Double = 0) {
        for s in 0 ..< 60 {
            let t = start + Double(s)
            for (rx, _, _) in CalibrationTests.positions {
                for (tx, _, _) in CalibrationTests.positions where tx != rx {
                    let d = plan.node(named: rx)!.position.distance(to: plan.node(named: tx)!.position)
                    let rssi = CalibrationTests.power[tx]! + CalibrationTests.bias[rx]! - 28 * log10(d) + 2 * PositioningTests.gaussian(&seed)
                        + (rx == blocked ? extra : 0)
                    calibration.hear(receiver: rx, transmitter: tx, rssi: rssi, stated: -59, samples: 10, at: t)
                }
            }
        }
    }

    @Test("refitted every minute: the model's offsets undo the receivers' biases; a node whose receiver reads 8 dB low from then on is reported drifting, the others not")
    func continuous() throws {
        var calibration = FleetCalibration(plan: Self.plan)
        var seed: UInt64 = 4
        let early = calibration.refit(at: 0)
        #expect(!early)   // nothing heard yet
        Self.minute(&calibration, from: 0, seed: &seed)
        let first = calibration.refit(at: 60), soon = calibration.refit(at: 90)
        #expect(first && !soon)   // then not until a minute later
        let fit = try #require(calibration.fit)
        #expect(CalibrationTests.offsetError(fit) < 1, "\(fit.rxOffsets)")
        #expect(abs(calibration.model.exponent - 2.8) < 0.25)
        #expect(calibration.nodes.values.allSatisfy { $0.drift == nil }, "\(calibration.nodes)")
        // Node e's receiver now reads 8 dB low (a box turned to the wall): within ten minutes it is reported.
        var t = 60.0
        for _ in 0 ..< 10 {
            Self.minute(&calibration, from: t, seed: &seed, blocked: "e", extra: -8)
            t += 60
            calibration.refit(at: t)
        }
        let e = try #require(calibration.nodes["e"])
        #expect(e.drift?.contains("receive offset moved") == true, "\(e)")
        #expect(calibration.nodes.filter { $0.key != "e" }.values.allSatisfy { $0.drift == nil }, "\(calibration.nodes)")
        #expect(calibration.pairs.count == 56 && calibration.pairs.values.allSatisfy { $0.residual != nil })
    }

    @Test("hearings of anything but two plan nodes are ignored")
    func ignores() {
        var calibration = FleetCalibration(plan: Self.plan)
        calibration.hear(receiver: "a", transmitter: "tag", rssi: -70, stated: -59, at: 0)
        calibration.hear(receiver: "garage", transmitter: "a", rssi: -70, stated: -59, at: 0)
        calibration.hear(receiver: "a", transmitter: "a", rssi: -40, stated: -59, at: 0)
        #expect(calibration.pairs.isEmpty)
    }
}
