import DBusKit
import Foundation
import ProximityCore
@testable import ProximityNode
import Testing

/// The exporter's diff, alone.
@Suite struct ExportPlanTests {
    func peer(_ id: String, _ zone: Proximity = .near, rssi: Int16 = -60, lastSeen: UInt64 = 1) -> PeerState {
        PeerState(identifier: PeerID(id), kind: .node, address: "AA:00:00:00:00:01", name: "n", rssi: rssi, smoothedRSSI: Double(rssi),
                  measuredPower: -59, distance: 1.2, proximity: zone, firstSeen: 1, lastSeen: lastSeen, beacon: nil)
    }

    func report(_ peers: [PeerState]) -> NodeReport { NodeReport(time: 0, peers: peers, silenced: [], removed: []) }

    @Test("new peers are exported, gone ones unexported, and only changed properties updated")
    func diff() {
        let exported = ["a": peer("a"), "b": peer("b"), "c": peer("c")].reduce(into: [PeerID: PeerState]()) { $0[PeerID($1.key)] = $1.value }
        let plan = ExportPlan(from: exported, to: report([peer("a"), peer("b", .far, rssi: -70, lastSeen: 2), peer("d")]))
        #expect(plan.unexport == ["c"])
        #expect(plan.export.map(\.identifier) == ["d"])
        #expect(plan.update.keys.sorted() == ["b"])
        #expect(plan.update["b"] == ["Proximity": .string("far"), "RSSI": .int16(-70), "SmoothedRSSI": .double(-70), "LastSeen": .uint64(2)])
    }

    @Test("an unchanged report changes nothing")
    func unchanged() {
        let plan = ExportPlan(from: [PeerID("a"): peer("a")], to: report([peer("a")]))
        #expect(plan.isEmpty)
    }

    @Test("constant properties are never updated, and a beacon's own properties are exported only for its kind")
    func constants() throws {
        var beacon = peer("ibeacon:x:1:2")
        beacon.kind = .ibeacon
        beacon.beacon = .iBeacon(uuid: UUID(), major: 1, minor: 2, measuredPower: -59)
        #expect(beacon.properties.values["Major"] == .uint16(1) && beacon.properties.values["URL"] == nil)
        #expect(peer("n").properties.values["Major"] == nil)
        var moved = beacon
        moved.firstSeen = 99
        #expect(ExportPlan(from: [beacon.identifier: beacon], to: report([moved])).update.isEmpty)
    }
}
