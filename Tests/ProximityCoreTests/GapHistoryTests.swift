import Foundation
import ProximityCore
import Testing

extension SplitMix {
    mutating func uniform() -> Double { Double(next() >> 11) / Double(1 << 53) }
    mutating func exponential(mean: Double) -> Double { -mean * log(1 - uniform()) }
}

/// A bursty receiver: a sample every `interval` s, and after each sample, with probability
/// `holeRate` × interval, a hole of `threshold` + Exp(`meanExcess`) s (no sample in it).
private struct BurstyReceiver {
    var rng: SplitMix
    var interval = 0.1
    var holeRate = 0.1
    var meanExcess = 2.0
    var threshold = 0.5

    /// The gaps of `duration` seconds of reception.
    mutating func gaps(for duration: Double) -> [Double] {
        var gaps: [Double] = []
        var t = 0.0
        while t < duration {
            let gap = rng.uniform() < holeRate * interval ? threshold + rng.exponential(mean: meanExcess) : interval
            gaps.append(gap)
            t += gap
        }
        return gaps
    }
}

@Suite("Holes in reception (the stale rule)")
struct GapHistoryTests {
    /// The share of the time a present peer would have been silent for longer than `limit`.
    static func shareBeyond(_ limit: Double, _ gaps: [Double]) -> Double {
        gaps.map { max(0, $0 - limit) }.reduce(0, +) / gaps.reduce(0, +)
    }

    @Test("learnt on a bursty receiver, the silence keeps a present peer past it for about the share asked, on reception to come",
          arguments: [UInt64(1), 2, 3, 4, 5, 6])
    func keepsTheShare(seed: UInt64) {
        var receiver = BurstyReceiver(rng: SplitMix(seed: seed))
        var history = GapHistory(memory: 300)
        for gap in receiver.gaps(for: 900) { history.add(gap, threshold: 0.5) }
        let share = 0.005
        let limit = 0.5 + history.silence(forShare: share)
        // Exponential holes: λ·μ·e^{−(S−h)/μ} = ε gives h + μ·ln(λμ/ε) ≈ 0.5 + 2·ln(0.167/0.005) ≈ 7.5 s.
        #expect((5.5...9.5).contains(limit), "seed \(seed): limit \(limit) s")
        // The promise, on the next hour of the same receiver: about ε of the time beyond the limit.
        let future = receiver.gaps(for: 3600)
        let realised = Self.shareBeyond(limit, future)
        #expect(realised < 3 * share && realised > share / 6, "seed \(seed): limit \(limit) s, realised share \(realised)")
        // The old rule (4.5 usual gaps, at least 3 s) would have been past its limit far more often.
        #expect(Self.shareBeyond(3, future) > 5 * share)
    }

    @Test("without holes, the silence falls to nothing once the prior has worn off")
    func cleanReception() {
        var history = GapHistory()
        #expect(history.silence(forShare: 0.005) > 2.5, "a peer just heard is judged as on a bursty receiver")
        for _ in 0..<400 { history.add(0.1, threshold: 0.5) }  // 40 s
        #expect(history.silence(forShare: 0.005) < 2.5)
        for _ in 0..<600 { history.add(0.1, threshold: 0.5) }
        #expect(history.silence(forShare: 0.005) == 0)
    }

    @Test("a receiver that stops being bursty is followed within a few memories")
    func forgets() {
        var receiver = BurstyReceiver(rng: SplitMix(seed: 9))
        var history = GapHistory(memory: 60)
        for gap in receiver.gaps(for: 600) { history.add(gap, threshold: 0.5) }
        let bursty = history.silence(forShare: 0.005)
        for _ in 0..<3000 { history.add(0.1, threshold: 0.5) }  // 300 s, five memories
        #expect(bursty > 3)
        #expect(history.silence(forShare: 0.005) < 1)
    }

    @Test("in the table: once learnt, a peer with holes keeps its zone through a 5 s hole, while a clean one still goes unknown after 3 s; a bursty departure is unknown once, then removed")
    func table() {
        var table = FoundDevicesTable()
        var receiver = BurstyReceiver(rng: SplitMix(seed: 42))
        // The bursty peer's sample times over 600 s; the steady peer is heard every 0.1 s.
        var heard: [Double] = []
        var t = 0.0
        for gap in receiver.gaps(for: 600) {
            heard.append(t)
            t += gap
        }
        let end = heard.last!
        var next = 0
        var unknownTicks = 0, ticks = 0
        var tick = 1.0
        for step in 0..<Int(end * 10) {
            let now = Double(step) / 10
            table.observe("steady", rssi: -65, at: now)
            while next < heard.count, heard[next] <= now {
                table.observe("bursty", rssi: -65, at: heard[next])
                next += 1
            }
            if now >= tick {
                let report = table.tick(at: tick)
                if tick > 120 {
                    ticks += 1
                    if report.zones["bursty"] == .unknown { unknownTicks += 1 }
                }
                tick += 1
            }
        }
        // Once learnt, the bursty peer is rarely reported unknown while it is there.
        #expect(Double(unknownTicks) / Double(ticks) < 0.02, "\(unknownTicks) of \(ticks) ticks unknown")
        // Both fall silent at once: the steady one is unknown after 3 s, the bursty one keeps its
        // zone through 5 s of silence and is unknown before the clear interval, then removed.
        let last = Double(Int(end * 10) - 1) / 10
        table.observe("bursty", rssi: -65, at: last)
        var unknownAt: [PeerID: Double] = [:]
        var removedAt: [PeerID: Double] = [:]
        while tick < last + 15 {
            let report = table.tick(at: tick)
            for (id, zone) in report.zones where zone == .unknown && unknownAt[id] == nil { unknownAt[id] = tick - last }
            for id in report.removed { removedAt[id] = tick - last }
            if tick - last <= 5 { #expect(report.zones["bursty"] == .near, "at \(tick - last) s of silence") }
            tick += 1
        }
        #expect((3...4.1).contains(unknownAt["steady"] ?? 0))
        let bursty = unknownAt["bursty"] ?? 0
        #expect(bursty > 5 && bursty < 10)
        #expect(removedAt["bursty"].map { $0 > 10 && $0 <= 11 } == true)
    }
}
