import Foundation
import ProximityAPI
import ProximityCore
@testable import ProximityNode
import Testing

/// Where the zones end: `zones:` in the config file, checked, reloaded into every peer's zone,
/// and shown as `Node1.ZoneDistances`.
@Suite struct ZoneDistanceTests {
    static let file = ConfigFileTests.file

    @Test("zones: both, one (the other's default), none; the node's configuration takes them")
    func parsed() throws {
        #expect(try ConfigFile.parse("zones:\n  immediate: 1\n  near: 4.5\n", path: Self.file).zones == ZoneThresholds(immediate: 1, near: 4.5))
        #expect(try ConfigFile.parse("zones:\n  near: 2\n", path: Self.file).zones == ZoneThresholds(immediate: 0.5, near: 2))
        #expect(try ConfigFile.parse("zones:\n", path: Self.file).zones == ZoneThresholds())
        let file = try ConfigFile.parse("zones: {immediate: 0.3, near: 2.5}\n", path: Self.file)
        #expect(NodeConfiguration(commandLine: RunOptions(), file: file, environment: [:]).zones == ZoneThresholds(immediate: 0.3, near: 2.5))
    }

    @Test("bad zones are refused at FILE:LINE:COLUMN with what is wrong", arguments: [
        ("zones:\n  immediate: 3\n  near: 2\n", "\(file):1:1: zones: immediate (3.0 m) must be below near (2.0 m)"),
        ("zones:\n  near: 0.4\n", "\(file):1:1: zones: immediate (0.5 m) must be below near (0.4 m)"),
        ("zones:\n  near: -1\n", "\(file):2:9: zones.near: must be a number of metres above 0 and at most 1000, not -1"),
        ("zones:\n  near: .inf\n", "\(file):2:9: zones.near: must be a number of metres above 0 and at most 1000, not .inf"),
        ("zones:\n  near: far\n", "\(file):2:9: zones.near: must be a number of metres, not the string \"far\""),
        ("zones:\n  far: 10\n", "\(file):2:3: zones: unknown key 'far' (expected 'immediate' or 'near')"),
        ("zones: 3\n", "\(file):1:8: zones: must be a mapping of immediate and near, not the number 3"),
    ])
    func refused(_ text: String, _ expected: String) {
        #expect(ConfigFileTests.problems(text) == [expected])
    }

    @Test("ZoneThresholds.problem: finite, above 0, at most 1 km, immediate below near")
    func problem() {
        #expect(ZoneThresholds.problem(immediate: 0.5, near: 3) == nil)
        #expect(ZoneThresholds.problem(immediate: 0, near: 3) != nil)
        #expect(ZoneThresholds.problem(immediate: 1, near: .nan) != nil)
        #expect(ZoneThresholds.problem(immediate: 2, near: 2) != nil)
        #expect(ZoneThresholds.problem(immediate: 1, near: 1001) != nil)
    }

    @Test("a reload's zones reach every peer at its next sample, with the hysteresis scaled to them; the change is published once")
    func reloaded() throws {
        var step = NodeStepTests.step()
        // -69 dBm at -59 dBm measured power and n = 2: about 3.2 m, far with the default 3 m.
        let before = NodeStepTests.hear(&step, rssi: -69, seconds: 4)
        func zone(_ effects: [NodeEffect]) -> Proximity? {
            NodeStepTests.published(effects).compactMap { if case .report(let r) = $0 { r.peers.first?.proximity } else { nil } }.first
        }
        #expect(zone(before.last!) == .far)

        var configuration = NodeStepTests.configuration { _ in }
        configuration.zones = ZoneThresholds(immediate: 1, near: 5)
        let outcome = try step.reconfigure(configuration, at: NodeStepTests.time(4.5))
        #expect(NodeStepTests.published(outcome.effects).filter { if case .zoneDistances(let z) = $0 { z == configuration.zones } else { false } }.count == 1)
        let after = NodeStepTests.hear(&step, rssi: -69, seconds: 2, from: 5)
        #expect(zone(after.last!) == .near, "3.2 m is near once near ends at 5 m")
        // The same zones again: nothing published.
        var again = step
        #expect(!NodeStepTests.published(try again.reconfigure(configuration, at: NodeStepTests.time(9)).effects).contains {
            if case .zoneDistances = $0 { true } else { false }
        })
    }

    @Test("Node1.ZoneDistances: a{sd} with immediate and near, read back by the API's decoding")
    func property() {
        let value = NodeProperties.zoneDistances(immediate: 1, near: 4)
        #expect(value.type == .dictionary(key: .string, value: .double))
        var properties = NodeProperties(identifier: "x", name: "n")
        #expect(properties.zoneDistances == ["immediate": 0.5, "near": 3.0])
        properties.zoneDistances = ["immediate": 1, "near": 4]
        #expect(NodeProperties(properties.values).zoneDistances == ["immediate": 1, "near": 4])
    }
}
