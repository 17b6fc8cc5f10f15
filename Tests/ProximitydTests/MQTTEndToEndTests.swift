import Foundation
import ProximityTesting
import Testing

/// `mosquitto_sub` as the independent client: every message as `topic|payload`, one a line.
struct Subscriber {
    let process: ManagedProcess

    /// Returns once the broker acknowledged the subscription (SUBACK): every message published
    /// from then on is seen, and every retained one comes. -d: its debug lines say so; stdbuf
    /// -oL: line by line, as on a terminal.
    static func start(_ broker: MosquittoBroker, _ topics: [String], extra: [String] = []) async throws -> Subscriber {
        let process = try ManagedProcess(resolveExecutable("stdbuf"), ["-oL", "mosquitto_sub"]
                                         + broker.clientArguments + topics.flatMap { ["-t", $0] } + ["-F", "%t|%p", "-d"] + extra)
        do {
            try await process.waitForOutput(containing: "received SUBACK", timeout: .seconds(30))
        } catch {
            await process.stop()
            throw error
        }
        return Subscriber(process: process)
    }

    /// Whether `line` is one of -d's debug lines ("Client … received PUBLISH (…)", "Subscribed
    /// (mid: 1): 0"), not a message.
    static func isDebug<S: StringProtocol>(_ line: S) -> Bool {
        line.hasPrefix("Client ") || line.hasPrefix("Subscribed (mid: ")
    }

    /// The messages, as `topic|payload`.
    var lines: [String] { process.stdout.split(separator: "\n").filter { !Self.isDebug($0) }.map(String.init) }

    /// The payloads of `topic`, in order.
    func payloads(_ topic: String) -> [String] {
        lines.compactMap { line in line.hasPrefix(topic + "|") ? String(line.dropFirst(topic.count + 1)) : nil }
    }

    /// Waits until `topic` has had `count` messages (`payload`, if given).
    @discardableResult
    func wait(_ topic: String, payload: String? = nil, count: Int = 1, timeout: Duration = .seconds(30)) async -> Bool {
        await process.waitForOutput(timeout: timeout) { out in
            out.split(separator: "\n").filter { line in
                !Self.isDebug(line) && (payload.map { line == "\(topic)|\($0)" } ?? line.hasPrefix(topic + "|"))
            }.count >= count
        }
    }

    /// Waits until a message of `topic` whose payload satisfies `accept` has come.
    @discardableResult
    func wait(_ topic: String, timeout: Duration = .seconds(30), _ accept: @escaping @Sendable (String) -> Bool) async -> Bool {
        await process.waitForOutput(timeout: timeout) { out in
            out.split(separator: "\n").contains { line in
                !Self.isDebug(line) && line.hasPrefix(topic + "|") && accept(String(line.dropFirst(topic.count + 1)))
            }
        }
    }

    func stop() async { await process.stop() }
}

/// The node on a real Mosquitto broker, as a user runs it: `proximityd` with `mqtt:` in its
/// config file, checked with `mosquitto_sub` and `mosquitto_pub`.
@Suite("MQTT publishing end to end", .serialized)
struct MQTTEndToEndTests {
    static let prefix = "proximityd/test-box"

    static func config(_ box: Box, _ mqtt: String, extra: String = "") throws -> String {
        let file = box.bus.directory.appendingPathComponent("proximityd.yaml")
        try "mqtt:\n\(mqtt)\(extra)".write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    static func monitor(_ box: Box, _ method: String, _ region: String) async throws {
        let arguments = method == "StartMonitoring" ? ["sa{sv}", region, "0"] : ["s", region]
        let reply = try await box.busctl(["call", "org.proximityd", "/org/proximityd", "org.proximityd.RegionMonitor1", method] + arguments)
        #expect(reply.status == 0, "\(reply)")
    }

    @Test("availability: online retained, offline as the last will on SIGKILL (ESPresense's room status too); discovery retained, sent again on homeassistant/status online; a removed region's entity deleted")
    func availabilityAndDiscovery() async throws {
        try await MosquittoBroker.with { broker in
            try await withBox { box in
                let file = try Self.config(box, "  broker: mqtt://127.0.0.1:\(broker.port)\n  keepalive: 60\n  compat: [espresense]\n")
                let sub = try await Subscriber.start(broker, ["\(Self.prefix)/#", "homeassistant/#", "espresense/rooms/#"])
                let daemon = try await box.startDaemon(["--config", file])
                #expect(await sub.wait("\(Self.prefix)/status", payload: "online"))
                #expect(await sub.wait("espresense/rooms/test-box/status", payload: "online"))
                let identity = try String(contentsOf: box.stateDirectory.appendingPathComponent("identity"), encoding: .utf8)
                    .trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
                let node = "proximityd_\(identity)"
                let connectivity = "homeassistant/binary_sensor/\(node)/connectivity/config"
                #expect(await sub.wait(connectivity))
                #expect(await sub.wait("homeassistant/sensor/\(node)/peers/config"))
                let config = try #require(sub.payloads(connectivity).first)
                let json = try #require(try JSONSerialization.jsonObject(with: Data(config.utf8)) as? [String: Any])
                #expect(json["state_topic"] as? String == "\(Self.prefix)/status")
                #expect(json["device_class"] as? String == "connectivity")
                #expect((json["device"] as? [String: Any])?["identifiers"] as? [String] == [node])
                // The entity id, for Home Assistant before 2025.10 (object_id) and after (default_entity_id).
                #expect(json["object_id"] as? String == "proximityd_test_box_connectivity")
                #expect(json["default_entity_id"] as? String == "binary_sensor.proximityd_test_box_connectivity")

                // A region: its state (retained) and its occupancy entity.
                try await Self.monitor(box, "StartMonitoring", "kitchen")
                let kitchen = "homeassistant/binary_sensor/\(node)/region_kitchen/config"
                #expect(await sub.wait(kitchen))
                #expect(await sub.wait("\(Self.prefix)/regions/kitchen"))
                let region = try #require(try JSONSerialization.jsonObject(with: Data((sub.payloads(kitchen).first ?? "").utf8)) as? [String: Any])
                #expect(region["device_class"] as? String == "occupancy")
                #expect(region["availability_topic"] as? String == "\(Self.prefix)/status")
                #expect(region["state_topic"] as? String == "\(Self.prefix)/regions/kitchen")
                #expect(region["default_entity_id"] as? String == "binary_sensor.proximityd_test_box_region_kitchen")

                // Home Assistant restarts: discovery again.
                let before = sub.payloads(connectivity).count
                let pub = try await runCommand("mosquitto_pub", broker.clientArguments + ["-t", "homeassistant/status", "-m", "online"])
                #expect(pub.status == 0)
                #expect(await sub.wait(connectivity, count: before + 1))
                #expect(await sub.wait(kitchen, count: 2))

                // The region goes: its entity and state are deleted (empty retained payloads).
                try await Self.monitor(box, "StopMonitoring", "kitchen")
                #expect(await sub.wait(kitchen, payload: ""))
                #expect(await sub.wait("\(Self.prefix)/regions/kitchen", payload: ""))
                // A new subscriber gets the retained configs, then the retained status: the broker
                // sends a subscription's retained messages topic filter by topic filter, in the order
                // asked. By the status every retained config has come, and the region's is not one.
                let retained = try await Subscriber.start(broker, ["homeassistant/binary_sensor/\(node)/+/config", "\(Self.prefix)/status"])
                #expect(await retained.wait("\(Self.prefix)/status", payload: "online"), "\(retained.lines)")
                #expect(!retained.lines.contains { $0.contains("region_kitchen") } && !retained.payloads(connectivity).isEmpty,
                        "\(retained.lines)")
                await retained.stop()

                // SIGKILL: the broker publishes the will.
                daemon.signal(SIGKILL)
                _ = try await daemon.waitForExit()
                #expect(await sub.wait("\(Self.prefix)/status", payload: "offline"))
                // ESPresense's room status has its own connection, and its own will.
                #expect(await sub.wait("espresense/rooms/test-box/status", payload: "offline"))
                let status = try await runCommand("mosquitto_sub", broker.clientArguments + ["-t", "\(Self.prefix)/status", "-C", "1", "-W", "5"])
                #expect(status.stdout == "offline\n", "\(status)")
                await sub.stop()
            }
        }
    }

    @Test("a clean stop says offline; a region removed while the node was away loses its entity at the next start")
    func cleanStopAndStaleEntity() async throws {
        try await MosquittoBroker.with { broker in
            try await withBox { box in
                let file = try Self.config(box, "  broker: mqtt://127.0.0.1:\(broker.port)\n")
                let sub = try await Subscriber.start(broker, ["\(Self.prefix)/#", "homeassistant/#"])
                var daemon = try await box.startDaemon(["--config", file])
                try await Self.monitor(box, "StartMonitoring", "hall")
                #expect(await sub.wait("\(Self.prefix)/regions/hall"))
                await daemon.stop()
                #expect(daemon.exitStatus == 0)
                #expect(await sub.wait("\(Self.prefix)/status", payload: "offline"))
                // Removed while the node is away: the region lives in its state directory.
                let regions = box.stateDirectory.appendingPathComponent("regions.json")
                try? FileManager.default.removeItem(at: regions)
                daemon = try await box.startDaemon(["--config", file])
                #expect(await sub.wait("\(Self.prefix)/status", payload: "online", count: 2))
                let identity = try String(contentsOf: box.stateDirectory.appendingPathComponent("identity"), encoding: .utf8)
                    .trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
                #expect(await sub.wait("homeassistant/binary_sensor/proximityd_\(identity)/region_hall/config", payload: ""))
                #expect(await sub.wait("\(Self.prefix)/regions/hall", payload: ""))
                await daemon.stop()
                await sub.stop()
            }
        }
    }

    @Test("region events during a broker restart and an outage, with a SIGKILL of the node in the outage: every one arrives, in order")
    func outage() async throws {
        try await MosquittoBroker.with(["allow_anonymous true", "persistence true", "persistence_location {dir}/"]) { broker in
            try await withBox { box in
                let file = try Self.config(box, "  broker: mqtt://127.0.0.1:\(broker.port)\n  reconnect-max: 2\n")
                // A persistent session (QoS 1, clean session off): what the broker queues for it
                // while it is away survives the broker's restarts (its persistence file).
                // -d: its debug lines say when the subscription is in place (SUBACK); stdbuf -oL:
                // line by line, as on a terminal.
                let subscription = ["-t", "\(Self.prefix)/events/region", "-q", "1", "-c", "-i", "outage-test", "-F", "%p", "-d"]
                var subscribers = [try ManagedProcess(resolveExecutable("stdbuf"), ["-oL", "mosquitto_sub"] + broker.clientArguments + subscription)]
                try await subscribers[0].waitForOutput(containing: "SUBACK")
                var daemon = try await box.startDaemon(["--config", file])
                var expected: [String] = []
                func region(_ n: Int) async throws {
                    let id = "r\(n)"
                    try await Self.monitor(box, "StartMonitoring", id)
                    expected.append(id)
                }
                for n in 1...5 { try await region(n) }
                // A restart in the middle of the stream.
                await broker.pause()
                #expect(FileManager.default.fileExists(atPath: broker.directory.appendingPathComponent("mosquitto.db").path),
                        "the broker saved no sessions: \(broker.log)")
                for n in 6...8 { try await region(n) }
                try await broker.resume()
                for n in 9...10 { try await region(n) }
                // An outage, and the node killed in it.
                await broker.pause()
                for n in 11...14 { try await region(n) }
                daemon.signal(SIGKILL)
                _ = try await daemon.waitForExit()
                daemon = try await box.startDaemon(["--config", file])
                for n in 15...17 { try await region(n) }
                try await broker.resume()
                // mosquitto_sub ends when its broker goes: a new one, in the same session, takes
                // what was queued for it.
                if !subscribers.last!.isRunning {
                    subscribers.append(try ManagedProcess(resolveExecutable("stdbuf"), ["-oL", "mosquitto_sub"] + broker.clientArguments + subscription))
                }
                let earlier = subscribers.dropLast().map(\.stdout).joined(separator: "\n")
                let wanted = expected
                @Sendable func received(_ output: String) -> [(seq: Int, region: String)] {
                    output.split(separator: "\n").compactMap { line in
                        guard let json = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                              json["type"] as? String == "determined", let seq = json["seq"] as? Int,
                              let region = (json["data"] as? [String: String])?["region"] else { return nil }
                        return (seq, region)
                    }
                }
                // (The predicate runs on the process's own output: reading `stdout` there would
                // take its lock again.)
                let all = await subscribers.last!.waitForOutput(timeout: .seconds(60)) { out in
                    Set(received(earlier + "\n" + out).map(\.region)).isSuperset(of: wanted)
                }
                let events = received(earlier + "\n" + subscribers.last!.stdout)
                #expect(all, "missing: \(Set(expected).subtracting(events.map(\.region)).sorted()); log: \(daemon.stderr)")
                // In order: the first arrival of each event comes in the order of the log.
                var firsts: [(seq: Int, region: String)] = []
                for e in events where !firsts.contains(where: { $0.seq == e.seq }) { firsts.append(e) }
                #expect(firsts.map(\.seq) == firsts.map(\.seq).sorted(), "\(firsts)")
                // None lost: every entry of the log from the first to the last (all region events
                // here; the restarted node determines its restored regions again, with new numbers).
                if let low = firsts.map(\.seq).min(), let high = firsts.map(\.seq).max() {
                    #expect(firsts.map(\.seq).sorted() == Array(low...high), "\(firsts)")
                }
                let order = firsts.map(\.region).filter { expected.contains($0) }
                var seen: [String] = []
                for r in order where !seen.contains(r) { seen.append(r) }
                #expect(seen == expected, "\(seen)")
                await daemon.stop()
                for s in subscribers { await s.stop() }
            }
        }
    }

    /// A CA, and a certificate for 127.0.0.1 it signs, made with openssl in `directory`.
    static func makeCertificates(in directory: URL) async throws {
        func run(_ arguments: [String]) async throws {
            let result = try await runCommand("openssl", arguments)
            guard result.status == 0 else { throw TestKitError("openssl \(arguments.joined(separator: " ")): \(result)") }
        }
        let d = directory.path
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\n".write(toFile: "\(d)/san.ext", atomically: true, encoding: .utf8)
        try await run(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "\(d)/ca.key", "-out", "\(d)/ca.crt", "-days", "2",
                       "-subj", "/CN=proximityd test CA"])
        try await run(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "\(d)/server.key", "-out", "\(d)/server.csr",
                       "-subj", "/CN=127.0.0.1"])
        try await run(["x509", "-req", "-in", "\(d)/server.csr", "-CA", "\(d)/ca.crt", "-CAkey", "\(d)/ca.key", "-CAcreateserial",
                       "-out", "\(d)/server.crt", "-days", "2", "-extfile", "\(d)/san.ext"])
        // Started as root, mosquitto reads its files as user mosquitto.
        for file in ["ca.crt", "server.crt", "server.key"] {
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: "\(d)/\(file)")
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: d)
    }

    @Test("TLS with a CA made here, and a password: a wrong one is one clear log line and backed-off retries, no crash; the right one, after a reload, connects")
    func tlsAndPassword() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mqtt-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await Self.makeCertificates(in: directory)
        let d = directory.path
        let made = try await runCommand("mosquitto_passwd", ["-b", "-c", "\(d)/passwords", "node", "s3cret"])
        #expect(made.status == 0, "\(made)")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: "\(d)/passwords")
        try await MosquittoBroker.with(["allow_anonymous false", "password_file \(d)/passwords", "cafile \(d)/ca.crt",
                                        "certfile \(d)/server.crt", "keyfile \(d)/server.key"]) { broker in
            try await withBox { box in
                let password = directory.appendingPathComponent("node.password")
                try writeSecret("guess\n", to: password.path)
                let file = try Self.config(box, """
                      broker: mqtts://127.0.0.1:\(broker.port)
                      ca-file: \(d)/ca.crt
                      username: node
                      password-file: \(password.path)
                      reconnect-max: 2

                    """)
                let daemon = try await box.startDaemon(["--config", file])
                // Three refusals by the broker (1 s, then 2 s apart): one line in the node's log.
                let refusals = await broker.process.waitForOutput(inStderr: true, timeout: .seconds(30)) { log in
                    log.components(separatedBy: "not authorised").count - 1 >= 3
                }
                #expect(refusals, "\(broker.log)")
                #expect(daemon.isRunning)
                let lines = daemon.stderr.split(separator: "\n").filter { $0.contains("refused the connection") }
                #expect(lines.count == 1, "\(daemon.stderr)")
                #expect(lines.first?.contains("not authorised") == true && lines.first?.contains("mqtt.password-file") == true)

                // The right password, and a reload: connected, over TLS.
                let sub = try await Subscriber.start(broker, ["\(Self.prefix)/status"],
                                                     extra: ["--cafile", "\(d)/ca.crt", "-u", "node", "-P", "s3cret"])
                try writeSecret("s3cret\n", to: password.path)
                daemon.signal(SIGHUP)
                #expect(await sub.wait("\(Self.prefix)/status", payload: "online", timeout: .seconds(30)), "\(daemon.stderr)")
                // The node logs it after connecting, maybe after the broker passed its status on.
                try await daemon.waitForOutput(containing: "connected to the MQTT broker", inStderr: true)
                await daemon.stop()
                #expect(daemon.exitStatus == 0)
                await sub.stop()
            }
        }
    }
}
