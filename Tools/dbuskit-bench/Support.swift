import DBusKit
import Foundation
import ProximityTesting

// Helpers shared by the subcommands: clocks, the benchmark's D-Bus names and payload, statistics,
// JSON and table output, and locating the binary and the Python helpers.

// MARK: - Clocks

/// CLOCK_MONOTONIC in seconds: the clock Python's `time.monotonic()` reads too, so times taken in
/// the bench and in its child processes can be compared.
func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// CPU time (user + system) this process has used so far, in seconds.
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

// MARK: - Names and payload

/// What the emitter sends and the subscribers expect: a BlueZ-style `PropertiesChanged` of a
/// device (signature `sa{sv}as`, changed `RSSI` as int16 and `ManufacturerData` as `a{qv}` holding
/// an iBeacon-like `ay`), then one `Done` signal closing the stream.
enum BenchSignal {
    static let path: ObjectPath = "/org/bluez/hci0/dev_C0_FF_EE_00_00_01"
    static let deviceInterface = "org.bluez.Device1"
    static let benchInterface: InterfaceName = "org.proximityd.Bench1"
    static let changedMember: MemberName = "PropertiesChanged"
    /// `Done(u sent, x rssiSum)`: sent after the last `PropertiesChanged`. The bus keeps one
    /// sender's messages in order, so a subscriber that sees it has seen everything it will get.
    static let doneMember: MemberName = "Done"
    /// Apple's company identifier, as in an iBeacon advertisement.
    static let companyID: UInt16 = 0x004C

    /// The one match rule every subscriber (DBusKit and Python) installs.
    static let matchRule = MatchRule(path: path)
    static var matchRuleText: String { matchRule.description }

    /// The RSSI carried by signal `i`: -30 … -99 dBm.
    static func rssi(_ i: Int) -> Int16 { Int16(-30 - (i % 70)) }

    /// The sum of the RSSI values of the first `count` signals: each subscriber adds up what it
    /// decoded and compares, which proves it decoded every value.
    static func rssiSum(count: Int) -> Int64 {
        let cycles = count / 70, rest = count % 70
        let full = (0..<70).reduce(Int64(0)) { $0 + Int64(rssi($1)) }
        return Int64(cycles) * full + (0..<rest).reduce(Int64(0)) { $0 + Int64(rssi($1)) }
    }

    /// 23 bytes of iBeacon manufacturer data: type, length, proximity UUID, major, minor, TX power.
    static let manufacturerData: [UInt8] = [0x02, 0x15]
        + [0xE2, 0xC5, 0x6D, 0xB5, 0xDF, 0xFB, 0x48, 0xD2, 0xB0, 0x60, 0xD0, 0xF5, 0xA7, 0x10, 0x96, 0xE0]
        + [0x00, 0x01, 0x00, 0x2A, 0xC5]

    /// The arguments of signal `i`.
    static func arguments(_ i: Int) -> [DBusValue] {
        [
            .string(deviceInterface),
            .dictionary(key: .string, value: .variant, [
                .init(.string("RSSI"), .variant(.int16(rssi(i)))),
                .init(.string("ManufacturerData"), .variant(.dictionary(key: .uint16, value: .variant, [
                    .init(.uint16(companyID), .variant(.bytes(manufacturerData))),
                ]))),
            ]),
            .strings([]),
        ]
    }
}

/// The exported object of the `calls` benchmark.
enum BenchService {
    static let path: ObjectPath = "/org/proximityd/bench"
    static let interface: InterfaceName = "org.proximityd.Bench1"
}

// MARK: - Statistics

/// Percentiles of a set of samples (nearest rank).
struct Percentiles {
    private let sorted: [Double]
    init(_ samples: [Double]) { sorted = samples.sorted() }
    func callAsFunction(_ p: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1
        return sorted[min(max(rank, 0), sorted.count - 1)]
    }
}

// MARK: - Output

/// Writes `value` as one line of JSON to standard output.
func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    let data = try encoder.encode(value)
    print(String(decoding: data, as: UTF8.self))
}

/// Writes `line` to standard error (progress and warnings, so `--json` output stays clean).
func note(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

/// A plain text table with right-aligned columns after the first.
struct TextTable {
    var header: [String]
    var rows: [[String]] = []

    func render() -> String {
        var widths = header.map(\.count)
        for row in rows {
            for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, cell in
                let pad = String(repeating: " ", count: max(0, widths[i] - cell.count))
                return i == 0 ? cell + pad : pad + cell
            }.joined(separator: "  ")
        }
        let rule = widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")
        return ([line(header), rule] + rows.map(line)).joined(separator: "\n")
    }
}

extension Double {
    /// `12,345`-style grouping of a rounded rate.
    var grouped: String {
        guard isFinite else { return "-" }
        let n = Int(rounded())
        let digits = String(abs(n))
        var out = ""
        for (i, c) in digits.reversed().enumerated() {
            if i > 0 && i % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return (n < 0 ? "-" : "") + String(out.reversed())
    }

    func fixed(_ decimals: Int) -> String {
        guard isFinite else { return "-" }
        return String(format: "%.\(decimals)f", self)
    }
}

// MARK: - Locating things

enum BenchPaths {
    /// This executable, for starting the emitter as a child process.
    static var executable: String {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
    }

    /// The package root: the first directory above the executable or the working directory that
    /// holds `benchmarks/python`.
    static var packageRoot: URL? {
        let starts = [
            URL(fileURLWithPath: executable).deletingLastPathComponent(),
            URL(fileURLWithPath: FileManager.default.currentDirectoryPath),
        ]
        for start in starts {
            var dir = start.standardizedFileURL
            while true {
                let probe = dir.appendingPathComponent("benchmarks/python/receive_signals.py").path
                if FileManager.default.fileExists(atPath: probe) { return dir }
                let parent = dir.deletingLastPathComponent()
                if parent.path == dir.path { break }
                dir = parent
            }
        }
        return nil
    }

    static var pythonScripts: URL? { packageRoot?.appendingPathComponent("benchmarks/python") }

    /// The benchmark venv's interpreter (`.venv-bench`, made by `benchmarks/run-dbus-bench.sh`)
    /// when it exists.
    static var venvPython: String? {
        guard let root = packageRoot else { return nil }
        let path = root.appendingPathComponent(".venv-bench/bin/python").path
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }
}

/// Whether `python` can import `modules` (checked by running it).
func pythonHasModules(_ python: String, _ modules: [String]) async -> Bool {
    let result = try? await runCommand(python, ["-c", "import " + modules.joined(separator: ", ")], timeout: .seconds(30))
    return result?.status == 0
}
