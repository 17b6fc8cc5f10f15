import Foundation
import ProximityAPI
import ProximityCore
@testable import ProximityNode
import ProximityMQTT
import Testing

/// The node's payloads as the shared Codable types write them: the forms docs/mqtt.md shows.
@Suite("MQTT payloads")
struct MQTTPayloadTests {
    static let messages = MQTTMessages(identity: UUID(uuidString: "4a1c2b3d-5e6f-4a7b-8c9d-0e1f2a3b4c5d")!, name: "kitchen",
                                       settings: MQTTSettings(broker: .init(host: "127.0.0.1", port: 1883)))

    @Test("a peer's report carries the smoothed RSSI, its spread and the sample count, for a fleet's positioning")
    func positioningFields() throws {
        let peer = PeerSnapshot(identifier: "ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:2", kind: .ibeacon, address: "C0:00:00:00:00:01",
                                name: "Anna's badge", proximity: .near, distance: 1.84, rssi: -66, smoothedRSSI: -64.26, measuredPower: -59,
                                lastSeen: 10, spread: 3.14159, samples: 42)
        let native = try #require(Self.messages.reports(peer, at: 1795469990.769).first)
        let read = try #require(MQTTJSON.decode(PeerReport.self, from: Array(native.payload.utf8)))
        #expect(read.rssiFiltered == -64.3 && read.rssiSpread == 3.1 && read.samples == 42 && read.name == "Anna's badge")
        #expect(native.payload.contains(#""rssi_filtered":-64.3"#) && native.payload.contains(#""rssi_spread":3.1"#)
                && native.payload.contains(#""samples":42"#), "\(native.payload)")
    }

    @Test("a phone recognised by its IRK is reported under its stable peer irk:<name>, kind irk, with the address it uses now, in the native and ESPresense forms")
    func irkPeer() throws {
        var settings = MQTTSettings(broker: .init(host: "127.0.0.1", port: 1883))
        settings.compatibility = [.espresense]
        let messages = MQTTMessages(identity: UUID(uuidString: "4a1c2b3d-5e6f-4a7b-8c9d-0e1f2a3b4c5d")!, name: "kitchen", settings: settings)
        let peer = PeerSnapshot(identifier: .irk("anna-phone"), kind: .irk, address: "5B:12:34:0D:FB:AA", name: "", proximity: .near,
                                distance: 2.5, rssi: -70, smoothedRSSI: -70, measuredPower: -59, lastSeen: 10)
        let out = messages.reports(peer, at: 1795469990)
        #expect(out.map(\.topic) == ["proximityd/kitchen/peers/irk:anna-phone", ESPresenseReport.topic(peer: "irk:anna-phone", room: "kitchen")])
        let read = try #require(MQTTJSON.decode(PeerReport.self, from: Array(out[0].payload.utf8)))
        #expect(read.id == "irk:anna-phone" && read.kind == "irk" && read.mac == "5B:12:34:0D:FB:AA")
    }

    @Test("issue 32: a node's report says whether it proved its identity with the fleet's key (verified, for nodes only); a node with a fleet key publishes no peer's radio address, native or ESPresense")
    func verifiedAndNoAddress() throws {
        var settings = MQTTSettings(broker: .init(host: "127.0.0.1", port: 1883))
        settings.compatibility = [.espresense]
        let identity = UUID(uuidString: "4a1c2b3d-5e6f-4a7b-8c9d-0e1f2a3b4c5d")!
        var member = PeerSnapshot(identifier: .node(UUID(uuidString: "0b0b0b0b-0000-4000-8000-000000000002")!), kind: .node,
                                  address: "4C:11:22:33:44:55", name: "bravo", proximity: .near, distance: 2, rssi: -66, smoothedRSSI: -66,
                                  measuredPower: -59, lastSeen: 10)
        member.verified = true
        var stranger = member
        stranger.verified = false
        let phone = PeerSnapshot(identifier: .irk("anna-phone"), kind: .irk, address: "5B:12:34:0D:FB:AA", name: "", proximity: .near,
                                 distance: 2.5, rssi: -70, smoothedRSSI: -70, measuredPower: -59, lastSeen: 10)
        for keyed in [false, true] {
            let messages = MQTTMessages(identity: identity, name: "kitchen", settings: settings, publishesAddresses: !keyed)
            for (peer, verified) in [(member, true as Bool?), (stranger, false), (phone, nil)] {
                let out = messages.reports(peer, at: 1795469990)
                let native = try #require(MQTTJSON.decode(PeerReport.self, from: Array(out[0].payload.utf8)))
                #expect(native.verified == verified, "\(out[0].payload)")
                let espresense = try #require(MQTTJSON.decode(ESPresenseReport.self, from: Array(out[1].payload.utf8)))
                if keyed {
                    #expect(native.mac == nil && espresense.mac == nil && !out.contains { $0.payload.contains(peer.address) }
                            && !out.contains { $0.payload.lowercased().contains(peer.address.replacingOccurrences(of: ":", with: "").lowercased()) },
                            "\(out.map(\.payload))")
                } else {
                    #expect(native.mac == peer.address && espresense.mac != nil, "\(out.map(\.payload))")
                }
            }
        }
    }

    @Test("a peer no longer heard: distance null (not absent), no RSSI; a reader takes it as no distance")
    func gone() throws {
        let out = Self.messages.gone("ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:2", at: 1795455467.0844)
        #expect(out.topic == "proximityd/kitchen/peers/ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:2")
        #expect(out.payload == #"{"distance":null,"id":"ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:2","proximity":"unknown","time":1795455467.084}"#)
        let read = try #require(MQTTJSON.decode(PeerReport.self, from: Array(out.payload.utf8)))
        #expect(read.distance == nil && read.rssi == nil && read.proximity == "unknown")
        // What another publisher writes, with only id and distance, is read too.
        #expect(MQTTJSON.decode(PeerReport.self, from: Array(#"{"id":"tag1","distance":1.5}"#.utf8))?.distance == 1.5)
        #expect(MQTTJSON.decode(PeerReport.self, from: Array(#"{"distance":1.5}"#.utf8)) == nil, "id is required")
    }

    @Test("the state and an event: snake_case keys, data only when there is some")
    func stateAndEvent() {
        var view = NodeView(adapter: "hci0", advertising: true, peerCount: 3, rssiOffset: -4, outboxDropped: 2)
        view.health = "ok"
        view.healthDetail = ""
        let state = Self.messages.state(view)
        #expect(state.retain && state.topic == "proximityd/kitchen/state")
        #expect(state.payload == #"{"adapter":"hci0","advertising":true,"discovering":false,"health":"ok","id":"4a1c2b3d-5e6f-4a7b-8c9d-0e1f2a3b4c5d","name":"kitchen","outbox_dropped":2,"peers":3,"role":"fixed","rssi_offset":-4}"#)
        view.health = "recovering"
        view.healthDetail = "bluetoothd went away: waiting for bluetoothd (org.bluez)"
        #expect(Self.messages.state(view).payload.contains(#""health":"recovering","health_detail":"bluetoothd went away: waiting for bluetoothd (org.bluez)""#))
        let bare = Self.messages.event(LogEntryValue(seq: 7, time: 12.5, source: "region", type: "entered", data: [:]))
        #expect(bare.payload == #"{"seq":7,"source":"region","time":12.5,"type":"entered"}"# && bare.topic == "proximityd/kitchen/events/region")
    }
}
