import Foundation
import ProximityCore
import Testing

/// The tracker on a manual clock (seed `004_…`): the current beacon, `trackBeacon` and
/// `clearCurrentBeacon`.
@Suite struct TrackerTests {
    static let fleet = UUID(uuidString: "f7826da6-4fa2-4e98-8024-bc5b71e0893e")!

    static func beacon(_ minor: UInt16, _ zone: Proximity, _ distance: Double, at t: Timestamp) -> PeerSnapshot {
        let b = BeaconIdentity.iBeacon(uuid: fleet, major: 12, minor: minor, measuredPower: -59)
        return PeerSnapshot(identifier: b.peerID, kind: .ibeacon, address: "C0:00:00:00:00:0\(minor)", beacon: b, proximity: zone,
                               distance: distance, rssi: -60, lastSeen: t)
    }

    static func attributes(_ actions: [TrackingAction]) -> [String: String?]? {
        guard case .track(_, let a, _)? = actions.last else { return nil }
        return a
    }

    @Test("a beacon comes (far), nears (near, immediate), fades (unknown: prox 0) and goes: tracked at each change, then cleared")
    func comesAndGoes() {
        var tracker = Tracker(configuration: .init(contextData: ["site": "museum"]))
        var profile = Profile(["a.user": "albert"])
        func step(_ peers: [PeerSnapshot], _ t: Timestamp) -> [TrackingAction] {
            let actions = tracker.update(peers, at: t)
            for action in actions {
                switch action {
                case .track(_, let attributes, _): _ = try? profile.apply(attributes)
                case .clear: _ = try? profile.apply(Dictionary(uniqueKeysWithValues: TrackingKeys.all.map { ($0, nil) }))
                }
            }
            return actions
        }
        #expect(step([], 0).isEmpty)
        let far = step([Self.beacon(1, .far, 8, at: 1)], 1)
        guard case .track(let peer, _, let context)? = far.first else { Issue.record("\(far)"); return }
        #expect(peer == Self.beacon(1, .far, 8, at: 1).identifier)
        #expect(context == ["site": "museum", "a.beacon.uuid": Self.fleet.uuidString.lowercased(), "a.beacon.major": "12",
                            "a.beacon.minor": "1", "a.beacon.prox": "3"])
        #expect(profile.attributes == ["a.user": "albert", "a.beacon.uuid": Self.fleet.uuidString.lowercased(), "a.beacon.major": "12",
                                       "a.beacon.minor": "1", "a.beacon.prox": "3"])
        #expect(step([Self.beacon(1, .far, 7, at: 2)], 2).isEmpty, "nothing changed: nothing tracked")
        #expect(Self.attributes(step([Self.beacon(1, .near, 2, at: 3)], 3))?["a.beacon.prox"] == "2")
        #expect(Self.attributes(step([Self.beacon(1, .immediate, 0.3, at: 4)], 4))?["a.beacon.prox"] == "1")
        #expect(Self.attributes(step([Self.beacon(1, .unknown, .infinity, at: 4)], 5))?["a.beacon.prox"] == "0")
        #expect(profile["a.beacon.prox"] == "0")
        #expect(step([], 6) == [.clear(peer: Self.beacon(1, .far, 8, at: 1).identifier)])
        #expect(profile.attributes == ["a.user": "albert"], "the four removed, the others kept")
        #expect(step([], 7).isEmpty)
    }

    @Test("the nearest qualifying peer is current; another takes over only from a nearer zone, or when the current leaves")
    func current() {
        var tracker = Tracker()
        _ = tracker.update([Self.beacon(1, .near, 2, at: 0), Self.beacon(2, .near, 2.5, at: 0)], at: 0)
        #expect(tracker.current == Self.beacon(1, .near, 2, at: 0).identifier)
        // Beacon2 now a little nearer, in the same zone: no turn-taking.
        #expect(tracker.update([Self.beacon(1, .near, 2.4, at: 1), Self.beacon(2, .near, 2.1, at: 1)], at: 1).isEmpty)
        // Beacon2 immediate: it takes over.
        let over = tracker.update([Self.beacon(1, .near, 2.4, at: 2), Self.beacon(2, .immediate, 0.3, at: 2)], at: 2)
        #expect(Self.attributes(over)?["a.beacon.minor"] == "2" && tracker.current == Self.beacon(2, .near, 1, at: 0).identifier)
        // Beacon2 leaves: Beacon1 qualifies, tracked without a clear.
        let left = tracker.update([Self.beacon(1, .near, 2.4, at: 3)], at: 3)
        #expect(left.count == 1 && Self.attributes(left)?["a.beacon.minor"] == "1")
        // A node is not tracked by default; with a matcher for nodes, it is, under a.node.*.
        let node = PeerSnapshot(identifier: PeerID.node(Self.fleet), kind: .node, address: "AA:00:00:00:00:01", proximity: .near,
                                   distance: 1, rssi: -60, lastSeen: 4)
        var nodes = RegionMatcher()
        nodes.kind = .node
        var nodeTracker = Tracker(configuration: .init(matcher: nodes))
        let tracked = Self.attributes(nodeTracker.update([node, Self.beacon(1, .immediate, 0.2, at: 4)], at: 4))
        #expect(tracked?["a.node.id"] == .some(Self.fleet.uuidString.lowercased()) && tracked?["a.node.prox"] == .some("2"))
        #expect(tracked?["a.beacon.major"] == .some(nil), "the beacon keys are removed")
    }

    @Test("the heartbeat tracks again when nothing changed")
    func heartbeat() {
        var tracker = Tracker(configuration: .init(heartbeat: 10))
        var tracks: [Timestamp] = []
        for t in stride(from: 0.0, through: 30, by: 1) where !tracker.update([Self.beacon(1, .near, 2, at: t)], at: t).isEmpty {
            tracks.append(t)
        }
        #expect(tracks == [0, 10, 20, 30])
    }

    @Test("manual trackBeacon: an empty string removes its attribute; prox is always set")
    func manual() {
        let action = Tracker.manual(uuid: "u", major: "", minor: "3", prox: 2, data: ["k": "v"])
        guard case .track(let peer, let attributes, let context) = action, peer == nil else { Issue.record("\(action)"); return }
        var expected: [String: String?] = Dictionary(uniqueKeysWithValues: TrackingKeys.all.map { ($0, nil) })
        expected["a.beacon.uuid"] = .some("u")
        expected["a.beacon.minor"] = .some("3")
        expected["a.beacon.prox"] = .some("2")
        #expect(attributes == expected, "the other kinds' keys removed too")
        #expect(context == ["k": "v", "a.beacon.uuid": "u", "a.beacon.minor": "3", "a.beacon.prox": "2"])
    }
}

/// The rules engine: every operator, groups, triggers, tokens, frequencies.
@Suite struct RuleTests {
    static func test(_ key: String, _ op: RuleOperator, _ values: [String] = []) -> RuleCondition { .test(key: key, op: op, values: values) }

    @Test("every operator, on a present and a missing value; numbers compare as numbers", arguments: [
        (RuleOperator.eq, ["12"], true, false), (.eq, ["12.0"], true, false), (.eq, ["1", "12"], true, false), (.eq, ["13"], false, false),
        (.ne, ["13"], true, true), (.ne, ["12", "13"], false, true),
        (.ex, [], true, false), (.nx, [], false, true),
        (.gt, ["9"], true, false), (.gt, ["12"], false, false), (.ge, ["12"], true, false),
        (.lt, ["100"], true, false), (.le, ["11"], false, false), (.le, ["12"], true, false),
        (.co, ["2"], true, false), (.co, [""], true, false), (.nc, ["2"], false, true), (.nc, ["3"], true, true),
        (.eq, ["0x0c"], false, false), (.gt, ["1e1"], true, false),
        (.sw, ["1"], true, false), (.sw, ["2"], false, false), (.ew, ["2"], true, false), (.ew, ["1"], false, false),
    ])
    func operators(_ op: RuleOperator, _ values: [String], _ present: Bool, _ missing: Bool) {
        let profile = ["a.beacon.major": "12"]
        #expect(Self.test("a.beacon.major", op, values).holds { profile[$0] } == present)
        #expect(Self.test("a.absent", op, values).holds { profile[$0] } == missing)
    }

    @Test("\"10\" gt \"9\" as numbers; text is not compared by gt; nested groups")
    func numbersAndGroups() {
        let p = ["n": "10", "t": "abc", "prox": "2", "major": "12"]
        #expect(Self.test("n", .gt, ["9"]).holds { p[$0] })
        #expect(!Self.test("t", .gt, ["9"]).holds { p[$0] })
        let near12: RuleCondition = .all([Self.test("major", .eq, ["12"]), .any([Self.test("prox", .le, ["1"]), .all([Self.test("prox", .eq, ["2"]), Self.test("t", .sw, ["a"])])])])
        #expect(near12.holds { p[$0] })
        #expect(!near12.holds { ["major": "12", "prox": "3", "t": "abc"][$0] })
        #expect(near12.explain { p[$0] }.first == "true   all of:")
        #expect(near12.explain { p[$0] }.contains("      true   prox eq \"2\"  (prox is \"2\")"))
    }

    static let near = Rule(identifier: "near-12", triggers: [.tracking],
                           condition: .all([test("a.beacon.major", .eq, ["12"]), test("a.beacon.prox", .within, ["near"])]),
                           actions: [.signal(["major": "{%a.beacon.major%}", "what": "{%event.type%} {%a.missing%}!"])], frequency: .once)

    @Test("frequencies: always, once, cooldown; only on the rule's triggers; tokens replaced")
    func frequencies() {
        var engine = RuleEngine()
        engine.add(Self.near)
        var always = Self.near
        always.identifier = "always"
        always.frequency = .always
        engine.add(always)
        var cooled = Self.near
        cooled.identifier = "cooldown"
        cooled.frequency = .cooldown(10)
        engine.add(cooled)
        let profile = Profile(["a.beacon.major": "12", "a.beacon.prox": "2"])
        let tracked = RuleEvent(trigger: .tracking, fields: ["type": "tracked"])
        var fired: [String: [Timestamp]] = [:]
        for t in stride(from: 0.0, through: 20, by: 1) {
            for firing in engine.evaluate(tracked, profile: profile, at: t) { fired[firing.rule, default: []].append(t) }
        }
        #expect(fired["near-12"] == [0])
        #expect(fired["always"]?.count == 21)
        #expect(fired["cooldown"] == [0, 10, 20])
        #expect(engine.evaluate(RuleEvent(trigger: .region, fields: [:]), profile: profile, at: 100).isEmpty, "not its trigger")
        var fresh = RuleEngine()
        fresh.add(Self.near)
        #expect(fresh.evaluate(tracked, profile: profile, at: 0).first?.actions == [.signal(["major": "12", "what": "tracked !"])])
        #expect(fresh.evaluate(tracked, profile: Profile(["a.beacon.major": "12", "a.beacon.prox": "3"]), at: 1).isEmpty)
    }

    @Test("a rule's tree round-trips; bad trees are refused with the path of the problem")
    func definitions() throws {
        let parsed = try Rule.parse(identifier: "near-12", Self.near.definition)
        #expect(parsed == Self.near)
        let json = #"{"on": "tracking", "when": {"any": [{"key": "a.beacon.prox", "op": "le", "value": 2}, {"key": "event.type", "op": "eq", "values": ["cleared"]}]}, "do": [{"set": {"a.seen": "yes"}}, {"remove": "a.coupon"}, {"offer-alert": "lighthouse"}, {"log": {"n": "{%a.beacon.minor%}"}}], "frequency": "cooldown", "cooldown": 30}"#
        let rule = try Rule.parse(identifier: "r", RuleValue.json(json))
        #expect(rule.frequency == .cooldown(30) && rule.triggers == [.tracking] && rule.actions.count == 4)
        #expect(try Rule.parse(identifier: "r", rule.definition) == rule)
        let bad: [(String, String)] = [
            (#"{"when": {"key": "a", "op": "is", "value": "1"}, "do": [{"log": {}}]}"#, "when.op: must be one of eq, ne, ex, nx, gt, ge, lt, le, co, nc, sw, ew, within, not the string \"is\""),
            (#"{"when": {"all": [{"key": "a", "op": "gt", "value": "x"}]}, "do": [{"log": {}}]}"#, "when.all[0]: gt compares numbers: \"x\" is not a number"),
            (#"{"when": {"key": "a", "op": "ex", "value": "1"}, "do": [{"log": {}}]}"#, "when: ex takes no value"),
            (#"{"when": {"key": "a", "op": "eq"}, "do": [{"log": {}}]}"#, "when: eq needs value: or values:"),
            (#"{"when": {"key": "a", "op": "eq", "value": "1"}, "do": [{"shout": {}}]}"#, "do[0].shout: unknown action (known: signal, set, remove, offer-alert, log)"),
            (#"{"when": {"key": "a", "op": "eq", "value": "1"}, "do": []}"#, "do: must be a non-empty list of actions"),
            (#"{"when": {"key": "a", "op": "eq", "value": "1"}, "do": [{"log": {}}], "frequency": "cooldown"}"#, "frequency: cooldown needs cooldown: SECONDS"),
            (#"{"when": {"key": "a", "op": "eq", "value": "1"}, "do": [{"log": {}}], "on": ["weather"]}"#, "on[0]: must be one of profile, tracking, region, alert, not the string \"weather\""),
            (#"{"when": {"key": "a", "op": "eq", "value": "1"}}"#, "a rule needs do: (its actions)"),
            (#"{"when": {"key": "a", "op": "eq", "value": "1"}, "do": [{"log": {}}], "colour": 1}"#, "colour: unknown key (known: on, when, do, frequency, cooldown)"),
        ]
        for (text, message) in bad {
            #expect(throws: RuleDefinitionError.self) { try Rule.parse(identifier: "r", RuleValue.json(text)) }
            do { _ = try Rule.parse(identifier: "r", RuleValue.json(text)) } catch { #expect(error.description == message) }
        }
    }
}
