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

    @Test("nothing to fit: nil; one pair: the priors keep it finite")
    func degenerate() throws {
        #expect(Calibration.fit([]) == nil)
        let one = try #require(Calibration.fit([.init(receiver: "a", transmitter: "b", distance: 3, rssi: -70)]))
        #expect(one.exponent.isFinite && one.rxOffsets["a"]!.isFinite && (1.5 ... 4.5).contains(one.exponent))
    }
}
