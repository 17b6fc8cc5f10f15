import ArgumentParser
import DBusKit
import Foundation
import ProximityAPI

/// `--json` and `--count N` of the subcommands that follow a node's signals.
struct FollowOptions: ParsableArguments {
    @Flag(name: .long, help: "Print one JSON object per line instead of text.")
    var json = false

    @Option(name: .long, help: ArgumentHelp("Stop after this many lines (default: run until interrupted).", valueName: "n"))
    var count: Int?

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count: must be at least 1") }
    }
}

/// Why following stopped.
enum FollowOutcome: Sendable { case counted, nodeLeft, disconnected }

extension NodeOptions {
    /// Follows the signals `subscribe` returns, printing a line for each that `line` turns into one
    /// (given the time it was received), until `count` lines are printed (then it returns), or the
    /// node leaves the bus or the connection closes (one line, exit 69). It subscribes to the node
    /// leaving first, so nothing between the two is missed.
    func follow<Signal: Sendable>(_ what: String, count: Int?,
                                  subscribe: @escaping @Sendable (NodeProxy) async throws -> AsyncStream<Signal>,
                                  line: @escaping @Sendable (Signal, String) -> String?) async {
        let outcome = await withNode(what) { node -> FollowOutcome in
            let departure = try await node.departure()
            let signals = try await subscribe(node)
            // It may have left before the first subscription.
            guard try await node.isStillThere() else { return .nodeLeft }
            return await withTaskGroup(of: FollowOutcome.self) { group in
                group.addTask {
                    for await _ in departure { return .nodeLeft }
                    return .disconnected
                }
                group.addTask {
                    let clock = ISO8601DateFormatter()
                    clock.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
                    var lines = 0
                    for await signal in signals {
                        guard let text = line(signal, clock.string(from: Date())) else { continue }
                        print(text)
                        fflush(nil)
                        lines += 1
                        if let count, lines >= count { return .counted }
                    }
                    return .disconnected
                }
                // The first to end decides: --count reached, the node gone, or the bus.
                let first = await group.next() ?? .disconnected
                group.cancelAll()
                return first
            }
        }
        switch outcome {
        case .counted: return
        case .nodeLeft: fail("\(NodeConnectionError.nodeLeft(bus: address, name: name))")
        case .disconnected: fail("\(NodeConnectionError.disconnected(bus: address))")
        }
    }
}
