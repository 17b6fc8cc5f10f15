import ArgumentParser
import Foundation
import MQTTKit

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
            """)

    @Option(help: ArgumentHelp("The broker: mqtt://HOST[:PORT] or mqtts://HOST[:PORT].", valueName: "url"))
    var broker: String

    @Option(help: ArgumentHelp("The user name on the broker.", valueName: "name"))
    var username: String?

    @Option(name: .customLong("password-file"), help: ArgumentHelp("A file whose first line is the password.", valueName: "file"))
    var passwordFile: String?

    @Option(name: .customLong("ca-file"), help: ArgumentHelp("PEM file of the broker's CA (mqtts://). Default: the system's CAs.",
                                                             valueName: "file"))
    var caFile: String?

    @Option(help: ArgumentHelp("The fleet service's topic prefix.", valueName: "topic"))
    var prefix = "proximity-fleet"

    @Option(help: ArgumentHelp("Stop after this many tables (default: run until interrupted).", valueName: "n"))
    var count: Int?

    @Option(help: ArgumentHelp("Give up when no table came within this many seconds.", valueName: "seconds"))
    var timeout: Double = 10

    @Flag(help: "Print each table as its JSON, one a line.")
    var json = false

    func validate() throws {
        do { _ = try MQTTBrokerURL.parse(broker) } catch { throw ValidationError("--broker: \(error.message)") }
        if let count, count < 1 { throw ValidationError("--count: must be at least 1") }
        guard timeout > 0, timeout <= 3600 else { throw ValidationError("--timeout: must be in 0...3600 seconds") }
        if prefix.isEmpty || prefix.contains("+") || prefix.contains("#") { throw ValidationError("--prefix: not a topic prefix: '\(prefix)'") }
    }

    func run() async throws {
        let url = try MQTTBrokerURL.parse(broker)
        var password: String?
        if let passwordFile {
            guard let text = try? String(contentsOfFile: passwordFile, encoding: .utf8) else {
                fail("--password-file \(passwordFile): cannot read", status: 66)
            }
            password = String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
        }
        var options = MQTTOptions(host: url.host, port: url.port, clientID: "proximityctl-\(getpid())", username: username,
                                  password: password, reconnectDelay: 1...2)
        if url.tls { options.tls = .init(caFile: caFile, caPath: caFile == nil ? "/etc/ssl/certs" : nil) }
        let client = try MQTTClient(options)
        defer { client.disconnect() }
        let topic = "\(prefix)/table"
        let (json, count, timeout) = (json, count, timeout)
        client.connect()
        let outcome: String? = try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask {
                for await event in client.events {
                    switch event {
                    case .connected:
                        try await client.subscribe(topic)
                    case .refused(_, let reason):
                        return "the broker refused the connection: \(reason)"
                    case .disconnected: continue
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
                        let text = FleetTable.render(message.payload)
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

/// The fleet table as text: one line per device, its room and each node's distance (and age).
enum FleetTable {
    static func render(_ payload: [UInt8]) -> String {
        guard let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any],
              let devices = object["devices"] as? [[String: Any]] else { return "(not a fleet table)\n" }
        let time = (object["time"] as? Double).map { ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: $0)) } ?? "?"
        var lines = ["proximity-fleet — \(devices.count) device\(devices.count == 1 ? "" : "s") — rule \(object["rule"] as? String ?? "?") — \(time)"]
        let rows = devices.map { d -> (String, String, String) in
            let readings = (d["readings"] as? [[String: Any]] ?? []).map { r -> String in
                let distance = (r["distance"] as? Double).map { String(format: "%.2f m", $0) } ?? "?"
                let age = (r["age"] as? Double).map { String(format: "%.0f s", $0) } ?? "?"
                return "\(r["node"] as? String ?? "?") \(distance) (\(age))"
            }
            return (d["id"] as? String ?? "?", d["room"] as? String ?? "?", readings.joined(separator: ", "))
        }
        let w0 = max(6, rows.map(\.0.count).max() ?? 0), w1 = max(4, rows.map(\.1.count).max() ?? 0)
        func pad(_ s: String, _ w: Int) -> String { s + String(repeating: " ", count: max(0, w - s.count)) }
        lines.append("\(pad("DEVICE", w0))  \(pad("ROOM", w1))  DISTANCE BY NODE (AGE)")
        for r in rows { lines.append("\(pad(r.0, w0))  \(pad(r.1, w1))  \(r.2)") }
        return lines.joined(separator: "\n") + "\n"
    }
}
