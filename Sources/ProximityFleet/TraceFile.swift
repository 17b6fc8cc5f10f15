import Foundation
import ProximityCore

/// A recording of RSSI samples for `proximity-fleet replay`, `calibrate` and `walk`, CSV as
/// ``CSVReader`` reads it (RFC 4180; LF or CRLF). Either a trace, whose header row names its
/// columns, among them `time,node,device,rssi` (and `x,y,z` for the truth), other columns
/// ignored; or what `proximityctl record` wrote on one node: `#` comment lines, one of them with
/// `name=NODE`, then the columns `time,peer,rssi,…`, read as that node's samples of each peer (its
/// rows without an rssi, the reports and truth marks, skipped). In both, lines starting with `#`
/// are comments; empty rows and comments after the header are skipped and counted. Problems are
/// `FILE:LINE: message`.
public enum TraceFile {
    public typealias Problem = CSVReader.Problem

    public struct Trace: Sendable {
        public var samples: [TraceSample]
        /// The node whose `proximityctl record` file this was; nil for a trace.
        public var recordedBy: String?
        public var skipped = SkippedRows()
    }

    /// A trace or a record file (`replay`, `calibrate`), with at least one sample.
    public static func load(path: String, truthFor: String? = nil) throws(Problem) -> Trace {
        var reader = try CSVReader(path: path, comments: true)
        return try read(&reader, truthFor: truthFor)
    }

    /// A `proximityctl record` file (`walk`): its samples as the node `node`'s (by default the one
    /// its comments name); none is no problem, the node may have heard nothing.
    public static func loadRecord(path: String, node: String?) throws(Problem) -> Trace {
        var reader = try CSVReader(path: path, comments: true)
        return try read(&reader, recordOnly: true, node: node)
    }

    /// The samples of `reader`'s file: a trace or a record file (with `recordOnly`, only a record
    /// file), whose samples are `node`'s when it is given.
    public static func read(_ reader: inout CSVReader, truthFor: String? = nil, recordOnly: Bool = false,
                            node given: String? = nil) throws(Problem) -> Trace {
        let path = reader.path
        var named: String?
        var headerRow: CSVReader.Record?
        while let row = try reader.next() {
            if row.isComment, named == nil, let range = row.fields[0].range(of: " name=") {
                named = String(row.fields[0][range.upperBound...]).trimmingCharacters(in: .whitespaces)
            }
            if !row.isComment, !row.isEmpty {
                headerRow = row
                break
            }
        }
        guard let headerRow else {
            throw reader.problem(1, "no header row: the first row names the columns, among them time,node,device,rssi")
        }
        func problem(_ line: Int, _ message: String) -> Problem { reader.problem(line, message) }
        let header = headerRow.fields.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        var column: [String: Int] = [:]
        for (i, name) in header.enumerated() where column[name] == nil { column[name] = i }
        let isRecord = recordOnly || column["peer"] != nil && column["node"] == nil && column["device"] == nil
        let missing = (isRecord ? ["time", "peer", "rssi"] : ["time", "node", "device", "rssi"]).filter { column[$0] == nil }
        if !missing.isEmpty {
            throw problem(headerRow.line, recordOnly ? "not a proximityctl record file (no time,peer,rssi columns)"
                : "no \(missing.joined(separator: ", ")) column (the header names \(header.joined(separator: ",")))")
        }
        let truthColumns = ["x", "y", "z"].compactMap { column[$0] }
        if let truthFor, truthColumns.count < 2 {
            throw problem(headerRow.line, "\(truthFor) needs the truth: x,y columns (and z on several floors)")
        }
        var recordedBy: String?
        if isRecord {
            guard let node = given ?? named, !node.isEmpty else {
                throw Problem(message: recordOnly ? "\(path): no node name (name=… in its first line): give it as NAME=\(path)"
                    : "\(path): a proximityctl record file without its node's name (name=… in its first line): " +
                        "proximity-fleet walk NAME=\(path) > trace.csv makes a trace of it")
            }
            recordedBy = node
        }
        let (ti, ri) = (column["time"]!, column["rssi"]!)
        let (ni, di) = isRecord ? (nil, column["peer"]!) : (column["node"], column["device"]!)
        let (xi, yi, zi) = (column["x"], column["y"], column["z"])
        var trace = Trace(samples: [], recordedBy: recordedBy)
        while let row = try reader.next() {
            if trace.skipped.skips(row) { continue }
            let f = row.fields
            if isRecord, ri >= f.count || f[ri].trimmingCharacters(in: .whitespaces).isEmpty {
                trace.skipped.add("without an rssi (a report's or a truth mark's row)")
                continue
            }
            func value(_ i: Int, _ name: String) throws(Problem) -> Double {
                guard i < f.count, let v = Double(f[i].trimmingCharacters(in: .whitespaces)), v.isFinite else {
                    throw problem(row.line, "\(name) must be a number, not \(i < f.count ? f[i].debugDescription : "missing")")
                }
                return v
            }
            func text(_ i: Int, _ name: String) throws(Problem) -> String {
                guard i < f.count, !f[i].isEmpty else { throw problem(row.line, "\(name) is empty") }
                return f[i]
            }
            let time = try value(ti, "time"), rssi = try value(ri, "rssi")
            guard (-127 ... 20).contains(rssi) else { throw problem(row.line, "rssi must be in -127…20 dBm, not \(f[ri])") }
            var truth: PlanPoint?
            if let xi, let yi, xi < f.count, yi < f.count, !f[xi].isEmpty, !f[yi].isEmpty {
                let z = try zi.map { i throws(Problem) in i < f.count && !f[i].isEmpty ? try value(i, "z") : 1 } ?? 1
                truth = PlanPoint(x: try value(xi, "x"), y: try value(yi, "y"), z: z)
            }
            let node = if let recordedBy { recordedBy } else { try text(ni!, "node") }
            trace.samples.append(TraceSample(time: time, node: node, device: try text(di, isRecord ? "peer" : "device"), rssi: rssi,
                                             truth: truth))
        }
        if !recordOnly, trace.samples.isEmpty { throw problem(headerRow.line, "no samples after the header") }
        return trace
    }
}
