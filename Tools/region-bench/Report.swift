import Foundation
import ProximityCore

/// Everything one run measured: the JSON output, and the table's source. Times are seconds, memory
/// bytes.
struct BenchResult: Codable {
    var mix: Mix
    var regions: Int
    var peers: Int
    var reports: Int
    var warmUp: Int
    var seed: UInt64
    var reportInterval: Double
    var defaultExitPeriod: Double
    var workload: WorkloadSummary
    var monitor: Timing
    /// The naive monitor; nil with --no-baseline.
    var baseline: Timing?
    var memory: MemoryFigures
    var crossCheck: String
    /// The naive monitor's median time per report over the monitor's.
    var medianSpeedup: Double?

    init(mix: Mix, regions: Int, peers: Int, reports: Int, warmUp: Int, seed: UInt64, reportInterval: Double,
         defaultExitPeriod: Double, workload: WorkloadSummary, monitor: Timing, baseline: Timing?, memory: MemoryFigures,
         crossCheck: String) {
        (self.mix, self.regions, self.peers, self.reports, self.warmUp, self.seed) = (mix, regions, peers, reports, warmUp, seed)
        (self.reportInterval, self.defaultExitPeriod, self.workload) = (reportInterval, defaultExitPeriod, workload)
        (self.monitor, self.baseline, self.memory, self.crossCheck) = (monitor, baseline, memory, crossCheck)
        medianSpeedup = baseline.map { $0.perReport.median / monitor.perReport.median }
    }
}

/// One monitor's times.
struct Timing: Codable {
    /// Starting every region, one `start` after another.
    var startAll: Double
    /// One `update` per report, over the measured reports.
    var perReport: Distribution
}

/// Memory growth by phase, from `before` (the process before the workload is built).
struct MemoryFigures: Codable {
    var before: MemorySample
    var peerTable: MemoryGrowth
    /// The benchmark's array of regions, as built.
    var regionDefinitions: MemoryGrowth
    /// What starting them in the monitor added while the array was still alive (the monitor's
    /// index, slots and state; the regions' strings are shared with the array).
    var monitorStructures: MemoryGrowth
    /// The monitor holding every region, once the array is dropped: definitions and structures.
    var monitor: MemoryGrowth
    var monitorPerRegion: MemoryGrowth
    /// The naive monitor's own copy of the regions and their state.
    var baseline: MemoryGrowth?
    var baselinePerRegion: MemoryGrowth?
    /// VmHWM at the end, the reports included.
    var peakRSS: Int
}

/// The workload a run generated.
struct WorkloadSummary: Codable {
    var regionForms: [String: Int]
    var regionsWithWithin: Int
    var regionsWithOwnExitPeriod: Int
    /// Regions with nothing to index by: checked against every peer.
    var unindexedRegions: Int
    /// Distinct keys of the monitor's index, and the most regions under one.
    var indexKeys: Int
    var largestIndexBucket: Int
    var largestIndexBucketKey: String?
    var peerForms: [String: Int]
    var measured = ReportTally()

    init(_ regions: [(RegionForm, Region)], _ table: PeerTable) {
        regionForms = Dictionary(regions.map { ($0.0.rawValue, 1) }, uniquingKeysWith: +)
        regionsWithWithin = regions.count { $0.1.matcher.within != nil }
        regionsWithOwnExitPeriod = regions.count { $0.1.matcher.exitPeriod != nil }
        unindexedRegions = regions.count { !RegionSet.isIndexed($0.1.matcher) }
        let buckets = Dictionary(regions.compactMap { RegionSet.indexKey($0.1.matcher).map { ($0, 1) } }, uniquingKeysWith: +)
        indexKeys = buckets.count
        let largest = buckets.max { ($0.value, $1.key) < ($1.value, $0.key) }
        largestIndexBucket = largest?.value ?? 0
        largestIndexBucketKey = largest?.key
        peerForms = Dictionary(table.peers.map { ($0.form.rawValue, 1) }, uniquingKeysWith: +)
    }
}

/// What the measured reports did, summed.
struct ReportTally: Codable {
    var reports = 0
    var entered = 0
    var exited = 0
    /// `determined outside` without an exit: regions whose first exit period passed with nobody.
    var determinedOutside = 0
    var rangingRegions = 0
    var rangedPairs = 0
    /// Peers heard less than the default exit period ago.
    var recentPeers = 0

    mutating func add(_ outcome: NaiveMonitor.Outcome, _ peers: [PeerSnapshot], at t: Timestamp, exitPeriod: Double) {
        reports += 1
        var exitedNow = 0, outsideNow = 0
        for event in outcome.events {
            switch event {
            case .entered: entered += 1
            case .exited: exitedNow += 1
            case .determined(_, .outside): outsideNow += 1
            case .determined: break
            }
        }
        exited += exitedNow
        determinedOutside += outsideNow - exitedNow
        rangingRegions += outcome.ranging.count
        rangedPairs += outcome.ranging.reduce(0) { $0 + $1.peers.count }
        recentPeers += peers.count { t - $0.lastSeen < exitPeriod }
    }

    func perReport(_ n: Int) -> Double { reports == 0 ? 0 : Double(n) / Double(reports) }
}

// MARK: - The table

extension BenchResult {
    var table: String {
        let w = workload
        let m = w.measured
        var out = "== region-bench --mix \(mix.rawValue): \(regions) regions, \(peers) peers, seed \(seed); "
            + "\(reports) reports measured after \(warmUp) warm-up, one every \(Fmt.number(reportInterval)) s; "
            + "default exit period \(Fmt.number(defaultExitPeriod)) s\n"
        let forms = RegionForm.allCases.compactMap { f in w.regionForms[f.rawValue].map { "\($0) \(f.rawValue)" } }
        out += "regions  " + forms.joined(separator: ", ") + "\n"
        out += "         \(w.regionsWithWithin) with within, \(w.regionsWithOwnExitPeriod) with their own exit period; "
            + "\(w.unindexedRegions) unindexed (checked against every peer); "
            + (w.indexKeys == 0 ? "no index keys" : "\(w.indexKeys) index keys, the largest holding \(w.largestIndexBucket) regions"
                + (w.largestIndexBucketKey.map { " (\($0))" } ?? "")) + "\n"
        let peerForms = PeerForm.allCases.compactMap { f in w.peerForms[f.rawValue].map { "\($0) \(f.rawValue)" } }
        out += "peers    " + peerForms.joined(separator: ", ") + "; \(Fmt.number(m.perReport(m.recentPeers), 0)) heard "
            + "within the exit period per report\n"
        out += "reports  per report: \(Fmt.number(m.perReport(m.entered), 1)) entered, \(Fmt.number(m.perReport(m.exited), 1)) exited, "
            + "\(Fmt.number(m.perReport(m.determinedOutside), 1)) determined outside; \(Fmt.number(m.perReport(m.rangingRegions), 0)) "
            + "regions ranging \(Fmt.number(m.perReport(m.rangedPairs), 0)) peers in all\n\n"

        out += Fmt.left("", 24) + Fmt.right("start all", 11) + Fmt.right("per start", 11) + "   per report:"
            + Fmt.right("median", 10) + Fmt.right("p95", 10) + Fmt.right("max", 10) + Fmt.right("mean", 10) + "\n"
        func row(_ name: String, _ t: Timing) -> String {
            Fmt.left(name, 24) + Fmt.right(Fmt.time(t.startAll), 11) + Fmt.right(Fmt.time(t.startAll / Double(regions)), 11)
                + String(repeating: " ", count: 13) + Fmt.right(Fmt.time(t.perReport.median), 10)
                + Fmt.right(Fmt.time(t.perReport.p95), 10) + Fmt.right(Fmt.time(t.perReport.max), 10)
                + Fmt.right(Fmt.time(t.perReport.mean), 10) + "\n"
        }
        out += row("monitor", monitor)
        if let baseline { out += row("naive (every × every)", baseline) }
        if let s = medianSpeedup {
            out += "the monitor's median report takes \(Fmt.number(1 / s, 3))× the naive monitor's "
                + (s >= 1 ? "(\(Fmt.number(s, 1))× faster)\n" : "(\(Fmt.number(1 / s, 1))× slower)\n")
        }

        out += "\n" + Fmt.left("memory, growth", 44) + Fmt.right("RSS", 10) + Fmt.right("heap", 10)
            + Fmt.right("per region (RSS / heap)", 26) + "\n"
        func growth(_ name: String, _ g: MemoryGrowth, perRegion: Bool) -> String {
            var line = Fmt.left(name, 44) + Fmt.right(Fmt.bytes(g.rss), 10) + Fmt.right(g.heap.map(Fmt.bytes) ?? "n/a", 10)
            if perRegion {
                line += Fmt.right("\(g.rss / regions) B / " + (g.heap.map { "\($0 / regions) B" } ?? "n/a"), 26)
            }
            return line + "\n"
        }
        let mem = self.memory
        out += growth("peer table (\(peers) peers)", mem.peerTable, perRegion: false)
        out += growth("region definitions (the benchmark's array)", mem.regionDefinitions, perRegion: true)
        out += growth("  monitor's structures on top of them", mem.monitorStructures, perRegion: true)
        out += growth("monitor holding every region (array gone)", mem.monitor, perRegion: true)
        if let b = mem.baseline { out += growth("naive monitor, its own copy", b, perRegion: true) }
        out += "peak RSS \(Fmt.bytes(mem.peakRSS)), the reports' transient allocations included (RSS before the workload "
            + "\(Fmt.bytes(mem.before.rss)))\n"
        out += "cross-check: \(crossCheck)\n"
        return out
    }
}

/// Number formatting for the table.
enum Fmt {
    static func number(_ x: Double, _ digits: Int = 0) -> String {
        digits == 0 && x == x.rounded() ? String(Int(x)) : String(format: "%.\(digits)f", x)
    }

    /// Seconds in ns, µs, ms or s, three significant digits or so.
    static func time(_ s: Double) -> String {
        guard s.isFinite else { return "n/a" }
        let (value, unit): (Double, String) = s < 1e-6 ? (s * 1e9, "ns") : s < 1e-3 ? (s * 1e6, "µs") : s < 1 ? (s * 1e3, "ms") : (s, "s")
        return String(format: value < 10 ? "%.2f" : value < 100 ? "%.1f" : "%.0f", value) + " " + unit
    }

    /// Bytes in kB or MB (10³, 10⁶).
    static func bytes(_ b: Int) -> String {
        let x = Double(b)
        if abs(x) < 1e6 { return String(format: "%.0f kB", x / 1e3) }
        return String(format: "%.1f MB", x / 1e6)
    }

    static func left(_ s: String, _ width: Int) -> String {
        s.count >= width ? s : s + String(repeating: " ", count: width - s.count)
    }

    static func right(_ s: String, _ width: Int) -> String {
        s.count >= width ? s : String(repeating: " ", count: width - s.count) + s
    }
}
