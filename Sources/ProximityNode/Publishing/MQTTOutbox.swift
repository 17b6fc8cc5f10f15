import Foundation
import Logging
import ProximityAPI

/// The events waiting for the broker: the event log's entries (region, alert, tracking, profile
/// and rule events, each on disk before anything announces it) after the last one the broker
/// acknowledged. The outbox keeps no copy of them: its file, `mqtt-outbox.json` in the state
/// directory, holds only that position and the count of events dropped.
///
/// - While the broker cannot be reached the entries wait, in the log and here in memory, at most
///   ``capacity`` of them; past it the oldest go, counted (``dropped``) and logged.
/// - After a SIGKILL or a restart the outbox starts again after the last position saved: an event
///   acknowledged in the second before may go out again (once or more, never lost), none is lost.
/// - The first time (no file) it starts after the log's last entry: the history before MQTT was
///   configured is not sent.
final class MQTTOutbox: @unchecked Sendable {
    static let fileName = "mqtt-outbox.json"
    /// How often the position is written while events are acknowledged, seconds.
    static let saveInterval: Double = 1

    struct Position: Codable, Hashable {
        /// The last entry the broker acknowledged (or that was dropped).
        var delivered: UInt64
        /// Events dropped because the outbox was full, since the state directory was made.
        var dropped: UInt64
    }

    private let state: StateDirectory
    private let log: EventLog
    private let logger: Logger
    private let lock = NSLock()
    private var position: Position
    private var pending = Queue()
    /// The highest sequence number taken into `pending` (or delivered).
    private var lastQueued: UInt64
    private var savedPosition: Position?
    private var savedAt = Date.distantPast
    private var lastDropLog = Date.distantPast
    private var droppedSinceLog: UInt64 = 0
    var capacity: Int

    init(state: StateDirectory, log: EventLog, capacity: Int, logger: Logger) {
        self.state = state
        self.log = log
        self.capacity = capacity
        self.logger = logger
        let url = state.url.appendingPathComponent(Self.fileName)
        if let data = try? Data(contentsOf: url), let saved = try? JSONDecoder().decode(Position.self, from: data) {
            position = saved
            savedPosition = saved
        } else {
            if FileManager.default.fileExists(atPath: url.path) {
                logger.error("\(url.path) is unreadable: the MQTT outbox starts after the event log's last entry")
            }
            position = Position(delivered: log.lastSeq, dropped: 0)
        }
        lastQueued = position.delivered
        refill()
    }

    /// Events waiting.
    var count: Int { lock.withLock { pending.count } }
    var dropped: UInt64 { lock.withLock { position.dropped } }
    var first: LogEntryValue? { lock.withLock { pending.first } }

    /// Reads the entries after the last one queued from the log.
    private func refill() {
        let entries = log.read(after: lastQueued)
        lock.withLock {
            if let first = entries.first, first.seq > lastQueued + 1 {
                // Rotated out of the log before they could go.
                drop(first.seq - lastQueued - 1)
            }
            for entry in entries { enqueue(entry) }
        }
    }

    /// A new entry of the log (from the engine's `Logged`): queued, or, if entries came before it
    /// that this outbox did not see, those are read from the log first.
    func offer(_ entry: LogEntryValue) {
        let gap = lock.withLock { () -> Bool in
            if entry.seq <= lastQueued { return false }
            if entry.seq == lastQueued + 1 {
                enqueue(entry)
                return false
            }
            return true
        }
        if gap { refill() }
    }

    private func enqueue(_ entry: LogEntryValue) {
        guard entry.seq > lastQueued else { return }
        pending.append(entry)
        lastQueued = entry.seq
        if pending.count > capacity {
            let excess = pending.count - capacity
            pending.removeFirst(excess)
            drop(UInt64(excess))
        }
    }

    /// Counts `n` dropped events (the oldest), moves the position past them, logs (at most every
    /// 10 s, with the count since the last line).
    private func drop(_ n: UInt64) {
        position.dropped += n
        position.delivered = max(position.delivered, (pending.first?.seq ?? lastQueued + 1) - 1)
        droppedSinceLog += n
        let now = Date()
        if now.timeIntervalSince(lastDropLog) >= 10 {
            logger.warning("MQTT outbox full: dropped the oldest events", metadata: [
                "dropped": "\(droppedSinceLog)", "dropped.total": "\(position.dropped)", "outbox.capacity": "\(capacity)",
            ])
            lastDropLog = now
            droppedSinceLog = 0
        }
    }

    /// The broker acknowledged the first entry, `seq`.
    func delivered(_ seq: UInt64) {
        let due = lock.withLock { () -> Bool in
            if pending.first?.seq == seq { pending.removeFirst() }
            position.delivered = max(position.delivered, seq)
            return Date().timeIntervalSince(savedAt) >= Self.saveInterval || pending.isEmpty
        }
        if due { save() }
    }

    /// Writes the position if it changed.
    func save() {
        let current = lock.withLock { position }
        guard current != savedPosition else { return }
        do {
            try state.writeJSON(Self.fileName, current)
            savedPosition = current
            savedAt = Date()
        } catch {
            logger.error("cannot save the MQTT outbox position", metadata: ["error": "\(error)"])
        }
    }
}

/// A first-in, first-out queue of entries: an array and the index of its head, compacted when
/// half of it is gone.
private struct Queue {
    private var items: [LogEntryValue] = []
    private var head = 0

    var count: Int { items.count - head }
    var isEmpty: Bool { count == 0 }
    var first: LogEntryValue? { head < items.count ? items[head] : nil }

    mutating func append(_ entry: LogEntryValue) { items.append(entry) }

    mutating func removeFirst(_ n: Int = 1) {
        head += min(n, count)
        if head > 1024, head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
    }
}
