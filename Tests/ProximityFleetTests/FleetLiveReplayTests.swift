import Foundation
import Logging
import MQTTKit
import ProximityCore
import ProximityFleet
import ProximityMQTT
import ProximityTesting
import Synchronization
import Testing

/// Live and replay cannot differ: one trace through the fleet service as it runs (its executor,
/// a real Mosquitto, the topics parsed from the wire), and through `proximity-fleet replay`'s
/// ``FleetReplay``, on the same clock.
@Suite("the fleet service live and replayed", .serialized)
struct FleetLiveReplayTests {
    /// Four nodes at a 10 × 8 m floor's corners, four rooms.
    static let plan = FloorPlan(
        nodes: [.init(name: "a", position: PlanPoint(x: 0.5, y: 0.5, z: 2)), .init(name: "b", position: PlanPoint(x: 9.5, y: 0.5, z: 2)),
                .init(name: "c", position: PlanPoint(x: 9.5, y: 7.5, z: 2)), .init(name: "d", position: PlanPoint(x: 0.5, y: 7.5, z: 2))],
        rooms: [.init(name: "kitchen", floor: 0, polygon: [.init(x: 0, y: 0), .init(x: 5, y: 0), .init(x: 5, y: 4), .init(x: 0, y: 4)]),
                .init(name: "hall", floor: 0, polygon: [.init(x: 5, y: 0), .init(x: 10, y: 0), .init(x: 10, y: 4), .init(x: 5, y: 4)]),
                .init(name: "study", floor: 0, polygon: [.init(x: 5, y: 4), .init(x: 10, y: 4), .init(x: 10, y: 8), .init(x: 5, y: 8)]),
                .init(name: "living", floor: 0, polygon: [.init(x: 0, y: 4), .init(x: 5, y: 4), .init(x: 5, y: 8), .init(x: 0, y: 8)])])

    /// 90 s of two tags: one walking from the kitchen through the hall to the study at about
    /// 0.3 m/s, one lying in the living room; each node samples each 5 times a second, with a
    /// seeded 3 dB of noise.
    static func trace(start: Double) -> [TraceSample] {
        var seed: UInt64 = 11
        func gaussian() -> Double {
            func uniform() -> Double {
                seed = seed &* 6364136223846793005 &+ 1442695040888963407
                return (Double(seed >> 11) + 0.5) / Double(1 << 53)
            }
            return (-2 * log(uniform())).squareRoot() * cos(2 * .pi * uniform())
        }
        var out: [TraceSample] = []
        for tenth in stride(from: 0, to: 900, by: 2) {
            let t = Double(tenth) / 10
            let walker = t < 30 ? PlanPoint(x: 2, y: 2, z: 1) : t < 60 ? PlanPoint(x: 2 + (t - 30) * 0.2, y: 2, z: 1) : PlanPoint(x: 8, y: 2 + (t - 60) * 0.15, z: 1)
            for (device, at) in [("tag:walker", walker), ("tag:still", PlanPoint(x: 2, y: 6, z: 1))] {
                for node in plan.nodes {
                    let d = max(0.3, node.position.distance(to: at))
                    out.append(TraceSample(time: start + t, node: node.name, device: device, rssi: (-59 - 25 * log10(d) + 3 * gaussian()).rounded()))
                }
            }
        }
        return out
    }

    static func configuration() -> FleetConfiguration {
        var configuration = FleetConfiguration()
        configuration.plan = plan
        configuration.discovery = false
        return configuration
    }

    /// Waits, polling the service at most `timeout`, until `condition` holds of its step. Alone the
    /// whole test takes 2 s; in the parallel suite on two cores, 27 to 32 s, and one step once
    /// waited more than 20 s (CI, 2026-11-29) while the suite's heaviest tests started beside it.
    static func until(_ service: FleetService, _ what: String, timeout: Duration = .seconds(60),
                      _ condition: @escaping @Sendable (FleetStep) -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !(await service.read(condition)) {
            guard ContinuousClock.now < deadline else { throw TestKitError("the service: \(what), not within \(timeout)") }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    @Test("one trace through the service on a real Mosquitto and through replay: the same rooms and positions, published in the same order")
    func same() async throws {
        let start = 1_795_000_000.0
        let samples = Self.trace(start: start)
        let seconds = stride(from: start + 1, through: start + 90, by: 1).map { $0 }

        // Replay: the nodes' reports straight into the step.
        var replay = FleetReplay(Self.configuration())
        replay.keepPublications()
        var i = 0
        for t in seconds {
            while i < samples.count, samples[i].time <= t { replay.add(samples[i]); i += 1 }
            _ = replay.step(at: t)
        }
        let replayed = replay.publications.map { "\($0.topic)|\($0.payload)" }
        #expect(replayed.contains("proximity-fleet/devices/tag:walker/room|study") && replayed.contains("proximity-fleet/devices/tag:still/room|living"),
                "\(replayed.filter { $0.contains("/room|") })")

        // Live: the same reports published on the broker by the nodes' client, the service's
        // clock and ticks the trace's.
        try await MosquittoBroker.with { broker in
            let clock = Mutex(start)
            let (ticks, tick) = AsyncStream.makeStream(of: Void.self)
            let service = FleetService(Self.configuration(), broker: MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "fleet"),
                                       logger: Logger(label: "fleet"), now: { clock.withLock { $0 } })
            let running = Task { try await service.run(ticks: ticks) }
            defer { tick.finish(); running.cancel() }

            let published = EventRecorder<String>()
            let watcher = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "watcher"))
            let nodes = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "nodes"))
            let watching = Task {
                for await m in watcher.messages where m.topic.hasSuffix("/room") || m.topic.hasSuffix("/position") {
                    published.record("\(m.topic)|\(String(decoding: m.payload, as: UTF8.self))")
                }
            }
            defer { watching.cancel(); watcher.disconnect(); nodes.disconnect() }
            for client in [watcher, nodes] {
                let up = EventRecorder(recording: client.events) { event -> Bool? in if case .connected = event { true } else { nil } }
                client.connect()
                _ = try await up.require("a client connected", timeout: .seconds(10)) { $0 }
            }
            try await watcher.subscribe("proximity-fleet/devices/#")
            // The service has subscribed to the nodes' reports once it took a retained one (of a
            // node outside the plan: ignored, so both sides have the same inputs).
            try nodes.send("proximityd/probe/peers/probe", MQTTJSON.encode(PeerReport.gone("probe", at: start)), qos: 1, retain: true)
            try await Self.until(service, "takes the reports") { $0.reportsTaken >= 1 }

            var source = FleetReplay(Self.configuration())
            var j = 0
            for t in seconds {
                while j < samples.count, samples[j].time <= t { source.add(samples[j]); j += 1 }
                let reports = source.nodeMessages(at: t)
                clock.withLock { $0 = t }
                let taken = await service.read(\.reportsTaken)
                for m in reports { try nodes.send(m.topic, m.payload, qos: 1) }
                try await Self.until(service, "takes the \(reports.count) reports of \(t) after \(taken)") { $0.reportsTaken == taken + reports.count }
                tick.yield()
                try await Self.until(service, "ticks at \(t)") { $0.lastTick == t }
            }
            _ = try await published.require("every publication", from: max(0, replayed.count - 1), timeout: .seconds(20)) { _ in true }
            #expect(published.events == replayed)
        }
    }
}
