import Foundation
import Logging
import ProximityAPI
import ProximityCore
import Synchronization

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
final class MQTTOutbox: Sendable {
    static let fileName = "mqtt-outbox.json"
    /// How often the position is written while events are acknowledged, seconds.
    static let saveInterval: Double = 1
    /// The least time between two log lines about dropped events, seconds.
    static let dropLogInterval: Double = 10

    struct Position: Codable, Hashable {
        /// The last entry the broker acknowledged (or that was dropped).
        var delivered: UInt64
        /// Events dropped because the outbox was full, since the state directory was made.
        var dropped: UInt64
    }

    private let state: StateDirectory
    private let log: EventLog
    private let logger: Logger
    /// The node's clock: when to save the position and to log drops.
    private let clock: any NodeClock

    private struct Contents {
        var position: Position
        var pending = OutboxQueue()
        /// The highest sequence number taken into `pending` (or delivered).
        var lastQueued: UInt64
        var savedPosition: Position?
        var savedAt = -Double.infinity
        var lastDropLog = -Double.infinity
        var droppedSinceLog: UInt64 = 0
        var capacity: Int
    }
    private let contents: Mutex<Contents>

    init(state: StateDirectory, log: EventLog, capacity: Int, clock: any NodeClock, logger: Logger) {
        self.state = state
        self.log = log
        self.logger = logger
        self.clock = clock
        let url = state.url.appendingPathComponent(Self.fileName)
        let position: Position
        var saved: Position?
        if let data = try? Data(contentsOf: url), let read = try? JSONDecoder().decode(Position.self, from: data) {
            position = read
            saved = read
        } else {
            if FileManager.default.fileExists(atPath: url.path) {
                logger.error("\(url.path) is unreadable: the MQTT outbox starts after the event log's last entry")
            }
            position = Position(delivered: log.lastSeq, dropped: 0)
        }
        contents = Mutex(Contents(position: position, lastQueued: position.delivered, savedPosition: saved, capacity: capacity))
        refill()
    }

    /// Events waiting.
    var count: Int { contents.withLock { $0.pending.count } }
    var dropped: UInt64 { contents.withLock { $0.position.dropped } }
    var first: LogEntryValue? { contents.withLock { $0.pending.first } }
    /// The most events kept while the broker is away (`mqtt.outbox-size`, reloadable).
    var capacity: Int {
        get { contents.withLock { $0.capacity } }
        set { contents.withLock { $0.capacity = newValue } }
    }

    /// Reads the entries after the last one queued from the log.
    private func refill() {
        let entries = log.read(after: contents.withLock { $0.lastQueued })
        let now = clock.now
        contents.withLock { c in
            if let first = entries.first, first.seq > c.lastQueued + 1 {
                // Rotated out of the log before they could go.
                drop(first.seq - c.lastQueued - 1, from: &c, at: now)
            }
            for entry in entries { enqueue(entry, into: &c, at: now) }
        }
    }

    /// A new entry of the log (from the engine's `Logged`): queued, or, if entries came before it
    /// that this outbox did not see, those are read from the log first.
    func offer(_ entry: LogEntryValue) {
        let now = clock.now
        let gap = contents.withLock { c -> Bool in
            if entry.seq <= c.lastQueued { return false }
            if entry.seq == c.lastQueued + 1 {
                enqueue(entry, into: &c, at: now)
                return false
            }
            return true
        }
        if gap { refill() }
    }

    private func enqueue(_ entry: LogEntryValue, into c: inout Contents, at now: Timestamp) {
        guard entry.seq > c.lastQueued else { return }
        c.pending.append(entry)
        c.lastQueued = entry.seq
        if c.pending.count > c.capacity {
            let excess = c.pending.count - c.capacity
            c.pending.removeFirst(excess)
            drop(UInt64(excess), from: &c, at: now)
        }
    }

    /// Counts `n` dropped events (the oldest), moves the position past them, logs (at most every
    /// ``dropLogInterval`` seconds, with the count since the last line).
    private func drop(_ n: UInt64, from c: inout Contents, at now: Timestamp) {
        c.position.dropped += n
        c.position.delivered = max(c.position.delivered, (c.pending.first?.seq ?? c.lastQueued + 1) - 1)
        c.droppedSinceLog += n
        if now - c.lastDropLog >= Self.dropLogInterval {
            logger.warning("MQTT outbox full: dropped the oldest events", metadata: [
                "dropped": "\(c.droppedSinceLog)", "dropped.total": "\(c.position.dropped)", "outbox.capacity": "\(c.capacity)",
            ])
            c.lastDropLog = now
            c.droppedSinceLog = 0
        }
    }

    /// The broker acknowledged the first entry, `seq`.
    func delivered(_ seq: UInt64) {
        let now = clock.now
        let due = contents.withLock { c -> Bool in
            if c.pending.first?.seq == seq { c.pending.removeFirst() }
            c.position.delivered = max(c.position.delivered, seq)
            return now - c.savedAt >= Self.saveInterval || c.pending.isEmpty
        }
        if due { save() }
    }

    /// Writes the position if it changed.
    func save() {
        let (current, saved) = contents.withLock { ($0.position, $0.savedPosition) }
        guard current != saved else { return }
        do {
            try state.writeJSON(Self.fileName, current)
            let now = clock.now
            contents.withLock { c in
                c.savedPosition = current
                c.savedAt = now
            }
        } catch {
            logger.error("cannot save the MQTT outbox position", metadata: ["error": "\(error)"])
        }
    }
}

/// A first-in, first-out queue of entries: an array and the index of its head, compacted when
/// half of it is gone.
private struct OutboxQueue: Sendable {
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
