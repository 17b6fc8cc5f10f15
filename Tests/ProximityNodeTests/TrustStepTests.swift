import Foundation
import ProximityAPI
import ProximityCore
@testable import ProximityNode
import ProximityTrust
import Testing

/// The trusted fleet's parts of the step, on an injected clock: the `verified` matcher key,
/// `event.verified` for the rules, and IRKs (the config file's and the bus's) resolving a phone's
/// rotating addresses to one peer.
@Suite struct TrustStepTests {
    typealias S = NodeStepTests
    static let anna = try! IdentityResolvingKey(hex: "ec0234a357c8ad05341010a60a397d9b")
    static let bob = try! IdentityResolvingKey(hex: "00112233445566778899aabbccddeeff")
    static let service = NodeConfiguration.defaultServiceUUID.uuidString.lowercased()

    static func matcher(verified: Bool) -> RegionMatcher {
        var m = RegionMatcher()
        m.verified = verified
        return m
    }

    static func entered(_ reports: [[NodeEffect]]) -> Set<String> {
        var out: Set<String> = []
        for effects in reports {
            for case .regions(let changes) in S.published(effects) {
                for case .entered(let id) in changes.events { out.insert(id) }
            }
        }
        return out
    }

    @Test("verified: true matches a node that proved its identity with the fleet's key, verified: false every other peer; event.verified tells the rules")
    func verifiedMatcher() throws {
        for verified in [true, false] {
            var step = S.step(try S.configuration {
                $0.trust = TrustSettings(key: FleetKey.generate())
                $0.regions = [Region(identifier: "fleet", matcher: Self.matcher(verified: true), source: .config),
                              Region(identifier: "others", matcher: Self.matcher(verified: false), source: .config)]
                $0.rules = [try S.rule("ours", #"{"on": "region", "when": {"key": "event.verified", "op": "eq", "value": true}, "do": [{"set": {"ours": "{%event.region%}"}}]}"#)]
            })
            _ = step.input(.introduced(S.peer, address: S.address, verified: verified), at: S.time(0))
            var reports: [[NodeEffect]] = []
            for tenth in 1 ... 15 {
                let t = Double(tenth) / 5
                _ = step.input(.sighting(Observation(address: S.address, rssi: -55, time: t), frame: AdvertisedFrame(), alias: nil), at: S.time(t))
                if tenth % 5 == 0 { reports.append(step.report(at: S.time(t))) }
            }
            #expect(Self.entered(reports) == [verified ? "fleet" : "others"], "verified \(verified)")
            let peer = try #require(S.published(reports.last!).compactMap { if case .report(let r) = $0 { r.peers.first } else { nil } }.first)
            #expect(peer.verified == verified)
            #expect(step.profileAttributes["ours"] == (verified ? "fleet" : nil), "verified \(verified): \(step.profileAttributes)")
        }
    }

    @Test("a phone's resolvable private addresses resolve to one peer irk:<name> of kind irk across rotations; another phone's are ignored; AddIRK adds one (saved), the config's name is NotPermitted, RemoveIRK forgets it")
    func irks() throws {
        var step = S.step(S.configuration { $0.trust.irks = ["anna": Self.anna] })
        #expect(step.irkSources == ["anna": "config"])
        func hear(_ address: [UInt8], at t: Double) {
            let text = IdentityResolvingKey.addressText(address)
            _ = step.input(.sighting(Observation(address: text, rssi: -60, time: t), frame: AdvertisedFrame(), alias: nil), at: S.time(t))
        }
        var t = 0.0
        for prand: UInt32 in [0x1234, 0x2345, 0x3456] {
            for _ in 0 ..< 5 { t += 0.2; hear(Self.anna.address(prand: prand), at: t); hear(Self.bob.address(prand: prand), at: t) }
        }
        let report = try #require(S.published(step.report(at: S.time(t))).compactMap { if case .report(let r) = $0 { r } else { nil } }.first)
        #expect(report.peers.map(\.identifier) == [.irk("anna")])
        #expect(report.peers.first?.kind == .irk && report.peers.first?.address == IdentityResolvingKey.addressText(Self.anna.address(prand: 0x3456)))

        // Over the bus: saved before the reply, then bob's next address is his.
        let outcome = try step.command(.addIRK("bob", key: Self.bob), at: S.time(t))
        guard case .settings(let settings)? = outcome.commit.first else { Issue.record("AddIRK commits nothing: \(outcome.commit)"); return }
        #expect(settings.irks == ["bob": Hex.text(Self.bob.bytes)])
        #expect(S.published(outcome.effects).contains(.irks(["anna": "config", "bob": "bus"], sequence: step.sequence)))
        for _ in 0 ..< 5 { t += 0.2; hear(Self.bob.address(prand: 0x4567), at: t) }
        let next = try #require(S.published(step.report(at: S.time(t))).compactMap { if case .report(let r) = $0 { r } else { nil } }.first)
        #expect(Set(next.peers.map(\.identifier)) == [.irk("anna"), .irk("bob")])
        func refusal(_ command: NodeCommand) -> NodeRefusal.Kind? {
            do { _ = try step.command(command, at: S.time(t)); return nil } catch { return error.kind }
        }
        #expect(refusal(.addIRK("anna", key: Self.bob)) == .notPermitted)
        #expect(refusal(.removeIRK("anna")) == .notPermitted)
        #expect(refusal(.removeIRK("carol")) == .doesNotExist)
        _ = try step.command(.removeIRK("bob"), at: S.time(t))
        #expect(step.irkSources == ["anna": "config"])
        // A reload without irks: none is tried any more.
        _ = try step.reconfigure(S.configuration { _ in }, at: S.time(t))
        #expect(step.irkSources.isEmpty && step.resolver.privateAddresses == nil)
    }

    @Test("with a fleet key, every peer remembered is forgotten at start (each proves its identity again after a restart; verified is not taken from disk) and when the key changes; without a key nothing is")
    func peersProveAgain() throws {
        var saved = NodeStep.Saved()
        var verified = IdentityResolver.Remembered(identity: UUID(), seen: 0)
        verified.verified = true
        saved.peers = ["AA:00:00:00:00:02": IdentityResolver.Remembered(identity: S.peer, seen: 0), "AA:00:00:00:00:03": verified]
        var open = NodeStep(configuration: S.configuration { _ in }, identity: S.me, saved: saved, at: S.time(0))
        _ = open.started(at: S.time(0))
        #expect(open.identities.count == 2)
        // The key turned on at a reload: every peer identified again.
        let outcome = try open.reconfigure(S.configuration { $0.trust = TrustSettings(key: FleetKey.generate()) }, at: S.time(1))
        #expect(open.identities.isEmpty)
        #expect(outcome.effects.contains { if case .save(.peers(let nodes)) = $0 { nodes.isEmpty } else { false } })

        var keyed = NodeStep(configuration: S.configuration { $0.trust = TrustSettings(key: FleetKey.generate()) }, identity: S.me, saved: saved, at: S.time(0))
        let effects = keyed.started(at: S.time(0))
        #expect(keyed.identities.isEmpty)
        #expect(S.lines(effects).contains("peers learnt without the fleet's key are identified again"))
    }

    /// A keyed step that knows the member `S.peer` at `S.address`, verified by a link of its own
    /// at 0 s, heard every 0.5 s until `until`.
    static func keyedStepWithMember(key: FleetKey = FleetKey.generate(), until: Double) -> (NodeStep, [NodeEffect]) {
        var step = S.step(S.configuration { $0.trust = TrustSettings(key: key) })
        var effects = step.input(.adapterSeen(powered: true, discovering: true, address: "AA:00:00:00:00:01"), at: S.time(0))
        effects += step.input(.sighting(Observation(address: S.address, rssi: -60, time: 0), frame: AdvertisedFrame(serviceUUIDs: [Self.service]), alias: nil),
                              at: S.time(0))
        effects += step.input(.identified(address: S.address, .identified(S.peer, verified: true)), at: S.time(0.5))
        for t in stride(from: 0.5, through: until, by: 0.5) {
            effects += step.input(.sighting(Observation(address: S.address, rssi: -60, time: t), frame: AdvertisedFrame(), alias: nil), at: S.time(t))
            if t == t.rounded() { effects += step.report(at: S.time(t)) }
        }
        return (step, effects)
    }

    static func connections(_ effects: [NodeEffect]) -> [String] {
        effects.compactMap { if case .identify(let connect) = $0 { connect.address } else { nil } }
    }

    @Test("a one-shot relay buys nothing lasting: a verified claim of a member's identity from a new address, while the member is heard, moves nothing and bans nobody; the node proves both addresses with links of its own; the relay gone, its address never holds the identity, and the member stays verified where it is")
    func relay() throws {
        var (step, _) = Self.keyedStepWithMember(until: 5)
        #expect(step.identities == [S.address: S.peer.lowercased])
        // The relay: an outsider's second radio wrote the member's hello, relayed, to this node.
        let relay = "5A:00:00:00:00:99"
        var effects = step.input(.introduced(S.peer, address: relay, verified: true), at: S.time(5.2))
        #expect(step.identities == [S.address: S.peer.lowercased], "nothing moved: \(step.identities)")
        #expect(S.lines(effects).contains(NodeStep.conflictMessage), "\(S.lines(effects))")
        #expect(Self.connections(effects) == [S.address], "the member proved by this node's own link: \(effects)")
        #expect(!S.lines(effects).contains { $0.contains("leaving a peer alone") || $0.contains("two devices claim one identity") })
        // The member proves itself on this node's link.
        effects = step.input(.identified(address: S.address, .identified(S.peer, verified: true)), at: S.time(6))
        #expect(step.identities == [S.address: S.peer.lowercased])
        #expect(step.resolver.isVerified(at: S.address))
        // A sustained relay, the member heard all along: the relay's address is tried every few
        // seconds by this node's own link, answers (relayed), and still nothing moves; nobody is
        // ever left alone.
        var relayLinks = 0
        for tenth in 61 ... 300 {
            let t = Double(tenth) / 10
            effects = step.input(.sighting(Observation(address: S.address, rssi: -60, time: t), frame: AdvertisedFrame(), alias: nil), at: S.time(t))
            effects += step.input(.sighting(Observation(address: relay, rssi: -70, time: t), frame: AdvertisedFrame(serviceUUIDs: [Self.service]), alias: nil),
                                  at: S.time(t))
            if tenth % 10 == 0 { effects += step.report(at: S.time(t)) }
            for connect in Self.connections(effects) {
                #expect(connect == relay || connect == S.address, "\(connect)")
                if connect == relay { relayLinks += 1 }
                effects += step.input(.identified(address: connect, .identified(S.peer, verified: true)), at: S.time(t + 0.05))
            }
            #expect(!S.lines(effects).contains { $0.contains("leaving a peer alone") }, "\(S.lines(effects))")
            #expect(step.identities == [S.address: S.peer.lowercased], "at \(t): \(step.identities)")
        }
        #expect(relayLinks >= 2 && relayLinks <= 5, "the relay's address was tried \(relayLinks) times in 24 s")
        // The relay stops and the member is no longer heard at its address (it rotated, say): the
        // claim from the new address is taken at the next try (after the 30-s yield here: no
        // hello comes in this test).
        let rotated = "5B:12:34:0D:FB:AA"
        for tenth in 301 ... 700 {
            let t = Double(tenth) / 10
            effects = step.input(.sighting(Observation(address: rotated, rssi: -60, time: t), frame: AdvertisedFrame(serviceUUIDs: [Self.service]), alias: nil),
                                 at: S.time(t))
            if tenth % 10 == 0 { effects += step.report(at: S.time(t)) }
            for connect in Self.connections(effects) where connect == rotated {
                effects += step.input(.identified(address: rotated, .identified(S.peer, verified: true)), at: S.time(t + 0.05))
            }
        }
        #expect(step.identities == [rotated: S.peer.lowercased], "\(step.identities)")
    }

    @Test("a flood of 100 advertisers of the general UUID that never answer does not hold a member back: its tagged advertisement takes the slot kept for members at once, while the decoys share the other; the tag copied to another address is no member's; each decoy's link stalls 20 s, and a member heard after all of them is connected to within the second (today's queue served it after the decoys ahead of it)")
    func floodKeepsMemberSlot() throws {
        let key = FleetKey.generate()
        let tagging = KeyedMemberTag(key)
        let ordering = KeyedConnectionOrdering(key)
        let own = "AA:00:00:00:00:01"
        var step = S.step(S.configuration { $0.trust = TrustSettings(key: key) })
        _ = step.input(.adapterSeen(powered: true, discovering: true, address: own), at: S.time(0))
        func address(_ prefix: String, _ i: Int) -> String { String(format: "%@:00:00:00:%02X:%02X", prefix, i / 256, i % 256) }
        // Addresses this node connects to first (the others it would wait for).
        func connecting(_ prefix: String, from start: Int) -> String {
            var i = start
            while !ordering.connectsFirst(own: own, peer: address(prefix, i)) { i += 1 }
            return address(prefix, i)
        }
        let general = AdvertisedFrame(serviceUUIDs: [Self.service])
        func frame(tag: [UInt8]?) -> AdvertisedFrame {
            AdvertisedFrame(serviceUUIDs: [Self.service], manufacturerData: NodePowerFrame.manufacturerData(measuredPower: -59, memberTag: tag))
        }
        var open: [String: Double] = [:]  // link → when it stalls out
        var effects: [NodeEffect] = []
        var decoys: [String] = []
        var next = 0
        for _ in 0 ..< 100 {
            let decoy = connecting("D0", from: next)
            next = Int(decoy.suffix(5).replacingOccurrences(of: ":", with: ""), radix: 16)! + 1
            decoys.append(decoy)
        }
        // 0.0–1.0 s: the decoys are heard; every link to one stalls 20 s.
        for (i, decoy) in decoys.enumerated() {
            let t = Double(i) / 100
            effects = step.input(.sighting(Observation(address: decoy, rssi: -60, time: t), frame: general, alias: nil), at: S.time(t))
            for c in Self.connections(effects) { open[c] = t + 20 }
        }
        #expect(open.count == 1, "the decoys have one slot between them, not both: \(open.keys.sorted())")
        // A copied tag at another address is no member's.
        let member = connecting("C0", from: 0)
        let copier = connecting("E0", from: 0)
        effects = step.input(.sighting(Observation(address: copier, rssi: -60, time: 1.1), frame: frame(tag: tagging.tag(for: member)), alias: nil),
                             at: S.time(1.1))
        #expect(Self.connections(effects).isEmpty, "a copied tag is queued behind the decoys")
        // The member, heard after all of them.
        effects = step.input(.sighting(Observation(address: member, rssi: -60, time: 1.2), frame: frame(tag: tagging.tag(for: member)), alias: nil),
                             at: S.time(1.2))
        #expect(Self.connections(effects) == [member], "the member is connected to at once: \(Self.connections(effects))")
        effects = step.input(.identified(address: member, .identified(S.peer, verified: true)), at: S.time(1.3))
        #expect(step.resolver.isVerified(at: member))
        // The decoys go on, one stalled link at a time.
        var t = 1.3
        while t < 61 {
            t += 0.5
            for (link, until) in open where until <= t {
                open[link] = nil
                effects = step.input(.identified(address: link, .failed), at: S.time(t))
                for c in Self.connections(effects) { open[c] = t + 20 }
            }
            #expect(open.count <= 1, "at \(t): \(open.keys.sorted())")
        }
    }

    @Test("peers.json (a cache) is written at most once a second for peers that are not members (what outsiders can make a node learn); a member is on disk before the signal that announces it")
    func peersSavesCoalesced() throws {
        var step = S.step(S.configuration { $0.trust = TrustSettings(key: FleetKey.generate(), acceptUnverified: true) })
        func saves(_ effects: [NodeEffect]) -> Int { effects.filter { if case .save(.peers) = $0 { true } else { false } }.count }
        func announced(_ effects: [NodeEffect]) -> [String] {
            S.published(effects).compactMap { if case .peerIdentified(_, let address, _) = $0 { address } else { nil } }
        }
        // Twenty open nodes' hellos in one second: announced, nothing written yet.
        var effects: [NodeEffect] = []
        for i in 0 ..< 20 {
            effects += step.input(.introduced(UUID(), address: String(format: "AA:00:00:00:01:%02X", i)), at: S.time(0.01 * Double(i)))
        }
        #expect(saves(effects) == 0 && announced(effects).count == 20)
        // The report: one write.
        #expect(saves(step.report(at: S.time(1))) == 1)
        #expect(saves(step.report(at: S.time(2))) == 0, "nothing new: nothing written")
        // A member: written at once, before its announcement.
        effects = step.input(.introduced(S.peer, address: S.address, verified: true), at: S.time(2.5))
        #expect(saves(effects) == 1 && announced(effects) == [S.address])
        #expect(effects.firstIndex { if case .save(.peers) = $0 { true } else { false } }! < effects.firstIndex { if case .publish(.peerIdentified) = $0 { true } else { false } }!)
    }

    @Test("a link under way when the key changes counts for nothing: its result is taken as a failure and the peer identified again")
    func linkOfOldKey() throws {
        var step = S.step(S.configuration { $0.trust = TrustSettings(key: FleetKey.generate()) })
        _ = step.input(.adapterSeen(powered: true, discovering: true, address: "AA:00:00:00:00:01"), at: S.time(0))
        var effects: [NodeEffect] = []
        var t = 0.0
        // Heard until this node connects (at once, or once its yield runs out).
        while !Self.connections(effects).contains(S.address), t < 40 {
            t += 0.5
            effects = step.input(.sighting(Observation(address: S.address, rssi: -60, time: t), frame: AdvertisedFrame(serviceUUIDs: [Self.service]), alias: nil),
                                 at: S.time(t))
            effects += step.report(at: S.time(t))
        }
        #expect(Self.connections(effects) == [S.address])
        // The key changes while the link is under way; the link then reads a verified identity.
        _ = try step.reconfigure(S.configuration { $0.trust = TrustSettings(key: FleetKey.generate()) }, at: S.time(t + 0.1))
        effects = step.input(.identified(address: S.address, .identified(S.peer, verified: true)), at: S.time(t + 0.2))
        #expect(step.identities.isEmpty, "\(step.identities)")
        #expect(S.lines(effects).contains("a link begun before the fleet key changed: identifying the peer again"))
    }

    @Test("a hello proved with a key the node no longer holds (opened just before a reload replaced it) is not taken; one proved with the current or the previous key is")
    func helloOfOldKey() throws {
        let old = FleetKey.generate(), new = FleetKey.generate()
        var trust = TrustSettings(key: new)
        var step = S.step(S.configuration { $0.trust = trust })
        var effects = step.input(.introduced(S.peer, address: S.address, verified: true, key: old.fingerprint), at: S.time(1))
        #expect(step.identities.isEmpty && S.lines(effects).contains("a hello proved with a key this node no longer holds: not taken"))
        effects = step.input(.introduced(S.peer, address: S.address, verified: true, key: new.fingerprint), at: S.time(2))
        #expect(step.identities == [S.address: S.peer.lowercased])
        trust.previousKey = .init(key: old, until: Date().addingTimeInterval(3600))
        step = S.step(S.configuration { $0.trust = trust })
        _ = step.input(.introduced(S.peer, address: S.address, verified: true, key: old.fingerprint), at: S.time(3))
        #expect(step.identities == [S.address: S.peer.lowercased], "the previous key, during its grace")
    }

    @Test("verified expires: a member's proof older than 5 min is asked for again (by the side that connects first; the other waits another interval), and one older than 15 min without a new proof is unverified")
    func proofExpires() throws {
        var (step, effects) = Self.keyedStepWithMember(until: 1)
        var asked: [Double] = []
        var t = 1.0
        while t <= 1000 {
            t += 1
            effects = step.input(.sighting(Observation(address: S.address, rssi: -60, time: t), frame: AdvertisedFrame(), alias: nil), at: S.time(t))
            effects += step.report(at: S.time(t))
            if Self.connections(effects).contains(S.address) {
                asked.append(t)
                // The peer does not answer.
                effects += step.input(.identified(address: S.address, .failed), at: S.time(t + 0.5))
            }
        }
        let first = try #require(asked.first)
        let connectsFirst = step.scheduler.connectsFirst(S.address)
        #expect(first >= 300.5 && first <= (connectsFirst ? 302 : 602), "first asked at \(first) (connects first: \(connectsFirst))")
        #expect(!step.resolver.isVerified(at: S.address), "unverified after 15 min without a proof")
        #expect(step.identities[S.address] == S.peer.lowercased, "still known, unverified")
    }

    @Test("who connects: one side of every pair, keyed or open; a keyed node's choice tells a prober nothing of how its address compares with the probe's (the old rule told it every time)")
    func whoConnects() {
        var generator = SystemRandomNumberGenerator()
        func address() -> String { (0 ..< 6).map { _ in String(format: "%02X", Int.random(in: 0 ... 255, using: &generator)) }.joined(separator: ":") }
        let keyed = KeyedConnectionOrdering(FleetKey.generate()), open = PairHashOrdering()
        for _ in 0 ..< 500 {
            let a = address(), b = address()
            #expect(keyed.connectsFirst(own: a, peer: b) != keyed.connectsFirst(own: b, peer: a))
            #expect(open.connectsFirst(own: a, peer: b) != open.connectsFirst(own: b, peer: a))
        }
        // A prober hears a keyed node at once or after its yield for 2,000 addresses it chose.
        var scheduler = IdentificationScheduler(ownAddress: "7F:12:34:56:78:9A")
        scheduler.ordering = keyed
        var agree = 0
        for i in 0 ..< 2000 {
            let probe = address()
            let atOnce = !scheduler.heard(probe, at: Double(i)).isEmpty
            if atOnce { _ = scheduler.finished(probe, .failed, at: Double(i)) } else { scheduler.resolved(probe) }
            if atOnce == ("7F:12:34:56:78:9A" < probe) { agree += 1 }
        }
        #expect(agree > 880 && agree < 1120, "connecting at once agreed with the address order \(agree) times in 2000")
    }

    @Test("irks: inline or in a file kept as a secret; every problem at its FILE:LINE:COLUMN")
    func irkConfig() throws {
        let parsed = try ConfigFile.parse("irks:\n  anna: EC:02:34:A3:57:C8:AD:05:34:10:10:A6:0A:39:7D:9B\n", path: "c.yaml")
        #expect(parsed.trust.irks == ["anna": Self.anna])
        #expect(ConfigFileTests.problems("irks:\n  anna phone: ec0234a357c8ad05341010a60a397d9b\n  bob: 00\n", path: "c.yaml") == [
            "c.yaml:2:3: irks.anna phone: \"anna phone\" is not an IRK name: letters, digits, '-', '_' and '.' only",
            "c.yaml:3:8: irks.bob: an IRK is 32 hexadecimal digits (16 bytes, most significant first), e.g. ec0234a357c8ad05341010a60a397d9b, or its 16 bytes in base64 as the Keychain shows them, e.g. m305CqYQEDQFrchXozQC7A==",
        ])
        #expect(ConfigFileTests.problems("irks: irks.yaml\n", path: "c.yaml") == ["c.yaml:1:7: irks: must be an absolute path, not 'irks.yaml'"])
        #expect(ConfigFileTests.problems("irks: [a]\n", path: "c.yaml").first?.hasPrefix("c.yaml:1:7: irks: must be a mapping of names to IRKs") == true)

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("irks-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let good = directory.appendingPathComponent("good.yaml").path
        #expect(FileManager.default.createFile(atPath: good, contents: Data("# phones\nanna: ec0234a357c8ad05341010a60a397d9b\n".utf8), attributes: [.posixPermissions: 0o600]))
        #expect(try ConfigFile.parse("irks: \(good)\n", path: "c.yaml").trust.irks == ["anna": Self.anna])
        let loose = directory.appendingPathComponent("loose.yaml").path
        #expect(FileManager.default.createFile(atPath: loose, contents: Data("anna: ec0234a357c8ad05341010a60a397d9b\n".utf8), attributes: [.posixPermissions: 0o644]))
        #expect(ConfigFileTests.problems("irks: \(loose)\n", path: "c.yaml") == [
            "c.yaml:1:7: irks: \(loose) is readable or writable by group or others (mode 644): an IRK must be its owner's alone; chmod 600 \(loose)"])
        let bad = directory.appendingPathComponent("bad.yaml").path
        #expect(FileManager.default.createFile(atPath: bad, contents: Data("anna: ec0234\nanna: 00\n".utf8), attributes: [.posixPermissions: 0o600]))
        let problems = ConfigFileTests.problems("irks: \(bad)\n", path: "c.yaml")
        #expect(problems.first == "c.yaml:1:7: irks: \(bad) is not an IRK file (below)", "\(problems)")
        #expect(problems.dropFirst().first?.hasPrefix("\(bad):1:7: irks.anna: an IRK is 32 hexadecimal digits") == true, "\(problems)")
        #expect(problems.count == 3 && problems[2].hasPrefix("\(bad):2:1:"), "\(problems)")
    }
}
