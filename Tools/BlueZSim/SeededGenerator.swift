import Foundation

/// The simulator's only source of randomness: xoshiro256** (Blackman and Vigna), its 256-bit state
/// filled from a 64-bit seed by SplitMix64, as the authors recommend.
///
/// Everything random in a run is drawn from generators derived from the scenario's seed, so the
/// same scenario gives the same run on every machine and every Swift version. That is also why the
/// helpers below are written out instead of using `Double.random(in:using:)`: the standard
/// library does not promise how many words it draws, nor how it maps them to a `Double`.
///
/// Independent parts of the simulation (each link's advertisements, each box's connections) take
/// their own stream with ``derived(_:)``, so adding a box or reordering events in one part never
/// changes the numbers another part sees.
public struct SeededGenerator: RandomNumberGenerator, Sendable, Hashable {
    /// The seed this stream was made from (for a derived stream, the seed mixed from its parent's
    /// seed and its label). It never changes as numbers are drawn.
    public let seed: UInt64
    private var s0: UInt64
    private var s1: UInt64
    private var s2: UInt64
    private var s3: UInt64

    public init(seed: UInt64) {
        self.seed = seed
        var splitMix = SplitMix64(state: seed)
        s0 = splitMix.next()
        s1 = splitMix.next()
        s2 = splitMix.next()
        s3 = splitMix.next()
        // SplitMix64 is a bijection of its counter, so four outputs are never all zero: the one
        // state xoshiro cannot leave.
    }

    /// A generator with its raw xoshiro256** state, for the reference test vectors.
    init(state: (UInt64, UInt64, UInt64, UInt64)) {
        precondition(state != (0, 0, 0, 0), "xoshiro256** cannot run from the all-zero state")
        seed = 0
        (s0, s1, s2, s3) = state
    }

    /// xoshiro256**: the next 64 random bits.
    public mutating func next() -> UInt64 {
        let result = (s1 &* 5).rotatedLeft(by: 7) &* 9
        let t = s1 << 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = s3.rotatedLeft(by: 45)
        return result
    }

    /// A uniform `Double` in [0, 1): the top 53 bits of one draw.
    public mutating func unit() -> Double {
        Double(next() >> 11) * 0x1p-53
    }

    /// A uniform `Double` in `range` (one draw). The upper bound is reached with probability zero.
    public mutating func uniform(_ range: ClosedRange<Double>) -> Double {
        range.lowerBound + (range.upperBound - range.lowerBound) * unit()
    }

    /// True with probability `p` (one draw, whatever `p` is): never for p ≤ 0, always for p ≥ 1.
    public mutating func chance(_ p: Double) -> Bool {
        unit() < p
    }

    /// A normal deviate, N(mean, sigma²), by the Box–Muller transform (two draws; the second
    /// deviate of the pair is discarded so every call consumes the same amount of the stream).
    public mutating func gaussian(mean: Double, sigma: Double) -> Double {
        let u1 = 1 - unit()  // (0, 1]: the logarithm stays finite
        let u2 = unit()
        let z = (-2 * Foundation.log(u1)).squareRoot() * Foundation.cos(2 * Double.pi * u2)
        return mean + sigma * z
    }

    /// An exponential deviate with the given mean (one draw).
    public mutating func exponential(mean: Double) -> Double {
        -mean * Foundation.log(1 - unit())
    }

    /// An independent stream for one part of the simulation, named by `label` (for example
    /// `"adv alpha->bravo"`). It depends only on this generator's ``seed`` and the label: not on
    /// how many numbers were drawn here, nor on which other streams were derived, or in what order.
    ///
    /// The label is hashed with 64-bit FNV-1a, not `Hasher`, which is seeded anew in every process.
    public func derived(_ label: String) -> SeededGenerator {
        SeededGenerator(seed: SplitMix64.mix(seed ^ SplitMix64.mix(Self.fnv1a64(label))))
    }

    /// 64-bit FNV-1a over the label's UTF-8 bytes.
    static func fnv1a64(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }
}

/// SplitMix64 (Steele, Lea and Flood): a Weyl counter through a 64-bit finaliser. Used only to
/// expand seeds; never as the simulation's generator.
struct SplitMix64 {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        return Self.mix(state)
    }

    /// The SplitMix64 finaliser: a bijection of UInt64 that spreads every input bit.
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}

extension UInt64 {
    fileprivate func rotatedLeft(by k: UInt64) -> UInt64 {
        (self << k) | (self >> (64 - k))
    }
}
