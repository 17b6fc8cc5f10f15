import DBusKit

/// Every signal of one subscription, kept in order with the time it arrived, and waits on them:
/// an ``EventRecorder`` of bus signals, with the waits named as the bus tests use them.
public final class SignalLog: Sendable {
    public struct Entry: Sendable, CustomStringConvertible {
        public let at: ContinuousClock.Instant
        public let message: DBusMessage
        public var description: String { message.description }
    }

    /// The signals, as recorded: wait on them, or ``EventRecorder/until(_:timeout:_:)`` a state
    /// they announce.
    public let recorder: EventRecorder<Entry>

    public init(_ stream: DBusSignalStream) {
        recorder = EventRecorder(recording: stream) { Entry(at: .now, message: $0) }
    }

    public var entries: [Entry] { recorder.events }
    public var messages: [DBusMessage] { entries.map(\.message) }
    public var count: Int { recorder.count }

    /// The first signal (from index `from` on) matching `predicate`, with its arrival time,
    /// waiting up to `timeout`.
    @discardableResult
    public func waitEntry(from: Int = 0, timeout: Duration = .seconds(10), _ what: String = "signal",
                          _ predicate: @escaping @Sendable (DBusMessage) -> Bool) async throws -> Entry {
        try await recorder.require(what, from: from, timeout: timeout) { predicate($0.message) }
    }

    /// ``waitEntry(from:timeout:_:_:)`` without the time.
    @discardableResult
    public func wait(from: Int = 0, timeout: Duration = .seconds(10), _ what: String = "signal",
                     _ predicate: @escaping @Sendable (DBusMessage) -> Bool) async throws -> DBusMessage {
        try await waitEntry(from: from, timeout: timeout, what, predicate).message
    }

    /// Waits until `condition` holds, checked now and after each signal from now on.
    public func until(_ what: String, timeout: Duration, _ condition: () async throws -> Bool) async throws {
        try await recorder.until(what, timeout: timeout, condition)
    }

    public func cancel() { recorder.cancel() }
}
