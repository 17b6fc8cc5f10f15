import ProximityCore
import Testing

@Suite("Found-devices table")
struct FoundDevicesTests {
    @Test("a peer's spread follows how far its samples stray, and its recent sample count its rate over the last 10 s")
    func spreadAndSamples() throws {
        var table = FoundDevicesTable()
        for i in 0 ..< 200 { table.observe("a", rssi: i % 2 == 0 ? -62 : -68, at: Double(i) / 10) }
        for i in 0 ..< 20 { table.observe("b", rssi: -70, at: Double(i)) }
        let a = try #require(table.peers["a"]), b = try #require(table.peers["b"])
        #expect(a.spread > 2 && a.spread < 4, "\(a.spread)")
        #expect(b.spread < 0.1, "\(b.spread)")
        #expect((95 ... 105).contains(a.recentSamples), "\(a.recentSamples)")
        #expect((10 ... 12).contains(b.recentSamples), "\(b.recentSamples)")
    }

    @Test("a silent peer turns unknown once, then is removed")
    func expiry() {
        var table = FoundDevicesTable(configuration: RangingConfiguration(clearInterval: 10))
        table.observe("a", rssi: -59, at: 0)
        table.observe("b", rssi: -75, at: 0)
        #expect(table.tick(at: 1).zones == ["a": .near, "b": .far])
        table.observe("b", rssi: -75, at: 9)
        let silent = table.tick(at: 10.5)
        #expect(silent.zones == ["a": .unknown, "b": .far])
        #expect(silent.silenced == ["a"])
        let gone = table.tick(at: 11.5)
        #expect(gone.removed == ["a"])
        #expect(gone.zones == ["b": .far])
        // Heard again while departing: back, not removed.
        table.observe("b", rssi: -75, at: 19.6)
        #expect(table.tick(at: 20).zones == ["b": .far])
    }

    @Test("a silent peer goes stale after a few of its usual gaps, then is removed at the clear interval",
          arguments: [(0.1, 3.0), (1.0, 4.5)])
    func stale(interval: Double, staleAfter: Double) {
        var table = FoundDevicesTable()
        var t = 0.0
        while t < 30 {
            table.observe("a", rssi: -65, at: t)
            t += interval
        }
        let last = t - interval
        var silencedAt: [Double] = []
        var removedAt: Double?
        var tick = (last + 0.5).rounded(.up)
        while tick < last + 15 {
            let report = table.tick(at: tick)
            if report.silenced == ["a"] { silencedAt.append(tick) }
            if report.removed == ["a"] { removedAt = tick }
            if tick - last <= staleAfter { #expect(report.zones["a"] == .near) }
            if tick - last > staleAfter + 0.1 && tick - last <= 10 { #expect(report.zones["a"] == .unknown) }
            tick += 1
        }
        // Reported once, at the first tick past the stale limit; removed at the first past 10 s.
        #expect(silencedAt.count == 1)
        #expect((silencedAt.first ?? 0) - last > staleAfter - 0.1 && (silencedAt.first ?? 0) - last <= staleAfter + 1.1)
        #expect((removedAt ?? 0) - last > 10 && (removedAt ?? 0) - last <= 11)
    }

    @Test("a departing peer is reported unknown, then removed within the clear interval plus one report",
          arguments: [(1.5, 0.1), (1.5, 1), (2, 0.1), (2, 1), (3, 0.1), (3, 1), (3, 2.5), (4, 0.1), (4, 2.5), (10, 0.1), (10, 1),
                      (10, 2.5), (10, 8)])
    func departureBound(clear: Double, sampleInterval: Double) {
        for phase in [0.0, 0.25, 0.5, 0.99] {
            var table = FoundDevicesTable(configuration: RangingConfiguration(clearInterval: clear))
            var t = 0.0
            var tick = phase
            var last = 0.0
            var unknownAt: Double?
            var removedAt: Double?
            // Heard for 30 s, then never again; the table is ticked once a second throughout.
            while tick < 60 {
                while t <= tick && t < 30 {
                    table.observe("a", rssi: -65, at: t)
                    last = t
                    t += sampleInterval
                }
                let report = table.tick(at: tick)
                if tick > last, t >= 30, unknownAt == nil, report.zones["a"] == .unknown { unknownAt = tick }
                if report.removed.contains("a") {
                    #expect(t >= 30, "clear \(clear), every \(sampleInterval) s: removed while heard, at \(tick)")
                    removedAt = tick
                }
                tick += 1
            }
            guard let removed = removedAt, let unknown = unknownAt else {
                Issue.record("clear \(clear), every \(sampleInterval) s, phase \(phase): removed at \(String(describing: removedAt)), unknown at \(String(describing: unknownAt))")
                continue
            }
            #expect(unknown < removed)
            #expect(removed - last > clear && removed - last <= clear + 1,
                    "clear \(clear), every \(sampleInterval) s, phase \(phase): removed \(removed - last) s after the last sample")
        }
    }

    @Test("heard again while stale, a peer comes back")
    func comesBack() {
        var table = FoundDevicesTable()
        for i in 0..<100 { table.observe("a", rssi: -65, at: Double(i) * 0.1) }
        #expect(table.tick(at: 14).silenced == ["a"])
        #expect(table.tick(at: 15).zones["a"] == .unknown)
        table.observe("a", rssi: -65, at: 15.5)
        let back = table.tick(at: 16)
        #expect(back.zones["a"] == .near)
        #expect(back.removed.isEmpty && back.silenced.isEmpty)
    }

    @Test("the defaults")
    func defaults() {
        let c = RangingConfiguration()
        #expect(c.clearInterval == 10)
        #expect(c.thresholds == ZoneThresholds(immediate: 0.5, near: 3))
        #expect(c.hysteresisMargin == 0.125 && c.dwell == 0)
        #expect(c.staleGaps == 4.5 && c.minimumStale == 3 && c.staleShare == 0.005 && c.gapMemory == 300)
        #expect(c.makeFilter() is KalmanRSSIFilter)
    }

    @Test("standing on the 3 m boundary it changes zone far less than plain thresholds; a move to 6 m shows within two reports")
    func boundaryAndStep() {
        // 3 m at n = 2 and -59 dBm at 1 m: -68.5 dBm; σ = 6 dB, 10 samples a second, 5 minutes.
        var noise = TestNoise(seed: 5)
        let samples = (0..<3000).map { (t: Double($0) * 0.1, rssi: (-68.5 + noise.gaussian(6)).rounded()) }
        func changes(_ configuration: RangingConfiguration) -> Int {
            var table = FoundDevicesTable(configuration: configuration)
            var i = 0
            var changes = 0
            var last: Proximity?
            for tick in 1...300 {
                while i < samples.count, samples[i].t < Double(tick) {
                    table.observe("a", rssi: samples[i].rssi, at: samples[i].t)
                    i += 1
                }
                let zone = table.tick(at: Double(tick)).zones["a"]
                if let last, zone != last { changes += 1 }
                last = zone
            }
            return changes
        }
        let node = changes(RangingConfiguration())
        let meanOfTen = changes(RangingConfiguration(hysteresisMargin: 0, makeFilter: { MeanOfLastFilter(count: 10) }))
        #expect(meanOfTen > 100)
        #expect(node * 3 < meanOfTen)

        // At 1.5 m (near) for 30 s, then at 6 m (far): reported far two reports later.
        var followed = 0
        for seed in UInt64(1)...50 {
            var noise = TestNoise(seed: seed)
            var table = FoundDevicesTable()
            var t = 0.0
            while t < 30 { table.observe("a", rssi: (-62.5 + noise.gaussian(6)).rounded(), at: t); t += 0.1 }
            let before = table.tick(at: 30).zones["a"]
            while t < 32 { table.observe("a", rssi: (-74.6 + noise.gaussian(6)).rounded(), at: t); t += 0.1 }
            if before == .near && table.tick(at: 32).zones["a"] == .far { followed += 1 }
        }
        #expect(followed >= 48)
    }

    @Test("a full table takes a new peer in place of a stale one, else of the farthest if clearly nearer, else drops it")
    func cap() {
        var table = FoundDevicesTable(configuration: RangingConfiguration(maxPeers: 3))
        // a at 1 m, b at 3.5 m, c at 10 m (n = 2, -59 dBm at 1 m), heard every 0.1 s.
        var t = 0.0
        func hear(_ ids: [(PeerID, Double)]) {
            for (id, rssi) in ids { table.observe(id, rssi: rssi, at: t) }
        }
        while t < 5 { hear([("a", -59), ("b", -70), ("c", -79)]); t += 0.1 }
        // d at 9 m is not clearly nearer than c: dropped, nothing changes.
        #expect(table.observe("d", rssi: -78, at: t) == nil)
        #expect(Set(table.peers.keys) == ["a", "b", "c"] && table.dropped == 1)
        // e at 2 m takes the farthest's place.
        #expect(table.observe("e", rssi: -65, at: t) != nil)
        #expect(Set(table.peers.keys) == ["a", "b", "e"] && table.evictions == 1)
        // b falls silent and goes stale: the next newcomer, however far, takes its place.
        while t < 10 { hear([("a", -59), ("e", -65)]); t += 0.1 }
        #expect(table.observe("f", rssi: -85, at: t) != nil)
        #expect(Set(table.peers.keys) == ["a", "e", "f"] && table.count == 3)
    }

    @Test("a peer's own measured power is used for its distance")
    func measuredPower() {
        var table = FoundDevicesTable()
        let own = table.observe("beacon", rssi: -70, at: 0, measuredPower: -70)
        #expect(abs((own?.distance ?? 0) - 1) < 1e-9)
        let defaulted = table.observe("node", rssi: -70, at: 0)
        #expect(abs((defaulted?.distance ?? 0) - 3.548) < 0.01)
    }
}
