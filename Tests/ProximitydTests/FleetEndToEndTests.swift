import Foundation
import MQTTKit
import ProximityMQTT
import ProximityTesting
import Testing

/// `proximity-fleet` on a real broker, fed reports as two nodes publish them (this test, through
/// MQTTKit), checked with `mosquitto_sub` and `proximityctl fleet`.
@Suite("the fleet service end to end", .serialized)
struct FleetEndToEndTests {
    static func fleet(_ broker: MosquittoBroker, _ extra: [String] = []) throws -> ManagedProcess {
        try ManagedProcess(BuiltProducts.path("proximity-fleet"),
                           ["--broker", "mqtt://127.0.0.1:\(broker.port)", "--stale-after", "3", "--away-after", "6",
                            "--log-level", "debug"] + extra)
    }

    /// Publishes `distances` (node → metres) of `device` every 0.5 s until cancelled.
    static func report(_ client: MQTTClient, _ device: String, _ distances: [String: Double]) -> Task<Void, Never> {
        Task {
            while !Task.isCancelled {
                for (node, d) in distances {
                    try? client.send("proximityd/\(node)/peers/\(device)", payload(device, distance: d), qos: 0)
                }
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
    }

    @Test("rooms follow the nearest node with hysteresis, go not_home when nobody hears the device, and come back from the retained messages after a restart; device_tracker discovery with the service's availability; proximityctl fleet shows the table")
    func rooms() async throws {
        try await MosquittoBroker.with { broker in
            let sub = try await Subscriber.start(broker, ["proximity-fleet/#", "homeassistant/device_tracker/#"])
            var fleet = try Self.fleet(broker)
            let nodes = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "test-nodes"))
            nodes.connect()
            defer { nodes.disconnect() }
            #expect(await sub.wait("proximity-fleet/status", payload: "online"))
            let room = "proximity-fleet/devices/tag1/room"

            // Nearer the kitchen: the kitchen.
            var feed = Self.report(nodes, "tag1", ["kitchen": 1.0, "hall": 6.0])
            #expect(await sub.wait(room, payload: "kitchen"))
            let tracker = "homeassistant/device_tracker/proximity_fleet_tag1/config"
            #expect(await sub.wait(tracker))
            let config = try #require(try JSONSerialization.jsonObject(with: Data((sub.payloads(tracker).first ?? "").utf8)) as? [String: Any])
            #expect(config["source_type"] as? String == "bluetooth_le")
            #expect(config["availability_topic"] as? String == "proximity-fleet/status")
            #expect(config["state_topic"] as? String == room)
            #expect(config["payload_not_home"] as? String == "not_home")

            // proximityctl fleet: the table, once (once the service has published one with the room
            // and both nodes' readings; the two reports of a round arrive one after the other).
            #expect(await sub.process.waitForOutput { out in
                out.split(separator: "\n").contains { line in
                    guard line.hasPrefix("proximity-fleet/table|"),
                          let table = MQTTJSON.decode(FleetTable.self, from: line.dropFirst("proximity-fleet/table|".count).utf8),
                          let tag = table.devices.first(where: { $0.id == "tag1" }) else { return false }
                    return tag.room == "kitchen" && Set(tag.readings.map(\.node)) == ["kitchen", "hall"]
                }
            })
            let table = try await runCommand(BuiltProducts.path("proximityctl"),
                                             ["fleet", "--broker", "mqtt://127.0.0.1:\(broker.port)", "--count", "1"])
            #expect(table.status == 0, "\(table)")
            #expect(table.stdout.contains("tag1") && table.stdout.contains("kitchen") && table.stdout.contains("hall"), "\(table)")

            // Nearer the hall, clearly: the hall (the hysteresis itself: RoomDeciderTests and fleet-bench).
            feed.cancel()
            feed = Self.report(nodes, "tag1", ["kitchen": 6.0, "hall": 1.0])
            #expect(await sub.wait(room, payload: "hall"))
            #expect(!sub.payloads(room).contains("not_home"))

            // A restart: the room comes back from the broker, and is not published again.
            await fleet.stop()
            #expect(fleet.exitStatus == 0)
            #expect(await sub.wait("proximity-fleet/status", payload: "offline"))
            let published = sub.payloads(room).count
            fleet = try Self.fleet(broker)
            try await fleet.waitForOutput(containing: "room taken back", inStderr: true)
            #expect(fleet.stderr.contains("device=tag1") && fleet.stderr.contains("room=hall"), "\(fleet.stderr)")
            #expect(await sub.wait("proximity-fleet/status", payload: "online", count: 2))

            // Nobody hears it: not_home after the away limit.
            feed.cancel()
            #expect(await sub.wait(room, payload: "not_home", timeout: .seconds(30)))
            #expect(sub.payloads(room).count == published + 1, "\(sub.payloads(room))")

            // Killed: the broker says offline for it (its will).
            fleet.signal(SIGKILL)
            #expect(await sub.wait("proximity-fleet/status", payload: "offline", count: 2))
            await sub.stop()
        }
    }
}

extension FleetEndToEndTests {
    /// A node's report of `device` as the node writes it (``PeerReport``): the fields the fleet reads.
    static func payload(_ device: String, distance: Double, kind: String? = nil, name: String? = nil) -> String {
        MQTTJSON.encode(PeerReport(id: device, kind: kind, rssi: nil, rssiAt1m: nil, distance: distance, proximity: nil, time: nil, name: name))
    }

    @Test("issue 34: a second service with the same topics refuses to start (exit 75, naming the broker) and the first never blinks offline; after a broker restart without persistence every retained state is back, the rooms' occupancy too")
    func manners() async throws {
        try await MosquittoBroker.with { broker in
            let sub = try await Subscriber.start(broker, ["proximity-fleet/#"])
            let fleet = try Self.fleet(broker, ["--keepalive", "5"])
            let nodes = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "test-nodes"))
            nodes.connect()
            defer { nodes.disconnect() }
            #expect(await sub.wait("proximity-fleet/status", payload: "online"))
            let feed = Self.report(nodes, "tag1", ["kitchen": 1.0, "hall": 6.0])
            defer { feed.cancel() }
            let room = "proximity-fleet/devices/tag1/room"
            #expect(await sub.wait(room, payload: "kitchen"))
            #expect(await sub.wait("proximity-fleet/rooms/kitchen") { MQTTJSON.decode(FleetRoomOccupancy.self, from: $0.utf8)?.count == 1 })

            // A second service on the same topics, by mistake: it waits for the first's will
            // (1.5 keepalives and 5 s), then refuses; the first stays online throughout.
            let second = try Self.fleet(broker, ["--keepalive", "5"])
            let status = try await second.waitForExit(timeout: .seconds(60))
            #expect(status == 75, "\(second.stderr)")
            #expect(second.stderr.contains("error: another proximity-fleet is online on mqtt://127.0.0.1:\(broker.port)"), "\(second.stderr)")
            #expect(sub.payloads("proximity-fleet/status") == ["online"], "\(sub.payloads("proximity-fleet/status"))")
            #expect(fleet.exitStatus == nil)

            // The broker restarts and forgets every retained message: the service publishes its own again.
            await sub.stop()
            try await broker.restart()
            let after = try await Subscriber.start(broker, ["proximity-fleet/#"])
            #expect(await after.wait(room, payload: "kitchen", timeout: .seconds(30)))
            #expect(await after.wait("proximity-fleet/devices/tag1/attributes"))
            #expect(await after.wait("proximity-fleet/rooms/kitchen") { MQTTJSON.decode(FleetRoomOccupancy.self, from: $0.utf8)?.count == 1 })
            #expect(await after.wait("proximity-fleet/status", payload: "online"))
            await after.stop()
            await fleet.stop()
            #expect(fleet.exitStatus == 0)
        }
    }

    /// Publishes `payload` as `node`'s report of `device` every 0.5 s until cancelled.
    static func report(_ client: MQTTClient, node: String, _ device: String, _ payload: String) -> Task<Void, Never> {
        Task {
            while !Task.isCancelled {
                try? client.send("proximityd/\(node)/peers/\(device)", payload, qos: 0)
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
    }

    static func json(_ text: String?) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data((text ?? "").utf8)) as? [String: Any])
    }

    @Test("names: the device_tracker is named after its device (entity name null), which takes the name the nodes report, again when it arrives late; a tracked node is its own node's device; the table and proximityctl fleet show the name")
    func names() async throws {
        try await MosquittoBroker.with { broker in
            let sub = try await Subscriber.start(broker, ["proximity-fleet/table", "homeassistant/device_tracker/#"])
            let fleet = try Self.fleet(broker)
            let nodes = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "test-nodes"))
            nodes.connect()
            defer { nodes.disconnect() }

            // A badge, first without a name, then with one: discovered again with it.
            let badge = "ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:10:1"
            let badgeConfig = "homeassistant/device_tracker/proximity_fleet_\(MQTTTopic.objectID(badge))/config"
            var feed = Self.report(nodes, node: "kitchen", badge, Self.payload(badge, distance: 1, kind: "ibeacon"))
            #expect(await sub.wait(badgeConfig))
            let unnamed = try Self.json(sub.payloads(badgeConfig).first)
            #expect(unnamed["name"] is NSNull, "\(unnamed)")
            #expect((unnamed["device"] as? [String: Any])?["name"] as? String == badge)
            feed.cancel()
            feed = Self.report(nodes, node: "kitchen", badge, Self.payload(badge, distance: 1, kind: "ibeacon", name: "Anna's badge"))
            #expect(await sub.wait(badgeConfig, count: 2))
            let named = try Self.json(sub.payloads(badgeConfig).last)
            #expect(named["name"] is NSNull && named["unique_id"] as? String == unnamed["unique_id"] as? String, "\(named)")
            let device = try #require(named["device"] as? [String: Any])
            #expect(device["name"] as? String == "Anna's badge")
            #expect(device["identifiers"] as? [String] == ["proximity_fleet_\(MQTTTopic.objectID(badge))"])

            // A node tracked by another: the device of the node's own entities.
            let node = "0f8e62a4-5c1e-4a57-9f0a-3b6c2d1e7f90"
            let nodeFeed = Self.report(nodes, node: "kitchen", node, Self.payload(node, distance: 2, kind: "node", name: "meeting"))
            defer { nodeFeed.cancel() }
            let nodeConfig = "homeassistant/device_tracker/proximity_fleet_\(node)/config"
            #expect(await sub.wait(nodeConfig))
            let tracked = try #require(try Self.json(sub.payloads(nodeConfig).last)["device"] as? [String: Any])
            #expect(tracked["identifiers"] as? [String] == ["proximityd_\(node)"] && tracked["name"] as? String == "meeting", "\(tracked)")
            #expect(tracked["model"] as? String == "proximityd node")

            // The table: the name beside the identifier.
            #expect(await sub.process.waitForOutput { out in
                out.split(separator: "\n").contains { line in
                    guard line.hasPrefix("proximity-fleet/table|"),
                          let table = MQTTJSON.decode(FleetTable.self, from: line.dropFirst("proximity-fleet/table|".count).utf8) else { return false }
                    return table.devices.contains { $0.id == badge && $0.name == "Anna's badge" }
                        && table.devices.contains { $0.id == node && $0.name == "meeting" }
                }
            })
            let text = try await runCommand(BuiltProducts.path("proximityctl"), ["fleet", "--broker", "mqtt://127.0.0.1:\(broker.port)", "--count", "1"])
            let rows = text.stdout.split(separator: "\n").map { $0.split(separator: " ").joined(separator: " ") }
            #expect(rows.contains { $0.hasPrefix("Anna's badge kitchen kitchen") && $0.hasSuffix(badge) }, "\(text)")
            feed.cancel()
            await fleet.stop()
            #expect(fleet.exitStatus == 0)
            await sub.stop()
        }
    }
}

@Suite("the fleet service and a mobile node", .serialized)
struct FleetMobileNodeTests {
    @Test("a node whose retained state says role mobile is never a room, however near; a fixed node's reports decide")
    func mobileNodeIsNoRoom() async throws {
        try await MosquittoBroker.with { broker in
            let nodes = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "test-nodes"))
            let connected = EventRecorder(recording: nodes.events) { event -> Bool? in if case .connected = event { true } else { nil } }
            nodes.connect()
            defer { nodes.disconnect() }
            _ = try await connected.require("the nodes' client connected", timeout: .seconds(10)) { $0 }
            // The cart's state, retained as a node publishes it, before the service starts.
            let cart = NodeStatePayload(id: "c0ffee00-0000-4000-8000-000000000001", name: "cart", adapter: "hci0", advertising: true,
                                        discovering: true, peers: 1, rssiOffset: 0, outboxDropped: 0, role: "mobile")
            try await nodes.publish("proximityd/cart/state", MQTTJSON.encode(cart), qos: 1, retain: true)
            let sub = try await Subscriber.start(broker, ["proximity-fleet/#"])
            let fleet = try FleetEndToEndTests.fleet(broker)
            #expect(await sub.wait("proximity-fleet/status", payload: "online"))
            let feed = FleetEndToEndTests.report(nodes, "tag1", ["cart": 0.5, "kitchen": 2.0])
            let room = "proximity-fleet/devices/tag1/room"
            #expect(await sub.wait(room, payload: "kitchen"))
            // A table with the kitchen's reading and the room: the cart's reports are not in it.
            #expect(await sub.process.waitForOutput { out in
                out.split(separator: "\n").contains { line in
                    guard line.hasPrefix("proximity-fleet/table|"),
                          let table = MQTTJSON.decode(FleetTable.self, from: line.dropFirst("proximity-fleet/table|".count).utf8),
                          let tag = table.devices.first(where: { $0.id == "tag1" }) else { return false }
                    return tag.room == "kitchen" && tag.readings.map(\.node) == ["kitchen"]
                }
            })
            #expect(!sub.payloads(room).contains("cart"), "\(sub.payloads(room))")
            feed.cancel()
            await fleet.stop()
            await sub.stop()
        }
    }
}
