import ArgumentParser
import Foundation
import ProximityCore
import ProximityFleet

/// `proximity-fleet replay --plan PLAN.yaml TRACE.csv [--score]`: a recording through each node's
/// own ranging and report code and the fleet service's own step, exactly as live (``FleetReplay``).
struct Replay: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Play a recording of RSSI samples through the nodes' ranging and the fleet's positioning.",
        discussion: """
            TRACE.csv has a header row naming its columns, among them time,node,device,rssi \
            (seconds, the node's name as in the plan, the device's identifier, dBm), one sample \
            per row, nodes in any order; other columns are ignored, but x,y,z (metres), when \
            present, are the device's true position at that time. Each node's samples go through \
            its own ranging (the found-devices table with proximityd's defaults) and its MQTT \
            reports (the rate control, the payloads); the fleet service's own step takes what \
            the nodes would have published, on the trace's clock, as the live service does. \
            Prints time,device,x,y,z,room once a second of trace time: the position and the room \
            the service had published by then, from samples up to that time (x,y,z empty while it \
            published no position: a device is placed 2 s after its first report; room as \
            published: a room's name, home when the position is in no room, not_home).

            TRACE.csv may also be one node's `proximityctl record` file, read as it is: the node \
            is the one its first line names (name=...), the devices are its peer column, and its \
            rows without an rssi (reports, truth marks) are skipped. proximity-fleet walk \
            (without --marks) merges several nodes' recordings into one trace.

            The file is CSV as RFC 4180 has it (LF or CRLF line ends, quoted fields, a UTF-8 \
            byte order mark); lines starting with # are comments. The rows skipped after the \
            header (empty ones, comments, a recording's rows without an rssi) are counted on \
            standard error: FILE: N rows skipped: ....

            With --score (the trace must have x,y,z), the rows are followed by lines that start \
            with '#': median, mean and p90 error in metres, the share within 1, 2 and 3 m, room \
            accuracy, room changes per minute against the truth's, and how late the positions \
            come (the lag, 0 to 15 s, at which they are closest to where the device truly was). docs/positioning.md.

            Exit status: 0; 64 for a bad argument; 65 for a bad plan or trace (FILE:LINE:COLUMN \
            or FILE:LINE); 66 when a file cannot be read.

            Examples:
              $ proximity-fleet replay --plan house.yaml walk.csv > positions.csv
                The positions, once a second.
              $ proximity-fleet replay --plan house.yaml walk.csv --score \\
                  --estimator espresense
                ESPresense Companion's multilateration on the same recording, scored.
              $ proximity-fleet replay --plan house.yaml kitchen.csv
                One node's proximityctl record file, as it is.
            """)

    @Option(help: ArgumentHelp("The floor plan (docs/positioning.md).", valueName: "file"))
    var plan: String

    @Argument(help: ArgumentHelp("The recording: time,node,device,rssi[,x,y,z], or a proximityctl record file.", valueName: "trace.csv"))
    var trace: String

    @Flag(help: "Score the estimates against the trace's x,y,z.")
    var score = false

    @Option(help: ArgumentHelp("fleet (the grid filter), espresense (ESPresense Companion's multilateration), centroid or nearest.",
                               valueName: "estimator"))
    var estimator: FleetEstimator = .fleet

    func run() throws {
        let floorPlan = Self.loadPlan(plan)
        let samples = Self.loadTrace(trace, truthFor: score ? "--score" : nil)
        // A row a second per device: a trace spanning months (a stray time) would never end.
        if let first = samples.map(\.time).min(), let last = samples.map(\.time).max(), last - first > Self.maxSpan {
            Self.fail("\(trace): the samples span \(Int(last - first)) s (from \(first) to \(last)); " +
                      "a replay covers at most \(Int(Self.maxSpan)) s (7 days)", status: 65)
        }
        let unknown = Set(samples.map(\.node)).subtracting(floorPlan.nodes.map(\.name))
        if !unknown.isEmpty {
            FileHandle.standardError.write(Data("proximity-fleet: warning: nodes not in the plan, their samples unused for positions: \(unknown.sorted().joined(separator: ", "))\n".utf8))
        }
        var out = "time,device,x,y,z,room\n"
        let truth = TruthTrack(samples)
        var scored = PositionScore()
        var lateness = LatenessScore()
        var configuration = FleetConfiguration()
        configuration.plan = floorPlan
        configuration.estimator = estimator
        configuration.discovery = false
        FleetReplay.play(samples, configuration: configuration) { rows in
            for row in rows {
                let time = Self.number(row.time, places: 3)
                if let p = row.position {
                    out += "\(time),\(Self.field(row.device)),\(Self.number(p.x, places: 2)),\(Self.number(p.y, places: 2)),"
                        + "\(Self.number(p.z, places: 2)),\(Self.field(row.room))\n"
                } else {
                    out += "\(time),\(Self.field(row.device)),,,,\(Self.field(row.room))\n"
                }
                if score {
                    scored.add(device: row.device, estimate: Self.estimate(row, plan: floorPlan),
                               truth: truth.position(of: row.device, at: row.time),
                               plan: floorPlan)
                    if let p = row.position {
                        lateness.add(PlanPoint(x: p.x, y: p.y, z: p.z)) { truth.position(of: row.device, at: row.time - Double($0)) }
                    }
                }
            }
            if out.utf8.count > 1 << 16 {
                FileHandle.standardOutput.write(Data(out.utf8))
                out = ""
            }
        }
        if score {
            out += "# estimator \(estimator.rawValue), \(scored.errors.count) estimates of \(Int(scored.seconds)) device-seconds\n"
            out += "# error m: median \(Self.number(scored.median, places: 2)), mean \(Self.number(scored.mean, places: 2)), "
                + "p90 \(Self.number(scored.p90, places: 2))\n"
            out += "# within 1 m \(Self.percent(scored.within(1))), 2 m \(Self.percent(scored.within(2))), "
                + "3 m \(Self.percent(scored.within(3)))\n"
            out += "# room accuracy \(Self.percent(scored.roomAccuracy))\n"
            out += "# room changes per minute \(Self.number(scored.changesPerMinute, places: 2)), "
                + "truth \(Self.number(scored.trueChangesPerMinute, places: 2))\n"
            if let lag = lateness.bestLag {
                out += "# lateness: closest to the truth \(lag) s before "
                    + "(median error \(Self.number(lateness.median(atLag: lag), places: 2)) m; "
                    + "\(Self.number(lateness.median(atLag: 0), places: 2)) m against the truth at the same moment)\n"
            }
        }
        FileHandle.standardOutput.write(Data(out.utf8))
    }

    /// The longest trace replayed, seconds.
    static let maxSpan = 7 * 86_400.0

    static func number(_ v: Double, places: Int) -> String { v.isFinite ? String(format: "%.\(places)f", v) : "nan" }
    static func percent(_ v: Double) -> String { v.isFinite ? String(format: "%.1f %%", 100 * v) : "nan" }
    /// A CSV field, quoted when it must be.
    static func field(_ s: String) -> String {
        s.unicodeScalars.contains(where: { ",\"\r\n".unicodeScalars.contains($0) })
            ? "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : s
    }
}

extension FleetEstimator: ExpressibleByArgument {}

extension Replay {
    /// A row as the score reads it: the published position, and the published room (none for
    /// home and not_home).
    static func estimate(_ row: FleetReplay.Row, plan: FloorPlan) -> PositionEstimate? {
        guard let p = row.position else { return nil }
        let floor = plan.floors.firstIndex { $0.name == p.floor } ?? 0
        let room = plan.rooms.firstIndex { $0.name == row.room }
        return PositionEstimate(position: PlanPoint(x: p.x, y: p.y, z: p.z), floor: floor, uncertainty: p.uncertainty, room: room)
    }
}

/// Each device's true positions, read in time order: the position at a time is the last one
/// given at or before it, within 2 s.
struct TruthTrack {
    private var tracks: [String: [(time: Double, position: PlanPoint)]] = [:]

    init(_ samples: [TraceSample]) {
        for s in samples { if let p = s.truth { tracks[s.device, default: []].append((s.time, p)) } }
        for key in tracks.keys { tracks[key]!.sort { $0.time < $1.time } }
    }

    func position(of device: String, at t: Double) -> PlanPoint? {
        guard let track = tracks[device] else { return nil }
        var lo = 0, hi = track.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if track[mid].time <= t { lo = mid + 1 } else { hi = mid }
        }
        guard lo > 0, t - track[lo - 1].time <= 2 else { return nil }
        return track[lo - 1].position
    }
}

extension ParsableCommand {
    /// Ends the command in the one error style, `proximity-fleet: error: MESSAGE` (each line of a
    /// message of several), with `status`.
    static func fail(_ message: String, status: Int32) -> Never {
        let text = message.split(separator: "\n", omittingEmptySubsequences: false).map { "proximity-fleet: error: \($0)\n" }.joined()
        FileHandle.standardError.write(Data(text.utf8))
        Foundation.exit(status)
    }
}
