import BlueZSim
import DBusKit
import Foundation
import ProximityCore
import ProximityNode
import NodeTesting
import ProximityTesting
import Testing
import SimTesting

/// The engine itself (stages, Identifier, exporter) in this process, on the simulation's clock:
/// bluez-sim's air, two nodes and their BlueZ on private buses, time moved by the test. A
/// 10-minute ban passes in well under a second of real time; nothing sleeps.
@Suite("identification in simulated time", .serialized)
struct IdentificationSimulationTests {
    /// Two nodes 1 m apart, every connection failing until the test says otherwise.
    static func scenario() -> Scenario {
        var scenario = twoBoxes(distance: 1, seed: 3)
        scenario.radio.connectionFailureRate = 1
        return scenario
    }

    @Test("attempts back off 1, 2, 4 … 60 s and stop after 8; the higher address yields 30 s; once connections succeed one link identifies both")
    func backoffBanYieldAndHello() async throws {
        try await withSimBoxes(Self.scenario(), time: .simulated) { boxes in
            // alpha is AA:00:00:00:00:01 and connects; beta, AA:00:00:00:00:02, yields.
            try await withNode("alpha", on: boxes) { alpha in try await withNode("beta", on: boxes) { beta in
                let failed = { (node: NodeRunner, peer: String) in
                    node.log.entries("identification failed", ["peer.address": peer]).filter { $0.message == "identification failed" }
                }

                // Alpha: eight attempts, each after the backoff of the one before, then a ban.
                #expect(try await boxes.advance(until: 300, keepingUp: [alpha, beta]) {
                    !alpha.log.entries("leaving the peer alone", ["peer.address": "AA:00:00:00:00:02"]).isEmpty
                }, "alpha never gave up: \(alpha.log.entries.suffix(20))")
                let times = failed(alpha, "AA:00:00:00:00:02").map(\.time)
                #expect(times.count == 8, "\(times)")
                let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
                for (gap, backoff) in zip(gaps, [1.0, 2, 4, 8, 16, 32, 60]) {
                    #expect(gap >= backoff && gap < backoff + 2, "gaps \(gaps)")
                }
                // Beta waited 30 s for alpha's hello before connecting itself.
                let betaFirst = try #require(beta.log.entries("connecting to identify a peer", ["peer.address": "AA:00:00:00:00:01"]).first)
                #expect(betaFirst.time >= 30, "beta connected at \(betaFirst.time)")
                #expect(!beta.log.entries("the peer did not introduce itself").isEmpty)

                // Connections work again: whoever connects next identifies both in one link.
                try await boxes.control("Configure", [.vardict(["ConnectionFailureRate": .double(0)])])
                let banned = boxes.simulator.clock.now
                let bothKnown = try await boxes.advance(until: 700, keepingUp: [alpha, beta]) {
                    alpha.events.events.contains { $0.identification != nil } && beta.events.events.contains { $0.identification != nil }
                }
                #expect(bothKnown, "alpha \(alpha.log.entries.suffix(5)) beta \(beta.log.entries.suffix(5))")
                let (alphaKnows, betaKnows) = (await alpha.identities, await beta.identities)
                #expect(alphaKnows.count == 1 && betaKnows.count == 1, "\(alphaKnows) \(betaKnows)")
                // Alpha stayed banned meanwhile: it made no attempt before its ten minutes were up,
                // unless beta's hello came first.
                let alphaAfter = alpha.log.entries("connecting to identify a peer").filter { $0.time > banned }
                #expect(alphaAfter.allSatisfy { $0.time >= times.last! + 600 }, "\(alphaAfter)")
                // One link: one node read the other's identity over GATT, the other got its hello.
                let identifications = (alpha.events.events + beta.events.events).compactMap(\.identification)
                #expect(identifications.filter { !$0.introduced }.count == 1 && identifications.filter(\.introduced).count == 1,
                        "\(identifications)")
            } }
        }
    }

    @Test("a peer at a new address is identified again there, and the old address forgotten")
    func addressChange() async throws {
        var scenario = twoBoxes(distance: 1, seed: 4)
        scenario.radio.connectionFailureRate = 0
        try await withSimBoxes(scenario, time: .simulated) { boxes in
            try await withNode("alpha", on: boxes) { alpha in try await withNode("beta", on: boxes) { beta in
                #expect(try await boxes.advance(until: 20, keepingUp: [alpha, beta]) { await alpha.identities["AA:00:00:00:00:02"] != nil })
                let identity = await alpha.identities["AA:00:00:00:00:02"]
                // The event reaches the recorder after the engine's state shows it: waited for.
                let first = try #require(await alpha.events.wait(timeout: .seconds(10)) { $0.identification != nil }?.identification)
                #expect(first.address == "AA:00:00:00:00:02")
                // Beta's private address rotates: identified again at the new one (by whichever side
                // the coin picks).
                try await boxes.control("SetAddress", [.string("beta"), .string("AA:00:00:00:00:09")])
                #expect(try await boxes.advance(until: 20, keepingUp: [alpha, beta]) { await alpha.identities["AA:00:00:00:00:09"] != nil })
                #expect(await alpha.identities == ["AA:00:00:00:00:09": identity!])
                // The same peer, identified again at its new address.
                let again = try #require(await alpha.events.wait(timeout: .seconds(10)) { $0.identification?.address == "AA:00:00:00:00:09" })
                #expect(again.identification?.peer == first.peer)
            } }
        }
    }
}

extension NodeRunner {
    /// `GetIdentities` as the engine answers it.
    var identities: [String: String] {
        get async { await engine.read { $0.identities } }
    }
}
