import Foundation
import ProximityMQTT
@testable import ProximityNode
import Testing

/// `mqtt.role`: a node that moves is never a room.
@Suite struct MQTTRoleTests {
    @Test("role: fixed by default, mobile when set; anything else, and compat forms on a mobile node, refused where they are")
    func role() throws {
        let file = ConfigFileTests.file
        #expect(try ConfigFile.parse("mqtt:\n  broker: mqtt://localhost\n", path: file).mqtt?.role == .fixed)
        #expect(try ConfigFile.parse("mqtt:\n  broker: mqtt://localhost\n  role: mobile\n", path: file).mqtt?.role == .mobile)
        #expect(ConfigFileTests.problems("mqtt:\n  broker: mqtt://localhost\n  role: roaming\n")
            == ["\(file):3:9: mqtt.role: must be fixed or mobile, not 'roaming'"])
        #expect(ConfigFileTests.problems("mqtt:\n  broker: mqtt://localhost\n  role: mobile\n  compat: [mqtt-room]\n")
            == ["\(file):4:3: mqtt.compat: a mobile node is never a room, and these forms would make it one: leave compat out, or set role: fixed"])
    }

    @Test("the node's state says its role; a state without one (an older node) is fixed")
    func state() throws {
        let state = NodeStatePayload(id: "x", name: "cart", adapter: "hci0", advertising: true, discovering: true, peers: 0, rssiOffset: 0,
                                     outboxDropped: 0, role: MQTTSettings.Role.mobile.rawValue)
        let json = MQTTJSON.encode(state)
        #expect(json.contains(#""role":"mobile""#), "\(json)")
        #expect(MQTTJSON.decode(NodeStatePayload.self, from: json.utf8)?.isMobile == true)
        let old = #"{"id":"x","name":"n","adapter":"hci0","advertising":true,"discovering":true,"peers":0,"rssi_offset":0,"outbox_dropped":0}"#
        #expect(MQTTJSON.decode(NodeStatePayload.self, from: old.utf8)?.isMobile == false)
    }
}
