import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The process's memory at one moment: resident set size (`VmRSS` of /proc/self/status) and the
/// bytes glibc's malloc has handed out and not taken back (from `malloc_info`). Free memory is
/// returned to the system (`malloc_trim`) first, so that RSS follows what is in use.
struct MemorySample: Codable, Sendable {
    var rss: Int
    /// nil where glibc's `malloc_info` is not available.
    var heap: Int?

    static func now() -> MemorySample {
        Malloc.trim()
        return MemorySample(rss: ProcStatus.kilobytes("VmRSS").map { $0 * 1024 } ?? 0, heap: Malloc.inUse())
    }

    /// The growth from `before` to `self`.
    func minus(_ before: MemorySample) -> MemoryGrowth {
        MemoryGrowth(rss: rss - before.rss, heap: heap.flatMap { h in before.heap.map { h - $0 } })
    }
}

/// Bytes a phase added.
struct MemoryGrowth: Codable, Sendable {
    var rss: Int
    var heap: Int?

    /// Per region (or per peer).
    func divided(by n: Int) -> MemoryGrowth {
        MemoryGrowth(rss: rss / n, heap: heap.map { $0 / n })
    }
}

/// Lines of /proc/self/status.
enum ProcStatus {
    /// A `kB` field such as `VmRSS` or `VmHWM`, in kB.
    static func kilobytes(_ field: String) -> Int? {
        // Read as a stream: /proc files report a size of 0, which whole-file readers trust.
        guard let file = fopen("/proc/self/status", "r") else { return nil }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0, let line {
            let text = String(cString: line)
            if text.hasPrefix(field + ":") {
                return Int(text.dropFirst(field.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
            }
        }
        return nil
    }
}

/// glibc's malloc statistics, looked up at run time (the Glibc module does not import malloc.h).
enum Malloc {
    private typealias TrimFunction = @convention(c) (Int) -> Int32
    private typealias InfoFunction = @convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32

    private static func symbol(_ name: String) -> UnsafeMutableRawPointer? {
        #if canImport(Glibc)
        return dlsym(dlopen(nil, RTLD_NOW), name)
        #else
        return nil
        #endif
    }

    /// Returns free memory at the top of the heap and in free pages to the system.
    static func trim() {
        guard let f = symbol("malloc_trim") else { return }
        _ = unsafeBitCast(f, to: TrimFunction.self)(0)
    }

    /// Bytes in use: the arenas' size less their free chunks, plus the mmapped chunks; from the
    /// totals of `malloc_info`'s XML.
    static func inUse() -> Int? {
        #if canImport(Glibc)
        guard let f = symbol("malloc_info") else { return nil }
        var buffer: UnsafeMutablePointer<CChar>?
        var size = 0
        guard let stream = open_memstream(&buffer, &size) else { return nil }
        let status = unsafeBitCast(f, to: InfoFunction.self)(0, stream)
        fclose(stream)
        guard let buffer else { return nil }
        let xml = String(cString: buffer)
        free(buffer)
        guard status == 0 else { return nil }
        // The totals over every arena follow the last </heap>.
        guard let totals = xml.range(of: "</heap>", options: .backwards).map({ xml[$0.upperBound...] }) else { return nil }
        func value(_ tag: String, _ type: String) -> Int? {
            guard let line = totals.split(separator: "\n").first(where: { $0.contains("<\(tag) type=\"\(type)\"") }),
                  let range = line.range(of: "size=\"") else { return nil }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
        guard let current = value("system", "current"), let fast = value("total", "fast"), let rest = value("total", "rest"),
              let mmap = value("total", "mmap") else { return nil }
        return current - fast - rest + mmap
        #else
        return nil
        #endif
    }
}

/// Wall-clock time of a piece of work, seconds.
func seconds(_ work: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try work()
    return (ContinuousClock.now - start).seconds
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) * 1e-18 }
}

/// Median, 95th percentile, largest and mean of a set of durations, seconds.
struct Distribution: Codable, Sendable {
    var median: Double
    var p95: Double
    var max: Double
    var mean: Double
    var count: Int

    init(_ values: [Double]) {
        let sorted = values.sorted()
        func percentile(_ p: Double) -> Double {
            guard !sorted.isEmpty else { return .nan }
            let rank = p * Double(sorted.count - 1)
            let lo = Int(rank.rounded(.down)), hi = Int(rank.rounded(.up))
            return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - Double(lo))
        }
        median = percentile(0.5)
        p95 = percentile(0.95)
        max = sorted.last ?? .nan
        mean = sorted.isEmpty ? .nan : sorted.reduce(0, +) / Double(sorted.count)
        count = sorted.count
    }
}
