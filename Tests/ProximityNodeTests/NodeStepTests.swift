import Foundation
import Logging
import ProximityAPI
import ProximityCore
@testable import ProximityNode
import Testing

/// The node's middle as one value, without a bus, a disk or a clock: inputs and commands in,
/// effects out, in microseconds.
@Suite struct NodeStepTests {
    static let me = UUID(uuidString: "0a0a0a0a-0000-4000-8000-000000000001")!
    static let peer = UUID(uuidString: "3f0e8c52-1d7a-4c1b-9a55-6b1f3c2d4e5f")!
    static let peerID = PeerID.node(peer)
    static let address = "AA:00:00:00:00:02"

    static func time(_ t: Double) -> NodeTime { NodeTime(now: t, epoch: 1_800_000_000 + t) }

    static func configuration(_ change: (inout NodeConfiguration) throws -> Void) rethrows -> NodeConfiguration {
        var configuration = NodeConfiguration(name: "test", stateDirectory: URL(fileURLWithPath: "/nonexistent"))
        try change(&configuration)
        return configuration
    }

    static func step(_ configuration: NodeConfiguration = configuration { _ in }) -> NodeStep {
        NodeStep(configuration: configuration, identity: me, saved: .init(), at: time(0))
    }

    static func rule(_ id: String, _ json: String) throws -> Rule { try Rule.parse(identifier: id, RuleValue.json(json)) }

    static var matcher: RegionMatcher {
        var m = RegionMatcher()
        m.identifier = peerID.rawValue
        return m
    }

    /// The peer node introduces itself, then is heard at `rssi` five times a second; a report at
    /// each whole second. Returns each report's effects, by second.
    static func hear(_ step: inout NodeStep, rssi: Int16 = -55, seconds: Int, from start: Double = 0) -> [[NodeEffect]] {
        _ = step.input(.introduced(peer, address: address), at: time(start))
        var reports: [[NodeEffect]] = []
        for tenth in 1 ... seconds * 5 {
            let t = start + Double(tenth) / 5
            let observation = Observation(address: address, rssi: rssi, time: t, frame: nil, txPower: nil, name: "peer")
            _ = step.input(.sighting(observation, frame: AdvertisedFrame(serviceUUIDs: [], manufacturerData: [:], serviceData: [:]), alias: nil),
                           at: time(t))
            if tenth % 5 == 0 { reports.append(step.report(at: time(t))) }
        }
        return reports
    }

    static func lines(_ effects: [NodeEffect]) -> [String] {
        effects.compactMap { if case .log(let line) = $0 { line.message } else { nil } }
    }

    static func published(_ effects: [NodeEffect]) -> [NodeEvent] {
        effects.compactMap { if case .publish(let event) = $0 { event } else { nil } }
    }

    // MARK: -

    @Test("a report: the peer ranged, one snapshot per peer published, nearest first, with the wall-clock epoch of its time")
    func report() throws {
        var step = Self.step()
        let reports = Self.hear(&step, seconds: 3)
        let last = try #require(Self.published(reports.last!).compactMap { if case .report(let r) = $0 { r } else { nil } }.first)
        let peer = try #require(last.peers.first)
        #expect(last.peers.count == 1 && peer.identifier == Self.peerID && peer.name == "peer")
        #expect(peer.proximity != .unknown && peer.lastSeen == 3)
        #expect(last.epoch(peer.lastSeen) == 1_800_000_003)
        // An identity learnt is published at once, and written to peers.json (a cache) at the
        // next report, with the others of its second.
        var fresh = Self.step()
        let learnt = fresh.input(.introduced(Self.peer, address: Self.address), at: Self.time(0)) + fresh.report(at: Self.time(1))
        let order = learnt.compactMap { effect -> String? in
            switch effect {
            case .save(.peers): "save"
            case .publish(.peerIdentified): "publish"
            default: nil
            }
        }
        #expect(order == ["publish", "save"])
        // Stopped before that report, the node writes them as it stops.
        var stopping = Self.step()
        _ = stopping.input(.introduced(Self.peer, address: Self.address), at: Self.time(0))
        #expect(stopping.filesOnStop { _ in false }.contains { if case .peers(let nodes) = $0 { nodes[Self.address] != nil } else { false } })
        _ = stopping.report(at: Self.time(1))
        #expect(!stopping.filesOnStop { _ in false }.contains { if case .peers = $0 { true } else { false } })
    }

    @Test("two devices with one identity (a cloner): the one that took it over is left alone once the earlier claims it back, instead of the identity going back and forth; an address change is not that")
    func twoDevicesOneIdentity() {
        var step = Self.step()
        let (first, cloner, later) = (Self.address, "AA:00:00:00:00:03", "AA:00:00:00:00:04")
        func connects(_ address: String, at t: Double) -> Bool {
            let frame = AdvertisedFrame(serviceUUIDs: [NodeConfiguration.defaultServiceUUID.uuidString.lowercased()])
            let effects = step.input(.sighting(Observation(address: address, rssi: -60, time: t, frame: frame), frame: frame, alias: nil), at: Self.time(t))
            return effects.contains { if case .identify(let c) = $0 { c.address == address } else { false } }
        }
        _ = step.input(.introduced(Self.peer, address: first), at: Self.time(0))
        #expect(Self.lines(step.input(.introduced(Self.peer, address: cloner), at: Self.time(1))).contains("a peer changed address"))
        // The first address, still there, is identified again: the two would alternate.
        #expect(connects(first, at: 2))
        let back = Self.lines(step.input(.identified(address: first, .identified(Self.peer)), at: Self.time(3)))
        #expect(back.contains("two devices claim one identity: keeping the earlier") && back.contains("leaving a peer alone")
                && !back.contains("a peer changed address"), "\(back)")
        #expect(step.identities == [first: Self.peer.uuidString.lowercased()])
        #expect(!connects(cloner, at: 4))
        // An address change, with no claim back within the window: an address change.
        #expect(Self.lines(step.input(.introduced(Self.peer, address: later), at: Self.time(10))).contains("a peer changed address"))
        #expect(Self.lines(step.input(.introduced(Self.peer, address: first), at: Self.time(10 + NodeStep.conflictWindow)))
            .contains("a peer changed address"))
    }

    @Test("a rule's offer-alert on a region event, before the alert stage saw the report, is offered in that same report")
    func pendingOffer() throws {
        var step = Self.step(try Self.configuration {
            $0.regions = [Region(identifier: "fleet", matcher: Self.matcher, source: .config)]
            // Its own range never holds (the peer is not immediate): only the rule offers it.
            $0.alerts = [Alert(identifier: "lighthouse", content: AlertContent(title: "Lighthouse"),
                               parameters: AlertParameters(range: .immediate, comparison: .equal), targets: Self.matcher)]
            $0.rules = [try Self.rule("offer", #"{"on": "region", "when": {"key": "event.type", "op": "eq", "value": "entered"}, "do": [{"offer-alert": "lighthouse"}]}"#)]
        })
        let reports = Self.hear(&step, rssi: -65, seconds: 5)
        let key = AlertTargetKey(alert: "lighthouse", peer: Self.peerID)
        let entered = try #require(reports.firstIndex { effects in
            Self.published(effects).contains { if case .regions(let c) = $0 { c.events.contains(.entered("fleet")) } else { false } }
        }, "the region was never entered")
        let events = Self.published(reports[entered])
        let regionAt = try #require(events.firstIndex { if case .regions(let c) = $0 { !c.events.isEmpty } else { false } })
        let offerAt = try #require(events.firstIndex { event in
            guard case .alerts(let c) = event else { return false }
            return c.notices.contains { if case .ready(let k, _) = $0 { k == key } else { false } }
        }, "no offer in the report of the entry")
        #expect(regionAt < offerAt, "the offer follows the region event it came from")
        #expect(step.alerts.engine.current == key && step.alerts.pendingOffers.isEmpty)
        #expect(Self.lines(reports[entered]).contains("rule fired"))
        #expect(!Self.lines(reports[entered]).contains { $0.hasPrefix("a rule's alert was not offered") })
    }

    @Test("rules that change the profile back and forth stop after eight rounds; the change is committed before it is announced")
    func ruleRounds() throws {
        var step = Self.step(try Self.configuration {
            $0.rules = [
                try Self.rule("up", #"{"on": "profile", "when": {"key": "a.x", "op": "eq", "value": "1"}, "do": [{"set": {"a.x": "2"}}]}"#),
                try Self.rule("down", #"{"on": "profile", "when": {"key": "a.x", "op": "eq", "value": "2"}, "do": [{"set": {"a.x": "1"}}]}"#),
            ]
        })
        let outcome = try step.command(.updateAttribute("a.x", "1"), at: Self.time(1))
        #expect(outcome.commit.map(\.kind) == [.profile])
        let lines = Self.lines(outcome.effects)
        #expect(lines.filter { $0 == "rule fired" }.count == NodeStep.maxRuleRounds)
        #expect(lines.contains("rules changed the profile 8 rounds in a row: the last changes reach no rule"))
        guard case .profile(let sequence, let attributes, let items) = try #require(outcome.effects.last { if case .profile = $0 { true } else { false } })
        else { return }
        #expect(sequence == outcome.sequence && attributes?["a.x"] != nil)
        // Each round's profile change is logged, the last one too.
        #expect(items.filter { if case .log(let e) = $0 { e.source == "profile" } else { false } }.count == NodeStep.maxRuleRounds + 1)
    }

    @Test("a strategy client: asked once per report while a question is pending, answered, dropped with Release on a failure, without when it leaves")
    func strategyClient() throws {
        var step = Self.step(Self.configuration {
            $0.alerts = [Alert(identifier: "door", content: AlertContent(title: "Door"),
                               parameters: AlertParameters(range: .near, comparison: .equal, strategy: "crowd"), targets: Self.matcher)]
        })
        let client = StrategyClient(owner: ":1.42", path: "/org/example/crowd")
        let registered = try step.command(.registerStrategy("crowd", client), at: Self.time(0))
        #expect(registered.effects.contains { if case .watch(":1.42") = $0 { true } else { false } })
        func questions(_ effects: [NodeEffect]) -> [StrategyQuestion] { effects.compactMap { if case .ask(let q) = $0 { q } else { nil } } }
        let reports = Self.hear(&step, rssi: -60, seconds: 3)
        let asked = reports.flatMap(questions)
        #expect(asked.count == 1 && asked.first?.targets.first?.key == AlertTargetKey(alert: "door", peer: Self.peerID), "one question while it is pending")
        let question = try #require(asked.first)
        _ = try step.command(.strategyAnswered("crowd", generation: question.generation, [question.targets[0].key: true]), at: Self.time(3.5))
        #expect(questions(step.report(at: Self.time(4))).count == 1, "asked again once answered")
        let failed = try step.command(.strategyFailed("crowd", generation: question.generation, because: "timeout"), at: Self.time(4.5))
        #expect(failed.effects.contains { if case .release(client) = $0 { true } else { false } })
        #expect(step.alerts.agents.isEmpty && Self.lines(failed.effects).contains("dropped a strategy: its alerts use their default strategy"))

        // Registered again, the client leaves the bus: dropped, not told.
        _ = try step.command(.registerStrategy("crowd", client), at: Self.time(5))
        let left = try step.command(.clientLeft(":1.42", because: "its client left the bus"), at: Self.time(6))
        #expect(step.alerts.agents.isEmpty && !left.effects.contains { if case .release = $0 { true } else { false } })
        // A late answer of the dropped registration changes nothing.
        #expect(try step.command(.strategyAnswered("crowd", generation: question.generation, [:]), at: Self.time(7)).effects.isEmpty)
    }

    @Test("a reload: config definitions replaced, a bus one taken over, three files committed; over a limit it is refused and the step it ran on is dropped")
    func reload() throws {
        var step = Self.step(Self.configuration {
            $0.regionMonitor.maxRegions = 3
            $0.regions = [Region(identifier: "old", matcher: RegionMatcher(), source: .config)]
        })
        _ = try step.command(.startMonitoring(Region(identifier: "mine", matcher: RegionMatcher(), source: .bus)), at: Self.time(1))
        _ = try step.command(.startMonitoring(Region(identifier: "shared", matcher: RegionMatcher(), source: .bus)), at: Self.time(1))

        var next = step
        let outcome = try next.reconfigure(Self.configuration {
            $0.regionMonitor.maxRegions = 3
            $0.regions = [Region(identifier: "shared", matcher: Self.matcher, source: .config)]
        }, at: Self.time(2))
        #expect(outcome.commit.map(\.kind) == [.regions, .alerts, .profile])
        #expect(next.monitoredRegions == ["mine", "shared"] && next.regions.provenance["shared"] == .config)
        #expect(Self.lines(outcome.effects).contains("a region added over the bus is now defined in the config file"))
        let changes = try #require(Self.published(outcome.effects).compactMap { if case .regions(let c) = $0 { c } else { nil } }.last)
        #expect(changes.removed == ["old"] && changes.defined.map(\.region.identifier) == ["shared"])

        var refused = step
        #expect(throws: NodeRefusal.self) {
            try refused.reconfigure(Self.configuration {
                $0.regionMonitor.maxRegions = 3
                $0.regions = ["a", "b", "c"].map { Region(identifier: $0, matcher: RegionMatcher(), source: .config) }
            }, at: Self.time(2))
        }
        #expect(step.monitoredRegions == ["mine", "old", "shared"], "the step a refused reload ran on is a copy")
        // The bus may not touch what the config file defines.
        var bus = next
        #expect(throws: NodeRefusal(.notPermitted, "region \"shared\" is defined in the config file; remove it there and reload")) {
            try bus.command(.stopMonitoring("shared"), at: Self.time(3))
        }
    }

    @Test("files committed all or nothing: when one cannot be written, those before it are written back")
    func commitAllOrNothing() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("step-commit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let state = try StateDirectory(directory)
        let files = StateFiles(state: state, clock: SystemNodeClock(), logger: Logger(label: "test"))
        var step = Self.step()
        _ = try step.command(.startMonitoring(Region(identifier: "kept", matcher: RegionMatcher(), source: .bus)), at: Self.time(1))
        try files.write(step.snapshot(.regions))

        var next = step
        let outcome = try next.command(.startMonitoring(Region(identifier: "new", matcher: RegionMatcher(), source: .bus)), at: Self.time(2))
        // alerts.json cannot be written: a directory stands in its way.
        try FileManager.default.createDirectory(at: state.file(AlertStore.fileName), withIntermediateDirectories: true)
        let both = outcome.commit + [next.snapshot(.alerts)]
        #expect(throws: NodeRefusal.self) { try files.commit(both, previous: step.snapshot) }
        let saved = try RegionStore(state: state).load(clock: SystemNodeClock())
        #expect(saved.busRegions.map(\.identifier) == ["kept"], "regions.json is back as it was")
    }
}
