import Foundation
import MQTTKit
import ProximityMQTT
import ProximityTesting
import Testing

/// `proximity-fleet run --plan` calibrating itself on a real broker: the plan's nodes state their
/// identities (retained `P/state`) and report each other, as nodes do; the fit goes out on
/// `proximity-fleet/calibration`, and `proximityctl fleet calibration` shows it.
@Suite("the fleet calibrating itself, end to end", .serialized)
struct FleetCalibrationEndToEndTests {
    static let identities = ["alpha": "0a0a0a0a-0000-4000-8000-000000000001", "bravo": "0a0a0a0a-0000-4000-8000-000000000002",
                             "charlie": "0a0a0a0a-0000-4000-8000-000000000003", "delta": "0a0a0a0a-0000-4000-8000-000000000004"]
    /// How many dB high each node's receiver reads.
    static let bias = ["alpha": 6.0, "bravo": -4.0, "charlie": 2.0, "delta": -5.0]

    @Test("the nodes' reports of each other: a fit on proximity-fleet/calibration whose offsets undo the biases, the matrix in proximityctl fleet calibration")
    func calibrates() async throws {
        try await FleetPositionsEndToEndTests.withDirectory { directory in
            let planFile = directory.appendingPathComponent("plan.yaml").path
            try FleetPositionsEndToEndTests.plan().write(toFile: planFile, atomically: true, encoding: .utf8)
            try await MosquittoBroker.with { broker in
                let sub = try await Subscriber.start(broker, ["proximity-fleet/calibration"])
                let nodes = try await FleetPositionsEndToEndTests.connectedNodes(broker)
                defer { nodes.disconnect() }
                for (node, id) in Self.identities {
                    let state = NodeStatePayload(id: id, name: node, adapter: "hci0", advertising: true, discovering: true, peers: 3, rssiOffset: 0, outboxDropped: 0)
                    try nodes.send("proximityd/\(node)/state", MQTTJSON.encode(state), retain: true)
                }
                let fleet = try FleetPositionsEndToEndTests.fleet(broker, plan: planFile)
                let feed = Task {
                    while !Task.isCancelled {
                        for (rx, p) in FleetPositionsEndToEndTests.nodes {
                            for (tx, q) in FleetPositionsEndToEndTests.nodes where tx != rx {
                                let d = ((p.x - q.x) * (p.x - q.x) + (p.y - q.y) * (p.y - q.y)).squareRoot()
                                let rssi = (-59 - 25 * log10(d) + Self.bias[rx]!) * 10
                                let id = Self.identities[tx]!
                                let report = PeerReport(id: id, kind: "node", rssi: nil, rssiAt1m: -59, distance: MQTTRounding.metres(d),
                                                        proximity: nil, time: nil, rssiFiltered: rssi.rounded() / 10, rssiSpread: 1, samples: 10)
                                try? nodes.send("proximityd/\(rx)/peers/\(id)", MQTTJSON.encode(report), qos: 0)
                            }
                        }
                        try? await Task.sleep(for: .milliseconds(500))
                    }
                }
                defer { feed.cancel() }
                #expect(await sub.wait("proximity-fleet/calibration"), "\(fleet.stderr)")
                let payload = try #require(MQTTJSON.decode(FleetCalibrationPayload.self, from: Array((sub.payloads("proximity-fleet/calibration").last ?? "").utf8)))
                #expect(payload.pairs.count == 12 && payload.nodes.count == 4, "\(payload)")
                let offsets = Dictionary(uniqueKeysWithValues: payload.nodes.map { ($0.name, $0.rxOffset ?? .nan) })
                let shift = (offsets.values.reduce(0, +) + Self.bias.values.reduce(0, +)) / 4
                for (node, b) in Self.bias { #expect(abs(offsets[node]! + b - shift) < 1, "\(node): \(offsets)") }

                let shown = try await runCommand(BuiltProducts.path("proximityctl"),
                                                 ["fleet", "calibration", "--broker", "mqtt://127.0.0.1:\(broker.port)", "--count", "1"])
                #expect(shown.status == 0, "\(shown)")
                let lines = shown.stdout.split(separator: "\n").map(String.init)
                #expect(lines.first?.hasPrefix("proximity-fleet calibration — path-loss exponent ") == true, "\(shown.stdout)")
                #expect(lines.contains { $0.hasPrefix("NODE") && $0.contains("RX OFFSET") }, "\(shown.stdout)")
                #expect(lines.contains { $0.hasPrefix("alpha") && $0.contains("-") } && lines.contains("who hears whom: RSSI dBm (residual dB); rows receive, columns transmit"),
                        "\(shown.stdout)")
                await fleet.stop()
                #expect(fleet.exitStatus == 0)
                #expect(fleet.stderr.contains("calibration fitted"), "\(fleet.stderr)")
                await sub.stop()
            }
        }
    }
}
