import Foundation
import MQTTKit
import ProximityCore
import ProximityFleet
import ProximityMQTT
import Testing

/// The nodes' hearings of each second (docs/mqtt.md, hearings): made by the node's table,
/// batched, parsed by the fleet, and what its positioning reads.
@Suite struct FleetHearingsTests {
    @Test("a second's statistics: the count of every sample, the median, 1.4826 × the median absolute deviation (a burst of multipath moves neither); at most 64 samples kept")
    func statistics() throws {
        let s = try #require(HeardSecond(samples: [-70, -71, -69, -70, -82], count: 5))
        #expect(s.count == 5 && s.rssi == -70)
        #expect(abs(s.spread - 1.4826) < 1e-6)
        #expect(HeardSecond(samples: [-60], count: 1) == HeardSecond(count: 1, rssi: -60, spread: 0))
        #expect(HeardSecond(samples: [], count: 0) == nil)
        var table = FoundDevicesTable()
        table.collectsSeconds = true
        for i in 0 ..< 100 { table.observe(PeerID("loud"), rssi: -60 - Double(i % 3), at: 10 + Double(i) / 100) }
        table.observe(PeerID("once"), rssi: -80, at: 10.5)
        _ = table.tick(at: 11)
        #expect(table.peers[PeerID("loud")]?.lastSecond == HeardSecond(count: 100, rssi: -61, spread: 1.4826))
        #expect(table.peers[PeerID("once")]?.lastSecond?.count == 1)
        table.observe(PeerID("once"), rssi: -81, at: 11.5)
        _ = table.tick(at: 12)
        #expect(table.peers[PeerID("loud")]?.lastSecond == nil, "not heard in the second before 12")
        #expect(table.peers[PeerID("once")]?.lastSecond == HeardSecond(count: 1, rssi: -81, spread: 0))
        var quiet = FoundDevicesTable()
        quiet.observe(PeerID("loud"), rssi: -60, at: 10)
        _ = quiet.tick(at: 11)
        #expect(quiet.peers[PeerID("loud")]?.lastSecond == nil, "nothing kept unless asked")
    }

    @Test("a node's batch: every peer heard in the second, by identifier, 100 to a message; the fleet parses it from <root>/<node>/hearings")
    func batches() throws {
        var node = NodeReporter(name: "kitchen", hearings: true)
        for i in 0 ..< 250 { node.hear(String(format: "ibeacon:%03d", i), rssi: -70, at: 10.2, measuredPower: -59) }
        let (peers, _) = node.report(at: 11)
        let batches = HearingBatch.batches(peers, at: 1_700_000_011.0004)
        #expect(batches.map(\.devices.count) == [100, 100, 50])
        #expect(batches[0].devices[0] == .init(id: "ibeacon:000", n: 1, rssi: -70, spread: 0, rssiAt1m: -59))
        #expect(batches[0].time == 1_700_000_011)
        let payload = MQTTJSON.encode(batches[2])
        #expect(payload.hasPrefix(#"{"devices":[{"id":"ibeacon:200","n":1,"rssi":-70,"rssi@1m":-59,"spread":0}"#), "\(payload)")
        let message = FleetMessage.parse(topic: NodeTopics(prefix: "proximityd/kitchen").hearings, payload: Array(payload.utf8), root: "proximityd",
                                         prefix: "proximity-fleet", discoveryPrefix: "homeassistant")
        #expect(message == .hearings(node: "kitchen", batches[2]))
        #expect(FleetMessage.parse(topic: "proximityd/kitchen/hearings", payload: Array("no".utf8), root: "proximityd", prefix: "proximity-fleet",
                                   discoveryPrefix: "homeassistant") == .hearings(node: "kitchen", nil))
    }

    @Test("the fleet places a device on the nodes' hearings of each second, not on their late reports: a report saying elsewhere moves nothing once a node sends its seconds; each second counts 2.5 s")
    func placedOnSeconds() {
        let plan = FleetPositionsTests.plan
        var configuration = FleetConfiguration()
        configuration.plan = plan
        var step = FleetStep(configuration)
        _ = step.connection(.connected, at: 0)
        var positions: [FleetPosition] = []
        for t in stride(from: 100.0, through: 120, by: 1) {
            for node in plan.nodes.map(\.name) {
                // The device is in the living room (x 1.5); the reports say the kitchen (x 8.5), as a
                // report from seconds before would.
                var report = FleetPositionsTests.report(plan, node: node, x: 8.5, y: 2)
                report.id = "tag"
                _ = step.receive(.report(node: node, device: "tag", report), at: t)
                let truth = FleetPositionsTests.report(plan, node: node, x: 1.5, y: 2)
                let second = HearingBatch.Device(id: "tag", n: 10, rssi: truth.rssiFiltered!, spread: 2, rssiAt1m: -59)
                _ = step.receive(.hearings(node: node, HearingBatch(time: t, devices: [second])), at: t)
            }
            for case .publish(let topic, let payload, _) in step.tick(at: t) where topic.hasSuffix("/position") {
                positions += MQTTJSON.decode(FleetPosition.self, from: Array(payload.utf8)).map { [$0] } ?? []
            }
        }
        let last = positions.last
        #expect(last?.room == "living" && (last?.x ?? 9) < 3, "\(positions)")
        #expect(step.positions?.hearings(of: "tag", at: 122.4).count == 4)
        #expect(step.positions?.hearings(of: "tag", at: 122.5).count == 0)
    }
}
