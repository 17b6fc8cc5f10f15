import Foundation

/// What a peer's silences look like, so the table can tell a hole in reception from a departure.
///
/// A receiver that delivers samples in bursts (Gilbert–Elliott loss, a scanner paused for Wi-Fi)
/// has a short usual gap and, now and then, holes of several seconds; a limit on the mean gap
/// either fires inside those holes or waits long on every receiver. This keeps the **holes**: the
/// gaps longer than `holeFactor` × the usual gap (at least `minimumHole`), and models them as
/// peaks over a threshold with an exponential excess, the shape of a bad spell's length:
///
/// - rate λ = holes / time heard, and mean excess μ = mean of (hole − threshold);
/// - a silence S then lasts past S, while the peer is still there, for a share of the time of
///   λ · μ · e^{−(S − h)/μ}, with h the threshold; so the shortest S that keeps that share at `ε`:
///
///         S = h + μ · ln(λ · μ / ε)        (0 when λ · μ ≤ ε: holes are too rare to matter)
///
/// The model extrapolates past the holes seen so far, which a percentile of the gaps cannot: a few
/// holes of 1–2 s already say that one of 5 s will come. Everything is weighted by
/// exp(−age / `memory`), age in seconds of the peer's time, so a receiver that changes is followed,
/// and a peer advertising every 100 ms or every second remembers the same span. A prior of
/// ``priorHoles`` holes of ``priorExcess`` seconds' excess in ``priorSpan`` seconds keeps a peer
/// heard for a short while from drawing conclusions from one hole or from none.
public struct GapHistory: Sendable, Hashable {
    /// The prior: as if 0.2 holes with 2 s of excess each had been seen in 5 s (λμ = 0.08, so a
    /// new peer's first silences are judged as on a bursty receiver), worth a fifth of a hole, so
    /// that the peer's own gaps outweigh it within seconds: 40 s of clean reception bring the
    /// limit back to the floor, a few holes up to the receiver's.
    public static let priorHoles = 0.2
    public static let priorExcess = 2.0
    public static let priorSpan = 5.0

    /// Seconds of the peer's time after which a gap counts 1/e as much.
    public let memory: Double
    /// Decayed time heard (the sum of gaps), number of holes and sum of their excesses.
    public private(set) var span = 0.0
    public private(set) var holes = 0.0
    public private(set) var excess = 0.0

    public init(memory: Double = 300) {
        precondition(memory > 0, "memory must be positive")
        self.memory = memory
    }

    /// Adds one gap, seconds, judged a hole above `threshold`; everything before ages by the gap.
    public mutating func add(_ gap: Double, threshold: Double) {
        guard gap.isFinite, gap > 0 else { return }
        let decay = exp(-gap / memory)
        span = span * decay + gap
        holes *= decay
        excess *= decay
        if gap > threshold {
            holes += 1
            excess += gap - threshold
        }
    }

    /// Holes a second (λ) and their mean excess (μ), the prior included.
    public var rate: Double { (holes + Self.priorHoles) / (span + Self.priorSpan) }
    public var meanExcess: Double { (excess + Self.priorHoles * Self.priorExcess) / (holes + Self.priorHoles) }

    /// The shortest silence past `threshold` that a present peer outlasts for at most `share` of
    /// the time: μ · ln(λμ / share), 0 when holes are too rare.
    public func silence(forShare share: Double) -> Double {
        let mu = meanExcess
        let load = rate * mu
        guard share > 0 else { return .infinity }
        return load > share ? mu * log(load / share) : 0
    }
}
