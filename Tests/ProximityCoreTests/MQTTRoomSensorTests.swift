import ProximityCore
import Testing

/// Home Assistant's `mqtt_room` rule, as fleet-bench's baseline.
@Suite struct MQTTRoomSensorTests {
    @Test("a nearer report, a report from its room, or its last update timeout old: the room changes; otherwise not")
    func rule() {
        var sensor = MQTTRoomSensor(timeout: 5)
        #expect(sensor.observe(device: "tag", node: "A", distance: 1, at: 0).map(\.room) == ["A"])
        #expect(sensor.observe(device: "tag", node: "B", distance: 4, at: 4.9).isEmpty, "farther, and A's update is 4.9 s old")
        #expect(sensor.observe(device: "tag", node: "B", distance: 4, at: 5).map(\.room) == ["B"], "A's update is 5 s old: the timeout")
        #expect(sensor.observe(device: "tag", node: "A", distance: 1, at: 5.1).map(\.room) == ["A"], "nearer")
        #expect(sensor.tick(at: 1000).isEmpty && sensor.room(of: "tag") == "A", "never not_home (away_timeout 0)")
    }

    /// A minute of a device 1 m from A and 4 m from B, both nodes reporting every 5 s, B's report
    /// landing when A's is exactly 5 s old: how many times the sensor's room changes.
    static func changes(timeout: Double) -> Int {
        var sensor = MQTTRoomSensor(timeout: timeout)
        var changes = 0
        for cycle in 0 ..< 12 {
            let t = Double(cycle) * 5
            changes += sensor.observe(device: "tag", node: "A", distance: 1, at: t).count
            changes += sensor.observe(device: "tag", node: "B", distance: 4, at: t + 5).count
        }
        return changes
    }

    @Test("with the node's heartbeat as long as the timeout it flaps once a heartbeat; a timeout three heartbeats long does not")
    func heartbeatAgainstTimeout() {
        #expect(Self.changes(timeout: 5) > 12, "the default pairing (5 s, 5 s)")
        #expect(Self.changes(timeout: 15) == 1, "only the first room")
    }
}
