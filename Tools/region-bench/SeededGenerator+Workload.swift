import BlueZSim
import Foundation

/// The benchmark's only source of randomness: the simulator's ``SeededGenerator`` (xoshiro256**
/// with its state filled from a 64-bit seed by SplitMix64), one stream per part of the workload,
/// and the draws the workload makes, written out (instead of `Int.random(in:using:)`) so that a
/// seed gives the same workload on every machine and every Swift version.
extension SeededGenerator {
    /// The stream for `seed`, made independent of the other streams of the same seed by `stream`
    /// (the regions, the peers and their movements each draw from their own, so changing
    /// `--regions` does not change the peers).
    init(seed: UInt64, stream: UInt64) {
        self.init(seed: seed ^ (stream &* 0xD1B5_4A32_D192_ED03))
    }

    /// An integer in `0..<n` (Lemire's multiply-high; the tiny bias does not matter here).
    mutating func below(_ n: Int) -> Int {
        precondition(n > 0)
        return Int(next().multipliedFullWidth(by: UInt64(n)).high)
    }

    mutating func pick<T>(_ values: [T]) -> T { values[below(values.count)] }

    /// An index of `weights`, with probability proportional to its weight.
    mutating func weighted(_ weights: [Double]) -> Int {
        var x = unit() * weights.reduce(0, +)
        for (i, w) in weights.enumerated() {
            if x < w { return i }
            x -= w
        }
        return weights.count - 1
    }

    mutating func bytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8(truncatingIfNeeded: next()) }
    }

    /// A random (version 4) UUID.
    mutating func uuid() -> UUID {
        var b = bytes(16)
        b[6] = b[6] & 0x0F | 0x40
        b[8] = b[8] & 0x3F | 0x80
        return UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
    }

    /// A Bluetooth address, `AA:BB:CC:DD:EE:FF`.
    mutating func address() -> String {
        bytes(6).map { hexByte($0).uppercased() }.joined(separator: ":")
    }
}

/// Two lowercase hex digits.
func hexByte(_ b: UInt8) -> String {
    let digits = Array("0123456789abcdef")
    return String([digits[Int(b >> 4)], digits[Int(b & 0x0F)]])
}

/// Lowercase hex of bytes, as the matcher writes namespaces and instances.
func hexString(_ bytes: [UInt8]) -> String { bytes.map(hexByte).joined() }
