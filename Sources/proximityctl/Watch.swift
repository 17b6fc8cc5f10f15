import ArgumentParser
import Foundation
import ProximityAPI

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A live table of the node's peers with zone, distance and RSSI.",
        discussion: """
            The table follows the node's signals (peers added, changed and removed) and is redrawn at \
            every interval. On a terminal it is redrawn in place; otherwise each refresh is appended, \
            separated by a blank line. Ctrl-C stops.

            Examples:
              $ proximityctl watch
                The table, redrawn every second until Ctrl-C.
              $ proximityctl watch --interval 5 --count 3
                Three tables, five seconds apart.
            """)

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
        let (bus, interval, count) = (node.bus, interval, count)
        await node.withNode("lost the node") { node in
            let live = try await LivePeerTable.start(node)
            try await withThrowingTaskGroup(of: Void.self) { group in
                // Keeps the table current; throws when the node leaves the bus.
                group.addTask { try await live.follow() }
                group.addTask { try await Self.redraw(live, bus: bus, interval: interval, count: count) }
                // The first to end: the redrawing after --count refreshes, or the node gone.
                _ = try await group.next()
                group.cancelAll()
            }
        }
    }

    /// Draws the table now and at every `interval`, `count` times or until cancelled.
    private static func redraw(_ live: LivePeerTable, bus: String, interval: Double, count: Int?) async throws {
        let terminal = isatty(STDOUT_FILENO) == 1
        var refreshes = 0
        while count.map({ refreshes < $0 }) ?? true {
            let rows = PeerTable.rows(await live.peers)
            let stamp = ISO8601DateFormatter().string(from: Date())
            let header = "proximityd \(live.node.name) on \(bus) — \(rows.count) peer\(rows.count == 1 ? "" : "s") — \(stamp)\n"
            if terminal {
                print("\u{1B}[H\u{1B}[2J" + header + PeerTable.render(rows), terminator: "")
            } else {
                print((refreshes > 0 ? "\n" : "") + header + PeerTable.render(rows), terminator: "")
            }
            fflush(nil)
            refreshes += 1
            if count.map({ refreshes >= $0 }) ?? false { break }
            // The redraw cadence the user asked for; the table itself changes with the signals.
            try await Task.sleep(for: .milliseconds(Int(interval * 1000)))
        }
    }
}
