import Foundation

/// `x` with `digits` decimals.
public func format(_ x: Double, _ digits: Int) -> String {
    String(format: "%.\(digits)f", x)
}

/// The `p` quantile (0...1) of `values`, interpolated between ranks; nil when there are none.
public func percentile(_ values: [Double], _ p: Double) -> Double? {
    guard !values.isEmpty else { return nil }
    let sorted = values.sorted()
    let rank = p * Double(sorted.count - 1)
    let lo = Int(rank.rounded(.down)), hi = Int(rank.rounded(.up))
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - Double(lo))
}

public func mean(_ values: [Double]) -> Double? {
    values.isEmpty ? nil : values.reduce(0, +) / Double(values.count)
}

/// Prints `value` as the benchmarks' JSON output: pretty, keys sorted.
public func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}

/// The text tables' cells. Each benchmark adds its `render`.
public enum Table {
    /// Right-aligned in `width`.
    public static func pad(_ s: String, _ width: Int) -> String {
        let n = s.count
        return n >= width ? s : String(repeating: " ", count: width - n) + s
    }

    /// Left-aligned in `width`.
    public static func padRight(_ s: String, _ width: Int) -> String {
        let n = s.count
        return n >= width ? s : s + String(repeating: " ", count: width - n)
    }

    /// A number right-aligned in `width`, `n/a` when there is none.
    public static func cell(_ x: Double?, _ digits: Int, width: Int) -> String {
        pad(x.map { format($0, digits) } ?? "n/a", width)
    }

    /// `first…last (count)`, or the one seed.
    public static func seedRange(_ seeds: [UInt64]) -> String {
        guard let first = seeds.first, let last = seeds.last else { return "none" }
        return seeds.count == 1 ? "\(first)" : "\(first)…\(last) (\(seeds.count))"
    }
}
