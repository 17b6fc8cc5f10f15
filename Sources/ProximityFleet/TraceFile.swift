import Foundation
import ProximityCore

/// A recording of RSSI samples for `proximity-fleet replay` and `calibrate`: CSV with a header
/// row naming the columns, among them `time,node,device,rssi` (and `x,y,z` for the truth); other
/// columns ignored. Problems are `FILE:LINE: message`.
public enum TraceFile {
    public struct Problem: Error, Sendable {
        public var message: String
        /// The file could not be read at all (exit 66 rather than 65).
        public var unreadable: Bool
    }

    /// The largest file read, bytes.
    public static let maxSize = 2 << 30

    public static func load(path: String, truthRequired: Bool = false) throws(Problem) -> [TraceSample] {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path), options: .mappedIfSafe) } catch {
            throw Problem(message: "\(path): cannot read: \((error as NSError).localizedDescription)", unreadable: true)
        }
        guard data.count <= maxSize else { throw Problem(message: "\(path): cannot read: larger than \(maxSize >> 30) GiB", unreadable: true) }
        return try parse(String(decoding: data, as: UTF8.self), path: path, truthRequired: truthRequired)
    }

    public static func parse(_ text: String, path: String, truthRequired: Bool = false) throws(Problem) -> [TraceSample] {
        func problem(_ line: Int, _ message: String) -> Problem { Problem(message: "\(path):\(line): \(message)", unreadable: false) }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).makeIterator()
        guard let headerLine = lines.next(), !headerLine.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw problem(1, "no header row: the first row names the columns, among them time,node,device,rssi")
        }
        let header = fields(headerLine).map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        var column: [String: Int] = [:]
        for (i, name) in header.enumerated() where column[name] == nil { column[name] = i }
        let missing = ["time", "node", "device", "rssi"].filter { column[$0] == nil }
        if !missing.isEmpty { throw problem(1, "no \(missing.joined(separator: ", ")) column (the header names \(header.joined(separator: ",")))") }
        let truthColumns = ["x", "y", "z"].compactMap { column[$0] }
        if truthRequired, truthColumns.count < 2 { throw problem(1, "--score needs the truth: x,y columns (and z on several floors)") }
        let (ti, ni, di, ri) = (column["time"]!, column["node"]!, column["device"]!, column["rssi"]!)
        let (xi, yi, zi) = (column["x"], column["y"], column["z"])
        var samples: [TraceSample] = []
        var number = 1
        while let raw = lines.next() {
            number += 1
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw
            if line.isEmpty { continue }
            let f = fields(line)
            func value(_ i: Int, _ name: String) throws(Problem) -> Double {
                guard i < f.count, let v = Double(f[i].trimmingCharacters(in: .whitespaces)), v.isFinite else {
                    throw problem(number, "\(name) must be a number, not \(i < f.count ? f[i].debugDescription : "missing")")
                }
                return v
            }
            func text(_ i: Int, _ name: String) throws(Problem) -> String {
                guard i < f.count, !f[i].isEmpty else { throw problem(number, "\(name) is empty") }
                return f[i]
            }
            let time = try value(ti, "time"), rssi = try value(ri, "rssi")
            guard (-127 ... 20).contains(rssi) else { throw problem(number, "rssi must be in -127…20 dBm, not \(f[ri])") }
            var truth: PlanPoint?
            if let xi, let yi, xi < f.count, yi < f.count, !f[xi].isEmpty, !f[yi].isEmpty {
                let z = try zi.map { i throws(Problem) in i < f.count && !f[i].isEmpty ? try value(i, "z") : 1 } ?? 1
                truth = PlanPoint(x: try value(xi, "x"), y: try value(yi, "y"), z: z)
            }
            samples.append(TraceSample(time: time, node: try text(ni, "node"), device: try text(di, "device"), rssi: rssi, truth: truth))
        }
        if samples.isEmpty { throw problem(number, "no samples after the header") }
        return samples
    }

    /// A CSV row's fields: commas separate, double quotes quote (a doubled one is one quote).
    public static func fields(_ line: Substring) -> [String] {
        guard line.contains("\"") else { return line.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
        var out: [String] = [], field = "", quoted = false
        var chars = line.makeIterator()
        while let c = chars.next() {
            if quoted {
                if c == "\"" {
                    if let n = chars.next() {
                        if n == "\"" { field.append("\"") } else {
                            quoted = false
                            if n == "," { out.append(field); field = "" } else { field.append(n) }
                        }
                    } else { quoted = false }
                } else { field.append(c) }
            } else if c == "\"" { quoted = true } else if c == "," { out.append(field); field = "" } else { field.append(c) }
        }
        out.append(field)
        return out
    }
}
