import Foundation
import ProximityCore
import Testing

/// The region monitor's state machine, on a manual clock: every time is a number passed in.
@Suite struct RegionMonitorTests {
    static let fleet = UUID(uuidString: "f7826da6-4fa2-4e98-8024-bc5b71e0893e")!

    static func beacon(_ minor: UInt16, at lastSeen: Timestamp, zone: Proximity = .near, distance: Double = 1.5) -> PeerSnapshot {
        let b = BeaconIdentity.iBeacon(uuid: fleet, major: 1, minor: minor, measuredPower: -59)
        return PeerSnapshot(identifier: b.peerID, kind: .ibeacon, address: "AA:BB:CC:DD:EE:\(String(format: "%02X", minor))",
                               beacon: b, proximity: zone, distance: distance, rssi: -60, lastSeen: lastSeen)
    }

    static func region(_ id: String = "fleet", within: Proximity? = nil, exitPeriod: Double? = nil, major: UInt16? = nil) -> Region {
        var m = RegionMatcher()
        m.uuid = fleet
        m.major = major
        m.within = within
        m.exitPeriod = exitPeriod
        return Region(identifier: id, matcher: m, source: .bus)
    }

    func monitor(_ regions: Region...) throws -> RegionMonitor {
        var monitor = RegionMonitor(configuration: .init(defaultExitPeriod: 10, maxRegions: 1_024, restoreLimit: 900))
        for r in regions { _ = try monitor.start(r, at: 0) }
        return monitor
    }

    @Test("monitoring starts with a state determined: unknown")
    func start() throws {
        var monitor = RegionMonitor()
        #expect(try monitor.start(Self.region(), at: 0) == [.determined("fleet", .unknown)])
        #expect(monitor.status(of: "fleet")?.state == .unknown)
    }

    @Test("enter at the first report with a matching peer, state determined first; exit at exactly the exit period")
    func enterAndExit() throws {
        var monitor = try monitor(Self.region())
        #expect(monitor.update([], at: 1).events.isEmpty)
        let entered = monitor.update([Self.beacon(1, at: 1.5)], at: 2)
        #expect(entered.events == [.determined("fleet", .inside), .entered("fleet")])
        #expect(entered.ranging.map(\.region) == ["fleet"])
        // Heard again at 3.2, then silent: the exit comes at 3.2 + 10, not a moment before.
        #expect(monitor.update([Self.beacon(1, at: 3.2)], at: 4).events.isEmpty)
        for t in stride(from: 5.0, through: 13.0, by: 1) {
            #expect(monitor.update([Self.beacon(1, at: 3.2)], at: t).events.isEmpty, "t=\(t)")
        }
        #expect(monitor.update([], at: 13.19).events.isEmpty)
        #expect(monitor.update([], at: 13.2).events == [.determined("fleet", .outside), .exited("fleet")])
        #expect(monitor.update([], at: 14.2).events.isEmpty)
        #expect(monitor.status(of: "fleet")?.state == .outside)
        #expect(monitor.status(of: "fleet")?.lastSeen == 3.2)
    }

    @Test("a stale peer still in the table does not enter a region it has left")
    func staleDoesNotReenter() throws {
        var monitor = try monitor(Self.region(exitPeriod: 2))
        _ = monitor.update([Self.beacon(1, at: 0.9)], at: 1)
        #expect(monitor.update([Self.beacon(1, at: 0.9, zone: .unknown)], at: 2.9).events == [.determined("fleet", .outside), .exited("fleet")])
        #expect(monitor.update([Self.beacon(1, at: 0.9, zone: .unknown)], at: 5).events.isEmpty)
    }

    @Test("unknown becomes outside once no matching peer came for the exit period, with no exit")
    func unknownToOutside() throws {
        var monitor = try monitor(Self.region())
        #expect(monitor.update([], at: 9.9).events.isEmpty)
        #expect(monitor.update([], at: 10).events == [.determined("fleet", .outside)])
        #expect(monitor.update([Self.beacon(1, at: 10.5)], at: 11).events == [.determined("fleet", .inside), .entered("fleet")])
    }

    @Test("irregular samples with gaps shorter than the exit period never cause an exit")
    func noSpuriousExit() throws {
        var monitor = try monitor(Self.region())
        var generator = SplitMix(seed: 7)
        var heard: Timestamp = 0.5
        var events: [RegionEvent] = []
        for report in 1...3_600 {
            let t = Double(report)
            // Bursts of silence of up to 9 s, then a few samples.
            if Double(generator.next() % 1000) / 1000 < 0.3 {
                heard = min(t, heard + Double(generator.next() % 9_000) / 1000)
            } else {
                heard = t - Double(generator.next() % 1000) / 1000
            }
            events += monitor.update([Self.beacon(1, at: heard, zone: report % 7 == 0 ? .unknown : .near)], at: t).events
        }
        #expect(events == [.determined("fleet", .inside), .entered("fleet")])
    }

    @Test("within: a peer counts only at that zone or nearer; leaving the zone starts the exit period")
    func within() throws {
        var monitor = try monitor(Self.region(within: .near))
        #expect(monitor.update([Self.beacon(1, at: 1, zone: .far, distance: 6)], at: 1).events.isEmpty)
        #expect(monitor.update([Self.beacon(1, at: 2, zone: .near)], at: 2).events == [.determined("fleet", .inside), .entered("fleet")])
        // Still heard, but far from 3 on: out at 2 + 10.
        for t in 3...11 { #expect(monitor.update([Self.beacon(1, at: Double(t), zone: .far, distance: 6)], at: Double(t)).events.isEmpty) }
        #expect(monitor.update([Self.beacon(1, at: 12, zone: .far, distance: 6)], at: 12).events
                == [.determined("fleet", .outside), .exited("fleet")])
    }

    @Test("ranging lists each region's present peers nearest first, and only regions with peers")
    func ranging() throws {
        var monitor = try monitor(Self.region(), Self.region("near", within: .near), Self.region("none", major: 9))
        let peers = [Self.beacon(1, at: 1, zone: .far, distance: 5), Self.beacon(2, at: 1, zone: .immediate, distance: 0.3),
                     Self.beacon(3, at: 1, zone: .near, distance: 2)]
        let update = monitor.update(peers, at: 1)
        #expect(update.ranging.map(\.region) == ["fleet", "near"])
        #expect(update.ranging[0].peers.map(\.identifier) == [peers[1].identifier, peers[2].identifier, peers[0].identifier])
        #expect(update.ranging[1].peers.map(\.identifier) == [peers[1].identifier, peers[2].identifier])
        #expect(update.ranging[0].peers[0] == RangedPeer(identifier: peers[1].identifier, proximity: .immediate, distance: 0.3, rssi: -60))
    }

    @Test("requestState answers with a state determined; an unknown identifier with nil")
    func requestState() throws {
        var monitor = try monitor(Self.region())
        _ = monitor.update([Self.beacon(1, at: 1)], at: 1)
        #expect(monitor.requestState("fleet") == .determined("fleet", .inside))
        #expect(monitor.requestState("other") == nil)
    }

    @Test("redefining a region: the same selection keeps its state, another clears it; a new exit period applies")
    func redefinition() throws {
        var monitor = try monitor(Self.region())
        _ = monitor.update([Self.beacon(1, at: 1)], at: 1)
        #expect(try monitor.start(Self.region(exitPeriod: 30), at: 2) == [.determined("fleet", .inside)])
        #expect(monitor.exitPeriod(of: "fleet") == 30 && monitor.count == 1)
        #expect(monitor.update([], at: 12).events.isEmpty, "the new exit period (30 s) applies")
        #expect(try monitor.start(Self.region(major: 2), at: 13) == [.determined("fleet", .unknown)])
        #expect(monitor.status(of: "fleet")?.lastSeen == nil)
        #expect(monitor.update([Self.beacon(1, at: 13)], at: 14).events.isEmpty, "major 1 no longer matches")
        #expect(monitor.stop("fleet")?.identifier == "fleet" && monitor.stop("fleet") == nil && monitor.count == 0)
    }

    @Test("the region limit refuses a new region, not a redefinition")
    func limit() throws {
        var monitor = RegionMonitor(configuration: .init(maxRegions: 2))
        _ = try monitor.start(Self.region("a"), at: 0)
        _ = try monitor.start(Self.region("b"), at: 0)
        #expect(throws: RegionMonitor.LimitReached(limit: 2)) { try monitor.start(Self.region("c"), at: 0) }
        _ = try monitor.start(Self.region("b", within: .near), at: 0)
        monitor.stop("a")
        _ = try monitor.start(Self.region("c"), at: 0)
        #expect(monitor.regions.map(\.region.identifier) == ["b", "c"])
    }

    @Test("restoring: a young inside stays inside (no second enter), counting its exit period from the restart")
    func restoreYoungInside() throws {
        var monitor = RegionMonitor(configuration: .init(defaultExitPeriod: 10, restoreLimit: 900))
        let r = Self.region()
        let saved = SavedRegionState(matcher: r.matcher, state: .inside, lastSeen: 1_000, savedAt: 1_005)
        #expect(try monitor.start(r, restoring: saved, at: 1_600) == [.determined("fleet", .inside)])
        #expect(monitor.update([Self.beacon(1, at: 1_601)], at: 1_602).events.isEmpty, "no second enter")
        #expect(monitor.update([], at: 1_610).events.isEmpty)
        #expect(monitor.update([], at: 1_611).events == [.determined("fleet", .outside), .exited("fleet")])
    }

    @Test("restoring: an inside whose peer was not seen again leaves an exit period after the restart")
    func restoreThenLeave() throws {
        var monitor = RegionMonitor(configuration: .init(defaultExitPeriod: 10, restoreLimit: 900))
        let r = Self.region()
        _ = try monitor.start(r, restoring: SavedRegionState(matcher: r.matcher, state: .inside, lastSeen: 95, savedAt: 99), at: 100)
        #expect(monitor.update([], at: 109).events.isEmpty)
        #expect(monitor.update([], at: 110).events == [.determined("fleet", .outside), .exited("fleet")])
    }

    @Test("restoring: old state, state of another selection, and a saved unknown start unknown; a young outside stays outside",
          arguments: RegionMonitorTests.restoreCases)
    func restore(_ c: RestoreCase) throws {
        var monitor = RegionMonitor(configuration: .init(restoreLimit: 900))
        let r = Self.region()
        var matcher = r.matcher
        if c.otherSelection { matcher.major = 4 }
        let saved = SavedRegionState(matcher: matcher, state: c.saved, lastSeen: c.lastSeen, savedAt: c.savedAt)
        let events = try monitor.start(r, restoring: saved, at: 1_000)
        #expect(events == [.determined("fleet", c.expected)])
    }

    struct RestoreCase: Sendable {
        var saved: RegionState
        var lastSeen: Double
        var savedAt: Double
        var otherSelection: Bool
        var expected: RegionState
    }
    static let restoreCases: [RestoreCase] = [
        RestoreCase(saved: .inside, lastSeen: 1_000 - 901, savedAt: 1_000, otherSelection: false, expected: .unknown),
        RestoreCase(saved: .inside, lastSeen: 1_000 - 899, savedAt: 1_000, otherSelection: false, expected: .inside),
        RestoreCase(saved: .inside, lastSeen: 1_000 - 10, savedAt: 1_000, otherSelection: true, expected: .unknown),
        RestoreCase(saved: .outside, lastSeen: 0, savedAt: 1_000 - 100, otherSelection: false, expected: .outside),
        RestoreCase(saved: .outside, lastSeen: 0, savedAt: 1_000 - 1_000, otherSelection: false, expected: .unknown),
        RestoreCase(saved: .unknown, lastSeen: 990, savedAt: 999, otherSelection: false, expected: .unknown),
    ]

    @Test("regions found through every index key and the general list")
    func index() throws {
        var monitor = RegionMonitor()
        func add(_ id: String, _ parts: [(RegionMatcher.Key, RegionMatcher.Value)]) throws {
            _ = try monitor.start(Region(identifier: id, matcher: try RegionMatcher.parse(parts), source: .config), at: 0)
        }
        try add("id", [(.identifier, .text("3f0e8c52-1d7a-4c1b-9a55-6b1f3c2d4e5f"))])
        try add("addr", [(.address, .text("AA:BB:CC:DD:EE:02"))])
        try add("alt", [(.id1, .text(Self.fleet.uuidString))])
        try add("ns", [(.namespace, .text(String(repeating: "ab", count: 10)))])
        try add("url", [(.url, .text("https://example.com/a"))])
        try add("domain", [(.urlDomain, .text("example.com"))])
        try add("kind", [(.kind, .text("eddystone"))])
        let node = PeerSnapshot(identifier: "3f0e8c52-1d7a-4c1b-9a55-6b1f3c2d4e5f", kind: .node, address: "AA:BB:CC:DD:EE:01",
                                   proximity: .far, distance: 5, rssi: -80, lastSeen: 1)
        let alt = BeaconIdentity.altBeacon(manufacturer: 0x118, id1: Self.fleet, id2: 1, id3: 1, referenceRSSI: -59)
        let uid = BeaconIdentity.eddystoneUID(namespace: Array(repeating: 0xab, count: 10), instance: Array(repeating: 0, count: 6), txPowerAt0m: -20)
        let url = BeaconIdentity.eddystoneURL(url: "https://www.example.com/a", txPowerAt0m: -20)
        let peers = [node,
                     PeerSnapshot(identifier: alt.peerID, kind: .altbeacon, address: "AA:BB:CC:DD:EE:02", beacon: alt, proximity: .near,
                                     distance: 2, rssi: -70, lastSeen: 1),
                     PeerSnapshot(identifier: uid.peerID, kind: .eddystone, address: "AA:BB:CC:DD:EE:03", beacon: uid, proximity: .near,
                                     distance: 2, rssi: -70, lastSeen: 1),
                     PeerSnapshot(identifier: url.peerID, kind: .eddystone, address: "AA:BB:CC:DD:EE:04", beacon: url, proximity: .near,
                                     distance: 2, rssi: -70, lastSeen: 1)]
        let update = monitor.update(peers, at: 1)
        let ranged = Dictionary(uniqueKeysWithValues: update.ranging.map { ($0.region, $0.peers.map(\.identifier)) })
        #expect(ranged["id"] == [node.identifier])
        #expect(ranged["addr"] == [alt.peerID])
        #expect(ranged["alt"] == [alt.peerID])
        #expect(ranged["ns"] == [uid.peerID])
        #expect(ranged["url"] == nil, "www.example.com/a is not https://example.com/a")
        #expect(ranged["domain"] == [url.peerID])
        #expect(ranged["kind"] == [url.peerID, uid.peerID], "equally near: by identifier")
    }
}

/// A small deterministic generator for the tests.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
