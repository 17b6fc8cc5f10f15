import ArgumentParser
import Foundation
import MQTTKit
import ProximityMQTT
import ProximityCommandLine
import Synchronization

/// `proximityctl fleet`: the fleet service's live table, from the broker.
struct FleetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet",
        abstract: "The fleet's live table: each device, its room, and the distance each node sees.",
        discussion: """
            Reads the table proximity-fleet publishes (retained) on <prefix>/table, and redraws it \
            each time the service publishes it again. On a terminal it is redrawn in place; \
            otherwise each table is appended, separated by a blank line. --count 1 prints the \
            current table and exits. Ctrl-C stops. Exit status 69 when the broker cannot be \
            reached, or nothing is published there within --timeout seconds.

            With calibration (a fleet with a floor plan, docs/positioning.md), the fleet's \
            calibration instead (<prefix>/calibration): the fitted path-loss exponent, each node's \
            receive offset, transmit power, residual and drift, and the matrix of who hears whom \
            (the averaged RSSI, and what the fit leaves of it).

            Examples:
              $ proximityctl fleet --broker mqtt://broker.lan
                The live table, until Ctrl-C.
              $ proximityctl fleet --broker mqtts://broker.lan --count 1 --json
                The current table once, as JSON, over TLS.
              $ proximityctl fleet calibration --broker mqtt://broker.lan --count 1
                The fleet's calibration, once.
            """)

    /// What to show: the table, or the calibration.
    enum View: String, ExpressibleByArgument, CaseIterable {
        case table, calibration
    }

    @Argument(help: ArgumentHelp("table (the default) or calibration.", valueName: "view"))
    var view: View = .table

    @OptionGroup var connection: BrokerOptions

    @Option(help: ArgumentHelp("The fleet service's topic prefix.", valueName: "topic"))
    var prefix = "proximity-fleet"

    @Option(help: ArgumentHelp("Stop after this many tables (default: run until interrupted).", valueName: "n"))
    var count: Int?

    @Option(help: ArgumentHelp("Give up when no table came within this many seconds.", valueName: "seconds"))
    var timeout: Double = 10

    @Flag(help: "Print each table as its JSON, one a line.")
    var json = false

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count: must be at least 1") }
        guard timeout > 0, timeout <= 3600 else { throw ValidationError("--timeout: must be in 0...3600 seconds") }
        if let problem = MQTTTopic.prefixProblem(prefix) { throw ValidationError("--prefix: \(problem)") }
    }

    func run() async throws {
        let options: MQTTOptions
        do { options = try connection.options(clientID: "proximityctl-\(getpid())", reconnectDelay: 1...2) } catch {
            fail("--password-file \(error)", status: 66)
        }
        let client = try MQTTClient(options)
        defer { client.disconnect() }
        let topic = "\(prefix)/\(view.rawValue)"
        let (json, count, timeout, view) = (json, count, timeout, view)
        client.connect()
        // Why the broker is not reached, while it is not.
        let unreachable = Unreachable()
        let broker = connection.broker
        let outcome: String? = try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask {
                for await event in client.events {
                    switch event {
                    case .connected:
                        unreachable.reason.withLock { $0 = nil }
                        try await client.subscribe(topic)
                    case .refused(_, let reason):
                        return "the broker refused the connection: \(reason)"
                    case .disconnected(_, let reason):
                        unreachable.reason.withLock { $0 = reason }
                    }
                }
                return nil
            }
            group.addTask {
                var tables = 0
                let terminal = isatty(STDOUT_FILENO) == 1
                for await message in client.messages where message.topic == topic {
                    if json {
                        print(message.string)
                    } else {
                        let text = view == .table ? FleetTableText.render(message.payload) : FleetCalibrationText.render(message.payload)
                        print(terminal ? "\u{1B}[H\u{1B}[2J" + text : (tables > 0 ? "\n" : "") + text, terminator: "")
                    }
                    fflush(nil)
                    tables += 1
                    if let count, tables >= count { return nil }
                }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: .seconds(timeout))
                if let reason = unreachable.reason.withLock({ $0 }) { return "cannot reach the broker at \(broker): \(reason)" }
                if view == .calibration {
                    return "no calibration on \(topic) within \(timeout) s " +
                        "(is proximity-fleet running with --plan, and do the plan's nodes hear each other?)"
                }
                return "no table on \(topic) within \(timeout) s (is proximity-fleet running, with --prefix \(topic.dropLast(6))?)"
            }
            defer { group.cancelAll() }
            // The first to end: the tables printed, a refusal, or nothing in time.
            return try await group.next() ?? nil
        }
        if let outcome {
            client.disconnect()
            fail(outcome, status: 69)
        }
    }
}

/// The fleet table as text: one line per device, its room, its position on the floor plan (with
/// one), and each node's distance (and age).
enum FleetTableText {
    static func render(_ payload: [UInt8]) -> String {
        guard let table = MQTTJSON.decode(FleetTable.self, from: payload) else { return "(not a fleet table)\n" }
        let time = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: table.time))
        let count = table.devices.count
        var lines = ["proximity-fleet — \(count) device\(count == 1 ? "" : "s") — rule \(table.rule) — \(time)"]
        let rows = table.devices.map { d -> (String, String, String, String, String) in
            let readings = d.readings.map { "\($0.node) \(String(format: "%.2f m", $0.distance)) (\(String(format: "%.0f s", $0.age)))" }
            return (d.name ?? "-", d.room, d.position.map(position) ?? "-", readings.joined(separator: ", "), d.id)
        }
        // The position column only for a fleet with a floor plan: a table without one reads as before.
        let positions = table.devices.contains { $0.position != nil }
        let w0 = max(4, rows.map(\.0.count).max() ?? 0), w1 = max(4, rows.map(\.1.count).max() ?? 0)
        let wp = max(8, rows.map(\.2.count).max() ?? 0), w2 = max(24, rows.map(\.3.count).max() ?? 0)
        func pad(_ s: String, _ w: Int) -> String { s + String(repeating: " ", count: max(0, w - s.count)) }
        let positionHeader = positions ? "\(pad("POSITION", wp))  " : ""
        lines.append("\(pad("NAME", w0))  \(pad("ROOM", w1))  \(positionHeader)\(pad("DISTANCE BY NODE (AGE)", w2))  DEVICE")
        for r in rows {
            let cell = positions ? "\(pad(r.2, wp))  " : ""
            lines.append("\(pad(r.0, w0))  \(pad(r.1, w1))  \(cell)\(pad(r.3, w2))  \(r.4)")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// x,y in metres, ± the uncertainty, and the floor when the plan names it: `2.1,3.4 ±0.8 ground`.
    static func position(_ p: FleetPosition) -> String {
        "\(String(format: "%.1f,%.1f", p.x, p.y)) ±\(String(format: "%.1f", p.uncertainty))" + (p.floor.map { " \($0)" } ?? "")
    }
}

/// The fleet's calibration as text: the fit, each node, and the matrix (rows receive, columns
/// transmit: the averaged RSSI and the residual the fit leaves).
enum FleetCalibrationText {
    static func render(_ payload: [UInt8]) -> String {
        guard let c = MQTTJSON.decode(FleetCalibrationPayload.self, from: payload) else { return "(not a fleet calibration)\n" }
        let time = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: c.time))
        func pad(_ s: String, _ w: Int) -> String { s + String(repeating: " ", count: max(0, w - s.count)) }
        func dB(_ v: Double?) -> String { v.map { String(format: "%+.1f", $0) } ?? "-" }
        var lines = [String(format: "proximity-fleet calibration — path-loss exponent %.2f — residual %.1f dB RMS — %@",
                            c.exponent, c.rms, time)]
        let w = max(4, c.nodes.map(\.name.count).max() ?? 0)
        lines.append("\(pad("NODE", w))  RX OFFSET  TX POWER  RESIDUAL  DRIFT")
        for n in c.nodes {
            lines.append("\(pad(n.name, w))  \(pad(dB(n.rxOffset), 9))  \(pad(n.txPower.map { String(format: "%.1f", $0) } ?? "-", 8))  "
                         + "\(pad(n.residual.map { String(format: "%.1f", $0) } ?? "-", 8))  \(n.drift ?? "-")")
        }
        let names = c.nodes.map(\.name).filter { name in c.pairs.contains { $0.receiver == name || $0.transmitter == name } }
        if !names.isEmpty {
            lines.append("")
            lines.append("who hears whom: RSSI dBm (residual dB); rows receive, columns transmit")
            let cell = max(14, names.map(\.count).max() ?? 0)
            lines.append(pad("", w) + "  " + names.map { pad($0, cell) }.joined(separator: " "))
            for rx in names {
                let cells = names.map { tx -> String in
                    guard let p = c.pairs.first(where: { $0.receiver == rx && $0.transmitter == tx }) else {
                        return pad(rx == tx ? "" : "-", cell)
                    }
                    return pad(String(format: "%.1f", p.rssi) + (p.residual.map { String(format: " (%+.1f)", $0) } ?? ""), cell)
                }
                lines.append(pad(rx, w) + "  " + cells.joined(separator: " "))
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

/// Why the broker is not reached, shared by the tasks of `proximityctl fleet`.
final class Unreachable: Sendable {
    let reason = Mutex<String?>(nil)
}
