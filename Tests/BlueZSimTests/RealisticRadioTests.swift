import Foundation
import Testing

@testable import BlueZSim

/// The realistic radio's components, each on its own, seeded: their statistics against their
/// formulas, within 4 standard errors of the sample sizes (or the bound stated).
@Suite struct RealisticRadioTests {
    static func correlation(_ a: [Double], _ b: [Double]) -> Double {
        let n = Double(a.count)
        let ma = a.reduce(0, +) / n, mb = b.reduce(0, +) / n
        var sab = 0.0, saa = 0.0, sbb = 0.0
        for (x, y) in zip(a, b) {
            sab += (x - ma) * (y - mb)
            saa += (x - ma) * (x - ma)
            sbb += (y - mb) * (y - mb)
        }
        return sab / Foundation.sqrt(saa * sbb)
    }

    static func sd(_ v: [Double]) -> Double {
        let m = v.reduce(0, +) / Double(v.count)
        return Foundation.sqrt(v.map { ($0 - m) * ($0 - m) }.reduce(0, +) / Double(v.count - 1))
    }

    @Test("the shadowing field: unit variance everywhere, the same value at the same point, correlation falling with distance: near 1 close by, about 1/e at the decorrelation distance, none at three")
    func field() {
        let field = ShadowingField(seed: 7, decorrelation: 2)
        var rng = SeededGenerator(seed: 1)
        let n = 20_000
        let points = (0..<n).map { _ in (rng.uniform(0...2000), rng.uniform(0...2000)) }
        let values = points.map { field.value(x: $0.0, y: $0.1) }
        #expect(abs(Self.sd(values) - 1) < 4 * 1 / Foundation.sqrt(2 * Double(n)) + 0.02, "SD \(Self.sd(values))")
        #expect(field.value(x: 3.3, y: 4.4) == ShadowingField(seed: 7, decorrelation: 2).value(x: 3.3, y: 4.4))
        func r(at d: Double) -> Double {
            var angles = SeededGenerator(seed: 2)
            let moved = points.map { p -> Double in
                let a = angles.uniform(0...(2 * Double.pi))
                return field.value(x: p.0 + d * Foundation.cos(a), y: p.1 + d * Foundation.sin(a))
            }
            return Self.correlation(values, moved)
        }
        let near = r(at: 0.2), half = r(at: 1), one = r(at: 2), two = r(at: 4), three = r(at: 6)
        print("shadowing field: r(0.1 d) = \(near), r(0.5 d) = \(half), r(d) = \(one), r(2 d) = \(two), r(3 d) = \(three)")
        // 1/e at the decorrelation distance, as Gudmundson's; smoother than his exponential
        // before it (value noise), and none beyond two grid spacings (2.5 d).
        #expect(near > 0.95)
        #expect(half > one && one > two && two > three)
        #expect(abs(one - exp(-1)) < 0.06, "about 1/e at the decorrelation distance: \(one)")
        #expect(abs(three) < 0.05)
    }

    @Test("AR(1) shadowing: SD σ, lag-1 autocorrelation exp(−Δt/τ) at the advertising interval")
    func temporal() {
        var radio = RealisticRadio()
        radio.temporalSigma = 3
        radio.temporalTau = 0.25
        var link = RealisticLink(radio: radio, using: SeededGenerator(seed: 3))
        let n = 20_000
        let values = (0..<n).map { link.deviation(at: Double($0) * 0.1) }
        let rho = Foundation.exp(-0.1 / 0.25)
        let lag1 = Self.correlation(Array(values.dropLast()), Array(values.dropFirst()))
        print("AR(1): lag-1 \(lag1) (expected \(rho)), SD \(Self.sd(values))")
        // The SE of a lag-1 estimate of an AR(1) is about sqrt((1 − ρ²)/n).
        #expect(abs(lag1 - rho) < 4 * Foundation.sqrt((1 - rho * rho) / Double(n)))
        // Correlated samples: the effective count is n(1 − ρ)/(1 + ρ).
        let effective = Double(n) * (1 - rho) / (1 + rho)
        #expect(abs(Self.sd(values) - 3) < 4 * 3 / Foundation.sqrt(2 * effective))
    }

    @Test("channel offsets: each event takes the next channel, 37, 38, 39, and its offset")
    func channels() {
        var radio = RealisticRadio()
        radio.channelSigma = 6
        var link = RealisticLink(radio: radio, using: SeededGenerator(seed: 4))
        let first = link.channel
        let values = (0..<9).map { link.deviation(at: Double($0) * 0.1) }
        for (i, v) in values.enumerated() { #expect(v == link.channelOffsets[(first + i) % 3]) }
        // Across links the offsets have SD channelSigma.
        var offsets: [Double] = []
        for i in 0..<3000 { offsets += RealisticLink(radio: radio, using: SeededGenerator(seed: 4).derived("link \(i)")).channelOffsets }
        #expect(abs(Self.sd(offsets) - 6) < 4 * 6 / Foundation.sqrt(2 * Double(offsets.count)))
    }

    @Test("outliers: a fraction p of samples off by N(0, σ_out); the share 10 dB or more off is p·P(|N(0, σ_out)| ≥ 10)")
    func outliers() {
        var radio = RealisticRadio()
        radio.outlierRate = 0.05
        radio.outlierSigma = 12
        var link = RealisticLink(radio: radio, using: SeededGenerator(seed: 5))
        let n = 40_000
        let values = (0..<n).map { link.deviation(at: Double($0) * 0.1) }
        let far = Double(values.filter { abs($0) >= 10 }.count) / Double(n)
        let expected = 0.05 * erfc(10 / (12 * Foundation.sqrt(2)))
        print("outliers: \(far) of samples 10 dB or more off (expected \(expected))")
        #expect(abs(far - expected) < 4 * Foundation.sqrt(expected * (1 - expected) / Double(n)))
        #expect(Double(values.filter { $0 != 0 }.count) / Double(n) > 0.04)
    }

    @Test("device offsets: N(0, σ_dev) per device and role, the same for every link of a device")
    func devices() {
        var radio = RealisticRadio()
        radio.deviceSigma = 6
        let offsets = (0..<4000).map { radio.deviceOffset(seed: 9, device: "box\($0)", role: "tx") }
        #expect(abs(Self.sd(offsets) - 6) < 4 * 6 / Foundation.sqrt(2 * 4000.0))
        #expect(radio.deviceOffset(seed: 9, device: "alpha", role: "tx") == radio.deviceOffset(seed: 9, device: "alpha", role: "tx"))
        #expect(radio.deviceOffset(seed: 9, device: "alpha", role: "tx") != radio.deviceOffset(seed: 9, device: "alpha", role: "rx"))
        #expect(RealisticRadio().deviceOffset(seed: 9, device: "alpha", role: "tx") == 0, "off by default")
    }

    @Test("the realistic preset's values lie in the measured ranges; the default is off")
    func preset() {
        let r = RealisticRadio.realistic
        #expect((3.4...5.8).contains(r.fieldSigma))
        #expect(r.outlierRate > 0 && r.channelSigma > 0 && r.temporalSigma > 0 && r.deviceSigma > 0)
        #expect(RealisticRadio().isOff && !r.isOff)
    }

    @Test("scenarios: no radio key keeps the simple model; preset realistic takes the preset, and keys given override it; bad values are refused with their key")
    func scenarioKeys() throws {
        let simple = try Scenario.parse("""
            boxes:
              - { name: solo, address: "aa:bb:cc:dd:ee:ff", position: [0, 0] }
            """, format: .yaml)
        #expect(simple.radio.realistic.isOff)
        let realistic = try Scenario.parse("""
            radio: { preset: realistic, channel_sigma: 7, burst_loss_rate: 0.1 }
            boxes:
              - { name: solo, address: "aa:bb:cc:dd:ee:ff", position: [0, 0] }
            """, format: .yaml)
        var expected = RadioParameters.realistic
        expected.realistic.channelSigma = 7
        expected.burstLossRate = 0.1
        #expect(realistic.radio == expected)
        for (radio, message) in [("{ preset: noisy }", "radio.preset: must be simple or realistic"),
                                 ("{ outlier_rate: 2 }", "radio.outlier_rate: must be a probability in 0...1"),
                                 ("{ temporal_tau: 0 }", "radio.temporal_tau: must be 0.001 or more seconds")] {
            #expect(throws: ScenarioError.self) {
                try Scenario.parse("radio: \(radio)\nboxes:\n  - { name: solo, address: \"aa:bb:cc:dd:ee:ff\", position: [0, 0] }\n", format: .yaml)
            }
            do {
                _ = try Scenario.parse("radio: \(radio)\nboxes:\n  - { name: solo, address: \"aa:bb:cc:dd:ee:ff\", position: [0, 0] }\n", format: .yaml)
            } catch {
                #expect(error.description.contains(message), "\(error)")
            }
        }
    }

    @Test("a sample's deviation shifts its mean, and draws the same numbers: the simple model's streams do not move")
    func deviationHook() {
        let model = RadioModel(RadioParameters(shadowingSigma: 2))
        var a = SeededGenerator(seed: 11), b = SeededGenerator(seed: 11)
        for _ in 0..<1000 {
            let plain = model.sampleRSSI(distance: 2, using: &a)!
            let shifted = model.sampleRSSI(distance: 2, deviation: 7, using: &b)!
            #expect(abs(Int(shifted) - Int(plain) - 7) <= 1)
        }
        #expect(a == b)
    }

    @Test("a link: its device offsets and its field at the listener's place, fixed; the same link from the same seed, another from another")
    func linkStatic() {
        var radio = RealisticRadio()
        radio.deviceSigma = 6
        radio.fieldSigma = 4
        var link = radio.link(seed: 5, stream: "realistic:tag>alpha", from: "tag", to: "alpha")
        let expected = radio.deviceOffset(seed: 5, device: "tag", role: "tx") + radio.deviceOffset(seed: 5, device: "alpha", role: "rx")
            + 4 * radio.field(seed: 5, from: "tag", to: "alpha")!.value(x: 2, y: 1)
        for i in 0..<10 { #expect(abs(link.deviation(at: Double(i), x: 2, y: 1) - expected) < 1e-12) }
        var again = radio.link(seed: 5, stream: "realistic:tag>alpha", from: "tag", to: "alpha")
        #expect(again.deviation(at: 0, x: 2, y: 1) == link.deviation(at: 10, x: 2, y: 1))
        var reverse = radio.link(seed: 5, stream: "realistic:alpha>tag", from: "alpha", to: "tag")
        #expect(reverse.deviation(at: 0, x: 2, y: 1) != expected)
    }
}
