import ProximityCore
import Testing

@Suite("Found-devices table")
struct FoundDevicesTests {
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

    @Test("the cap evicts the peer heard least recently")
    func cap() {
        var table = FoundDevicesTable(configuration: RangingConfiguration(maxPeers: 3))
        for (i, id) in ["a", "b", "c"].enumerated() { table.observe(id, rssi: -60, at: Double(i)) }
        table.observe("a", rssi: -60, at: 5)
        table.observe("d", rssi: -60, at: 6)
        #expect(Set(table.peers.keys) == ["a", "c", "d"])
        #expect(table.count == 3)
    }

    @Test("a peer's own measured power is used for its distance")
    func measuredPower() {
        var table = FoundDevicesTable()
        let own = table.observe("beacon", rssi: -70, at: 0, measuredPower: -70)
        #expect(abs(own.distance - 1) < 1e-9)
        let defaulted = table.observe("node", rssi: -70, at: 0)
        #expect(abs(defaulted.distance - 3.548) < 0.01)
    }
}
