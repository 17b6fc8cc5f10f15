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

    @Test("with a fleet key, peers remembered from the open protocol are forgotten at start and when the key changes (identified again, the trusted way); verified ones are kept; without a key nothing is")
    func openPeersForgotten() throws {
        var saved = NodeStep.Saved()
        var verified = IdentityResolver.Remembered(identity: UUID(), seen: 0)
        verified.verified = true
        saved.peers = ["AA:00:00:00:00:02": IdentityResolver.Remembered(identity: S.peer, seen: 0), "AA:00:00:00:00:03": verified]
        var open = NodeStep(configuration: S.configuration { _ in }, identity: S.me, saved: saved, at: S.time(0))
        _ = open.started(at: S.time(0))
        #expect(open.identities.count == 2)
        // The key turned on at a reload.
        let outcome = try open.reconfigure(S.configuration { $0.trust = TrustSettings(key: FleetKey.generate()) }, at: S.time(1))
        #expect(open.identities.keys.sorted() == ["AA:00:00:00:00:03"])
        #expect(outcome.effects.contains { if case .save(.peers(let nodes)) = $0 { nodes.count == 1 } else { false } })

        var keyed = NodeStep(configuration: S.configuration { $0.trust = TrustSettings(key: FleetKey.generate()) }, identity: S.me, saved: saved, at: S.time(0))
        let effects = keyed.started(at: S.time(0))
        #expect(keyed.identities.keys.sorted() == ["AA:00:00:00:00:03"])
        #expect(S.lines(effects).contains("peers learnt without the fleet's key are identified again"))
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
