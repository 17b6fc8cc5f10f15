import ProximityCore
import Testing

/// A room taken back after a restart (`RoomRule.restore`): the fleet service's retained rooms.
@Suite struct RoomRestoreTests {
    @Test("a restored room is the incumbent: a challenger needs the usual evidence once the room's node reports")
    func incumbent() {
        var rule = RoomDecider()
        rule.restore(device: "tag", room: "hall", at: 0)
        #expect(rule.room(of: "tag") == "hall")
        // The kitchen reports first, a little nearer: no hand-over while the hall may still report.
        #expect(rule.observe(device: "tag", node: "kitchen", distance: 1.8, at: 1).isEmpty)
        #expect(rule.observe(device: "tag", node: "hall", distance: 2.0, at: 2).isEmpty)
        for t in stride(from: 3.0, through: 30, by: 1) {
            _ = rule.observe(device: "tag", node: "kitchen", distance: 1.8, at: t)
            _ = rule.observe(device: "tag", node: "hall", distance: 2.0, at: t)
            #expect(rule.tick(at: t).isEmpty)
        }
        #expect(rule.room(of: "tag") == "hall")
    }

    @Test("a restored room whose node never reports hands over to the nearest fresh node after stale-after, and goes not_home after away-after")
    func staleAndAway() {
        var rule = RoomDecider()
        let stale = rule.configuration.staleAfter, away = rule.configuration.awayAfter
        rule.restore(device: "tag", room: "hall", at: 100)
        #expect(rule.observe(device: "tag", node: "kitchen", distance: 3, at: 101).isEmpty)
        let handed = rule.tick(at: 100 + stale + 0.5)
        #expect(handed.map(\.room) == ["kitchen"] && handed.first?.reason == .stale)

        var quiet = RoomDecider()
        quiet.restore(device: "tag", room: "hall", at: 0)
        #expect(quiet.tick(at: away - 1).isEmpty)
        let gone = quiet.tick(at: away + 1)
        #expect(gone.map(\.room) == [nil] && gone.first?.reason == .away)
    }

    @Test("restore does nothing to a device the rule holds, nor for not_home")
    func onlyUnknown() {
        var rule = RoomDecider()
        _ = rule.observe(device: "tag", node: "kitchen", distance: 1, at: 0)
        rule.restore(device: "tag", room: "hall", at: 1)
        #expect(rule.room(of: "tag") == "kitchen")
        rule.restore(device: "other", room: nil, at: 1)
        #expect(rule.room(of: "other") == nil && !rule.devices.contains("other"))
    }
}
