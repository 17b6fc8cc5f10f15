import DBusKit
import ProximityAPI
import ProximityCore
import ProximityNode
import Testing

/// What each recording client gets of a report's batch, and the `Samples` signal's encoding.
struct RecordingBatchTests {
    static let a = "ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:1"
    static let b = "ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:2"

    @Test func eachClientGetsItsPeersSinceItStarted() {
        let batch = RecordingBatch(
            time: 100,
            samples: [RecordedSample(peer: Self.a, time: 99.1, rssi: -60, measuredPower: -59),
                      RecordedSample(peer: Self.b, time: 99.2, rssi: -70.5, measuredPower: -75),
                      RecordedSample(peer: Self.a, time: 99.6, rssi: -61, measuredPower: -59)],
            reports: [RecordedReport(peer: Self.a, zone: "near", distance: 1.2, measuredPower: -59),
                      RecordedReport(peer: Self.b, zone: RecordedReport.removed, distance: -1, measuredPower: 0)],
            recorders: [])
        let onlyA = batch.batch(for: .init(client: ":1.5", peers: [PeerID(Self.a)], since: 99.5))
        #expect(onlyA.samples.map(\.time) == [99.6] && onlyA.reports.map(\.peer) == [Self.a])
        let every = batch.batch(for: .init(client: ":1.6", peers: nil))
        #expect(every.samples.count == 3 && every.reports.count == 2 && every.time == 100)
    }

    @Test func samplesSignalRoundTrips() throws {
        let batch = RecordedBatch(time: 1_795_462_000.25,
                                  samples: [RecordedSample(peer: Self.a, time: 1_795_461_999.5, rssi: -60.25, measuredPower: -59)],
                                  reports: [RecordedReport(peer: Self.a, zone: "far", distance: 6.3, measuredPower: -59)])
        let types = batch.arguments.map(\.type)
        #expect(types == [.double, ProximityBus.Node1.samplesType, ProximityBus.Node1.reportsType])
        #expect(batch.arguments.allSatisfy { $0.conforms(to: $0.type) })
    }
}
