import Foundation
import ProximityAPI
import ProximityCore
import Synchronization

/// The durable event log: JSON Lines in the state directory (`events.jsonl`), one entry a line,
/// appended with one `write(2)` each before the signal that announces the event goes out.
///
/// - A SIGKILL loses at most the entry being written: what `write` returned is in the kernel,
///   whatever happens to the process. Entries are flushed to the disk (`fdatasync`) at most
///   ``syncInterval`` seconds apart, for power loss.
/// - A torn last line (a crash of the machine in the middle of a write) is cut off when the log is
///   opened again, and skipped by the reader; earlier lines are never rewritten.
/// - Size-bounded: past ``maxBytes`` the file is rotated (`events.jsonl.1` … `.N`, the oldest
///   dropped).
public final class EventLog: Sendable {
    public static let fileName = "events.jsonl"
    public static let defaultMaxBytes = 8 << 20
    public static let defaultKeep = 3
    public static let syncInterval: Double = 1

    let directory: URL
    public let maxBytes: Int
    public let keep: Int
    /// What decides when entries are flushed (``syncInterval``): the node's clock.
    let clock: any NodeClock
    private let syncQueue = DispatchQueue(label: "proximityd.eventlog.sync")

    /// The open file and what is known of it; every use holds the lock.
    private struct File {
        var fd: Int32 = -1
        var size = 0
        var lastSync = -Double.infinity
        var unsynced = false
        var lastSeq: UInt64 = 0
    }
    private let file: Mutex<File>

    public var lastSeq: UInt64 { file.withLock { $0.lastSeq } }

    var url: URL { directory.appendingPathComponent(Self.fileName) }

    /// Opens (creating) the log in `state`, cutting a torn last line off.
    public init(state: StateDirectory, maxBytes: Int = EventLog.defaultMaxBytes, keep: Int = EventLog.defaultKeep,
                clock: any NodeClock = SystemNodeClock()) throws(StateError) {
        directory = state.url
        self.maxBytes = maxBytes
        self.keep = keep
        self.clock = clock
        var opened = File()
        try Self.open(&opened, url: directory.appendingPathComponent(Self.fileName), directory: directory, keep: keep)
        file = Mutex(opened)
    }

    deinit { file.withLock { if $0.fd >= 0 { close($0.fd) } } }

    private static func open(_ file: inout File, url: URL, directory: URL, keep: Int) throws(StateError) {
        let path = url.path
        file.fd = Foundation.open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o640)
        guard file.fd >= 0 else { throw StateError(kind: .cannotWrite, path: path, detail: String(cString: strerror(errno))) }
        var info = stat()
        fstat(file.fd, &info)
        file.size = Int(info.st_size)
        // Cut a torn last line, and find the last sequence number (here or in the rotated files).
        if file.size > 0 {
            let data = (try? Data(contentsOf: url)) ?? Data()
            if data.last != UInt8(ascii: "\n") {
                let keepBytes = data.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? 0
                guard ftruncate(file.fd, off_t(keepBytes)) == 0 else {
                    throw StateError(kind: .cannotWrite, path: path,
                                     detail: "cannot cut the torn last line: \(String(cString: strerror(errno)))")
                }
                file.size = keepBytes
            }
        }
        file.lastSeq = Self.entries(in: directory, keep: keep).last?.seq ?? 0
    }

    /// Appends `event` (numbered here) and returns it as written. Throws when it cannot be written;
    /// the log stays usable.
    @discardableResult
    public func append(_ event: LogEntryValue) throws(StateError) -> LogEntryValue {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let now = clock.now
        return try file.withLock { (f: inout File) throws(StateError) -> LogEntryValue in
            var entry = event
            entry.seq = f.lastSeq + 1
            guard var line = try? encoder.encode(entry) else {
                throw StateError(kind: .cannotWrite, path: url.path, detail: "cannot encode an event")
            }
            line.append(UInt8(ascii: "\n"))
            if f.size > 0, f.size + line.count > maxBytes { try rotate(&f) }
            let fd = f.fd
            let written = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard written == line.count else {
                let reason = written < 0 ? String(cString: strerror(errno)) : "short write"
                // A short write leaves a torn line: cut it, so the next entry starts on its own line.
                if written > 0 { _ = ftruncate(fd, off_t(f.size)) }
                throw StateError(kind: .cannotWrite, path: url.path, detail: reason)
            }
            f.size += line.count
            f.lastSeq = entry.seq
            f.unsynced = true
            sync(&f, at: now)
            return entry
        }
    }

    /// Flushes entries written more than ``syncInterval`` ago (the node calls it at each report,
    /// so the last entries of a burst reach the disk within about a second).
    public func syncIfDue() {
        let now = clock.now
        file.withLock { sync(&$0, at: now) }
    }

    /// Flushes on a queue of its own, on a duplicate of the descriptor: an `fdatasync` may take
    /// tens of milliseconds, and the engine does not wait for it (a SIGKILL needs no flush; a
    /// power loss takes at most about a second of entries).
    private func sync(_ f: inout File, at now: Timestamp) {
        guard f.unsynced, now - f.lastSync >= Self.syncInterval else { return }
        f.lastSync = now
        f.unsynced = false
        let copy = dup(f.fd)
        guard copy >= 0 else { return }
        syncQueue.async {
            fdatasync(copy)
            close(copy)
        }
    }

    private func rotate(_ f: inout File) throws(StateError) {
        fdatasync(f.fd)
        close(f.fd)
        f.fd = -1
        let fm = FileManager.default
        for i in stride(from: keep, through: 1, by: -1) {
            let from = i == 1 ? url : directory.appendingPathComponent("\(Self.fileName).\(i - 1)")
            let to = directory.appendingPathComponent("\(Self.fileName).\(i)")
            guard fm.fileExists(atPath: from.path) else { continue }
            try? fm.removeItem(at: to)
            try? fm.moveItem(at: from, to: to)
        }
        f.size = 0
        let last = f.lastSeq
        try Self.open(&f, url: url, directory: directory, keep: keep)
        f.lastSeq = max(f.lastSeq, last)
    }

    /// Every readable entry, oldest first, from the rotated files and the current one. Lines that
    /// cannot be read (a torn last line) are skipped.
    public static func entries(in directory: URL, keep: Int = defaultKeep) -> [LogEntryValue] {
        var out: [LogEntryValue] = []
        let names = stride(from: keep, through: 1, by: -1).map { "\(fileName).\($0)" } + [fileName]
        let decoder = JSONDecoder()
        for name in names {
            guard let data = try? Data(contentsOf: directory.appendingPathComponent(name)) else { continue }
            for line in data.split(separator: UInt8(ascii: "\n")) {
                if let entry = try? decoder.decode(LogEntryValue.self, from: line) { out.append(entry) }
            }
        }
        return out
    }

    /// The entries after `seq`, or since `time` (epoch seconds), at most `limit`, oldest first.
    public func read(after seq: UInt64 = 0, since time: Double? = nil, limit: Int = .max) -> [LogEntryValue] {
        // Under the lock: not in the middle of a rotation.
        var entries = file.withLock { _ in Self.entries(in: directory, keep: keep) }.filter { $0.seq > seq }
        if let time { entries = entries.filter { $0.time >= time } }
        return Array(entries.prefix(limit))
    }
}
