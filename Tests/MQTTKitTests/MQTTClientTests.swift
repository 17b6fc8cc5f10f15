import Foundation
import MQTTKit
import ProximityTesting
import Synchronization
import Testing

/// MQTTKit against a real Mosquitto broker; mosquitto_sub and mosquitto_pub are the independent
/// clients.
@Suite("MQTTKit on a real broker", .serialized)
struct MQTTClientTests {
    @Test("a retained QoS 1 message published here is read back by mosquitto_sub")
    func publishRetained() async throws {
        try await MosquittoBroker.with { broker in
        let client = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "kit-publisher"))
        defer { client.disconnect() }
        let events = EventRecorder(recording: client.events)
        client.connect()
        #expect(await events.wait(timeout: .seconds(30)) { $0 == .connected } != nil)
        try await client.publish("proximityd/box1/status", "online", qos: 1, retain: true)
        let sub = try await runCommand("mosquitto_sub", broker.clientArguments + ["-t", "proximityd/+/status", "-C", "1", "-W", "5", "-v"])
        #expect(sub.status == 0 && sub.stdout == "proximityd/box1/status online\n", "\(sub)")
        }
    }

    @Test("messages mosquitto_pub sends arrive on a subscription, in order")
    func subscribe() async throws {
        try await MosquittoBroker.with { broker in
        let client = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "kit-subscriber"))
        defer { client.disconnect() }
        let events = EventRecorder(recording: client.events)
        client.connect()
        #expect(await events.wait(timeout: .seconds(30)) { $0 == .connected } != nil)
        try await client.subscribe("fleet/#", qos: 1)
        for i in 1...5 {
            let pub = try await runCommand("mosquitto_pub", broker.clientArguments + ["-t", "fleet/tag\(i)", "-m", "m\(i)", "-q", "1"])
            #expect(pub.status == 0, "\(pub)")
        }
        var received: [String] = []
        for await message in client.messages {
            received.append("\(message.topic)=\(message.string)")
            if received.count == 5 { break }
        }
        #expect(received == (1...5).map { "fleet/tag\($0)=m\($0)" })
        }
    }

    @Test("a wrong password is refused with the broker's reason, retried after the delay, and the right one connects")
    func password() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mosquitto-pw-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let passwords = directory.appendingPathComponent("passwords").path
        let made = try await runCommand("mosquitto_passwd", ["-b", "-c", passwords, "node", "s3cret"])
        #expect(made.status == 0, "\(made)")
        try await MosquittoBroker.with(["allow_anonymous false", "password_file \(passwords)"]) { broker in

        let wrong = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "kit-wrong", username: "node",
                                               password: "guess", reconnectDelay: 1...1))
        let wrongEvents = EventRecorder(recording: wrong.events)
        wrong.connect()
        // Refused, then refused again after the 1 s reconnect delay: retried, never connected.
        let isRefusal: @Sendable (MQTTConnectionEvent) -> Bool = { if case .refused = $0 { true } else { false } }
        let firstRefusal = await wrongEvents.wait(timeout: .seconds(30), where: isRefusal)
        let secondRefusal = await wrongEvents.wait(from: wrongEvents.count, timeout: .seconds(30), where: isRefusal)
        let refusals = [firstRefusal, secondRefusal].compactMap { $0 }
        #expect(refusals.count == 2)
        #expect(!wrongEvents.events.contains(.connected))
        #expect(refusals.allSatisfy { if case .refused(let code, let reason) = $0 { code == 5 && reason.contains("not authori") } else { false } },
                "\(refusals)")
        wrong.disconnect()

        let right = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "kit-right", username: "node",
                                               password: "s3cret"))
        let rightEvents = EventRecorder(recording: right.events)
        right.connect()
        #expect(await rightEvents.wait(timeout: .seconds(30)) { $0 == .connected } != nil)
        right.disconnect()
        }
    }

    @Test("a broker down at the start is reached once it is up; a publish waits for the acknowledgement")
    func brokerLater() async throws {
        let port = try freeTCPPort()
        let client = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: port, clientID: "kit-early", reconnectDelay: 1...1))
        let events = EventRecorder(recording: client.events)
        client.connect()
        // Nothing listens yet: no connection.
        #expect(await events.wait(timeout: .seconds(2)) { $0 == .connected } == nil)
        defer { client.disconnect() }
        try await MosquittoBroker.with(port: port) { broker in
        #expect(await events.wait(timeout: .seconds(30)) { $0 == .connected } != nil)
        try await client.publish("late/one", "here", qos: 1, retain: true)
        let sub = try await runCommand("mosquitto_sub", broker.clientArguments + ["-t", "late/one", "-C", "1", "-W", "5"])
        #expect(sub.stdout == "here\n", "\(sub)")
        }
    }

    @Test("a client whose socket is numbered above 1023 connects (select(2) cannot watch it; the loop polls)")
    func highDescriptors() async throws {
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        try #require(limit.rlim_cur > 1200, "the open-file limit (\(limit.rlim_cur)) leaves no room above 1023")
        // Fill the descriptors below 1100, as a busy process has them.
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        while true {
            let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { break }
            held.append(fd)
            if fd >= 1100 { break }
        }
        #expect((held.last ?? 0) >= 1100)
        try await MosquittoBroker.with { broker in
            let client = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "kit-high-fd"))
            defer { client.disconnect() }
            let events = EventRecorder(recording: client.events)
            client.connect()
            #expect(await events.wait(timeout: .seconds(30)) { $0 == .connected } != nil)
            try await client.publish("high/fd", "ok", qos: 1, retain: true)
            let sub = try await runCommand("mosquitto_sub", broker.clientArguments + ["-t", "high/fd", "-C", "1", "-W", "5"])
            #expect(sub.stdout == "ok\n", "\(sub)")
        }
    }
}
