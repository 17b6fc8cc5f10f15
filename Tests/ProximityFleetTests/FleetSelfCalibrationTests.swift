import Foundation
import ProximityCore
@testable import ProximityFleet
import ProximityMQTT
import Testing

/// The fleet calibrating itself from the plan's nodes hearing each other (their reports of each
/// other, named by identity), on an injected clock.
@Suite struct FleetSelfCalibrationTests {
    static let plan = FleetPositionsTests.plan
    /// Each node's identity, as the others report it.
    static let identities = ["alpha": "0a0a0a0a-0000-4000-8000-000000000001", "bravo": "0a0a0a0a-0000-4000-8000-000000000002",
                             "charlie": "0a0a0a0a-0000-4000-8000-000000000003", "delta": "0a0a0a0a-0000-4000-8000-000000000004"]
    /// How many dB high each node's receiver reads.
    static let bias = ["alpha": 6.0, "bravo": -4.0, "charlie": 2.0, "delta": -5.0]

    @Test("the nodes' reports of each other become the calibration: after a minute a fit whose offsets undo the receivers' biases, the model every device's estimator uses, and the payload with the matrix")
    func selfCalibrates() throws {
        var positions = FleetPositions(plan: Self.plan, staleAfter: 12)
        for (node, id) in Self.identities { positions.learn(node: node, identity: id) }
        for s in 0 ... 60 {
            let t = Double(s)
            for receiver in Self.plan.nodes {
                for transmitter in Self.plan.nodes where transmitter.name != receiver.name {
                    let d = receiver.position.distance(to: transmitter.position)
                    let rssi = -59 - 25 * log10(d) + Self.bias[receiver.name]!
                    let report = PeerReport(id: Self.identities[transmitter.name]!, kind: "node", rssi: Int(rssi.rounded()), rssiAt1m: -59,
                                            distance: d, proximity: "near", time: nil, rssiFiltered: rssi, rssiSpread: 1, samples: 10)
                    positions.hear(device: Self.identities[transmitter.name]!.uppercased(), node: receiver.name, report: report, at: t)
                }
            }
            // A tag, so there is a device to place.
            for node in ["alpha", "bravo"] {
                positions.hear(device: "tag", node: node, report: FleetPositionsTests.report(Self.plan, node: node, x: 2, y: 2), at: t)
            }
            _ = positions.step(at: t)
        }
        let fit = try #require(positions.calibration.fit)
        let shift = (fit.rxOffsets.values.reduce(0, +) + Self.bias.values.reduce(0, +)) / 4
        for (node, b) in Self.bias { #expect(abs(fit.rxOffsets[node]! + b - shift) < 1, "\(node): \(fit.rxOffsets)") }
        #expect(positions.model.rxOffsets == fit.rxOffsets && positions.model.exponent == fit.exponent)
        let payload = try #require(positions.calibrationPayload(epoch: 1_800_000_060))
        #expect(payload.pairs.count == 12 && payload.nodes.map(\.name) == ["alpha", "bravo", "charlie", "delta"])
        #expect(payload.nodes.allSatisfy { $0.drift == nil && $0.rxOffset != nil })
        // Not a plan node's identity: not a calibration hearing.
        #expect(positions.calibration.pairs.count == 12)
    }

    @Test("without the nodes' identities (no state seen) their reports of each other are not taken for calibration")
    func needsIdentities() {
        var positions = FleetPositions(plan: Self.plan, staleAfter: 12)
        let report = PeerReport(id: Self.identities["bravo"]!, kind: "node", rssi: -70, rssiAt1m: -59, distance: 4, proximity: "far", time: nil,
                                rssiFiltered: -70, rssiSpread: 1, samples: 10)
        positions.hear(device: Self.identities["bravo"]!, node: "alpha", report: report, at: 0)
        #expect(positions.calibration.pairs.isEmpty)
    }
}
