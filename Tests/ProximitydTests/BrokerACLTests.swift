import Foundation
import MQTTKit
import ProximityMQTT
import ProximityTesting
import Testing

/// docs/mqtt.md's broker for a trusted fleet, run as printed there: its `fleet.conf` and `acl`
/// blocks are read from the page (the paths moved to a temporary directory, the test kit's
/// listener standing for `listener 8883`), on a real Mosquitto, with a password file hashed by
/// `mosquitto_passwd -U` and a CA made by `openssl`. The nodes, the fleet service's user and Home
/// Assistant's are MQTTKit clients, and `proximity-fleet` itself as user `fleet`.
@Suite("a broker for a trusted fleet: docs/mqtt.md's ACL on a real Mosquitto", .serialized)
struct BrokerACLTests {
    static let passwords = ["kitchen": "kitchen-secret", "hall": "hall-secret", "fleet": "fleet-secret", "homeassistant": "ha-secret"]

    /// The fenced block of docs/mqtt.md's "A broker for a trusted fleet" whose first line is
    /// `# FILE`, without that line.
    static func documented(_ file: String) throws -> [String] {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/mqtt.md"), encoding: .utf8)
        let start = try #require(text.range(of: "\n## A broker for a trusted fleet\n"), "docs/mqtt.md has no such section")
        let rest = text[start.upperBound...]
        let section = rest[..<(rest.range(of: "\n## ")?.lowerBound ?? rest.endIndex)]
        // Between the fences: odd pieces are blocks, their first line the info string.
        for (index, block) in section.components(separatedBy: "```").enumerated() where index % 2 == 1 {
            let lines = block.split(separator: "\n", omittingEmptySubsequences: false).dropFirst().map(String.init)
            if lines.first == "# \(file)" { return Array(lines.dropFirst()) }
        }
        throw TestKitError("docs/mqtt.md's trusted fleet section has no block for \(file)")
    }

    /// The identity in `user`'s discovery line of the ACL (`homeassistant/+/proximityd_<id>/+/config`).
    static func identity(of user: String, in acl: [String]) throws -> String {
        let block = acl.drop { $0 != "user \(user)" }.dropFirst().prefix { !$0.hasPrefix("user ") }
        let line = try #require(block.first { $0.contains("/proximityd_") }, "no discovery line for \(user)")
        return String(try #require(line.components(separatedBy: "/proximityd_").last?.components(separatedBy: "/").first))
    }

    /// The broker of docs/mqtt.md, with the page's ACL (returned to the body) and
    /// ``passwords``; `directory` holds `ca.crt`.
    static func withBroker<T>(_ body: (MosquittoBroker, _ directory: URL, _ acl: [String]) async throws -> T) async throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mqtt-acl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await MQTTEndToEndTests.makeCertificates(in: directory)
        let d = directory.path
        // user:password lines, hashed in place, as the docs say.
        try (passwords.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: "\n") + "\n")
            .write(toFile: "\(d)/passwd", atomically: true, encoding: .utf8)
        let hashed = try await runCommand("mosquitto_passwd", ["-U", "\(d)/passwd"])
        try #require(hashed.status == 0, "\(hashed)")
        #expect(try String(contentsOfFile: "\(d)/passwd", encoding: .utf8).contains("kitchen:$7$"), "not hashed")
        let acl = try documented("/etc/mosquitto/acl")
        try (acl.joined(separator: "\n") + "\n").write(toFile: "\(d)/acl", atomically: true, encoding: .utf8)
        for file in ["passwd", "acl"] { try protect("\(d)/\(file)") }
        let conf = try documented("/etc/mosquitto/conf.d/fleet.conf")
        #expect(conf.contains("listener 8883") && conf.contains("allow_anonymous false"), "\(conf)")
        let lines = conf.filter { !$0.isEmpty && $0 != "listener 8883" }.map {
            $0.replacingOccurrences(of: "/etc/mosquitto/certs/", with: "\(d)/").replacingOccurrences(of: "/etc/mosquitto/", with: "\(d)/")
        }
        return try await MosquittoBroker.with(lines) { broker in try await body(broker, directory, acl) }
    }

    /// As the docs say: root's, group mosquitto, 0640 (mosquitto, started as root, reads them as its
    /// user; started as another user, as that user).
    static func protect(_ path: String) throws {
        var attributes: [FileAttributeKey: Any] = [.posixPermissions: 0o640]
        if getuid() == 0 { attributes[.groupOwnerAccountName] = "mosquitto" }
        try FileManager.default.setAttributes(attributes, ofItemAtPath: path)
    }

    /// A client of the broker over TLS as `user` (nil: none), trusting `ca` (nil: the system's CAs).
    static func client(_ broker: MosquittoBroker, _ user: String?, password: String? = nil, ca: String?) throws -> MQTTClient {
        try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "test-\(user ?? "anonymous")-\(UUID().uuidString.prefix(8))",
                                   username: user, password: password ?? user.flatMap { passwords[$0] },
                                   tls: .init(caFile: ca, caPath: ca == nil ? MQTTOptions.TLS.systemCAPath : nil), reconnectDelay: 1...1))
    }

    /// `client` connected, or the test stops.
    static func connect(_ client: MQTTClient, _ what: String) async throws {
        let events = EventRecorder(recording: client.events)
        client.connect()
        _ = try await events.require("\(what) connected", timeout: .seconds(10)) { $0 == .connected }
    }

    @Test("each node publishes under its own prefix, its room's topics and its own discovery; under another node's prefix, room or discovery, or the fleet service's, nothing reaches the fleet's or Home Assistant's subscriber (a sentinel after it does) and the broker logs each denial; the fleet service, as user fleet, reads a node's report and publishes the room and its discovery")
    func eachNodeItsOwnPrefix() async throws {
        try await Self.withBroker { broker, directory, acl in
            let ca = directory.appendingPathComponent("ca.crt").path
            let kitchenID = try Self.identity(of: "kitchen", in: acl), hallID = try Self.identity(of: "hall", in: acl)
            let fleetUser = try Self.client(broker, "fleet", ca: ca)
            let homeAssistant = try Self.client(broker, "homeassistant", ca: ca)
            let kitchen = try Self.client(broker, "kitchen", ca: ca)
            let hall = try Self.client(broker, "hall", ca: ca)
            defer { for c in [fleetUser, homeAssistant, kitchen, hall] { c.disconnect() } }
            let fleetSeen = EventRecorder(recording: fleetUser.messages)
            let haSeen = EventRecorder(recording: homeAssistant.messages)
            try await Self.connect(fleetUser, "the fleet's user")
            try await Self.connect(homeAssistant, "Home Assistant's user")
            try await Self.connect(kitchen, "kitchen")
            try await Self.connect(hall, "hall")
            try await fleetUser.subscribe("proximityd/#")
            for pattern in ["proximityd/#", "proximity-fleet/#", "espresense/#", "room_presence/#", "homeassistant/#"] {
                try await homeAssistant.subscribe(pattern)
            }

            // The kitchen's own topics, then another node's (hall's), then the sentinel, all on one
            // connection, each acknowledged by the broker (a denied one too: MQTT 3.1.1 cannot refuse).
            let report = FleetEndToEndTests.payload("tag1", distance: 1)
            let own = [("proximityd/kitchen/status", "online"), ("proximityd/kitchen/peers/tag1", report),
                       ("espresense/rooms/kitchen/status", "online"), ("espresense/devices/tag1/kitchen", report),
                       ("room_presence/kitchen", report), ("homeassistant/binary_sensor/proximityd_\(kitchenID)/connectivity/config", "{}")]
            let forged = [("proximityd/hall/status", "offline"), ("proximityd/hall/peers/tag1", FleetEndToEndTests.payload("tag1", distance: 0.1)),
                          ("espresense/rooms/hall/status", "offline"), ("espresense/devices/tag1/hall", report), ("room_presence/hall", report),
                          ("homeassistant/binary_sensor/proximityd_\(hallID)/connectivity/config", "{}"),
                          ("proximity-fleet/devices/tag1/room", "hall")]
            try await hall.publish("proximityd/hall/status", "online", qos: 1)
            for (topic, payload) in own + forged { try await kitchen.publish(topic, payload, qos: 1) }
            try await kitchen.publish("proximityd/kitchen/sentinel", "last", qos: 1)
            for (seen, who) in [(fleetSeen, "the fleet's user"), (haSeen, "Home Assistant's user")] {
                _ = try await seen.require("the sentinel at \(who)", timeout: .seconds(10)) { $0.topic == "proximityd/kitchen/sentinel" }
            }
            let fleetTopics = fleetSeen.events.map { "\($0.topic)=\($0.string)" }
            let haTopics = haSeen.events.map { "\($0.topic)=\($0.string)" }
            // The fleet's user reads every node: the kitchen's and the hall's own.
            #expect(fleetTopics.contains("proximityd/hall/status=online"), "\(fleetTopics)")
            #expect(own.filter { $0.0.hasPrefix("proximityd/") }.allSatisfy { fleetTopics.contains("\($0.0)=\($0.1)") }, "\(fleetTopics)")
            #expect(own.allSatisfy { haTopics.contains("\($0.0)=\($0.1)") }, "\(haTopics)")
            // What the kitchen published as another reached nobody.
            for (topic, payload) in forged {
                #expect(!fleetTopics.contains("\(topic)=\(payload)") && !haTopics.contains("\(topic)=\(payload)"), "\(topic) got through")
            }
            #expect(await broker.process.waitForOutput(inStderr: true) { log in
                forged.allSatisfy { log.contains("Denied PUBLISH from") && log.contains("'\($0.0)'") }
            }, "\(broker.log)")

            // proximity-fleet as user fleet over TLS: reads the kitchen's report, publishes the room
            // and its Home Assistant discovery, which Home Assistant's user reads.
            let password = directory.appendingPathComponent("fleet.password")
            try writeSecret("\(Self.passwords["fleet"]!)\n", to: password.path)
            let fleet = try ManagedProcess(BuiltProducts.path("proximity-fleet"),
                                           ["run", "--broker", "mqtts://127.0.0.1:\(broker.port)", "--ca-file", ca, "--username", "fleet",
                                            "--password-file", password.path, "--log-level", "debug"])
            try await fleet.waitForOutput(containing: "connected to the MQTT broker", inStderr: true)
            let from = haSeen.count
            // Reports go on until the service has its subscriptions (reports are not retained).
            let feed = FleetEndToEndTests.report(kitchen, node: "kitchen", "tag1", report)
            defer { feed.cancel() }
            _ = try await haSeen.require("the room from the fleet service", from: from, timeout: .seconds(10)) {
                $0.topic == "proximity-fleet/devices/tag1/room" && $0.string == "kitchen"
            }
            _ = try await haSeen.require("the tracker's discovery", from: from, timeout: .seconds(10)) {
                $0.topic == "homeassistant/device_tracker/proximity_fleet_tag1/config"
            }
            #expect(!broker.log.contains("Denied PUBLISH from proximity-fleet"), "\(broker.log)")
            await fleet.stop()
            #expect(fleet.exitStatus == 0, "\(fleet.stderr)")
        }
    }

    @Test("refused at connection: a wrong password and no user (not authorised, code 5); a client that does not trust the broker's CA fails the TLS handshake at every attempt with OpenSSL's reason, and proximity-fleet says so once with what to check; after a new password and SIGHUP, the new one connects and the old one is refused")
    func refused() async throws {
        try await Self.withBroker { broker, directory, _ in
            let ca = directory.appendingPathComponent("ca.crt").path
            let isRefusal: @Sendable (MQTTConnectionEvent) -> Bool = { if case .refused = $0 { true } else { false } }
            for (user, password) in [("kitchen", "guess"), (nil, nil)] as [(String?, String?)] {
                let client = try Self.client(broker, user, password: password, ca: ca)
                let events = EventRecorder(recording: client.events)
                client.connect()
                let refusal = await events.wait(timeout: .seconds(10), where: isRefusal)
                client.disconnect()
                guard case .refused(let code, let reason) = refusal else {
                    Issue.record("\(user ?? "no user"): not refused: \(events.events)")
                    continue
                }
                #expect(code == 5 && reason.contains("not authorised"), "\(user ?? "no user"): \(reason)")
                #expect(!events.events.contains(.connected))
            }

            // The right password, but the system's CAs, which do not hold the test's: the handshake
            // fails, every attempt, with OpenSSL's reason.
            let untrusting = try Self.client(broker, "kitchen", ca: nil)
            let events = EventRecorder(recording: untrusting.events)
            untrusting.connect()
            let first = await events.wait(timeout: .seconds(10)) { if case .disconnected = $0 { true } else { false } }
            let second = await events.wait(from: events.count, timeout: .seconds(10)) { if case .disconnected = $0 { true } else { false } }
            untrusting.disconnect()
            #expect(first?.isTLSFailure == true && second?.isTLSFailure == true, "\(events.events)")
            if case .disconnected(_, let reason) = first {
                #expect(reason.contains("TLS") && reason.contains("certificate verify failed"), "\(reason)")
            }
            #expect(!events.events.contains(.connected), "\(events.events)")

            // proximity-fleet without --ca-file: one error line that says why and what to check.
            let password = directory.appendingPathComponent("fleet.password")
            try writeSecret("\(Self.passwords["fleet"]!)\n", to: password.path)
            let fleet = try ManagedProcess(BuiltProducts.path("proximity-fleet"),
                                           ["run", "--broker", "mqtts://127.0.0.1:\(broker.port)", "--username", "fleet",
                                            "--password-file", password.path])
            try await fleet.waitForOutput(containing: "cannot reach the MQTT broker", inStderr: true)
            let line = fleet.stderr.split(separator: "\n").first { $0.contains("cannot reach the MQTT broker") } ?? ""
            #expect(line.contains("error") && line.contains("certificate verify failed") && line.contains("check --ca-file"), "\(fleet.stderr)")
            #expect(!fleet.stderr.contains("connected to the MQTT broker"), "\(fleet.stderr)")
            await fleet.stop()

            // A new password for the kitchen, hashed as the docs say, and SIGHUP (systemctl reload
            // mosquitto): the new one connects (retried each second until the broker has read
            // it), then the old one is refused.
            let d = directory.path
            try (Self.passwords.map { "\($0.key):\($0.key == "kitchen" ? "changed" : $0.value)" }.joined(separator: "\n") + "\n")
                .write(toFile: "\(d)/passwd", atomically: true, encoding: .utf8)
            let hashed = try await runCommand("mosquitto_passwd", ["-U", "\(d)/passwd"])
            try #require(hashed.status == 0, "\(hashed)")
            try Self.protect("\(d)/passwd")
            broker.process.signal(SIGHUP)
            let changed = try Self.client(broker, "kitchen", password: "changed", ca: ca)
            try await Self.connect(changed, "the kitchen with its new password")
            changed.disconnect()
            let old = try Self.client(broker, "kitchen", ca: ca)
            let oldEvents = EventRecorder(recording: old.events)
            old.connect()
            let refusal = await oldEvents.wait(timeout: .seconds(10), where: isRefusal)
            old.disconnect()
            #expect(refusal.map(isRefusal) == true && !oldEvents.events.contains(.connected), "\(oldEvents.events)")
        }
    }
}
