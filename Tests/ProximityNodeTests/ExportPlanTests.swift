import DBusKit
import Foundation
import ProximityAPI
import ProximityCore
@testable import ProximityNode
import Testing

/// The exporter's diff, alone.
@Suite struct ExportPlanTests {
    /// Times in seconds; the report's clock is the Unix epoch's.
    func snapshot(_ id: String, _ zone: Proximity = .near, rssi: Int16 = -60, lastSeen: Timestamp = 1) -> PeerSnapshot {
        PeerSnapshot(identifier: PeerID(id), kind: .node, address: "AA:00:00:00:00:01", name: "n", proximity: zone, distance: 1.2,
                     rssi: rssi, smoothedRSSI: Double(rssi), measuredPower: -59, firstSeen: 1, lastSeen: lastSeen)
    }

    func peer(_ id: String, _ zone: Proximity = .near, rssi: Int16 = -60, lastSeen: Timestamp = 1) -> PeerProperties {
        snapshot(id, zone, rssi: rssi, lastSeen: lastSeen).properties(in: report)
    }

    let report = NodeReport(time: 0, epoch: 0, peers: [], silenced: [], removed: [])

    @Test("new peers are exported, gone ones unexported, and only changed properties updated")
    func diff() {
        let exported = ["a": peer("a"), "b": peer("b"), "c": peer("c")].reduce(into: [PeerID: PeerProperties]()) { $0[PeerID($1.key)] = $1.value }
        let plan = ExportPlan(from: exported, to: [peer("a"), peer("b", .far, rssi: -70, lastSeen: 2), peer("d")])
        #expect(plan.unexport == ["c"])
        #expect(plan.export.map(\.identifier) == ["d"])
        #expect(plan.update.keys.sorted() == ["b"])
        #expect(plan.update["b"] == ["Proximity": .string("far"), "RSSI": .int16(-70), "SmoothedRSSI": .double(-70), "LastSeen": .uint64(2_000_000)])
    }

    @Test("an unchanged report changes nothing")
    func unchanged() {
        let plan = ExportPlan(from: [PeerID("a"): peer("a")], to: [peer("a")])
        #expect(plan.isEmpty)
    }

    @Test("constant properties are never updated, and a beacon's own properties are exported only for its kind")
    func constants() throws {
        var beacon = snapshot("ibeacon:x:1:2")
        beacon.kind = .ibeacon
        beacon.beacon = .iBeacon(uuid: UUID(), major: 1, minor: 2, measuredPower: -59)
        let properties = beacon.properties(in: report)
        #expect(properties.values["Major"] == .uint16(1) && properties.values["URL"] == nil)
        #expect(peer("n").values["Major"] == nil)
        var moved = beacon
        moved.firstSeen = 99
        #expect(ExportPlan(from: [beacon.identifier: properties], to: [moved.properties(in: report)]).update.isEmpty)
    }
}
