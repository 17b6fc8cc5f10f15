import Foundation
import ProximityAPI
@testable import ProximityNode
import Testing

/// The durable event log: appends, numbering across restarts, rotation, and a torn last line.
@Suite struct EventLogTests {
    static func state() throws -> StateDirectory {
        try StateDirectory(FileManager.default.temporaryDirectory.appendingPathComponent("eventlog-\(UUID().uuidString)"))
    }

    @Test("entries are numbered in order, across a reopen, and read back with their data")
    func appendAndReopen() throws {
        let state = try Self.state()
        var log: EventLog? = try EventLog(state: state)
        for i in 1...5 { try log!.append(LogEntryValue(time: Double(i), source: "tracking", type: "tracked", data: ["i": "\(i)"])) }
        log = nil
        let again = try EventLog(state: state)
        #expect(again.lastSeq == 5)
        try again.append(LogEntryValue(time: 6, source: "rule", type: "fired", data: ["rule": "r"]))
        let entries = again.read()
        #expect(entries.map(\.seq) == [1, 2, 3, 4, 5, 6])
        #expect(entries.last?.data == ["rule": "r"] && entries[2].data == ["i": "3"])
        #expect(again.read(after: 4).map(\.seq) == [5, 6])
        #expect(again.read(since: 3, limit: 2).map(\.seq) == [3, 4])
    }

    @Test("a torn last line is skipped by the reader, cut off at the next open, and never touches earlier lines")
    func tornLine() throws {
        let state = try Self.state()
        let log = try EventLog(state: state)
        for i in 1...3 { try log.append(LogEntryValue(time: Double(i), source: "region", type: "entered", data: ["region": "r\(i)"])) }
        let file = state.file(EventLog.fileName)
        let before = try Data(contentsOf: file)
        // What a crash in the middle of a write leaves: part of a line, no newline.
        let handle = try FileHandle(forWritingTo: file)
        handle.seekToEndOfFile()
        handle.write(Data(#"{"data":{"region":"r4"},"seq":4,"sou"#.utf8))
        try handle.close()
        #expect(EventLog.entries(in: state.url).map(\.seq) == [1, 2, 3], "the reader skips it")
        let reopened = try EventLog(state: state)
        #expect(try Data(contentsOf: file) == before, "cut back to the last whole line")
        try reopened.append(LogEntryValue(time: 4, source: "region", type: "exited"))
        #expect(EventLog.entries(in: state.url).map(\.seq) == [1, 2, 3, 4])
        #expect(try Data(contentsOf: file).prefix(before.count) == before)
    }

    @Test("past its size the log rotates, keeping N files, and reads back in order")
    func rotation() throws {
        let state = try Self.state()
        let log = try EventLog(state: state, maxBytes: 1000, keep: 2)
        for i in 1...100 { try log.append(LogEntryValue(time: Double(i), source: "tracking", type: "tracked", data: ["i": "\(i)"])) }
        let files = try FileManager.default.contentsOfDirectory(atPath: state.url.path).filter { $0.hasPrefix("events") }.sorted()
        #expect(files == ["events.jsonl", "events.jsonl.1", "events.jsonl.2"])
        for name in files {
            let size = try FileManager.default.attributesOfItem(atPath: state.file(name).path)[.size] as! Int
            #expect(size <= 1000)
        }
        let seqs = log.read().map(\.seq)
        #expect(seqs.last == 100 && seqs == Array(seqs.first!...100), "the newest, contiguous: \(seqs.first!)…100")
        #expect(seqs.count < 100, "the oldest were dropped")
    }
}
