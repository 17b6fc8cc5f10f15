import ArgumentParser
import DBusKit
import Foundation
import ProximityAPI

/// `proximityctl events`: the node's durable event log (`org.proximityd.EventLog1`).
struct Events: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the node's event log: tracking, profile, region, alert and rule events.",
        discussion: """
            One line per entry, oldest first: sequence number, local time, source.type, and the \
            data. --since takes seconds since the Unix epoch, an ISO 8601 time \
            (2026-11-23T17:00:00Z), or an age such as 10m, 2h or 1d. --follow then waits for new \
            entries (each printed once it is on the node's disk) until interrupted.

            Exit status: 0 on success, 64 for a bad argument, 69 when the node cannot be reached, \
            refuses the call, or leaves the bus.

            Examples:
              $ proximityctl events --since 1h
                The last hour's entries.
              $ proximityctl events --follow --json
                The whole log, then each new entry, as JSON lines.
            """)

    @OptionGroup var node: NodeOptions
    @Flag(name: .long, help: "Keep printing new entries.") var follow = false
    @Option(name: .long, help: ArgumentHelp("Only entries at or after this time.", valueName: "time")) var since: String?
    @Flag(name: .long, help: "Print one JSON object per line.") var json = false

    func validate() throws {
        if let since, Self.parseTime(since, now: Date()) == nil {
            throw ValidationError("--since: \(since.debugDescription) is not a time (epoch seconds, ISO 8601, or an age like 10m, 2h, 1d)")
        }
    }

    static func parseTime(_ text: String, now: Date) -> Double? {
        if let seconds = Double(text), seconds.isFinite, seconds >= 0 { return seconds }
        if let date = ISO8601DateFormatter().date(from: text) { return date.timeIntervalSince1970 }
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        if let unit = text.last, let factor = units[unit], let n = Double(text.dropLast()), n >= 0, n.isFinite {
            return now.timeIntervalSince1970 - n * factor
        }
        return nil
    }

    func run() async throws {
        let start = since.flatMap { Self.parseTime($0, now: Date()) } ?? 0
        await node.withNode("cannot read the event log") { node in
            // Subscribe first, so nothing falls between the read and the follow.
            let signals = follow ? try await node.profileSignals() : nil
            var last: UInt64 = 0
            while true {
                let page = try await node.events(after: last, since: start, limit: 1000)
                for entry in page { print(line(entry)) }
                last = page.last?.seq ?? last
                if page.count < 1000 { break }
            }
            guard let signals else { return }
            fflush(nil)
            for await signal in signals {
                guard case .logged(let entry) = signal, entry.seq > last, entry.time >= start else { continue }
                last = entry.seq
                print(line(entry))
                fflush(nil)
            }
            throw NodeConnectionError.nodeLeft(bus: node.bus, name: node.name)
        }
    }

    func line(_ entry: LogEntryValue) -> String {
        if json {
            let object: [String: Any] = ["seq": entry.seq, "time": entry.time, "source": entry.source, "type": entry.type,
                                         "data": entry.data]
            return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
                .map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        }
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss.SSS"
        let data = entry.data.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        return "\(entry.seq)  \(formatter.string(from: Date(timeIntervalSince1970: entry.time)))  \(entry.source).\(entry.type)  \(data)"
    }
}
