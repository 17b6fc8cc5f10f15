import ArgumentParser
import Foundation
import ProximityCore
import ProximityFleet

/// `proximity-fleet walk [--marks MARKS.csv] RECORD.csv… > WALK.csv`: the nodes' recordings of a
/// calibration walk and its marks, as the one CSV `calibrate` (and `replay --score`) read; without
/// marks, the recordings as one trace for `replay`.
struct Walk: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Merge the nodes' recordings of a calibration walk with its marks into one walk CSV.",
        discussion: """
            Each RECORD.csv is what `proximityctl record` wrote on one node during the walk; the \
            node's name is read from its first comment line (name=...), or given as NAME=FILE. \
            MARKS.csv has a header row and the columns start,end,x,y and optionally z: while the \
            tag was held still at (x, y, z), from start to end (seconds since the Unix epoch, as \
            `date +%s.%N` prints them). Prints time,node,device,rssi,x,y,z: every sample of every \
            recording, in time order, with the mark's position when it falls within one (empty \
            otherwise). docs/positioning.md, "With a calibration walk".

            Without --marks the positions are unknown and x,y,z are empty: the recordings of \
            several nodes as one trace, for replay (not for calibrate or --score).

            The files are CSV as RFC 4180 has it (LF or CRLF line ends, quoted fields, a UTF-8 \
            byte order mark); lines starting with # are comments. The rows skipped after the \
            header (empty ones, comments, and a recording's rows without an rssi: its reports \
            and truth marks) are counted on standard error: FILE: N rows skipped: ....

            Exit status: 0; 64 for a bad argument; 65 for a bad file (FILE:LINE); 66 when one \
            cannot be read.

            Examples:
              $ proximity-fleet walk --marks marks.csv kitchen.csv hall.csv > walk.csv
                The walk, for proximity-fleet calibrate --plan house.yaml walk.csv.
              $ proximity-fleet walk kitchen.csv hall=hall.csv > trace.csv
                The recordings as one trace (hall's name given), for proximity-fleet replay.
            """)

    @Option(help: ArgumentHelp("start,end,x,y[,z]: where the tag was held, and when (without it, x,y,z are empty).",
                               valueName: "marks.csv"))
    var marks: String?

    @Argument(help: ArgumentHelp("The nodes' recordings (proximityctl record), each FILE or NAME=FILE.", valueName: "record.csv"))
    var records: [String]

    func validate() throws {
        if records.isEmpty { throw ValidationError("give the nodes' recordings (proximityctl record's CSV files)") }
    }

    func run() throws {
        let spans = marks.map(Self.readMarks) ?? []
        var samples: [TraceSample] = []
        for argument in records {
            var name: String?, path = argument
            if let eq = argument.firstIndex(of: "="), !FileManager.default.fileExists(atPath: argument) {
                name = String(argument[..<eq])
                path = String(argument[argument.index(after: eq)...])
            }
            do {
                let record = try TraceFile.loadRecord(path: path, node: name)
                Self.noteSkipped(record.skipped, in: path)
                samples += record.samples
            } catch { Self.fail(error.message, status: error.unreadable ? 66 : 65) }
        }
        samples.sort { ($0.time, $0.node) < ($1.time, $1.node) }
        var out = "time,node,device,rssi,x,y,z\n"
        for s in samples {
            let mark = spans.first { $0.start <= s.time && s.time <= $0.end }
            let position = mark.map { String(format: "%g,%g,%g", $0.point.x, $0.point.y, $0.point.z) } ?? ",,"
            out += String(format: "%.3f", s.time)
                + ",\(Replay.field(s.node)),\(Replay.field(s.device)),\(String(format: "%g", s.rssi)),\(position)\n"
        }
        FileHandle.standardOutput.write(Data(out.utf8))
    }

    /// The marks: where the tag was held, and when.
    static func readMarks(_ path: String) -> [(start: Double, end: Double, point: PlanPoint)] {
        do throws(CSVReader.Problem) {
            var reader = try CSVReader(path: path, comments: true)
            var header: CSVReader.Record?
            while header == nil, let row = try reader.next() {
                if !row.isComment, !row.isEmpty { header = row }
            }
            guard let header else { fail("\(path):1: no header row (start,end,x,y[,z])", status: 65) }
            let names = header.fields.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard let s = names.firstIndex(of: "start"), let e = names.firstIndex(of: "end"), let x = names.firstIndex(of: "x"),
                  let y = names.firstIndex(of: "y") else {
                fail("\(path):\(header.line): the header must name start,end,x,y (and z)", status: 65)
            }
            let z = names.firstIndex(of: "z")
            var out: [(Double, Double, PlanPoint)] = []
            var skipped = SkippedRows()
            while let row = try reader.next() {
                if skipped.skips(row) { continue }
                let f = row.fields.map { $0.trimmingCharacters(in: .whitespaces) }
                func number(_ column: Int, _ what: String) -> Double {
                    guard column < f.count, let v = Double(f[column]), v.isFinite else {
                        fail("\(path):\(row.line): \(what) must be a number, " +
                             "not \(column < f.count ? f[column].debugDescription : "missing")", status: 65)
                    }
                    return v
                }
                let start = number(s, "start"), end = number(e, "end")
                guard start <= end else { fail("\(path):\(row.line): start must not be after end", status: 65) }
                out.append((start, end, PlanPoint(x: number(x, "x"), y: number(y, "y"), z: z.map { number($0, "z") } ?? 1)))
            }
            if out.isEmpty { fail("\(path): no marks after the header", status: 65) }
            noteSkipped(skipped, in: path)
            return out
        } catch { fail(error.message, status: error.unreadable ? 66 : 65) }
    }
}
