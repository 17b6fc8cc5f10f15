import Logging
@testable import ProximityNode
import Testing

/// The MQTT link as a state machine: what each piece of the broker's news makes the publisher do.
@Suite("MQTT link")
struct MQTTLinkTests {
    static let broker = "mqtt://broker.lan:1883"

    @Test("a connection announces, subscribes (with discovery) and starts one delivery; a reconnection says so")
    func connects() {
        var link = MQTTLink()
        let g = link.start(broker: Self.broker, discovery: true)
        #expect(link.handle(.connected, generation: g) == [
            .log(.notice, "connected to the MQTT broker", metadata: ["mqtt.broker": Self.broker]), .announce, .subscribe, .deliver])
        #expect(link.connected && link.delivering)
        #expect(link.handle(.lost(code: 7, reason: "The connection was lost.", tlsFailure: false, pending: 3), generation: g) == [
            .log(.warning, "lost the connection to the MQTT broker: reconnecting with back-off",
                 metadata: ["reason": "The connection was lost.", "events.pending": "3"])])
        #expect(!link.connected)
        // The delivery of before is still running: the reconnection does not start a second one.
        #expect(link.handle(.connected, generation: g) == [
            .log(.notice, "reconnected to the MQTT broker", metadata: ["mqtt.broker": Self.broker]), .announce, .subscribe])
        #expect(link.handle(.deliveryEnded, generation: g) == [])
        #expect(link.handle(.offered, generation: g) == [.deliver])
        // Without discovery: no subscriptions, and Home Assistant's status means nothing.
        var plain = MQTTLink()
        let p = plain.start(broker: Self.broker, discovery: false)
        #expect(plain.handle(.connected, generation: p) == [
            .log(.notice, "connected to the MQTT broker", metadata: ["mqtt.broker": Self.broker]), .announce, .deliver])
        #expect(plain.handle(.homeAssistantOnline, generation: p) == [])
        #expect(link.handle(.homeAssistantOnline, generation: g) == [
            .log(.info, "Home Assistant is online: sending discovery again", metadata: [:]), .rediscover])
    }

    @Test("one delivery at a time: events offered while it runs are its own; none while disconnected, one at the connection")
    func deliveries() {
        var link = MQTTLink()
        let g = link.start(broker: Self.broker, discovery: false)
        #expect(link.handle(.offered, generation: g) == [])
        _ = link.handle(.connected, generation: g)
        #expect(link.delivering)
        #expect(link.handle(.offered, generation: g) == [])
        #expect(link.handle(.offered, generation: g) == [])
        _ = link.handle(.deliveryEnded, generation: g)
        #expect(link.handle(.offered, generation: g) == [.deliver])
    }

    @Test("a problem is an error once, then debug while it lasts; a refusal's disconnection adds nothing; a TLS failure names mqtt.ca-file")
    func problems() {
        var link = MQTTLink()
        let g = link.start(broker: Self.broker, discovery: false)
        let refused = "the MQTT broker refused the connection: not authorised (check mqtt.username and mqtt.password-file); " +
            "retrying with back-off"
        #expect(link.handle(.refused(code: 5, reason: "not authorised"), generation: g) == [.log(.error, refused, metadata: ["code": "5"])])
        #expect(link.handle(.lost(code: 0, reason: "closed", tlsFailure: false, pending: 0), generation: g) == [])
        #expect(link.handle(.refused(code: 5, reason: "not authorised"), generation: g) == [.log(.debug, refused, metadata: [:])])
        var tls = MQTTLink()
        let t = tls.start(broker: Self.broker, discovery: false)
        let actions = tls.handle(.lost(code: 8, reason: "A TLS error occurred.", tlsFailure: true, pending: 0), generation: t)
        guard case .log(.error, let message, _)? = actions.first else {
            Issue.record("\(actions)")
            return
        }
        #expect(message.hasPrefix("cannot reach the MQTT broker at \(Self.broker): A TLS error occurred. (check mqtt.ca-file"))
        // After a connection, the same problem is news again.
        _ = tls.handle(.connected, generation: t)
        _ = tls.handle(.lost(code: 7, reason: "lost", tlsFailure: false, pending: 0), generation: t)
        #expect(tls.handle(.lost(code: 8, reason: "A TLS error occurred.", tlsFailure: true, pending: 0), generation: t).first
                    .map { if case .log(.error, _, _) = $0 { true } else { false } } == true)
    }

    @Test("a stopped or replaced client's news is ignored; stop says which connections were up for the goodbyes")
    func generations() {
        var link = MQTTLink()
        let first = link.start(broker: Self.broker, discovery: false)
        _ = link.handle(.connected, generation: first)
        #expect(link.handle(.roomConnected, generation: first) == [.roomOnline])
        let up = link.stop()
        #expect(up.main && up.room && !link.connected)
        #expect(link.handle(.connected, generation: first) == [])
        let second = link.start(broker: Self.broker, discovery: false)
        #expect(second != first)
        #expect(link.handle(.deliveryEnded, generation: first) == [] && !link.delivering)
        #expect(link.handle(.roomConnected, generation: first) == [] && !link.roomConnected)
        #expect(link.stop() == (main: false, room: false))
    }
}
