import DBusKit
import Dispatch
import Foundation
import ProximityAPI

extension NodeProxy {
    /// The node's owner leaving the bus, from now on: subscribe before the signals that depend on
    /// the node, then check ``isStillThere()`` (it may have left before). The stream yields once,
    /// when this proxy's owner releases the name, and ends with the connection.
    func departure() async throws -> AsyncStream<Void> {
        let changes = try await connection.subscribe(MatchRule(
            sender: .bus, path: "/org/freedesktop/DBus", interface: .bus, member: "NameOwnerChanged", arg0: name.rawValue))
        let owner = owner.rawValue
        return AsyncStream { continuation in
            let task = Task {
                for await change in changes where change.body.count == 3 && change.body[1].string == owner {
                    continuation.yield()
                    break
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Whether the name still has the owner this proxy talks to.
    func isStillThere() async throws -> Bool {
        try await connection.nameOwner(of: name) == owner
    }
}

/// SIGINT and SIGTERM handed to `handler` (on a global queue) instead of ending the process, until
/// the returned sources are cancelled: so a command can finish its work (write what it has,
/// close a notification, tell the node) before it exits.
///
/// Returns once both sources are registered with the event loop (their registration handlers
/// ran): libdispatch registers a source on its manager queue after `resume()` returns, and a
/// signal that came in between, its disposition already `SIG_IGN`, would be lost (a `record` told
/// to stop at once would then run on; seen in CI under load).
func interruptionSources(_ handler: @escaping @Sendable (Int32) -> Void) async -> [any DispatchSourceSignal] {
    var sources: [any DispatchSourceSignal] = []
    for s in [SIGINT, SIGTERM] {
        signal(s, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: s, queue: .global())
        source.setEventHandler { handler(s) }
        await withCheckedContinuation { (registered: CheckedContinuation<Void, Never>) in
            source.setRegistrationHandler { registered.resume() }
            source.resume()
        }
        sources.append(source)
    }
    return sources
}
