import Foundation
import MQTTKit
import ProximityMQTT
import ProximityTesting
import Testing

/// `proximity-fleet run --plan` on a real broker, fed reports as nodes publish them (this test,
/// through MQTTKit): positions and rooms from the plan's outlines, a node outside the plan ignored
/// (or, with `--outside-nodes nearest`, giving nearest-node rooms), Home Assistant's room sensor
/// and attributes, a bad plan at start and on SIGHUP.
@Suite("the fleet service with a floor plan, end to end", .serialized)
struct FleetPositionsEndToEndTests {
    /// Two rooms side by side on one floor, four nodes in their corners, not named after the rooms.
    static func plan(living: String = "living") -> String {
        """
        floors:
          - name: ground
            z: [0, 3]
        nodes:
          - name: alpha
            position: [0.5, 0.5, 1]
          - name: bravo
            position: [4.5, 3.5, 1]
          - name: charlie
            position: [9.5, 0.5, 1]
          - name: delta
            position: [9.5, 3.5, 1]
        rooms:
          - name: \(living)
            polygon: [[0, 0], [5, 0], [5, 4], [0, 4]]
          - name: kitchen
            polygon: [[5, 0], [10, 0], [10, 4], [5, 4]]

        """
    }

    static let nodes: [String: (x: Double, y: Double)] = ["alpha": (0.5, 0.5), "bravo": (4.5, 3.5), "charlie": (9.5, 0.5), "delta": (9.5, 3.5)]

    /// A temporary directory for the plan files, removed at the end.
    static func withDirectory<T>(_ body: (URL) async throws -> T) async throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-plan-\(getpid())-\(UInt32.random(in: 0 ... .max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        return try await body(directory)
    }

    static func fleet(_ broker: MosquittoBroker, plan: String, _ extra: [String] = []) throws -> ManagedProcess {
        try ManagedProcess(BuiltProducts.path("proximity-fleet"),
                           ["run", "--broker", "mqtt://127.0.0.1:\(broker.port)", "--stale-after", "3", "--away-after", "6",
                            "--plan", plan, "--log-level", "debug"] + extra)
    }

    /// The same plan with the garage's box in it, in a room of its own east of the kitchen.
    static func planWithGarage() -> String {
        plan().replacingOccurrences(of: "rooms:\n", with: "  - name: garage\n    position: [13, 2, 1]\nrooms:\n")
            .trimmingCharacters(in: .newlines) + "\n  - name: garage\n    polygon: [[10, 0], [16, 0], [16, 4], [10, 4]]\n"
    }

    /// A node's report of `device` at `d` metres, as the path-loss model expects it (−59 dBm at
    /// 1 m, exponent 2.5).
    static func hearing(_ device: String, distance d: Double) -> String {
        let rssi = -59 - 25 * log10(d)
        return MQTTJSON.encode(PeerReport(id: device, kind: nil, rssi: Int(rssi.rounded()), rssiAt1m: -59, distance: MQTTRounding.metres(d),
                                          proximity: nil, time: nil, rssiFiltered: (rssi * 10).rounded() / 10, rssiSpread: 2, samples: 20))
    }

    /// What each node of the plan publishes of `device` standing at (x, y) (``hearing(_:distance:)``),
    /// every 0.5 s until cancelled; `extra` adds other nodes' reports as they are (node → distance,
    /// without the positioning's fields).
    static func walk(_ client: MQTTClient, _ device: String, at x: Double, _ y: Double, extra: [String: Double] = [:]) -> Task<Void, Never> {
        var payloads: [String: String] = [:]
        for (node, p) in nodes {
            payloads[node] = hearing(device, distance: max(0.3, ((x - p.x) * (x - p.x) + (y - p.y) * (y - p.y)).squareRoot()))
        }
        for (node, d) in extra { payloads[node] = FleetEndToEndTests.payload(device, distance: d) }
        let messages = payloads
        return Task {
            while !Task.isCancelled {
                for (node, payload) in messages { try? client.send("proximityd/\(node)/peers/\(device)", payload, qos: 0) }
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
    }

    static func json(_ text: String?) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data((text ?? "").utf8)) as? [String: Any])
    }

    static func connectedNodes(_ broker: MosquittoBroker) async throws -> MQTTClient {
        let nodes = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "test-nodes"))
        let connected = EventRecorder(recording: nodes.events) { event -> Bool? in if case .connected = event { true } else { nil } }
        nodes.connect()
        _ = try await connected.require("the nodes' client connected", timeout: .seconds(10)) { $0 }
        return nodes
    }

    @Test("with a plan: the position on P/devices/<device>/position and the room from the outline holding it, following a move; with --outside-nodes nearest, a device heard only by a node outside the plan gets its nearest-node room, also once the plan's nodes stop hearing a placed one (its position deleted); the room sensor and the tracker's position attributes in Home Assistant; the table and proximityctl fleet show the position")
    func positions() async throws {
        try await Self.withDirectory { directory in
            let planFile = directory.appendingPathComponent("plan.yaml").path
            try Self.plan().write(toFile: planFile, atomically: true, encoding: .utf8)
            try await MosquittoBroker.with { broker in
                let sub = try await Subscriber.start(broker, ["proximity-fleet/#", "homeassistant/#"])
                let fleet = try Self.fleet(broker, plan: planFile, ["--outside-nodes", "nearest"])
                let nodes = try await Self.connectedNodes(broker)
                defer { nodes.disconnect() }
                #expect(await sub.wait("proximity-fleet/status", payload: "online"))
                let room = "proximity-fleet/devices/tag1/room", position = "proximity-fleet/devices/tag1/position"

                // In the living room, 1.5 m from alpha; the garage (outside the plan) hears it too,
                // farther: the plan's nodes place it.
                var feed = Self.walk(nodes, "tag1", at: 2, 2, extra: ["garage": 4.0])
                // A second device only the garage hears: the garage's room, as without a plan.
                let other = FleetEndToEndTests.report(nodes, node: "garage", "tag2", FleetEndToEndTests.payload("tag2", distance: 1.5))
                defer { other.cancel() }
                #expect(await sub.wait(room, payload: "living"), "\(fleet.stderr)")
                #expect(await sub.wait("proximity-fleet/devices/tag2/room", payload: "garage"))
                #expect(await sub.wait(position))
                let first = try Self.json(sub.payloads(position).last)
                let (x, y) = (try #require(first["x"] as? Double), try #require(first["y"] as? Double))
                #expect(((x - 2) * (x - 2) + (y - 2) * (y - 2)).squareRoot() < 1.5, "\(first)")
                #expect(first["room"] as? String == "living" && first["floor"] as? String == "ground", "\(first)")
                #expect(first["uncertainty"] is Double && first["time"] is Double && first["z"] is Double, "\(first)")
                #expect(sub.payloads("proximity-fleet/devices/tag2/position").isEmpty)

                // Home Assistant: the tracker as before, and a Room sensor on the same device.
                let tracker = "homeassistant/device_tracker/proximity_fleet_tag1/config"
                let sensor = "homeassistant/sensor/proximity_fleet_tag1/room/config"
                #expect(await sub.wait(tracker))
                #expect(await sub.wait(sensor))
                let trackerConfig = try Self.json(sub.payloads(tracker).last)
                let sensorConfig = try Self.json(sub.payloads(sensor).last)
                #expect(trackerConfig["name"] is NSNull && sensorConfig["name"] as? String == "Room", "\(sensorConfig)")
                #expect(sensorConfig["state_topic"] as? String == room && sensorConfig["availability_topic"] as? String == "proximity-fleet/status")
                #expect(sensorConfig["unique_id"] as? String == "proximity_fleet_tag1_room")
                let trackerDevice = try #require(trackerConfig["device"] as? [String: Any])
                let sensorDevice = try #require(sensorConfig["device"] as? [String: Any])
                #expect(sensorDevice["identifiers"] as? [String] == ["proximity_fleet_tag1"])
                #expect(trackerDevice["identifiers"] as? [String] == sensorDevice["identifiers"] as? [String])
                #expect(await sub.wait("homeassistant/sensor/proximity_fleet_tag2/room/config"))
                // The tracker's attributes: where, on which floor, how sure.
                let attributesTopic = try #require(trackerConfig["json_attributes_topic"] as? String)
                #expect(await sub.process.waitForOutput { out in
                    out.split(separator: "\n").contains { line in
                        line.hasPrefix(attributesTopic + "|") && line.contains("\"x\":") && line.contains("\"room\":\"living\"")
                    }
                })
                let attributes = try Self.json(sub.payloads(attributesTopic).last { $0.contains("\"x\":") })
                #expect(attributes["y"] is Double && attributes["uncertainty"] is Double && attributes["floor"] as? String == "ground", "\(attributes)")

                // It walks into the kitchen (nearest charlie and delta): the kitchen.
                feed.cancel()
                feed = Self.walk(nodes, "tag1", at: 8, 2)
                #expect(await sub.wait(room, payload: "kitchen"))
                #expect(await sub.process.waitForOutput { out in
                    out.split(separator: "\n").contains { $0.hasPrefix(position + "|") && $0.contains("\"room\":\"kitchen\"") }
                })
                let nodeNames = Set(Self.nodes.keys).union(["garage"])
                #expect(sub.payloads(room).allSatisfy { !nodeNames.contains($0) }, "\(sub.payloads(room))")

                // The table and proximityctl fleet: the position beside the room.
                #expect(await sub.process.waitForOutput { out in
                    out.split(separator: "\n").contains { line in
                        guard line.hasPrefix("proximity-fleet/table|"),
                              let table = MQTTJSON.decode(FleetTable.self, from: line.dropFirst("proximity-fleet/table|".count).utf8),
                              let tag = table.devices.first(where: { $0.id == "tag1" }) else { return false }
                        return tag.room == "kitchen" && tag.position?.room == "kitchen"
                            && table.devices.contains { $0.id == "tag2" && $0.room == "garage" && $0.position == nil }
                    }
                })
                let text = try await runCommand(BuiltProducts.path("proximityctl"), ["fleet", "--broker", "mqtt://127.0.0.1:\(broker.port)", "--count", "1"])
                #expect(text.status == 0, "\(text)")
                let rows = text.stdout.split(separator: "\n").map { $0.split(separator: " ").joined(separator: " ") }
                #expect(rows.contains { $0.hasPrefix("NAME ROOM POSITION") }, "\(text)")
                #expect(rows.contains { $0.hasPrefix("- kitchen ") && $0.contains(" ground ") && $0.hasSuffix("tag1") }, "\(text)")
                #expect(rows.contains { $0.hasPrefix("- garage - garage") && $0.hasSuffix("tag2") }, "\(text)")

                // Only the garage hears it now: once the plan's nodes' reports are stale, the
                // garage's room, and no position.
                feed.cancel()
                feed = FleetEndToEndTests.report(nodes, node: "garage", "tag1", FleetEndToEndTests.payload("tag1", distance: 1))
                #expect(await sub.wait(room, payload: "garage"))
                #expect(await sub.wait(position, payload: ""))
                #expect(sub.payloads(room) == ["living", "kitchen", "garage"], "\(sub.payloads(room))")
                feed.cancel()
                await fleet.stop()
                #expect(fleet.exitStatus == 0)
                await sub.stop()
            }
        }
    }

    @Test("with a plan, only its nodes count by default: a node outside it, however near, gives no room, position, reading, attribute, table row, Home Assistant entity or map entry, and is logged once at notice, by name, with how to allow it; a reload that adds it takes its reports, one that removes it stops taking them (logged once)")
    func onlyPlanNodes() async throws {
        try await Self.withDirectory { directory in
            let planFile = directory.appendingPathComponent("plan.yaml").path
            try Self.plan().write(toFile: planFile, atomically: true, encoding: .utf8)
            try await MosquittoBroker.with { broker in
                let sub = try await Subscriber.start(broker, ["proximity-fleet/#", "homeassistant/#"])
                let fleet = try Self.fleet(broker, plan: planFile, ["--http", "127.0.0.1:0"])
                let nodes = try await Self.connectedNodes(broker)
                defer { nodes.disconnect() }
                #expect(await sub.wait("proximity-fleet/status", payload: "online"))
                let tag2 = "proximity-fleet/devices/tag2/room"
                try await fleet.waitForOutput(containing: "map listening", inStderr: true)
                let listening = try #require(fleet.stderr.split(separator: "\n").first { $0.contains("map listening") })
                let port = try #require(Int(listening.split(separator: ":").last?.filter(\.isNumber) ?? ""), "\(listening)")

                // tag1 stands in the living room, and the garage's box (not in the plan) says it
                // is nearer than any node of the plan does; tag2 only the garage's box hears.
                let feed = Self.walk(nodes, "tag1", at: 2, 2, extra: ["garage": 0.5])
                defer { feed.cancel() }
                let started = Date().timeIntervalSince1970
                let garage = FleetEndToEndTests.report(nodes, node: "garage", "tag2", Self.hearing("tag2", distance: 1.5))
                defer { garage.cancel() }
                let ignored = "node not in the floor plan: its reports are ignored"
                try await fleet.waitForOutput(containing: ignored, inStderr: true)
                #expect(await sub.wait("proximity-fleet/devices/tag1/room", payload: "living"), "\(fleet.stderr)")
                // Past the moment the garage's reports would have given tag2 its room (a nearest-node
                // room waits FleetStep.fallbackDelay, 2 s, then the next tick): a table made 3 s
                // after the garage's first report, with tag1 read by the plan's four nodes.
                let prefix = "proximity-fleet/table|"
                #expect(await sub.process.waitForOutput { out in
                    out.split(separator: "\n").contains { line in
                        guard line.hasPrefix(prefix), let table = MQTTJSON.decode(FleetTable.self, from: line.dropFirst(prefix.count).utf8) else {
                            return false
                        }
                        return table.time >= started + 3 && table.devices.contains { $0.id == "tag1" && $0.readings.count == 4 }
                    }
                }, "\(fleet.stderr)")
                #expect(sub.payloads(tag2).isEmpty && sub.payloads("proximity-fleet/devices/tag2/position").isEmpty, "\(sub.lines)")
                #expect(!sub.lines.contains { $0.hasPrefix("homeassistant/") && $0.contains("proximity_fleet_tag2") }, "\(sub.lines)")
                let tables = sub.payloads("proximity-fleet/table").compactMap { MQTTJSON.decode(FleetTable.self, from: $0.utf8) }
                #expect(!tables.isEmpty && tables.allSatisfy { table in
                    table.devices.allSatisfy { $0.id != "tag2" && !$0.readings.contains { $0.node == "garage" } }
                }, "\(sub.payloads("proximity-fleet/table"))")
                let attributes = sub.payloads("proximity-fleet/devices/tag1/attributes")
                #expect(!attributes.isEmpty && !attributes.contains { $0.contains("garage") }, "\(attributes)")
                #expect(sub.payloads("proximity-fleet/devices/tag1/room") == ["living"])
                // The map: no garage among the nodes, no tag2 and no garage's reading among the devices.
                let mapNodes = try RawHTTP.get(port: port, "/api/nodes")
                #expect(mapNodes.hasPrefix("HTTP/1.1 200") && Self.nodes.keys.allSatisfy { mapNodes.contains("\"name\":\"\($0)\"") }
                        && !mapNodes.contains("garage"), "\(mapNodes)")
                let devices = try RawHTTP.get(port: port, "/api/devices")
                #expect(devices.contains("\"id\":\"tag1\"") && !devices.contains("tag2") && !devices.contains("garage"), "\(devices)")
                // Logged once, at notice, naming the node and how to take its reports.
                let lines = fleet.stderr.split(separator: "\n").filter { $0.contains(ignored) }
                #expect(lines.count == 1, "\(fleet.stderr)")
                #expect(lines.first.map { $0.contains("notice") && $0.contains("node=garage") && $0.contains("--outside-nodes nearest") } == true,
                        "\(lines)")

                // A plan with the garage's box in it: its reports count from the next one.
                try Self.planWithGarage().write(toFile: planFile, atomically: true, encoding: .utf8)
                fleet.signal(SIGHUP)
                #expect(await sub.wait(tag2, payload: "garage"), "\(fleet.stderr)")
                #expect(await sub.wait("proximity-fleet/devices/tag2/position"))
                #expect(fleet.stderr.contains("floor plan reloaded"))

                // Taken out again: the garage's box still reports tag2 every half second, but its
                // reports no longer count, so nobody hears tag2: not_home after --away-after, its
                // position deleted.
                try Self.plan().write(toFile: planFile, atomically: true, encoding: .utf8)
                fleet.signal(SIGHUP)
                #expect(await sub.wait(tag2, payload: "not_home"), "\(fleet.stderr)")
                #expect(await sub.wait("proximity-fleet/devices/tag2/position", payload: ""))
                #expect(sub.payloads(tag2) == ["garage", "not_home"], "\(sub.payloads(tag2))")
                let removed = fleet.stderr.split(separator: "\n").filter { $0.contains("node no longer in the floor plan: its reports are ignored") }
                #expect(removed.count == 1 && removed.first?.contains("node=garage") == true, "\(fleet.stderr)")
                #expect(fleet.stderr.components(separatedBy: ignored).count - 1 == 1, "\(fleet.stderr)")
                await fleet.stop()
                #expect(fleet.exitStatus == 0)
                await sub.stop()
            }
        }
    }

    @Test("a bad plan at start: each problem a line at FILE:LINE:COLUMN, exit 65; an unreadable one, exit 66")
    func badPlanAtStart() async throws {
        try await Self.withDirectory { directory in
            let planFile = directory.appendingPathComponent("plan.yaml").path
            try "nodes:\n  - name: alpha\n    position: [0.5, north]\nrooms:\n  - name: living\n    polygon: [[0, 0], [5, 0]]\n"
                .write(toFile: planFile, atomically: true, encoding: .utf8)
            let bad = try await runCommand(BuiltProducts.path("proximity-fleet"), ["--broker", "mqtt://127.0.0.1:1", "--plan", planFile])
            #expect(bad.status == 65, "\(bad)")
            let lines = bad.stderr.split(separator: "\n")
            #expect(lines.count == 2, "\(bad)")
            #expect(lines.first?.hasPrefix("proximity-fleet: error: \(planFile):3:") == true, "\(bad)")
            #expect(lines.last?.hasPrefix("proximity-fleet: error: \(planFile):6:") == true, "\(bad)")
            let missing = try await runCommand(BuiltProducts.path("proximity-fleet"),
                                               ["run", "--broker", "mqtt://127.0.0.1:1", "--plan", directory.appendingPathComponent("none.yaml").path])
            #expect(missing.status == 66, "\(missing)")
            #expect(missing.stderr.contains("cannot read"), "\(missing)")
        }
    }

    @Test("SIGHUP reads the plan again: one with problems is logged a line each at FILE:LINE:COLUMN and the running plan kept; a good one is used (a renamed room); not_home deletes the position")
    func reload() async throws {
        try await Self.withDirectory { directory in
            let planFile = directory.appendingPathComponent("plan.yaml").path
            try Self.plan().write(toFile: planFile, atomically: true, encoding: .utf8)
            try await MosquittoBroker.with { broker in
                let sub = try await Subscriber.start(broker, ["proximity-fleet/devices/#"])
                let fleet = try Self.fleet(broker, plan: planFile)
                let nodes = try await Self.connectedNodes(broker)
                defer { nodes.disconnect() }
                let feed = Self.walk(nodes, "tag1", at: 2, 2)
                defer { feed.cancel() }
                let room = "proximity-fleet/devices/tag1/room"
                #expect(await sub.wait(room, payload: "living"), "\(fleet.stderr)")

                // A plan with a problem: logged, and the running plan kept.
                try Self.plan().replacingOccurrences(of: "position: [9.5, 3.5, 1]", with: "position: [9.5, east, 1]")
                    .write(toFile: planFile, atomically: true, encoding: .utf8)
                fleet.signal(SIGHUP)
                try await fleet.waitForOutput(containing: "keeping the running plan", inStderr: true)
                #expect(fleet.stderr.contains("\(planFile):12:"), "\(fleet.stderr)")
                #expect(fleet.isRunning)

                // A good one, the living room renamed: used at once.
                try Self.plan(living: "lounge").write(toFile: planFile, atomically: true, encoding: .utf8)
                fleet.signal(SIGHUP)
                try await fleet.waitForOutput(containing: "floor plan reloaded", inStderr: true)
                #expect(await sub.wait(room, payload: "lounge"), "\(fleet.stderr)")
                #expect(sub.payloads(room) == ["living", "lounge"], "\(sub.payloads(room))")

                // Nobody hears it: not_home after the away limit, and its position deleted.
                feed.cancel()
                #expect(await sub.wait(room, payload: "not_home"))
                #expect(await sub.wait("proximity-fleet/devices/tag1/position", payload: ""))
                await fleet.stop()
                #expect(fleet.exitStatus == 0)
                await sub.stop()
            }
        }
    }
}
