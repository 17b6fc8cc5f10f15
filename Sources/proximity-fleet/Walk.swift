import ArgumentParser
import Foundation
import ProximityCore
import ProximityFleet

/// `proximity-fleet walk --marks MARKS.csv RECORD.csv… > WALK.csv`: the nodes' recordings of a
/// calibration walk and its marks, as the one CSV `calibrate` (and `replay --score`) read.
struct Walk: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Merge the nodes' recordings of a calibration walk with its marks into one walk CSV.",
        discussion: """
            Each RECORD.csv is what `proximityctl record` wrote on one node during the walk; the \\
            node's name is read from its first comment line (name=…), or given as NAME=FILE. \\
            MARKS.csv has a header row and the columns start,end,x,y and optionally z: while the \\
            tag was held still at (x, y, z), from start to end (seconds since the Unix epoch, as \\
            `date +%s.%N` prints them). Prints time,node,device,rssi,x,y,z: every sample of every \\
            recording, in time order, with the mark's position when it falls within one (empty \\
            otherwise). docs/positioning.md, "A calibration walk".

            Exit status: 0; 64 for a bad argument; 65 for a bad file (FILE:LINE); 66 when one \\
            cannot be read.

            Examples:
              $ proximity-fleet walk --marks marks.csv kitchen.csv hall.csv > walk.csv
                The walk, for proximity-fleet calibrate --plan house.yaml walk.csv.
            """)

    @Option(help: ArgumentHelp("start,end,x,y[,z]: where the tag was held, and when.", valueName: "marks.csv"))
    var marks: String

    @Argument(help: ArgumentHelp("The nodes' recordings (proximityctl record), each FILE or NAME=FILE.", valueName: "record.csv"))
    var records: [String]

    func validate() throws {
        if records.isEmpty { throw ValidationError("give the nodes' recordings (proximityctl record's CSV files)") }
    }

    func run() throws {
        let spans = Self.readMarks(marks)
        var rows: [(time: Double, node: String, device: String, rssi: Double)] = []
        for argument in records {
            var name: String?, path = argument
            if let eq = argument.firstIndex(of: "="), !FileManager.default.fileExists(atPath: argument) {
                name = String(argument[..<eq])
                path = String(argument[argument.index(after: eq)...])
            }
            rows += Self.readRecord(path, name: name)
        }
        rows.sort { ($0.time, $0.node) < ($1.time, $1.node) }
        var out = "time,node,device,rssi,x,y,z\n"
        for row in rows {
            let mark = spans.first { $0.start <= row.time && row.time <= $0.end }
            let position = mark.map { String(format: "%g,%g,%g", $0.point.x, $0.point.y, $0.point.z) } ?? ",,"
            out += String(format: "%.3f", row.time) + ",\(Replay.field(row.node)),\(Replay.field(row.device)),\(String(format: "%g", row.rssi)),\(position)\n"
        }
        FileHandle.standardOutput.write(Data(out.utf8))
    }

    static func lines(_ path: String) -> [Substring] {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path), options: .mappedIfSafe) } catch {
            fail("\(path): cannot read: \((error as NSError).localizedDescription)", status: 66)
        }
        guard data.count <= TraceFile.maxSize else { fail("\(path): cannot read: larger than \(TraceFile.maxSize >> 30) GiB", status: 66) }
        return String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
    }

    static func readMarks(_ path: String) -> [(start: Double, end: Double, point: PlanPoint)] {
        let lines = lines(path)
        guard let header = lines.first else { fail("\(path):1: no header row (start,end,x,y[,z])", status: 65) }
        let names = header.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        guard let s = names.firstIndex(of: "start"), let e = names.firstIndex(of: "end"), let x = names.firstIndex(of: "x"),
              let y = names.firstIndex(of: "y") else { fail("\(path):1: the header must name start,end,x,y (and z)", status: 65) }
        let z = names.firstIndex(of: "z")
        var out: [(Double, Double, PlanPoint)] = []
        for (i, line) in lines.enumerated().dropFirst() where !line.isEmpty && !line.hasPrefix("#") {
            let f = line.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            func number(_ column: Int, _ what: String) -> Double {
                guard column < f.count, let v = Double(f[column]), v.isFinite else {
                    fail("\(path):\(i + 1): \(what) must be a number, not \(column < f.count ? f[column].debugDescription : "missing")", status: 65)
                }
                return v
            }
            let start = number(s, "start"), end = number(e, "end")
            guard start <= end else { fail("\(path):\(i + 1): start must not be after end", status: 65) }
            out.append((start, end, PlanPoint(x: number(x, "x"), y: number(y, "y"), z: z.map { number($0, "z") } ?? 1)))
        }
        if out.isEmpty { fail("\(path): no marks after the header", status: 65) }
        return out
    }

    /// A recording's samples (its rows with an RSSI), with the node's name.
    static func readRecord(_ path: String, name given: String?) -> [(time: Double, node: String, device: String, rssi: Double)] {
        let lines = lines(path)
        var name = given
        var header: [String]?
        var out: [(Double, String, String, Double)] = []
        for (i, line) in lines.enumerated() where !line.isEmpty {
            if line.hasPrefix("#") {
                if name == nil, let range = line.range(of: " name=") { name = String(line[range.upperBound...]).trimmingCharacters(in: .whitespaces) }
                continue
            }
            guard let columns = header else {
                header = line.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                continue
            }
            guard let t = columns.firstIndex(of: "time"), let p = columns.firstIndex(of: "peer"), let r = columns.firstIndex(of: "rssi") else {
                fail("\(path):\(i + 1): not a proximityctl record file (no time,peer,rssi columns)", status: 65)
            }
            let f = TraceFile.fields(line)
            guard r < f.count, !f[r].isEmpty else { continue }   // a report's row
            guard t < f.count, p < f.count, let time = Double(f[t]), let rssi = Double(f[r]) else {
                fail("\(path):\(i + 1): a sample row must have a time and an rssi", status: 65)
            }
            guard let node = name, !node.isEmpty else { fail("\(path): no node name: give it as NAME=\(path)", status: 65) }
            out.append((time, node, f[p], rssi))
        }
        return out
    }
}
