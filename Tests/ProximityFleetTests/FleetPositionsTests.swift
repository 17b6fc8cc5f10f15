import Foundation
import ProximityCore
@testable import ProximityFleet
import ProximityMQTT
import Testing

/// The fleet service's positions with a floor plan (`run --plan`): hearings from the nodes'
/// reports, one estimator per device, what is published and when.
@Suite struct FleetPositionsTests {
    /// Two rooms side by side, four nodes in their corners; the nodes are not named after the rooms.
    static let plan = FloorPlan(
        nodes: [.init(name: "alpha", position: PlanPoint(x: 0.5, y: 0.5, z: 1)), .init(name: "bravo", position: PlanPoint(x: 4.5, y: 3.5, z: 1)),
                .init(name: "charlie", position: PlanPoint(x: 9.5, y: 0.5, z: 1)), .init(name: "delta", position: PlanPoint(x: 9.5, y: 3.5, z: 1))],
        rooms: [.init(name: "living", floor: 0, polygon: [.init(x: 0, y: 0), .init(x: 5, y: 0), .init(x: 5, y: 4), .init(x: 0, y: 4)]),
                .init(name: "kitchen", floor: 0, polygon: [.init(x: 5, y: 0), .init(x: 10, y: 0), .init(x: 10, y: 4), .init(x: 5, y: 4)])])

    /// A node's report of a device at (x, y) as the path-loss model expects it (−59 dBm at 1 m, n 2.5).
    static func report(_ plan: FloorPlan, node: String, x: Double, y: Double, offset: Double = 0) -> PeerReport {
        let p = plan.node(named: node)!.position
        let d = max(0.3, PlanPoint(x: x, y: y, z: 1).distance(to: p))
        let rssi = -59 - 25 * log10(d) + offset
        return PeerReport(id: "tag", kind: "ibeacon", rssi: Int(rssi.rounded()), rssiAt1m: -59, distance: d, proximity: "near", time: nil,
                          rssiFiltered: (rssi * 10).rounded() / 10, rssiSpread: 2, samples: 10)
    }

    @Test("a hearing: rssi_filtered, else an older node's rssi; rssi_spread, samples and rssi@1m, with defaults; none without a distance or an RSSI")
    func hearings() {
        let full = PeerReport(id: "d", kind: nil, rssi: -70, rssiAt1m: -61, distance: 3.2, proximity: "near", time: nil,
                              rssiFiltered: -68.4, rssiSpread: 3.1, samples: 42)
        let h = FleetPositions.hearing(node: "alpha", report: full, at: 100)
        #expect(h == NodeHearing(node: "alpha", rssi: -68.4, spread: 3.1, samples: 42, measuredPower: -61, distance: 3.2, time: 100))
        let old = PeerReport(id: "d", kind: nil, rssi: -70, rssiAt1m: nil, distance: 3.2, proximity: "near", time: nil)
        #expect(FleetPositions.hearing(node: "alpha", report: old, at: 100)
            == NodeHearing(node: "alpha", rssi: -70, spread: 3, samples: 5, measuredPower: -59, distance: 3.2, time: 100))
        #expect(FleetPositions.hearing(node: "alpha", report: .gone("d", at: 1), at: 100) == nil)
        let distanceOnly = PeerReport(id: "d", kind: nil, rssi: nil, rssiAt1m: nil, distance: 3.2, proximity: nil, time: nil)
        #expect(FleetPositions.hearing(node: "alpha", report: distanceOnly, at: 100) == nil)
    }

    @Test("a device heard by the plan's nodes is placed where the RSSI puts it, in the room holding it, louder than it says or not; a node outside the plan places nothing")
    func placed() {
        var positions = FleetPositions(plan: Self.plan, staleAfter: 5)
        var estimate: PositionEstimate?
        for t in 1 ... 12 {
            for node in ["alpha", "bravo", "charlie", "delta"] {
                positions.hear(device: "tag", node: node, report: Self.report(Self.plan, node: node, x: 2, y: 2, offset: 6), at: Double(t))
            }
            positions.hear(device: "other", node: "garage", report: Self.report(Self.plan, node: "alpha", x: 1, y: 1), at: Double(t))
            estimate = positions.step(at: Double(t) + 0.5)["tag"]
        }
        let e = try! #require(estimate)
        #expect(e.position.distance2D(to: PlanPoint(x: 2, y: 2)) < 1, "\(e)")
        #expect(e.room == 0)
        let payload = positions.payload(e, at: 12.5)
        #expect(payload.room == "living" && payload.floor == nil && payload.time == 12.5)
        #expect(payload.x == (payload.x * 10).rounded() / 10 && payload.uncertainty > 0 && payload.uncertainty < 3, "\(payload)")
        #expect(positions.isPlaced("tag", at: 12.5))
        #expect(!positions.isPlaced("other", at: 12.5))
        #expect(positions.devices == ["tag"])
    }

    @Test("hearings count for stale-after; a report with a null distance and a node offline remove theirs at once; a device nobody hears loses its belief")
    func freshness() {
        var positions = FleetPositions(plan: Self.plan, staleAfter: 5)
        positions.hear(device: "tag", node: "alpha", report: Self.report(Self.plan, node: "alpha", x: 2, y: 2), at: 10)
        positions.hear(device: "tag", node: "bravo", report: Self.report(Self.plan, node: "bravo", x: 2, y: 2), at: 10)
        #expect(positions.hearings(of: "tag", at: 14.9).map(\.node) == ["alpha", "bravo"])
        #expect(positions.hearings(of: "tag", at: 15).isEmpty)
        #expect(positions.step(at: 15).isEmpty)
        #expect(positions.devices.isEmpty)
        positions.hear(device: "tag", node: "alpha", report: Self.report(Self.plan, node: "alpha", x: 2, y: 2), at: 20)
        positions.hear(device: "tag", node: "bravo", report: Self.report(Self.plan, node: "bravo", x: 2, y: 2), at: 20)
        positions.hear(device: "tag", node: "alpha", report: .gone("tag", at: 21), at: 21)
        #expect(positions.hearings(of: "tag", at: 21).map(\.node) == ["bravo"])
        #expect(positions.step(at: 21)["tag"] != nil && positions.devices == ["tag"])
        positions.forget(node: "bravo")
        #expect(!positions.isPlaced("tag", at: 21))
        #expect(positions.step(at: 22).isEmpty && positions.devices.isEmpty)
    }

    @Test("a reloaded plan that adds a node uses the hearings it already had")
    func reload() {
        var positions = FleetPositions(plan: Self.plan, staleAfter: 5)
        positions.hear(device: "tag", node: "echo", report: Self.report(Self.plan, node: "alpha", x: 1, y: 1), at: 10)
        #expect(!positions.isPlaced("tag", at: 10))
        var plan = Self.plan
        plan.nodes.append(.init(name: "echo", position: PlanPoint(x: 0.5, y: 0.5, z: 1)))
        positions.replace(plan: plan)
        #expect(positions.isPlanNode("echo") && positions.isPlaced("tag", at: 10))
        #expect(positions.step(at: 11)["tag"] != nil)
    }

    @Test("a position goes out again on another room or floor, a move of 0.3 m or more, or an uncertainty that changed as much")
    func meaningful() {
        let a = FleetPosition(x: 1, y: 1, z: 1, floor: nil, uncertainty: 1, room: "living", time: 1)
        #expect(FleetPositions.isMeaningful(a, since: nil))
        var b = a
        b.time = 2
        b.x = 1.2
        #expect(!FleetPositions.isMeaningful(b, since: a))
        b.x = 1.3
        #expect(FleetPositions.isMeaningful(b, since: a))
        b = a
        b.uncertainty = 1.3
        #expect(FleetPositions.isMeaningful(b, since: a))
        b = a
        b.room = nil
        #expect(FleetPositions.isMeaningful(b, since: a))
    }

    @Test("the payloads: a position with null room and floor; attributes and table rows without a position read as before, and old tables decode")
    func payloads() throws {
        let p = FleetPosition(x: 1.2, y: 3.4, z: 1, floor: nil, uncertainty: 0.8, room: nil, time: 1795469990.5)
        #expect(MQTTJSON.encode(p) == #"{"floor":null,"room":null,"time":1795469990.5,"uncertainty":0.8,"x":1.2,"y":3.4,"z":1}"#)
        let attributes = FleetAttributes(room: "alpha", distances: ["alpha": 1], ages: ["alpha": 0], since: 5, rule: "fleet")
        #expect(MQTTJSON.encode(attributes) == #"{"ages":{"alpha":0},"distances":{"alpha":1},"room":"alpha","rule":"fleet","since":5}"#)
        var placed = p
        placed.floor = "ground"
        placed.room = "living"
        let withPosition = FleetAttributes(room: "living", distances: [:], ages: [:], since: 5, rule: "fleet", position: placed)
        #expect(MQTTJSON.encode(withPosition)
            == #"{"ages":{},"distances":{},"floor":"ground","room":"living","rule":"fleet","since":5,"uncertainty":0.8,"x":1.2,"y":3.4}"#)
        let old = #"{"time":5,"rule":"fleet","devices":[{"id":"tag","room":"alpha","readings":[{"node":"alpha","distance":1,"age":0}]}]}"#
        let table = try #require(MQTTJSON.decode(FleetTable.self, from: Array(old.utf8)))
        #expect(table.devices.first?.position == nil)
        let row = FleetTable.Device(id: "tag", room: "living", readings: [], position: placed)
        #expect(!MQTTJSON.encode(FleetTable.Device(id: "tag", room: "alpha", readings: [])).contains("position"))
        #expect(MQTTJSON.decode(FleetTable.Device.self, from: Array(MQTTJSON.encode(row).utf8)) == row)
    }
}
