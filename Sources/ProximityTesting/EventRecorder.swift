import Synchronization

/// Every event of one source, kept in order, and waits on them: a test waits for the event
/// itself, bounded by a timeout, never for a guessed delay. The one recorder of the test kit:
/// bus signals (``SignalLog``), a node's log and events, an MQTT client's or a BlueZ mirror's
/// events are all recorded here.
///
/// A wait is resumed by ``record(_:)`` when a matching event arrives (no polling): it looks at
/// the events from index `from` on, those already recorded first. It ends with nil after its
/// timeout, or when the recorder is finished (its source ended) without a match.
public final class EventRecorder<Event: Sendable>: Sendable {
    private struct Waiter {
        var from: Int
        var predicate: @Sendable (Event) -> Bool
        var continuation: CheckedContinuation<Event?, Never>
    }
    private struct State {
        var events: [Event] = []
        var waiters: [UInt64: Waiter] = [:]
        var next: UInt64 = 0
        var finished = false
    }
    private let state = Mutex(State())
    private let task = Mutex<Task<Void, Never>?>(nil)

    /// A recorder fed by ``record(_:)``.
    public init() {}

    /// A recorder of every element of `sequence`, finished when the sequence ends. The sequence
    /// is read by a task of its own until then, or until ``cancel()``.
    public convenience init<S: AsyncSequence & Sendable>(recording sequence: S) where S.Element == Event {
        self.init(recording: sequence) { $0 }
    }

    /// A recorder of `transform` of each element of `sequence` (nil: not recorded).
    public convenience init<S: AsyncSequence & Sendable>(recording sequence: S,
                                                         _ transform: @escaping @Sendable (S.Element) -> Event?) {
        self.init()
        record(sequence, transform)
    }

    private func record<S: AsyncSequence & Sendable>(_ sequence: S, _ transform: @escaping @Sendable (S.Element) -> Event?) {
        let reading = Task { [self] in
            do {
                for try await element in sequence {
                    if let event = transform(element) { record(event) }
                }
            } catch {}
            finish()
        }
        task.withLock { $0 = reading }
    }

    /// Every event so far, in order.
    public var events: [Event] { state.withLock { $0.events } }
    public var count: Int { state.withLock { $0.events.count } }

    /// Keeps `event` and resumes the waits it matches.
    public func record(_ event: Event) {
        let ready = state.withLock { s -> [CheckedContinuation<Event?, Never>] in
            s.events.append(event)
            let index = s.events.count - 1
            var ready: [CheckedContinuation<Event?, Never>] = []
            for (id, w) in s.waiters where index >= w.from && w.predicate(event) {
                ready.append(w.continuation)
                s.waiters[id] = nil
            }
            return ready
        }
        for c in ready { c.resume(returning: event) }
    }

    /// No more events: the waits still open end with nil, and later waits look only at the
    /// events kept.
    public func finish() {
        let waiting = state.withLock { s -> [CheckedContinuation<Event?, Never>] in
            s.finished = true
            defer { s.waiters = [:] }
            return s.waiters.values.map(\.continuation)
        }
        for c in waiting { c.resume(returning: nil) }
    }

    /// Stops reading the sequence the recorder was made with.
    public func cancel() { task.withLock { $0?.cancel() } }

    deinit { task.withLock { $0?.cancel() } }

    /// The first event from index `from` on that matches `predicate` (already recorded, or still
    /// to come), or nil when none has come after `timeout`.
    @discardableResult
    public func wait(from: Int = 0, timeout: Duration = .seconds(10),
                     where predicate: @escaping @Sendable (Event) -> Bool) async -> Event? {
        let id = state.withLock { s -> UInt64 in s.next += 1; return s.next }
        return await withTaskGroup(of: Event?.self) { group in
            group.addTask {
                await withCheckedContinuation { (c: CheckedContinuation<Event?, Never>) in
                    let (found, waiting) = self.state.withLock { s -> (Event?, Bool) in
                        if let e = s.events.dropFirst(from).first(where: predicate) { return (e, false) }
                        if s.finished { return (nil, false) }
                        s.waiters[id] = Waiter(from: from, predicate: predicate, continuation: c)
                        return (nil, true)
                    }
                    if !waiting { c.resume(returning: found) }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            // The timeout won, or the match: either way the other task ends now.
            let left = self.state.withLock { $0.waiters.removeValue(forKey: id)?.continuation }
            left?.resume(returning: nil)
            group.cancelAll()
            return first
        }
    }

    /// ``wait(from:timeout:where:)``, throwing when no event matches: the error names `what`
    /// and the last events recorded.
    @discardableResult
    public func require(_ what: String, from: Int = 0, timeout: Duration = .seconds(10),
                        where predicate: @escaping @Sendable (Event) -> Bool) async throws -> Event {
        guard let event = await wait(from: from, timeout: timeout, where: predicate) else {
            let last = events.suffix(10).map { "\($0)" }.joined(separator: "\n  ")
            throw TestKitError("no \(what) within \(timeout); the last of \(count) events:\n  \(last)")
        }
        return event
    }

    /// Waits until `condition` holds: checked now, and again after each event recorded from now
    /// on (the events are the moments the state it reads can change), bounded by `timeout`.
    /// For state an event announces without carrying it (a property read back after its
    /// `PropertiesChanged`, a node's table after its report).
    public func until(_ what: String, timeout: Duration, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            let seen = count
            if try await condition() { return }
            let left = deadline - ContinuousClock.now
            guard left > .zero, await wait(from: seen, timeout: left, where: { _ in true }) != nil else {
                if try await condition() { return }
                throw TestKitError("\(what): not within \(timeout) (\(count) events)")
            }
        }
    }
}
