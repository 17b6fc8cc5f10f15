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

    @Test("with the node's heartbeat as long as the timeout it flaps once a heartbeat; a timeout three heartbeats long does not")
    func heartbeatAgainstTimeout() {
        // B's report lands when A's is exactly the timeout old: the default pairing (5 s, 5 s).
        var sensor = MQTTRoomSensor(timeout: 5)
        var flaps = 0
        for cycle in 0 ..< 12 {
            let t = Double(cycle) * 5
            flaps += sensor.observe(device: "tag", node: "A", distance: 1, at: t).count
            flaps += sensor.observe(device: "tag", node: "B", distance: 4, at: t + 5).count
        }
        #expect(flaps > 12, "\(flaps) changes in a minute")
        var patient = MQTTRoomSensor(timeout: 15)
        var changes = 0
        for cycle in 0 ..< 12 {
            let t = Double(cycle) * 5
            changes += patient.observe(device: "tag", node: "A", distance: 1, at: t).count
            changes += patient.observe(device: "tag", node: "B", distance: 4, at: t + 5).count
        }
        #expect(changes == 1, "only the first room: \(changes)")
    }
}
