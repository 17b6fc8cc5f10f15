import ArgumentParser
import DBusKit
import Foundation
import ProximityNode

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A live table of the node's peers with zone, distance and RSSI.",
        discussion: "On a terminal the table is redrawn in place; otherwise each refresh is appended, separated by a blank line. Ctrl-C stops.")

    @OptionGroup var node: NodeOptions

    @Option(name: .long, help: ArgumentHelp("Seconds between refreshes (0.1 to 60).", valueName: "seconds"))
    var interval: Double = 1

    @Option(name: .long, help: ArgumentHelp("Stop after this many refreshes (default: run until interrupted).", valueName: "n"))
    var count: Int?

    func validate() throws {
        guard interval >= 0.1, interval <= 60 else { throw ValidationError("--interval: must be between 0.1 and 60 seconds") }
        if let count, count < 1 { throw ValidationError("--count: must be at least 1") }
    }

    func run() async throws {
        let (connection, name) = await node.connect()
        let terminal = isatty(STDOUT_FILENO) == 1
        var refreshes = 0
        while count.map({ refreshes < $0 }) ?? true {
            let rows: [PeerRow]
            do {
                rows = try await PeerTable.fetch(connection, name)
            } catch {
                await connection.close()
                fail("lost the node: \(error)")
            }
            let stamp = ISO8601DateFormatter().string(from: Date())
            let header = "proximityd \(name) on \(node.bus) — \(rows.count) peer\(rows.count == 1 ? "" : "s") — \(stamp)\n"
            if terminal {
                print("\u{1B}[H\u{1B}[2J" + header + PeerTable.render(rows), terminator: "")
            } else {
                print((refreshes > 0 ? "\n" : "") + header + PeerTable.render(rows), terminator: "")
            }
            fflush(nil)
            refreshes += 1
            if count.map({ refreshes >= $0 }) ?? false { break }
            // The refresh cadence the user asked for.
            try await Task.sleep(for: .milliseconds(Int(interval * 1000)))
        }
        await connection.close()
    }
}
