import Foundation
import ProximityMQTT

/// What the fleet service hears on the broker, parsed once from a topic and its payload (the
/// topics are in docs/fleet.md and docs/mqtt.md). ``FleetStep`` takes these, never topics.
public enum FleetMessage: Sendable, Hashable {
    /// The service's own retained room of a device, from before a restart
    /// (`<prefix>/devices/<device>/room`); empty when the retained message was deleted.
    case ownRoom(device: String, room: String)
    /// Home Assistant's birth or last will (`<discovery-prefix>/status`).
    case homeAssistant(online: Bool)
    /// A node's retained state (`<root>/<node>/state`); nil when the payload is not one.
    case nodeState(node: String, NodeStatePayload?)
    /// A node's availability (`<root>/<node>/status`): `online`, `offline`, or empty (deleted).
    case nodeStatus(node: String, status: String)
    /// A node's report of a device (`<root>/<node>/peers/<device>`); nil when the payload is not
    /// one.
    case report(node: String, device: String, PeerReport?)
    /// What a node heard in a second (`<root>/<node>/hearings`); nil when the payload is not one.
    case hearings(node: String, HearingBatch?)
    /// Anything else a node publishes under the root (its regions, events …): it is alive.
    case nodeActivity(node: String)

    /// The message on `topic`, or nil for a topic the service does not read. An empty payload (a
    /// deleted retained message) is kept: it means something for a room and a status.
    public static func parse(topic: String, payload: [UInt8], root: String, prefix: String, discoveryPrefix: String) -> FleetMessage? {
        if topic == "\(discoveryPrefix)/status" { return .homeAssistant(online: String(decoding: payload, as: UTF8.self) == "online") }
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        let own = prefix.split(separator: "/").count
        if topic.hasPrefix(prefix + "/devices/"), levels.count == own + 3, levels.last == "room" {
            return .ownRoom(device: MQTTTopic.name(levels[own + 1]), room: String(decoding: payload, as: UTF8.self))
        }
        let depth = root.split(separator: "/").count
        guard topic.hasPrefix(root + "/"), levels.count > depth else { return nil }
        let node = MQTTTopic.name(levels[depth])
        switch (levels.count - depth, levels.count > depth + 1 ? levels[depth + 1] : "") {
        case (2, "state"):
            return .nodeState(node: node, MQTTJSON.decode(NodeStatePayload.self, from: payload))
        case (2, "status"):
            return .nodeStatus(node: node, status: String(String(decoding: payload, as: UTF8.self).prefix(16)))
        case (2, NodeTopics.hearingsLevel):
            return .hearings(node: node, MQTTJSON.decode(HearingBatch.self, from: payload))
        case (3, "peers"):
            return .report(node: node, device: MQTTTopic.name(levels[depth + 2]), MQTTJSON.decode(PeerReport.self, from: payload))
        default:
            return payload.isEmpty ? nil : .nodeActivity(node: node)
        }
    }

    /// The node it came from, for a node's message.
    var node: String? {
        switch self {
        case .nodeState(let node, _), .nodeStatus(let node, _), .report(let node, _, _), .hearings(let node, _),
             .nodeActivity(let node): node
        case .ownRoom, .homeAssistant: nil
        }
    }
}
