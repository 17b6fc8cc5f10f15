import BlueZSim
import Foundation
import StrictYAML
import Testing

/// A YAML scenario is read through the strict tree the daemon's config file uses (StrictYAML):
/// FILE:LINE:COLUMN in its errors, a duplicate key refused where its second occurrence is, and the
/// same size, depth and alias limits.
@Suite("scenario files: the config file's strict YAML")
struct ScenarioYAMLTests {
    static let box = #"{ name: a, address: "02:00:00:00:00:01", position: [0, 0] }"#

    func error(_ text: String) -> ScenarioError? {
        do {
            _ = try Scenario.parse(text, format: .yaml)
            return nil
        } catch {
            return error
        }
    }

    @Test("an error names the line and column of the value, or of the key when the key is wrong")
    func lineAndColumn() throws {
        let bad = try #require(error("seed: 1\nboxes:\n  - { name: a, address: \"nope\", position: [0, 0] }\n"))
        #expect(bad.path == "boxes[0].address" && bad.line == 3 && bad.column == 25)
        let unknown = try #require(error("boxes: [\(Self.box)]\ncolour: red\n"))
        #expect(unknown.path == "colour" && unknown.line == 2 && unknown.column == 1)
        let wrongType = try #require(error("radio:\n  packet_loss: high\nboxes: [\(Self.box)]\n"))
        #expect(wrongType.path == "radio.packet_loss" && wrongType.line == 2 && wrongType.column == 16)
        let syntax = try #require(error("boxes: [\(Self.box)\nseed: 1"))
        #expect(syntax.path == "" && syntax.line != nil && syntax.column != nil && syntax.message.hasPrefix("invalid YAML: "))
    }

    @Test("a duplicate key is refused at its second occurrence, with the first's place")
    func duplicateKey() throws {
        let top = try #require(error("seed: 1\nboxes: [\(Self.box)]\nseed: 2\n"))
        #expect(top.path == "seed" && top.line == 3 && top.column == 1)
        #expect(top.message == "duplicate key 'seed' (first at 1:1)")
        let nested = try #require(error("boxes:\n  - { name: a, name: b, address: \"02:00:00:00:00:01\", position: [0, 0] }\n"))
        #expect(nested.line == 2 && nested.column == 16 && nested.message == "duplicate key 'name' (first at 2:7)")
    }

    @Test("the config file's limits: nesting, aliases, bytes that are not UTF-8, the file's size")
    func limits() throws {
        let deep = String(repeating: "[", count: YAMLLimits.maxDepth + 1) + String(repeating: "]", count: YAMLLimits.maxDepth + 1)
        let tooDeep = try #require(error("seed: \(deep)\nboxes: [\(Self.box)]\n"))
        #expect(tooDeep.line == 1 && tooDeep.message == "collections nested more than \(YAMLLimits.maxDepth) deep")

        // A "billion laughs": 9 levels of 10 aliases.
        var bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        for level in 1 ... 8 {
            bomb += "a\(level): &a\(level) [" + Array(repeating: "*a\(level - 1)", count: 10).joined(separator: ", ") + "]\n"
        }
        let aliases = try #require(error(bomb + "boxes: [\(Self.box)]\n"))
        #expect(aliases.message.hasPrefix("more than \(YAMLLimits.maxValues) values, with YAML aliases expanded"))

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("scenario-yaml-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let latin1 = directory.appendingPathComponent("latin1.yaml")
        try Data("seed: 1\nboxes: [{ name: caf".utf8 + [0xE9] + " }]\n".utf8).write(to: latin1)
        #expect(throws: ScenarioError(path: "", message: "the file is not UTF-8 text", line: 2, column: 20, file: latin1.path)) {
            try Scenario.load(from: latin1)
        }
        let large = directory.appendingPathComponent("large.yaml")
        try Data(repeating: UInt8(ascii: " "), count: YAMLLimits.maxSize + 1).write(to: large)
        #expect(throws: ScenarioError(path: "", message: "the file is larger than \(YAMLLimits.maxSize >> 20) MiB", file: large.path)) {
            try Scenario.load(from: large)
        }
        let good = directory.appendingPathComponent("good.yml")
        try "seed: 3\nboxes: [\(Self.box)]\n".write(to: good, atomically: true, encoding: .utf8)
        #expect(try Scenario.load(from: good).seed == 3)
    }

    @Test("a loaded file's error reads FILE:LINE:COLUMN: path: message, as the config file's")
    func fileLineColumn() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("scenario-yaml-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("bad.yaml")
        try "boxes:\n  - name: a\n    address: \"02:00:00:00:00:01\"\n    position: [0, 0]\n    tx_offset: 99\n"
            .write(to: file, atomically: true, encoding: .utf8)
        do {
            _ = try Scenario.load(from: file)
            Issue.record("loaded a bad file")
        } catch {
            #expect(error.description == "\(file.path):5:16: boxes[0].tx_offset: must be -60...60 dB, not 99")
        }
        // JSON values have a column too.
        let json = directory.appendingPathComponent("bad.json")
        try "{\n  \"boxes\": [{\"name\": \"a\", \"address\": 5, \"position\": [0, 0]}]\n}\n".write(to: json, atomically: true, encoding: .utf8)
        do {
            _ = try Scenario.load(from: json)
            Issue.record("loaded a bad file")
        } catch {
            #expect(error.description.hasPrefix("\(json.path):2:38: boxes[0].address: "))
        }
    }
}
