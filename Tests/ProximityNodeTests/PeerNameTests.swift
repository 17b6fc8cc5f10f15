import DBusKit
import Foundation
import ProximityAPI
import ProximityCore
@testable import ProximityNode
import Testing

/// Display names: `names:` in the config file, `SetPeerName` over the bus (kept in
/// `settings.json`), the config file's winning; shown in every report's snapshot.
@Suite struct PeerNameTests {
    static let file = ConfigFileTests.file
    static let beacon = "ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:10:1"

    static func name(in effects: [NodeEffect]) -> String? {
        NodeStepTests.published(effects).compactMap { if case .report(let r) = $0 { r.peers.first?.name } else { nil } }.first
    }

    static func names(in effects: [NodeEffect]) -> [PeerID: String]? {
        NodeStepTests.published(effects).compactMap { if case .peerNames(let names, _) = $0 { names } else { nil } }.first
    }

    @Test("names: identifiers (capitals put right) to names; the node's configuration takes them")
    func parsed() throws {
        let text = "names:\n  \(Self.beacon.uppercased().replacingOccurrences(of: "IBEACON", with: "ibeacon")): \"Anna's badge\"\n"
            + "  \(NodeStepTests.peerID): Meeting room\n"
        let file = try ConfigFile.parse(text, path: Self.file)
        #expect(file.names == [PeerID(Self.beacon): "Anna's badge", NodeStepTests.peerID: "Meeting room"])
        #expect(NodeConfiguration(commandLine: RunOptions(), file: file, environment: [:]).names == file.names)
        #expect(try ConfigFile.parse("names:\n", path: Self.file).names.isEmpty)
    }

    @Test("bad names are refused at FILE:LINE:COLUMN with what is wrong", arguments: [
        ("names:\n  kitchen: Anna\n", "\(file):2:3: names: \"kitchen\" is not a peer identifier: a node's UUID, ibeacon:UUID:MAJOR:MINOR, altbeacon:MFG:ID1:ID2:ID3, eddystone:NAMESPACE:INSTANCE, eddystone-url:URL or irk:NAME, in lowercase, as GetRanging lists them"),
        ("names:\n  \(beacon): \"\"\n", "\(file):2:54: names.\(beacon): the name is empty"),
        ("names:\n  \(beacon): \" Anna\"\n", "\(file):2:54: names.\(beacon): the name starts or ends with a space"),
        ("names:\n  \(beacon): \(String(repeating: "x", count: 65))\n", "\(file):2:54: names.\(beacon): the name has 65 characters; at most 64"),
        ("names:\n  \(beacon): [a]\n", "\(file):2:54: names.\(beacon): must be a string, not a list"),
        ("names:\n  \(beacon): A\n  \(beacon.uppercased().replacingOccurrences(of: "IBEACON", with: "ibeacon")): B\n",
         "\(file):3:3: names: \(beacon) is named twice"),
        ("names: [a]\n", "\(file):1:8: names: must be a mapping of peer identifier to name, not a list"),
    ])
    func refused(_ text: String, _ expected: String) {
        #expect(ConfigFileTests.problems(text) == [expected])
    }

    @Test("PeerNames.problem: 1 to 64 characters, no control characters, no space at either end")
    func problem() {
        #expect(PeerNames.problem(name: "Anna's badge") == nil)
        #expect(PeerNames.problem(name: "Café ☕︎ 2") == nil)
        #expect(PeerNames.problem(name: String(repeating: "é", count: 64)) == nil)
        #expect(PeerNames.problem(name: "") != nil)
        #expect(PeerNames.problem(name: "a\nb") != nil)
        #expect(PeerNames.problem(name: "a ") != nil)
        #expect(PeerNames.problem(name: String(repeating: "x", count: 65)) != nil)
    }

    @Test("SetPeerName: the report shows the name, else the advertised one; it is committed to settings.json; empty removes it; a config name wins and is NotPermitted")
    func setOverTheBus() throws {
        var step = NodeStepTests.step()
        #expect(Self.name(in: NodeStepTests.hear(&step, seconds: 2).last!) == "peer")   // advertised

        let given = try step.command(.setPeerName("Desk", peer: NodeStepTests.peerID), at: NodeStepTests.time(3))
        #expect(given.commit.map(\.kind) == [.settings])
        guard case .settings(let settings)? = given.commit.first else { Issue.record("no settings"); return }
        #expect(settings.names == [NodeStepTests.peerID.rawValue: "Desk"])
        #expect(Self.names(in: given.effects) == [NodeStepTests.peerID: "Desk"])
        #expect(given.sequence > 0)
        #expect(Self.name(in: NodeStepTests.hear(&step, seconds: 1, from: 3).last!) == "Desk")
        // The same name again changes nothing: no write.
        #expect(try step.command(.setPeerName("Desk", peer: NodeStepTests.peerID), at: NodeStepTests.time(5)).commit.isEmpty)

        // Restarted from the settings it saved: the name is back.
        var saved = NodeStep.Saved()
        saved.settings = settings
        var restarted = NodeStep(configuration: NodeStepTests.configuration { _ in }, identity: NodeStepTests.me, saved: saved, at: NodeStepTests.time(0))
        #expect(Self.name(in: NodeStepTests.hear(&restarted, seconds: 2).last!) == "Desk")

        // The config file's name wins, and cannot be changed over the bus.
        let named = NodeStepTests.configuration { $0.names = [NodeStepTests.peerID: "Meeting room"] }
        let reload = try step.reconfigure(named, at: NodeStepTests.time(6))
        #expect(Self.names(in: reload.effects) == [NodeStepTests.peerID: "Meeting room"])
        #expect(Self.name(in: NodeStepTests.hear(&step, seconds: 1, from: 6).last!) == "Meeting room")
        #expect(throws: NodeRefusal.self) { try step.command(.setPeerName("Desk 2", peer: NodeStepTests.peerID), at: NodeStepTests.time(8)) }
        do {
            _ = try step.command(.setPeerName("", peer: NodeStepTests.peerID), at: NodeStepTests.time(8))
        } catch {
            #expect(error.kind == .notPermitted)
            #expect(error.message == "\(NodeStepTests.peerID) is named \"Meeting room\" in the config file's names; change it there and reload")
        }

        // Without the config name, the given one shows again; removing it, the advertised one.
        _ = try step.reconfigure(NodeStepTests.configuration { _ in }, at: NodeStepTests.time(9))
        #expect(Self.name(in: NodeStepTests.hear(&step, seconds: 1, from: 9).last!) == "Desk")
        let removed = try step.command(.setPeerName("", peer: NodeStepTests.peerID), at: NodeStepTests.time(11))
        guard case .settings(let after)? = removed.commit.first else { Issue.record("no settings"); return }
        #expect(after.names.isEmpty)
        #expect(Self.name(in: NodeStepTests.hear(&step, seconds: 1, from: 11).last!) == "peer")
    }

    @Test("settings.json: names are read back, and a bad one is a corrupt file, never overwritten")
    func settingsFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("names-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let state = try StateDirectory(directory)
        try NodeSettings(names: [Self.beacon: "Anna's badge"]).save(to: state)
        #expect(try NodeSettings.load(from: state).names == [Self.beacon: "Anna's badge"])
        try Data(#"{"version": 1, "names": {"ibeacon:x": "A"}}"#.utf8).write(to: state.file(NodeSettings.fileName))
        #expect(throws: StateError.self) { try NodeSettings.load(from: state) }
        try Data(#"{"version": 1, "names": {"\#(Self.beacon)": "a\u0007"}}"#.utf8).write(to: state.file(NodeSettings.fileName))
        #expect(throws: StateError.self) { try NodeSettings.load(from: state) }
    }

    @Test("Node1.PeerNames: a{ss}, read back by the API's decoding")
    func property() {
        let value = DBusValue.stringMap([Self.beacon: "Anna's badge"])
        #expect(value.type == .dictionary(key: .string, value: .string))
        #expect(NodeProperties(["PeerNames": value]).peerNames == [Self.beacon: "Anna's badge"])
    }
}
