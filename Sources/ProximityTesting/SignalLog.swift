import DBusKit
import Synchronization

/// Every signal of one subscription, kept in order with the time it arrived, and waits on them:
/// a test waits for the signal itself (bounded), never for a guessed delay.
public final class SignalLog: Sendable {
    public struct Entry: Sendable {
        public let at: ContinuousClock.Instant
        public let message: DBusMessage
    }
    private struct State {
        var entries: [Entry] = []
        /// Each waiter's predicate, the first index it may take, and its continuation.
        var waiters: [UInt64: (predicate: @Sendable (DBusMessage) -> Bool, from: Int, continuation: CheckedContinuation<Entry?, Never>)] = [:]
        var next: UInt64 = 0
    }
    private final class Shared: Sendable {
        let mutex = Mutex(State())
    }
    private let shared = Shared()
    private let task: Task<Void, Never>

    public init(_ stream: DBusSignalStream) {
        let shared = self.shared
        task = Task {
            for await m in stream {
                let entry = Entry(at: .now, message: m)
                let ready = shared.mutex.withLock { s -> [CheckedContinuation<Entry?, Never>] in
                    s.entries.append(entry)
                    let index = s.entries.count - 1
                    var ready: [CheckedContinuation<Entry?, Never>] = []
                    for (id, w) in s.waiters where index >= w.from && w.predicate(m) {
                        ready.append(w.continuation)
                        s.waiters[id] = nil
                    }
                    return ready
                }
                for c in ready { c.resume(returning: entry) }
            }
        }
    }

    public var entries: [Entry] { shared.mutex.withLock { $0.entries } }
    public var messages: [DBusMessage] { entries.map(\.message) }
    public var count: Int { shared.mutex.withLock { $0.entries.count } }

    /// The first signal (from index `from` on) matching `predicate`, with its arrival time,
    /// waiting up to `timeout`.
    @discardableResult
    public func waitEntry(from: Int = 0, timeout: Duration = .seconds(5), _ what: String = "signal",
                          _ predicate: @escaping @Sendable (DBusMessage) -> Bool) async throws -> Entry {
        let id = shared.mutex.withLock { s -> UInt64 in s.next += 1; return s.next }
        let found: Entry? = await withTaskGroup(of: Entry?.self) { group in
            group.addTask {
                await withCheckedContinuation { (c: CheckedContinuation<Entry?, Never>) in
                    let hit = self.shared.mutex.withLock { s -> Entry? in
                        if let e = s.entries.dropFirst(from).first(where: { predicate($0.message) }) { return e }
                        s.waiters[id] = (predicate, from, c)
                        return nil
                    }
                    if let hit { c.resume(returning: hit) }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                let c = self.shared.mutex.withLock { $0.waiters.removeValue(forKey: id)?.continuation }
                c?.resume(returning: nil)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            let c = self.shared.mutex.withLock { $0.waiters.removeValue(forKey: id)?.continuation }
            c?.resume(returning: nil)
            return first
        }
        guard let found else { throw TestKitError("no \(what) within \(timeout); got \(messages.map(\.description))") }
        return found
    }

    /// ``waitEntry(from:timeout:_:_:)`` without the time.
    @discardableResult
    public func wait(from: Int = 0, timeout: Duration = .seconds(5), _ what: String = "signal",
                     _ predicate: @escaping @Sendable (DBusMessage) -> Bool) async throws -> DBusMessage {
        try await waitEntry(from: from, timeout: timeout, what, predicate).message
    }

    public func cancel() { task.cancel() }
}
