import ArgumentParser
import DBusKit
import Foundation
import ProximityAPI
import Synchronization

/// `proximityctl record`: every RSSI sample the node ranges some peers with, and what each report
/// said of them, into a CSV file (docs/ranging.md, "Record and replay"), for `ranging-bench
/// --replay` once the true distances are filled in.
struct Record: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Record the node's RSSI samples and zones of some peers into a CSV file, for ranging-bench --replay.",
        discussion: """
            Asks the node for every sample of the peers (Node1.StartRecording) and writes, as each \
            report comes (once a second), one row per sample and one row per peer and report: \
            time,peer,rssi,truth,measured_power,zone,distance. Times are seconds since the Unix \
            epoch; truth is left empty, for the true distance in metres (docs/ranging.md, "Record \
            and replay"). Each report's rows are written at once, so SIGINT or SIGTERM loses \
            nothing received. Stops on SIGINT, SIGTERM, or after --seconds.

            Exit status: 0 when stopped (SIGINT, SIGTERM, --seconds), 64 for a bad argument, 69 when \
            the node cannot be reached, refuses the call or leaves the bus (the file keeps what was \
            received), 73 when the file cannot be created, 74 when it cannot be written.

            Example:
              $ proximityctl record \\
                  --peer ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:2 \\
                  --out door.csv --seconds 20
                Twenty seconds of one beacon's samples, into door.csv.
            """)

    @OptionGroup var node: NodeOptions

    @Option(name: .long, parsing: .upToNextOption,
            help: ArgumentHelp("The peers to record, as GetRanging and `proximityctl peers` name them (one or more).", valueName: "id"))
    var peer: [String] = []

    @Option(name: .long, help: ArgumentHelp("The CSV file to write (replaced if it exists), or - for standard output.", valueName: "file"))
    var out: String

    @Option(name: .long, help: ArgumentHelp(
        "Stop after this many seconds, and the report that carries their last samples (default: until SIGINT or SIGTERM).",
        valueName: "seconds"))
    var seconds: Double?

    func validate() throws {
        guard !peer.isEmpty else { throw ValidationError("--peer: name at least one peer to record") }
        _ = try SampleSession.peers(peer, option: "--peer")
        guard !out.isEmpty else { throw ValidationError("--out: the file name is empty") }
        if let seconds, !(seconds > 0 && seconds <= 7 * 86400) {
            throw ValidationError("--seconds: must be above 0 and at most a week (604800)")
        }
    }

    func run() async throws {
        let peers = try SampleSession.peers(peer, option: "--peer")
        let (out, seconds) = (out, seconds)
        let outcome = await node.withNode("cannot record") { node -> (SampleSession.End, RecordingFile) in
            let file = try RecordingFile(path: out)
            let properties = try await node.properties()
            try file.write(RecordingFile.preamble(node: properties, bus: node.bus, peers: peers))
            let end = try await SampleSession.run(node, peers: peers, seconds: seconds, started: {
                Self.note("recording \(peers.joined(separator: ", ")) to \(out == "-" ? "standard output" : out)"
                          + (seconds.map { " for \(RecordingFile.number($0)) s" } ?? "") + " (Ctrl-C to stop)")
                let ranged = try await node.ranging()
                for peer in peers where ranged[peer] == nil {
                    Self.note("\(peer) is not ranged now: its samples are recorded once the node hears it")
                }
            }, handle: { batch in
                try file.write(file.rows(batch))
            })
            return (end, file)
        }
        let (end, file) = outcome
        file.close()
        let summary = "\(file.samples) sample\(file.samples == 1 ? "" : "s") and " +
            "\(file.reports) report row\(file.reports == 1 ? "" : "s") written"
        switch end {
        case .interrupted(let s): Self.note("\(s == SIGINT ? "SIGINT" : "SIGTERM"): stopped; \(summary)")
        case .timeUp: Self.note("stopped after \(RecordingFile.number(seconds ?? 0)) s; \(summary)")
        case .nodeLeft: fail("\(NodeConnectionError.nodeLeft(bus: node.address, name: node.name)); \(summary)")
        case .disconnected: fail("\(NodeConnectionError.disconnected(bus: node.address)); \(summary)")
        }
    }

    static func note(_ message: String) {
        FileHandle.standardError.write(Data("proximityctl: record: \(message)\n".utf8))
    }
}

/// The CSV file `record` writes: the format of docs/ranging.md, "Record and replay".
final class RecordingFile: Sendable {
    /// The columns, in order. `ranging-bench --replay` needs the first four.
    static let header = "time,peer,rssi,truth,measured_power,zone,distance"

    private let handle: FileHandle
    private let path: String
    private let counts = Mutex((samples: 0, reports: 0))
    var samples: Int { counts.withLock { $0.samples } }
    var reports: Int { counts.withLock { $0.reports } }

    /// Creates (or empties) `path`; `-` is standard output. Exit 73 when it cannot be created.
    init(path: String) throws {
        self.path = path
        if path == "-" {
            handle = FileHandle.standardOutput
            return
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { fail("cannot create \(path): \(String(cString: strerror(errno)))", status: 73) }
        handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    }

    /// Writes `text` at once (one write: the rows of a report are in the file, whole, before the
    /// next report). Exit 74 when it cannot.
    func write(_ text: String) throws {
        guard !text.isEmpty else { return }
        do { try handle.write(contentsOf: Data(text.utf8)) } catch {
            fail("cannot write \(path == "-" ? "standard output" : path): \(error.localizedDescription)", status: 74)
        }
    }

    func close() {
        if path != "-" { try? handle.close() }
    }

    /// The comment lines and the header.
    static func preamble(node: NodeProperties, bus: BusAddress, peers: [String]) -> String {
        let started = ISO8601DateFormatter.string(from: Date(), timeZone: TimeZone(identifier: "UTC")!,
                                                  formatOptions: [.withInternetDateTime, .withFractionalSeconds])
        return "# proximityctl record: node=\(node.identifier) started=\(started)"
            + " path_loss_exponent=\(number(node.pathLossExponent)) clear_interval=\(number(node.clearInterval))"
            + " default_measured_power=\(node.measuredPower) name=\(node.name)\n"
            + "# peers: \(peers.joined(separator: " "))\n"
            + "# time: seconds since the Unix epoch; rssi, measured_power: dBm; truth, distance: metres (truth: fill in)\n"
            + header + "\n"
    }

    /// One report's rows: its samples in the order the node took them, then a row per peer of the
    /// report.
    func rows(_ batch: RecordedBatch) -> String {
        var out = ""
        for s in batch.samples {
            out += "\(Self.number(s.time)),\(Self.field(s.peer)),\(Self.number(s.rssi)),,\(Self.number(s.measuredPower)),,\n"
        }
        for r in batch.reports {
            let removed = r.zone == RecordedReport.removed
            out += "\(Self.number(batch.time)),\(Self.field(r.peer)),,,\(removed ? "" : Self.number(r.measuredPower)),"
                + "\(Self.field(r.zone)),\(removed ? "" : Self.number(r.distance))\n"
        }
        counts.withLock { $0 = ($0.samples + batch.samples.count, $0.reports + batch.reports.count) }
        return out
    }

    /// A number as Swift writes it back exactly (the shortest form that reads as the same
    /// double), integers without ".0".
    static func number(_ x: Double) -> String {
        if x == x.rounded(), abs(x) < 1e15 { return String(Int64(x)) }
        return "\(x)"
    }

    /// A field, quoted the RFC 4180 way when it holds a comma or a quote.
    static func field(_ text: String) -> String {
        guard text.contains(",") || text.contains("\"") else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
