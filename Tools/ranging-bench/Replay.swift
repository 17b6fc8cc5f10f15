import ArgumentParser
import BlueZSim
import Foundation
import ProximityBenchmarking
import ProximityCore
import ProximityFleet

// `ranging-bench --replay FILE.csv…`: every pipeline on traces recorded on a real radio with
// `proximityctl record` (docs/ranging.md, "Record and replay").

/// What the truth column says at a moment.
enum Truth: Equatable, Sendable {
    /// The true distance, metres.
    case distance(Double)
    /// The peer is not there (out of range, switched off).
    case absent
}

/// One recorded peer: its samples and, when the recording has them, the node's reports of it.
struct RecordedTrace: Sendable {
    struct Sample: Sendable {
        var t: Double
        var rssi: Double
        var measuredPower: Double?
        var truth: Truth?
    }

    struct Report: Sendable {
        var t: Double
        /// `immediate`, `near`, `far`, `unknown`, `removed`.
        var zone: String
        var truth: Truth?
    }

    var peer: String
    var samples: [Sample] = []
    var reports: [Report] = []
    /// Rows that give a truth and nothing else.
    var marks: [(t: Double, truth: Truth)] = []

    /// The times of the reports: the recorded ones, else one a second from a second after the
    /// first sample to a second after the last row.
    var tickTimes: [Double] {
        if !reports.isEmpty { return reports.map(\.t) }
        guard let first = samples.first?.t else { return [] }
        let last = max(samples.last?.t ?? first, marks.last?.t ?? first)
        return Array(stride(from: first + 1, through: last + 1, by: 1))
    }

    /// The measured power of most of its samples (the baselines take one), or nil if none says.
    var usualMeasuredPower: Double? {
        let powers = samples.compactMap(\.measuredPower)
        guard !powers.isEmpty else { return nil }
        return Dictionary(grouping: powers, by: { $0 }).max { ($0.value.count, $1.key) < ($1.value.count, $0.key) }?.key
    }

    /// The truth at `t`: the truth of a row at exactly `t` if it has one, else the latest truth
    /// given at or before `t`, if given no more than ``truthReach`` earlier.
    func truth(at t: Double) -> Truth? {
        var best: (t: Double, truth: Truth)?
        func consider(_ time: Double, _ truth: Truth?) {
            guard let truth, time <= t, t - time <= Self.truthReach else { return }
            if best == nil || time >= best!.t { best = (time, truth) }
        }
        for s in samples { consider(s.t, s.truth) }
        for r in reports { consider(r.t, r.truth) }
        for m in marks { consider(m.t, m.truth) }
        return best?.truth
    }

    /// How long a truth holds after its row when no later row gives one, seconds.
    static let truthReach = 1.5
}

/// A recording: its traces, by peer, and what its comment says of the node.
struct Recording: Sendable {
    var path: String
    var traces: [RecordedTrace]
    /// From the `# proximityctl record:` line, when there.
    var pathLossExponent: Double?
    var clearInterval: Double?
    var defaultMeasuredPower: Double?

    struct ParseError: Error, CustomStringConvertible {
        var description: String
    }

    /// The columns `--replay` needs; any other column is read if known, else ignored.
    static let required = ["time", "peer", "rssi", "truth"]

    static func load(_ path: String) throws -> Recording {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ParseError(description: "\(path): cannot read the file")
        }
        guard let text = String(data: data, encoding: .utf8) else { throw ParseError(description: "\(path): not UTF-8 text") }
        return try parse(text, path: path)
    }

    static func parse(_ text: String, path: String) throws -> Recording {
        var recording = Recording(path: path, traces: [])
        var columns: [String: Int]?
        var traces: [String: RecordedTrace] = [:]
        var order: [String] = []
        var lineNumber = 0
        func problem(_ message: String) -> ParseError { ParseError(description: "\(path):\(lineNumber): \(message)") }
        // RFC 4180, as users write it (LF or CRLF, quoted fields, a BOM): proximity-fleet's reader.
        var reader = CSVReader(Data(text.utf8), path: path, comments: true)
        while true {
            let next: CSVReader.Record?
            do { next = try reader.next() } catch { throw ParseError(description: error.message) }
            guard let record = next else { break }
            lineNumber = record.line
            if record.isComment {
                if let line = record.fields.first, line.hasPrefix("# proximityctl record:") { recording.readComment(line) }
                continue
            }
            if record.isEmpty { continue }
            let fields = record.fields.map { $0.trimmingCharacters(in: .whitespaces) }
            guard let columns else {
                var found: [String: Int] = [:]
                for (i, name) in fields.enumerated() {
                    let key = name.lowercased()
                    guard found[key] == nil else { throw problem("the header names \(key.debugDescription) twice") }
                    found[key] = i
                }
                let missing = required.filter { found[$0] == nil }
                guard missing.isEmpty else {
                    throw problem("the header needs the columns \(required.joined(separator: ",")); " +
                                  "missing: \(missing.joined(separator: ", "))")
                }
                columns = found
                continue
            }
            func field(_ name: String) -> String? {
                guard let i = columns[name], i < fields.count, !fields[i].isEmpty else { return nil }
                return fields[i]
            }
            func number(_ name: String) throws -> Double? {
                guard let text = field(name) else { return nil }
                guard let value = Double(text), value.isFinite else { throw problem("\(name): \(text.debugDescription) is not a number") }
                return value
            }
            guard fields.count <= columns.count || fields[columns.count...].allSatisfy({ $0.isEmpty }) else {
                throw problem("\(fields.count) fields, the header has \(columns.count)")
            }
            guard let t = try number("time") else { throw problem("time is empty") }
            guard let peer = field("peer") else { throw problem("peer is empty") }
            let truth: Truth?
            switch field("truth") {
            case nil: truth = nil
            case "absent"?: truth = .absent
            case let text?:
                guard let d = Double(text), d.isFinite, d >= 0 else {
                    throw problem("truth: \(text.debugDescription) is neither a distance in metres (0 or more) nor absent")
                }
                truth = .distance(d)
            }
            let rssi = try number("rssi")
            let zone = field("zone")
            let power = try number("measured_power")
            if let rssi, !(-127...20).contains(rssi) { throw problem("rssi: \(rssi) dBm is outside -127…20") }
            if let power, !(-127...20).contains(power) { throw problem("measured_power: \(power) dBm is outside -127…20") }
            if traces[peer] == nil {
                traces[peer] = RecordedTrace(peer: peer)
                order.append(peer)
            }
            switch (rssi, zone) {
            case (let rssi?, nil):
                traces[peer]!.samples.append(.init(t: t, rssi: rssi, measuredPower: power, truth: truth))
            case (nil, let zone?):
                guard ["immediate", "near", "far", "unknown", "removed"].contains(zone) else {
                    throw problem("zone: \(zone.debugDescription) is not immediate, near, far, unknown or removed")
                }
                traces[peer]!.reports.append(.init(t: t, zone: zone, truth: truth))
            case (_?, _?):
                throw problem("a row is a sample (rssi) or a report (zone), not both")
            case (nil, nil):
                guard let truth else { throw problem("a row needs rssi (a sample), zone (a report) or truth (a truth mark)") }
                traces[peer]!.marks.append((t, truth))
            }
        }
        guard columns != nil else { throw ParseError(description: "\(path): no header (\(required.joined(separator: ",")), …)") }
        recording.traces = order.map { peer in
            var trace = traces[peer]!
            // In time order; rows of one time keep the file's order.
            trace.samples = trace.samples.enumerated().sorted { ($0.element.t, $0.offset) < ($1.element.t, $1.offset) }.map(\.element)
            trace.reports = trace.reports.enumerated().sorted { ($0.element.t, $0.offset) < ($1.element.t, $1.offset) }.map(\.element)
            trace.marks = trace.marks.enumerated().sorted { ($0.element.t, $0.offset) < ($1.element.t, $1.offset) }.map(\.element)
            return trace
        }
        guard recording.traces.contains(where: { !$0.samples.isEmpty }) else {
            throw ParseError(description: "\(path): no sample rows")
        }
        return recording
    }

    /// `key=value` words of `proximityctl record`'s first comment line.
    mutating func readComment(_ line: String) {
        for word in line.split(separator: " ") {
            let parts = word.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let value = Double(parts[1]), value.isFinite else { continue }
            switch parts[0] {
            case "path_loss_exponent": pathLossExponent = value
            case "clear_interval": clearInterval = value
            case "default_measured_power": defaultMeasuredPower = value
            default: break
            }
        }
    }
}

extension Recording.ParseError: LocalizedError {
    var errorDescription: String? { description }
}

// MARK: - Running the pipelines

/// One tick of one pipeline on one recorded peer.
struct ReplayTick: Sendable {
    var t: Double
    var zone: Proximity
    var distance: Double?
    /// The node's table dropped the peer at this tick (its zone reads unknown).
    var removed = false

    /// The zone as the recording writes it.
    var recordedZone: String { removed ? "removed" : zone.rawValue }
}

/// One pipeline's figures over recorded traces.
struct ReplaySummary: Codable, Sendable {
    var pipeline: String
    var role: PipelineRole
    /// Over ticks with a distance for truth.
    var distanceErrorMean: Double?
    var distanceErrorMedian: Double?
    var distanceErrorP90: Double?
    var logErrorMean: Double?
    var zoneAccuracy: Double?
    var ticksWithTruth: Int
    /// Over every tick.
    var ticks: Int
    var zoneChangesPerMinute: Double
    /// Over the ticks where the peer is present (its truth a distance; with no truth, between its
    /// first and last sample).
    var unknownWhilePresent: Double?
    var falseUnknownPerHour: Double?
    /// From the truth turning absent to the first unknown, seconds.
    var departureMedian: Double?
    var departures: Int
}

/// The node's zones against the ones the live node reported, at every recorded report time.
struct ReplayAgreement: Codable, Sendable {
    var reports: Int
    var agreeing: Int
    /// The first few that differ: time, peer, recorded, replayed.
    var differences: [String]
}

struct ReplayFileResult: Codable, Sendable {
    var file: String
    var peers: [String]
    var samples: Int
    var reports: Int
    var summaries: [ReplaySummary]
    /// Nil when the file has no report rows.
    var agreement: ReplayAgreement?
    var notes: [String]
    /// With --zones: per peer, every pipeline's zone at each tick (and the recorded zone).
    var zones: [ReplayZoneRow]?
}

struct ReplayZoneRow: Codable, Sendable {
    var t: Double
    var peer: String
    var recorded: String?
    var zones: [String]
}

private struct ReplayTally {
    var distanceErrors: [Double] = []
    var logErrors: [Double] = []
    var zoneHits = 0, zoneTicks = 0
    var ticks = 0, changes = 0, minutes = 0.0
    var presentTicks = 0, unknownPresent = 0
    var departures: [Double] = []
}

enum Replay {
    /// Runs `specs` on every trace of `recording`; the node pipeline's configuration comes from
    /// `specs`, its measured power from each sample.
    static func run(_ recording: Recording, specs: [PipelineSpec], fallbackPower: Double, zones wantZones: Bool) -> ReplayFileResult {
        let exponent = recording.pathLossExponent ?? 2
        var tallies = specs.map { _ in ReplayTally() }
        var agreement = ReplayAgreement(reports: 0, agreeing: 0, differences: [])
        var zoneRows: [ReplayZoneRow] = []
        var notes: [String] = []
        if let n = recording.pathLossExponent, n != 2 {
            notes.append("the live node used a path-loss exponent of \(n); the replayed node uses RangingConfiguration()'s 2, " +
                         "so their zones can differ")
        }
        if let c = recording.clearInterval, c != RangingConfiguration().clearInterval {
            notes.append("the live node cleared peers after \(c) s; the replayed node after \(RangingConfiguration().clearInterval) s")
        }
        for trace in recording.traces where !trace.samples.isEmpty {
            let power = trace.usualMeasuredPower ?? recording.defaultMeasuredPower ?? fallbackPower
            let condition = RadioCondition(sigma: 0, exponent: exponent, interval: 0.1, loss: 0, measuredPower: power)
            let radio = condition.model
            let ticks = trace.tickTimes
            let firstSample = trace.samples.first!.t, lastSample = trace.samples.last!.t
            var columns: [[ReplayTick]] = []
            for (k, spec) in specs.enumerated() {
                let column = drive(trace, spec.make(condition), ticks: ticks, fallbackPower: power)
                columns.append(column)
                var tally = tallies[k]
                var previous: Proximity?
                var present: Bool?
                var departedAt: Double?
                for tick in column {
                    tally.ticks += 1
                    if let previous, previous != tick.zone { tally.changes += 1 }
                    previous = tick.zone
                    let truth = trace.truth(at: tick.t)
                    let isPresent: Bool
                    switch truth {
                    case .distance(let d)?:
                        isPresent = true
                        if let distance = tick.distance {
                            tally.distanceErrors.append(abs(distance - d))
                            tally.logErrors.append(abs(log10(max(distance, 1e-3) / max(d, 1e-3))))
                        }
                        tally.zoneTicks += 1
                        if tick.zone == Scoring.truthZone(spec, distance: d, radio: radio) { tally.zoneHits += 1 }
                    case .absent?:
                        isPresent = false
                    case nil:
                        isPresent = tick.t >= firstSample && tick.t <= lastSample
                    }
                    if isPresent {
                        tally.presentTicks += 1
                        if tick.zone == .unknown { tally.unknownPresent += 1 }
                    }
                    // A departure: the truth turns absent after the peer was present (ticks with
                    // neither between do not count); timed to the first unknown.
                    if present == true && truth == .absent { departedAt = tick.t }
                    if isPresent { departedAt = nil }
                    if let since = departedAt, tick.zone == .unknown {
                        tally.departures.append(tick.t - since)
                        departedAt = nil
                    }
                    if isPresent || truth != nil { present = isPresent }
                }
                if let first = column.first, let last = column.last { tally.minutes += (last.t - first.t + 1) / 60 }
                tallies[k] = tally
            }
            // The node against the live node, at each recorded report.
            if !trace.reports.isEmpty, let node = specs.firstIndex(where: { $0.role == .node }) {
                for (i, report) in trace.reports.enumerated() {
                    agreement.reports += 1
                    let mine = columns[node][i].recordedZone
                    if mine == report.zone {
                        agreement.agreeing += 1
                    } else if agreement.differences.count < 10 {
                        agreement.differences.append("\(report.t) \(trace.peer): recorded \(report.zone), replayed \(mine)")
                    }
                }
            }
            if wantZones {
                let recorded = trace.reports.isEmpty ? nil : trace.reports.map(\.zone)
                for (i, t) in ticks.enumerated() {
                    zoneRows.append(ReplayZoneRow(t: t, peer: trace.peer, recorded: recorded?[i],
                                                  zones: columns.map { $0[i].recordedZone }))
                }
            }
        }
        let summaries = zip(specs, tallies).map { spec, t in
            ReplaySummary(
                pipeline: spec.name, role: spec.role,
                distanceErrorMean: spec.hasDistance ? mean(t.distanceErrors) : nil,
                distanceErrorMedian: spec.hasDistance ? percentile(t.distanceErrors, 0.5) : nil,
                distanceErrorP90: spec.hasDistance ? percentile(t.distanceErrors, 0.9) : nil,
                logErrorMean: spec.hasDistance ? mean(t.logErrors) : nil,
                zoneAccuracy: t.zoneTicks == 0 ? nil : Double(t.zoneHits) / Double(t.zoneTicks),
                ticksWithTruth: t.zoneTicks, ticks: t.ticks,
                zoneChangesPerMinute: t.minutes == 0 ? 0 : Double(t.changes) / t.minutes,
                unknownWhilePresent: t.presentTicks == 0 ? nil : Double(t.unknownPresent) / Double(t.presentTicks),
                falseUnknownPerHour: t.presentTicks == 0 ? nil : Double(t.unknownPresent) / Double(t.presentTicks) * 3600,
                departureMedian: percentile(t.departures, 0.5), departures: t.departures.count)
        }
        let hasReports = recording.traces.contains { !$0.reports.isEmpty }
        return ReplayFileResult(
            file: recording.path, peers: recording.traces.map(\.peer), samples: recording.traces.map(\.samples.count).reduce(0, +),
            reports: recording.traces.map(\.reports.count).reduce(0, +), summaries: summaries,
            agreement: hasReports ? agreement : nil, notes: notes, zones: wantZones ? zoneRows : nil)
    }

    /// Feeds `trace`'s samples to `pipeline` in time order and reports at each of `ticks`. The
    /// node takes each sample's own measured power, as the live node did, and a tick at which its
    /// table drops the peer is marked `removed`.
    static func drive(_ trace: RecordedTrace, _ start: any Pipeline, ticks: [Double], fallbackPower: Double) -> [ReplayTick] {
        var pipeline = start
        var out: [ReplayTick] = []
        out.reserveCapacity(ticks.count)
        var i = 0
        let samples = trace.samples
        for t in ticks {
            while i < samples.count, samples[i].t <= t {
                let s = samples[i]
                if var node = pipeline as? NodePipeline {
                    node.table.observe(node.peer, rssi: s.rssi, at: s.t, measuredPower: s.measuredPower ?? fallbackPower)
                    pipeline = node
                } else {
                    pipeline.observe(s.rssi, at: s.t)
                }
                i += 1
            }
            if var node = pipeline as? NodePipeline {
                let had = node.table.peers[node.peer] != nil
                let report = node.table.tick(at: t)
                pipeline = node
                if let zone = report.zones[node.peer] {
                    out.append(ReplayTick(t: t, zone: zone, distance: zone == .unknown ? nil : node.table.peers[node.peer]?.distance))
                } else {
                    out.append(ReplayTick(t: t, zone: .unknown, distance: nil, removed: had && report.removed.contains(node.peer)))
                }
            } else {
                let r = pipeline.report(at: t)
                out.append(ReplayTick(t: t, zone: r.zone, distance: r.distance))
            }
        }
        return out
    }
}

// MARK: - Output

enum ReplayTable {
    static func render(_ r: ReplayFileResult) -> String {
        let withTruth = r.summaries.first?.ticksWithTruth ?? 0
        let ticks = r.summaries.first?.ticks ?? 0
        var out = "== \(r.file): \(r.peers.count) peer\(r.peers.count == 1 ? "" : "s"), \(r.samples) samples, "
            + "\(ticks) report\(ticks == 1 ? "" : "s") (\(withTruth) with a true distance)\n"
        out += Table.padRight("pipeline", 20) + Table.pad("err mean", 9) + Table.pad("med", 6) + Table.pad("p90", 6) + Table.pad("log10", 7)
            + Table.pad("zone%", 7) + Table.pad("chg/min", 9) + Table.pad("unk%", 7) + Table.pad("falseU/h", 9)
            + Table.pad("depart med", 11) + "\n"
        for s in r.summaries {
            out += Table.padRight(s.pipeline, 20)
            out += Table.cell(s.distanceErrorMean, 2, width: 9) + Table.cell(s.distanceErrorMedian, 2, width: 6)
                + Table.cell(s.distanceErrorP90, 2, width: 6) + Table.cell(s.logErrorMean, 3, width: 7)
            out += Table.cell(s.zoneAccuracy.map { $0 * 100 }, 1, width: 7)
            out += Table.cell(s.zoneChangesPerMinute, 2, width: 9)
            out += Table.cell(s.unknownWhilePresent.map { $0 * 100 }, 1, width: 7) + Table.cell(s.falseUnknownPerHour, 1, width: 9)
            out += Table.cell(s.departureMedian, 1, width: 11)
            out += "\n"
        }
        if let a = r.agreement {
            out += "   node vs the live node's zones: \(a.agreeing) of \(a.reports) report\(a.reports == 1 ? "" : "s") agree\n"
            for d in a.differences { out += "     \(d)\n" }
        }
        for note in r.notes { out += "   note: \(note)\n" }
        return out
    }

    /// `--zones`: a line per peer and report, the recorded zone and every pipeline's.
    static func zones(_ r: ReplayFileResult, specs: [PipelineSpec]) -> String {
        // One word a column: a name's spaces as _.
        let names = specs.map { $0.name.replacingOccurrences(of: " ", with: "_") }
        var out = "# \(r.file)\n" + (["time", "peer", "recorded"] + names).joined(separator: " ") + "\n"
        for row in r.zones ?? [] {
            out += ([RecordingNumber.text(row.t), row.peer, row.recorded ?? "-"] + row.zones).joined(separator: " ") + "\n"
        }
        return out
    }
}

enum RecordingNumber {
    /// As `proximityctl record` writes times: the shortest text that reads back as the same double.
    static func text(_ x: Double) -> String { "\(x)" }
}

extension RangingBench {
    /// `--replay`: every file's table (and with `--zones` its zones; with `--json` one object).
    func runReplay() throws {
        var results: [ReplayFileResult] = []
        let specs = specs
        for path in replay {
            let recording: Recording
            do { recording = try Recording.load(path) } catch {
                throw ValidationError("\(error)")
            }
            let result = Replay.run(recording, specs: specs, fallbackPower: measuredPower, zones: zones)
            results.append(result)
            if !json {
                print(ReplayTable.render(result))
                if zones { print(ReplayTable.zones(result, specs: specs)) }
            }
        }
        if json {
            try printJSON(results)
        }
    }
}
