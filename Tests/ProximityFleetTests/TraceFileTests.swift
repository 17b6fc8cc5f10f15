import Foundation
import ProximityCore
import ProximityFleet
import Testing

/// The CSV reader of recordings (RFC 4180, as spreadsheets and Python's csv module write it), and
/// traces and `proximityctl record` files read through it.
@Suite struct TraceFileTests {
    /// Each record of `text` as its line and fields; a comment's fields are `["#…"]`.
    static func records(_ text: String, comments: Bool = false) throws(CSVReader.Problem) -> [(line: Int, fields: [String])] {
        var reader = CSVReader(Data(text.utf8), path: "t.csv", comments: comments)
        var out: [(Int, [String])] = []
        while let record = try reader.next() { out.append((record.line, record.fields)) }
        return out
    }

    static func lines(_ records: [(line: Int, fields: [String])]) -> [Int] { records.map(\.line) }
    static func fields(_ records: [(line: Int, fields: [String])]) -> [[String]] { records.map(\.fields) }

    @Test("LF, CRLF and a lone CR end records alike; a last record without a line end; a BOM skipped")
    func lineEnds() throws {
        let rows = [["time", "node", "device", "rssi"], ["1", "a", "t", "-60"], ["2", "b", "t", "-61"]]
        for end in ["\n", "\r\n", "\r"] {
            for bom in ["", "\u{FEFF}"] {
                let text = bom + rows.map { $0.joined(separator: ",") }.joined(separator: end)
                for variant in [text, text + end] {
                    let read = try Self.records(variant)
                    #expect(Self.fields(read) == rows, "\(variant.debugDescription)")
                    #expect(Self.lines(read) == [1, 2, 3], "\(variant.debugDescription)")
                }
            }
        }
        #expect(try Self.records("").isEmpty)
        #expect(try Self.records("\u{FEFF}").isEmpty)
        // An empty line is an empty record, at its line.
        #expect(Self.fields(try Self.records("a\r\n\r\nb\r\n")) == [["a"], [""], ["b"]])
    }

    @Test("quoted fields hold commas, doubled quotes and line breaks (CRLF kept); the lines after a multi-line field are counted right")
    func quoted() throws {
        let text = "time,device,note\r\n1,\"tag, 1\",\"say \"\"hi\"\"\"\r\n2,\"two\r\nlines\",\"three\nmore\rlines\"\r\n3,\"\",x\r\n4,a\"b,\"c\"d"
        let read = try Self.records(text)
        #expect(Self.fields(read) == [["time", "device", "note"], ["1", "tag, 1", "say \"hi\""], ["2", "two\r\nlines", "three\nmore\rlines"],
                                      ["3", "", "x"], ["4", "a\"b", "cd"]])
        #expect(Self.lines(read) == [1, 2, 3, 7, 8])
        // A comma and a quote inside a quoted field at the end of the file, with no line end.
        #expect(Self.fields(try Self.records("a,\"b,\"\"\"")) == [["a", "b,\""]])
    }

    @Test("a quoted field not closed is a problem at the line it opens on")
    func unclosed() {
        for (text, line) in [("time,device\n1,\"tag\n2,t\n", 2), ("a\r\nb\r\n\"x\r\ny", 3), ("a,\"b\nc\",\"d\ne", 2)] {
            do {
                _ = try Self.records(text)
                Issue.record("read: \(text.debugDescription)")
            } catch {
                #expect(error.message == "t.csv:\(line): a quoted field opens on this line and is not closed", "\(text.debugDescription)")
            }
        }
    }

    @Test("with comments, a line starting with # is one field to its line end, quotes and all")
    func comments() throws {
        let read = try Self.records("# a \"quote, here\r\nx,y\r\n#\"\r\n1,2", comments: true)
        #expect(Self.fields(read) == [["# a \"quote, here"], ["x", "y"], ["#\""], ["1", "2"]])
        #expect(Self.lines(read) == [1, 2, 3, 4])
        #expect(Self.fields(try Self.records("#a,b")) == [["#a", "b"]])
    }

    static func trace(_ text: String) throws(TraceFile.Problem) -> TraceFile.Trace {
        var reader = CSVReader(Data(text.utf8), path: "t.csv", comments: true)
        return try TraceFile.read(&reader)
    }

    @Test("a trace: the rows skipped (empty, ,,, and # comments after the header) are counted; a bad row is FILE:LINE at its first line")
    func trace() throws {
        let trace = try Self.trace("\u{FEFF}# made by hand\r\nTime, node ,device,rssi,x,y\r\n1,a,\"tag, 1\",-60,1,2\r\n\r\n,,,,,\r\n# 2,a,t,-61\r\n3,b,\"tag, 1\",-70,,\r\n")
        #expect(trace.samples == [TraceSample(time: 1, node: "a", device: "tag, 1", rssi: -60, truth: PlanPoint(x: 1, y: 2, z: 1)),
                                  TraceSample(time: 3, node: "b", device: "tag, 1", rssi: -70)])
        #expect(trace.recordedBy == nil)
        #expect(trace.skipped.summary == "3 rows skipped: 2 empty, 1 commented out (#)")
        #expect(try Self.trace("time,node,device,rssi\n1,a,t,-60\n").skipped.summary == nil)
        do {
            _ = try Self.trace("time,node,device,rssi\r\n1,a,\"two\r\nlines\",-60\r\n2,a,t,loud\r\n")
            Issue.record("a bad rssi read")
        } catch { #expect(error.message == "t.csv:4: rssi must be a number, not \"loud\"") }
    }

    static let record = """
        # proximityctl record: node=0f8e62a4-5c1e-4a57-9f0a-3b6c2d1e7f90 started=2026-11-26T10:00:00.000Z path_loss_exponent=2 clear_interval=10 default_measured_power=-59 name=kitchen box
        # peers: tag
        # time: seconds since the Unix epoch; rssi, measured_power: dBm; truth, distance: metres (truth: fill in)
        time,peer,rssi,truth,measured_power,zone,distance
        1000.1,tag,-60,,-59,,
        1000.5,"ibeacon:a,b",-61,,-59,,
        1001,tag,,,-59,near,1.2
        1001.5,tag,,2,,,
        1002,tag,-70,,-59,,

        """

    @Test("a proximityctl record file is one node's trace: the node its first line names, the devices its peers; its rows without an rssi skipped and counted")
    func record() throws {
        let trace = try Self.trace(Self.record.replacingOccurrences(of: "\n", with: "\r\n"))
        #expect(trace.recordedBy == "kitchen box")
        #expect(trace.samples == [TraceSample(time: 1000.1, node: "kitchen box", device: "tag", rssi: -60),
                                  TraceSample(time: 1000.5, node: "kitchen box", device: "ibeacon:a,b", rssi: -61),
                                  TraceSample(time: 1002, node: "kitchen box", device: "tag", rssi: -70)])
        #expect(trace.skipped.summary == "2 rows skipped: 2 without an rssi (a report's or a truth mark's row)")
        // Without its node's name: how to give it.
        let unnamed = Self.record.replacingOccurrences(of: " name=kitchen box", with: "")
        do {
            _ = try Self.trace(unnamed)
            Issue.record("a record file without a name read")
        } catch {
            #expect(error.message == "t.csv: a proximityctl record file without its node's name (name=… in its first line): proximity-fleet walk NAME=t.csv > trace.csv makes a trace of it")
        }
        var reader = CSVReader(Data(unnamed.utf8), path: "t.csv", comments: true)
        #expect(try TraceFile.read(&reader, recordOnly: true, node: "hall").samples.map(\.node) == ["hall", "hall", "hall"])
    }
}
