import ArgumentParser
import Foundation
import ProximityCore

/// `region-bench`: the region monitor's cost per report and memory per region, against a naive
/// monitor (every peer checked against every region) in the same run, with a cross-check of their
/// events. See benchmarks/README.md, "Region monitor".
@main
struct RegionBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "region-bench",
        abstract: "Region monitor benchmark: time per report and memory per region, against a naive monitor in the same run.",
        discussion: """
            Builds a deterministic workload from the seed: a peer table (nodes, iBeacons of a few fleet \
            UUIDs, AltBeacons, Eddystone-UID and Eddystone-URL under a few domains) whose peers move, \
            leave and come back report after report, one report a second, and --regions regions of \
            the --mix. Starts every region in a RegionMonitor, then feeds it --warm-up and --reports \
            reports, timing each update. The naive monitor (every region against every peer, each \
            report) gets the same reports; their events, ranging and final region states must be \
            identical or the benchmark fails (exit status 1).

            Memory is the growth of resident set size (VmRSS, after malloc_trim) and of malloc's \
            bytes in use (malloc_info) from before the workload is built: the peer table, the region \
            definitions, and the monitor holding them once the benchmark's own copy is dropped.
            """
    )

    @Option(help: "Regions to monitor (1...100000).")
    var regions = 10_000

    @Option(help: "Peers in the table, every report.")
    var peers = 1_000

    @Option(help: "Reports measured, after the warm-up.")
    var reports = 60

    @Option(help: "Reports fed before measuring (the first ones enter most regions at once).")
    var warmUp = 10

    @Option(help: "Seed of the workload: the same seed gives the same peers, regions and movements.")
    var seed: UInt64 = 1

    @Option(help: ArgumentHelp("The regions: \(Mix.help).", valueName: "mix"))
    var mix: Mix = .realistic

    @Flag(inversion: .prefixedNo,
          help: "Run the naive monitor in the same run and cross-check it (--no-baseline: the monitor alone, e.g. under perf).")
    var baseline = true

    @Flag(help: "Print the results as one JSON object.")
    var json = false

    /// Seconds between reports.
    static let interval: Timestamp = 1
    /// When the regions are started; the first report is one interval later.
    static let t0: Timestamp = 1_000_000

    func validate() throws {
        guard RegionMonitor.Configuration.maxRegionsRange.upperBound >= regions, regions > 0 else {
            throw ValidationError("--regions must be in 1...\(RegionMonitor.Configuration.maxRegionsRange.upperBound)")
        }
        guard peers > 0 else { throw ValidationError("--peers must be positive") }
        guard reports > 0 else { throw ValidationError("--reports must be positive") }
        guard warmUp >= 0 else { throw ValidationError("--warm-up must be 0 or more") }
    }

    func run() throws {
        let t0 = Self.t0
        var configuration = RegionMonitor.Configuration()
        configuration.maxRegions = max(regions, RegionMonitor.Configuration.maxRegionsRange.lowerBound)

        // A small run first, so that the code and the runtime's caches are resident before memory is
        // measured (otherwise the first phase's RSS counts them).
        Self.prime(mix: mix, configuration: configuration)

        // Memory, phase by phase. Each sample trims malloc first.
        let before = MemorySample.now()
        var table = PeerTable(count: peers, seed: seed, at: t0)
        let afterTable = MemorySample.now()
        var definitions: [(RegionForm, Region)]? = RegionSet.make(count: regions, mix: mix, seed: seed, table: table)
        let afterDefinitions = MemorySample.now()

        var monitor = RegionMonitor(configuration: configuration)
        var wrongStart: String?
        let monitorStart = try seconds {
            for (_, region) in definitions! {
                let events = try monitor.start(region, at: t0)
                if events.count != 1 || events[0] != .determined(region.identifier, .unknown) {
                    wrongStart = wrongStart ?? "start \(region.identifier): \(events)"
                }
            }
        }
        let afterStart = withExtendedLifetime(definitions) { MemorySample.now() }
        definitions = nil
        let afterDrop = MemorySample.now()

        // The baseline gets its own copy of the same regions (made again from the seed), so that its
        // memory is its own.
        var naive = NaiveMonitor(defaultExitPeriod: configuration.defaultExitPeriod)
        var naiveStart: Double?
        var naiveMemory: MemoryGrowth?
        if baseline {
            var copy: [(RegionForm, Region)]? = RegionSet.make(count: regions, mix: mix, seed: seed, table: table)
            naiveStart = seconds {
                for (_, region) in copy! { _ = naive.start(region, at: t0) }
            }
            copy = nil
            // What the baseline holds once the copy is gone.
            naiveMemory = MemorySample.now().minus(afterDrop)
        }
        // Described from one more copy, after the memory is measured.
        var workload = WorkloadSummary(RegionSet.make(count: regions, mix: mix, seed: seed, table: table), table)
        if let wrongStart { throw Failure("the monitor's start did not return determined unknown: \(wrongStart)") }

        var monitorTimes: [Double] = []
        var naiveTimes: [Double] = []
        var tally = ReportTally()
        for k in 1...(warmUp + reports) {
            let t = t0 + Double(k) * Self.interval
            let candidates = table.report(at: t)
            var update: RegionUpdate?
            var outcome: NaiveMonitor.Outcome?
            // Alternate which one goes first, so neither always runs on the other's cache.
            let runMonitor = { () -> Double in seconds { update = monitor.update(candidates, at: t) } }
            let runNaive = { () -> Double in seconds { outcome = naive.update(candidates, at: t) } }
            var monitorTime = 0.0, naiveTime = 0.0
            if !baseline {
                monitorTime = runMonitor()
            } else if k % 2 == 0 {
                monitorTime = runMonitor()
                naiveTime = runNaive()
            } else {
                naiveTime = runNaive()
                monitorTime = runMonitor()
            }
            let mine = NaiveMonitor.Outcome(update!)
            if let outcome, let difference = mine.difference(from: outcome, "monitor", "naive") {
                throw Failure("cross-check failed at report \(k) (t0 + \(Double(k) * Self.interval) s): \(difference)")
            }
            if k > warmUp {
                monitorTimes.append(monitorTime)
                if baseline { naiveTimes.append(naiveTime) }
                tally.add(mine, candidates, at: t, exitPeriod: configuration.defaultExitPeriod)
            }
        }
        var crossCheck = "not run (--no-baseline)"
        if baseline {
            for entry in naive.entries {
                guard let status = monitor.status(of: entry.region.identifier) else {
                    throw Failure("cross-check failed: the monitor lost region \(entry.region.identifier)")
                }
                guard status.state == entry.state, status.lastSeen == entry.lastSeen else {
                    throw Failure("cross-check failed: region \(entry.region.identifier) is \(status.state) " +
                        "(last seen \(String(describing: status.lastSeen))) in the monitor, \(entry.state) " +
                        "(last seen \(String(describing: entry.lastSeen))) in the naive monitor")
                }
            }
            crossCheck = "identical events and ranging in all \(warmUp + reports) reports, identical states of all \(regions) regions"
        }
        workload.measured = tally

        let monitorMemory = afterDrop.minus(afterTable)
        let result = BenchResult(
            mix: mix, regions: regions, peers: peers, reports: reports, warmUp: warmUp, seed: seed,
            reportInterval: Self.interval, defaultExitPeriod: configuration.defaultExitPeriod, workload: workload,
            monitor: Timing(startAll: monitorStart, perReport: Distribution(monitorTimes)),
            baseline: naiveStart.map { Timing(startAll: $0, perReport: Distribution(naiveTimes)) },
            memory: MemoryFigures(
                before: before, peerTable: afterTable.minus(before), regionDefinitions: afterDefinitions.minus(afterTable),
                monitorStructures: afterStart.minus(afterDefinitions), monitor: monitorMemory,
                monitorPerRegion: monitorMemory.divided(by: regions), baseline: naiveMemory,
                baselinePerRegion: naiveMemory?.divided(by: regions),
                peakRSS: (ProcStatus.kilobytes("VmHWM") ?? 0) * 1024),
            crossCheck: crossCheck)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(result), as: UTF8.self))
        } else {
            print(result.table)
        }
    }
}

extension RegionBench {
    /// Runs every path of the benchmark once on a small workload, and throws it away.
    static func prime(mix: Mix, configuration: RegionMonitor.Configuration) {
        var table = PeerTable(count: 50, seed: 0, at: t0)
        let regions = RegionSet.make(count: 200, mix: mix, seed: 0, table: table)
        var monitor = RegionMonitor(configuration: configuration)
        var naive = NaiveMonitor(defaultExitPeriod: configuration.defaultExitPeriod)
        for (_, region) in regions {
            _ = try? monitor.start(region, at: t0)
            _ = naive.start(region, at: t0)
        }
        _ = WorkloadSummary(regions, table)
        for k in 1...2 {
            let t = t0 + Double(k) * interval
            let peers = table.report(at: t)
            var tally = ReportTally()
            tally.add(NaiveMonitor.Outcome(monitor.update(peers, at: t)), peers, at: t, exitPeriod: configuration.defaultExitPeriod)
            _ = naive.update(peers, at: t)
        }
        _ = MemorySample.now()
    }
}

/// The benchmark failed: its message, and exit status 1.
struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
