import Foundation
import ProximityCore
import ProximityFleet
import ProximityMQTT
import Testing

/// The fleet service's step in this process, on plain numbers for time: messages and ticks in,
/// effects out.
@Suite struct FleetStepTests {
    static let identities = ["alpha": "11111111-1111-4111-8111-111111111111", "bravo": "22222222-2222-4222-8222-222222222222",
                             "charlie": "33333333-3333-4333-8333-333333333333", "delta": "44444444-4444-4444-8444-444444444444"]

    static func step(track: Set<String>? = nil) -> FleetStep {
        var configuration = FleetConfiguration()
        configuration.plan = FleetPositionsTests.plan
        configuration.track = track
        var step = FleetStep(configuration)
        _ = step.connection(.connected, at: 0)
        return step
    }

    /// Every node's state, then each hearing the others at `t` (`offset` dB on what `blocked`
    /// receives, and `noise` dB of seeded noise on every hearing).
    static func nodesHearEachOther(_ step: inout FleetStep, at t: Double, blocked: String? = nil, offset: Double = 0, noise: Double = 0,
                                   seed: inout UInt64) -> [FleetEffect] {
        var effects: [FleetEffect] = []
        for (node, id) in identities {
            let state = NodeStatePayload(id: id, name: node, adapter: "hci0", advertising: true, discovering: true, peers: 3, rssiOffset: 0,
                                         outboxDropped: 0)
            effects += step.receive(.nodeState(node: node, state), at: t)
        }
        for rx in identities.keys.sorted() {
            for (tx, id) in identities where tx != rx {
                let p = FleetPositionsTests.plan.node(named: tx)!.position
                seed = seed &* 6364136223846793005 &+ 1442695040888963407
                let jitter = noise * (Double(seed >> 11) / Double(1 << 53) * 2 - 1)
                var report = FleetPositionsTests.report(FleetPositionsTests.plan, node: rx, x: p.x, y: p.y, offset: (rx == blocked ? offset : 0) + jitter)
                report.id = id
                report.kind = "node"
                effects += step.receive(.report(node: rx, device: id, report), at: t)
            }
        }
        return effects + step.tick(at: t)
    }

    static func rooms(_ effects: [FleetEffect]) -> [String] {
        effects.compactMap { if case .publish(let topic, let payload, _) = $0, topic.hasSuffix("/room") { "\(topic)|\(payload)" } else { nil } }
    }

    @Test("the plan's nodes are nodes, not devices: hearing each other they get no room, position or discovery, and feed the calibration; --track naming one by its name tracks it")
    func planNodesAreNotDevices() {
        var step = Self.step()
        var effects: [FleetEffect] = []
        var seed: UInt64 = 1
        for t in stride(from: 100.0, through: 110, by: 1) { effects += Self.nodesHearEachOther(&step, at: t, seed: &seed) }
        let published = effects.compactMap { if case .publish(let topic, _, _) = $0 { topic } else { nil } }
        #expect(!published.contains { ($0.contains("/devices/") || $0.contains("device_tracker") || $0.contains("/sensor/"))
            && !$0.contains("proximity_fleet_room_") }, "\(published)")
        // The plan's rooms are published empty: the nodes are in no room.
        let rooms = effects.compactMap { if case .publish(let topic, let payload, _) = $0, topic.contains("/rooms/") { payload } else { nil } }
        #expect(!rooms.isEmpty && rooms.allSatisfy { MQTTJSON.decode(FleetRoomOccupancy.self, from: $0.utf8)?.count == 0 }, "\(rooms)")
        #expect(step.table(at: 110).devices.isEmpty)
        #expect(step.positions?.calibration.pairs.count == 12)

        var tracking = Self.step(track: ["alpha"])
        var tracked: [FleetEffect] = []
        for t in stride(from: 100.0, through: 110, by: 1) { tracked += Self.nodesHearEachOther(&tracking, at: t, seed: &seed) }
        #expect(Self.rooms(tracked).map { $0.split(separator: "|")[0] } == ["proximity-fleet/devices/\(Self.identities["alpha"]!)/room"],
                "\(Self.rooms(tracked))")
    }

    @Test("a device new to the fleet is placed 2 s after its first report, not on the first node's report alone")
    func placedAfterTheOthersReported() {
        var step = Self.step()
        // Only charlie has reported yet: placed on that alone it would be in the kitchen.
        var effects = step.receive(.report(node: "charlie", device: "tag", FleetPositionsTests.report(FleetPositionsTests.plan, node: "charlie", x: 2, y: 2)), at: 100)
        effects += step.tick(at: 100)
        #expect(Self.rooms(effects).isEmpty, "\(Self.rooms(effects))")
        for node in ["alpha", "bravo", "delta"] {
            effects += step.receive(.report(node: node, device: "tag", FleetPositionsTests.report(FleetPositionsTests.plan, node: node, x: 2, y: 2)), at: 100.5)
        }
        effects += step.tick(at: 101)
        #expect(Self.rooms(effects).isEmpty, "\(Self.rooms(effects))")
        effects += step.tick(at: 102)
        #expect(Self.rooms(effects) == ["proximity-fleet/devices/tag/room|living"], "\(Self.rooms(effects))")
    }

    @Test("a node whose receiver starts reading 10 dB low is logged drifting once, however its figures move from fit to fit, and no longer drifting once when it is back; the others never")
    func driftLoggedOnce() {
        var step = Self.step()
        var seed: UInt64 = 7
        var logs: [String] = []
        func minutes(_ count: Int, from start: Double, offset: Double) -> Double {
            var t = start
            for _ in 0 ..< count * 60 {
                for case .log(let line) in Self.nodesHearEachOther(&step, at: t, blocked: "charlie", offset: offset, noise: 2, seed: &seed)
                    where line.message.contains("drifting") {
                    logs.append("\(line.metadata["node"] ?? "") \(line.message.hasPrefix("node drifting") ? "drifting" : "back")")
                }
                t += 1
            }
            return t
        }
        var t = minutes(3, from: 1000, offset: 0)
        #expect(logs.isEmpty, "\(logs)")
        t = minutes(10, from: t, offset: -10)
        #expect(logs == ["charlie drifting"], "\(logs)")
        _ = minutes(15, from: t, offset: 0)
        #expect(logs == ["charlie drifting", "charlie back"], "\(logs)")
    }

    @Test("issue 32: the fleet knows what is verified: a node's device is verified while every node that hears it says it proved the fleet's key, not verified once one says otherwise; a beacon has no such word; the attributes and the table say the same")
    func verified() throws {
        var configuration = FleetConfiguration()
        configuration.attributesInterval = 0
        var step = FleetStep(configuration)
        _ = step.connection(.connected, at: 0)
        let member = "0b0b0b0b-0000-4000-8000-000000000002"
        func report(_ id: String, _ kind: String, _ verified: Bool?, distance: Double, at t: Double) -> PeerReport {
            PeerReport(id: id, kind: kind, rssi: -60, rssiAt1m: -59, distance: distance, proximity: "near", time: t, verified: verified)
        }
        func said(_ effects: [FleetEffect], _ device: String) -> Bool?? {
            for case .publish(let topic, let payload, _) in effects.reversed() where topic == "proximity-fleet/devices/\(device)/attributes" {
                return .some(MQTTJSON.decode(FleetAttributes.self, from: Array(payload.utf8))?.verified)
            }
            return .none
        }
        var effects: [FleetEffect] = []
        for (t, node) in [(10.0, "alpha"), (10.2, "bravo")] {
            effects += step.receive(.report(node: node, device: member, report(member, "node", true, distance: node == "alpha" ? 1 : 3, at: t)), at: t)
            effects += step.receive(.report(node: node, device: "ibeacon:x", report("ibeacon:x", "ibeacon", nil, distance: 2, at: t)), at: t)
        }
        effects += step.tick(at: 11)
        #expect(said(effects, member) == .some(true), "\(effects)")
        #expect(said(effects, "ibeacon:x") == .some(nil))
        #expect(step.table(at: 11).devices.first { $0.id == member }?.verified == true)
        #expect(step.table(at: 11).devices.first { $0.id == "ibeacon:x" }?.verified == nil)
        // bravo now says it is not verified (another device at the member's identity, say).
        effects = step.receive(.report(node: "bravo", device: member, report(member, "node", false, distance: 3, at: 12)), at: 12)
        effects += step.tick(at: 13)
        #expect(said(effects, member) == .some(false), "\(effects)")
        #expect(step.table(at: 13).devices.first { $0.id == member }?.verified == false)
    }

    static func publications(_ effects: [FleetEffect]) -> [String: String] {
        var out: [String: String] = [:]
        for case .publish(let topic, let payload, _) in effects { out[topic] = payload }
        return out
    }

    @Test("issue 34: each room's occupancy and device count (with the devices' names), discovered for Home Assistant with default_entity_id and object_id; after a reconnection (a broker that lost its retained messages) every retained state goes out again")
    func roomsOccupancyAndRepublish() throws {
        var configuration = FleetConfiguration()
        configuration.broker = "mqtt://broker.lan:1883"
        var step = FleetStep(configuration)
        var effects = step.connection(.connected, at: 0)
        #expect(effects.contains(.log(.init(.notice, "connected to the MQTT broker", ["broker": "mqtt://broker.lan:1883"]))))
        let hall = "22222222-2222-4222-8222-222222222222"
        for (node, id) in [("kitchen", "11111111-1111-4111-8111-111111111111"), ("hall", hall)] {
            let state = NodeStatePayload(id: id, name: node, adapter: "hci0", advertising: true, discovering: true,
                                         peers: 1, rssiOffset: 0, outboxDropped: 0)
            effects += step.receive(.nodeState(node: node, state), at: 0.5)
        }
        for t in stride(from: 1.0, through: 12, by: 1) {
            for (node, d) in [("kitchen", 1.0), ("hall", 6.0)] {
                let report = PeerReport(id: "tag1", kind: "ibeacon", rssi: -60, rssiAt1m: -59, distance: d, proximity: "near", time: t,
                                        name: "Anna's keys")
                effects += step.receive(.report(node: node, device: "tag1", report), at: t)
            }
            // The kitchen's box hears the hall's: tracked (without a plan), but a box is no occupant.
            let box = PeerReport(id: hall, kind: "node", rssi: -70, rssiAt1m: -59, distance: 4, proximity: "far", time: t, name: "hall")
            effects += step.receive(.report(node: "kitchen", device: hall, box), at: t)
            effects += step.tick(at: t)
        }
        var published = Self.publications(effects)
        #expect(published["proximity-fleet/devices/tag1/room"] == "kitchen")
        #expect(published["proximity-fleet/devices/\(hall)/room"] == "kitchen")
        let kitchen = try #require(MQTTJSON.decode(FleetRoomOccupancy.self, from: (published["proximity-fleet/rooms/kitchen"] ?? "").utf8))
        #expect(kitchen == FleetRoomOccupancy(room: "kitchen", devices: ["tag1"], names: ["Anna's keys"]))
        #expect(MQTTJSON.decode(FleetRoomOccupancy.self, from: (published["proximity-fleet/rooms/hall"] ?? "").utf8)?.count == 0)

        // Discovery: the tracker, and the rooms' entities on the fleet service's device.
        let tracker = try JSONObject.object(published["homeassistant/device_tracker/proximity_fleet_tag1/config"])
        #expect(tracker["object_id"] as? String == "proximity_fleet_tag1")
        #expect(tracker["default_entity_id"] as? String == "device_tracker.proximity_fleet_tag1")
        let occupancy = try JSONObject.object(published["homeassistant/binary_sensor/proximity_fleet_room_kitchen/occupancy/config"])
        #expect(occupancy["default_entity_id"] as? String == "binary_sensor.proximity_fleet_kitchen_occupancy")
        #expect(occupancy["object_id"] as? String == "proximity_fleet_kitchen_occupancy")
        #expect(occupancy["device_class"] as? String == "occupancy")
        #expect(occupancy["state_topic"] as? String == "proximity-fleet/rooms/kitchen")
        #expect((occupancy["device"] as? [String: Any])?["name"] as? String == "proximity-fleet")
        let count = try JSONObject.object(published["homeassistant/sensor/proximity_fleet_room_kitchen/devices/config"])
        #expect(count["default_entity_id"] as? String == "sensor.proximity_fleet_kitchen_devices")
        #expect(count["json_attributes_topic"] as? String == "proximity-fleet/rooms/kitchen")
        #expect(count["value_template"] as? String == "{{ value_json.count }}")

        // Unchanged: nothing again.
        #expect(Self.publications(step.tick(at: 13)).keys.filter { $0.contains("/rooms/") }.isEmpty)

        // The broker restarts (without persistence) and the service reconnects: the room, the
        // attributes and the discovery go out at once, the rooms' occupancy at the next tick.
        _ = step.connection(.disconnected(reason: "closed", tls: false), at: 14)
        let again = step.connection(.connected, at: 15)
        published = Self.publications(again)
        #expect(published["proximity-fleet/devices/tag1/room"] == "kitchen")
        #expect(published["proximity-fleet/devices/tag1/attributes"] != nil)
        #expect(published["homeassistant/device_tracker/proximity_fleet_tag1/config"] != nil)
        published = Self.publications(step.tick(at: 16))
        #expect(MQTTJSON.decode(FleetRoomOccupancy.self, from: (published["proximity-fleet/rooms/kitchen"] ?? "").utf8)?.count == 1)
        #expect(published["homeassistant/binary_sensor/proximity_fleet_room_kitchen/occupancy/config"] != nil)

        // Broker problems name the broker.
        let lost = step.connection(.disconnected(reason: "connection refused", tls: false), at: 17)
        let down = step.connection(.disconnected(reason: "connection refused", tls: false), at: 18)
        let lines = (lost + down).compactMap { if case .log(let line) = $0 { line.message } else { nil } }
        #expect(lines.count == 2 && lines.allSatisfy { $0.contains("mqtt://broker.lan:1883") }, "\(lines)")
    }
}

/// A JSON object from a payload.
enum JSONObject {
    static func object(_ text: String?) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data((text ?? "").utf8)) as? [String: Any], "not a JSON object: \(text ?? "nil")")
    }
}
