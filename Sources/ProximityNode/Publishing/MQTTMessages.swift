import Foundation
import MQTTKit
import ProximityAPI
import ProximityCore

/// One message for the broker.
struct MQTTOutgoing: Sendable, Hashable {
    var topic: String
    var payload: String
    var qos: Int = 1
    var retain = false
}

/// The node's topics and payloads (`docs/mqtt.md`): what ``MQTTPublisher`` sends, as pure
/// functions of what the node knows.
struct MQTTMessages: Sendable {
    let identity: String
    let name: String
    let settings: MQTTSettings

    init(identity: UUID, name: String, settings: MQTTSettings) {
        self.identity = identity.lowercased
        self.name = name
        self.settings = settings
    }

    var prefix: String { settings.prefix(name: name) }
    var room: String { settings.room(name: name) }
    var statusTopic: String { "\(prefix)/status" }
    var stateTopic: String { "\(prefix)/state" }
    func peerTopic(_ peer: String) -> String { "\(prefix)/peers/\(MQTTTopic.segment(peer))" }
    func regionTopic(_ region: String) -> String { "\(prefix)/regions/\(MQTTTopic.segment(region))" }
    func eventTopic(_ source: String) -> String { "\(prefix)/events/\(MQTTTopic.segment(source))" }
    var espresenseStatusTopic: String { "espresense/rooms/\(MQTTTopic.segment(room))/status" }
    func espresenseTopic(_ peer: String) -> String { "espresense/devices/\(MQTTTopic.segment(peer))/\(MQTTTopic.segment(room))" }
    var mqttRoomTopic: String { "room_presence/\(MQTTTopic.segment(room))" }

    static func json(_ object: [String: Any]) -> String { MQTTTopic.json(object) }

    static func metres(_ d: Double) -> Double { (d * 100).rounded() / 100 }

    // MARK: - Availability and state

    func status(_ online: Bool) -> MQTTOutgoing {
        MQTTOutgoing(topic: statusTopic, payload: online ? "online" : "offline", retain: true)
    }

    func espresenseStatus(_ online: Bool) -> MQTTOutgoing {
        MQTTOutgoing(topic: espresenseStatusTopic, payload: online ? "online" : "offline", retain: true)
    }

    /// The node as it is: retained.
    func state(_ node: NodeView) -> MQTTOutgoing {
        MQTTOutgoing(topic: stateTopic, payload: Self.json([
            "id": identity, "name": name, "adapter": node.adapter, "advertising": node.advertising, "discovering": node.discovering,
            "peers": node.peerCount, "rssi_offset": node.rssiOffset, "outbox_dropped": node.outboxDropped,
        ]), retain: true)
    }

    /// A region's state: retained `inside`, `outside` or `unknown`; an empty payload clears it.
    func region(_ id: String, _ state: RegionState?) -> MQTTOutgoing {
        MQTTOutgoing(topic: regionTopic(id), payload: state?.rawValue ?? "", retain: true)
    }

    // MARK: - Reports

    /// The reports of one peer that passed the rate control: native, and the compatibility ones.
    func reports(_ peer: PeerState, at time: Double) -> [MQTTOutgoing] {
        let id = peer.identifier.rawValue
        let distance = Self.metres(peer.distance)
        var native: [String: Any] = [
            "id": id, "kind": peer.kind.rawValue, "rssi": Int(peer.rssi), "rssi@1m": Int(peer.measuredPower),
            "distance": distance, "proximity": peer.proximity.rawValue, "time": (time * 1000).rounded() / 1000,
        ]
        if !peer.name.isEmpty { native["name"] = peer.name }
        if !peer.address.isEmpty { native["mac"] = peer.address }
        var out = [MQTTOutgoing(topic: peerTopic(id), payload: Self.json(native), qos: 0)]
        if settings.compatibility.contains(.espresense) {
            var e: [String: Any] = ["id": id, "rssi@1m": Int(peer.measuredPower), "rssi": Int(peer.rssi), "distance": distance,
                                    "raw": distance]
            e["name"] = peer.name.isEmpty ? id : peer.name
            if !peer.address.isEmpty { e["mac"] = peer.address.replacingOccurrences(of: ":", with: "").lowercased() }
            out.append(MQTTOutgoing(topic: espresenseTopic(id), payload: Self.json(e), qos: 0))
        }
        if settings.compatibility.contains(.mqttRoom) {
            out.append(MQTTOutgoing(topic: mqttRoomTopic, payload: Self.json(["id": id, "name": peer.name.isEmpty ? id : peer.name,
                                                                              "distance": distance]), qos: 0))
        }
        return out
    }

    /// A peer no longer heard (silent, or gone from the table): one native report with no
    /// distance, so a fleet service hands over at once.
    func gone(_ peer: String, at time: Double) -> MQTTOutgoing {
        MQTTOutgoing(topic: peerTopic(peer), payload: Self.json(["id": peer, "proximity": "unknown", "distance": NSNull(),
                                                                 "time": (time * 1000).rounded() / 1000]), qos: 0)
    }

    // MARK: - Events

    /// An event of the log: QoS 1, not retained, on `events/<source>`.
    func event(_ entry: LogEntryValue) -> MQTTOutgoing {
        var object: [String: Any] = ["seq": entry.seq, "time": entry.time, "source": entry.source, "type": entry.type]
        if !entry.data.isEmpty { object["data"] = entry.data }
        return MQTTOutgoing(topic: eventTopic(entry.source), payload: Self.json(object))
    }

    // MARK: - Home Assistant discovery

    var nodeObjectID: String { "proximityd_\(MQTTTopic.objectID(identity))" }

    func discoveryTopic(_ component: String, _ object: String) -> String {
        "\(settings.discoveryPrefix)/\(component)/\(nodeObjectID)/\(object)/config"
    }

    /// The topic pattern of this node's binary sensors' discovery (regions removed while the node
    /// was away are found there).
    var binarySensorDiscoveryPattern: String { "\(settings.discoveryPrefix)/binary_sensor/\(nodeObjectID)/+/config" }
    var homeAssistantStatusTopic: String { "\(settings.discoveryPrefix)/status" }

    static func regionObject(_ region: String) -> String { "region_\(MQTTTopic.objectID(region))" }

    private var device: [String: Any] {
        ["identifiers": [nodeObjectID], "name": name, "manufacturer": "proximityd", "model": "proximityd node"]
    }

    private var availability: [String: Any] {
        ["availability_topic": statusTopic, "payload_available": "online", "payload_not_available": "offline"]
    }

    private func config(_ component: String, _ object: String, _ fields: [String: Any]) -> MQTTOutgoing {
        var all = fields
        all["unique_id"] = "\(nodeObjectID)_\(object)"
        all["device"] = device
        all["origin"] = ["name": "proximityd"]
        return MQTTOutgoing(topic: discoveryTopic(component, object), payload: Self.json(all), retain: true)
    }

    /// The node as a device: connectivity, the peer count, and one occupancy sensor per region.
    func discovery(regions: [String]) -> [MQTTOutgoing] {
        var out = [
            config("binary_sensor", "connectivity", [
                "name": "Connectivity", "device_class": "connectivity", "entity_category": "diagnostic", "state_topic": statusTopic,
                "payload_on": "online", "payload_off": "offline",
            ]),
            config("sensor", "peers", [
                "name": "Peers", "state_topic": stateTopic, "value_template": "{{ value_json.peers }}", "state_class": "measurement",
                "icon": "mdi:bluetooth",
            ].merging(availability) { a, _ in a }),
        ]
        for region in regions { out.append(regionDiscovery(region)) }
        return out
    }

    func regionDiscovery(_ region: String) -> MQTTOutgoing {
        config("binary_sensor", Self.regionObject(region), [
            "name": "Region \(region)", "device_class": "occupancy", "state_topic": regionTopic(region),
            "value_template": "{{ value if value in ('inside', 'outside') else 'None' }}",
            "payload_on": "inside", "payload_off": "outside",
        ].merging(availability) { a, _ in a })
    }

    /// Deletes a region's entity (and its retained state).
    func regionRemoval(_ region: String) -> [MQTTOutgoing] {
        [MQTTOutgoing(topic: discoveryTopic("binary_sensor", Self.regionObject(region)), payload: "", retain: true),
         self.region(region, nil)]
    }
}

/// What the publisher knows of the node, from its events.
struct NodeView: Sendable, Hashable {
    var adapter: String
    var advertising = false
    var discovering = false
    var peerCount = 0
    var rssiOffset: Double
    var outboxDropped: UInt64 = 0
}
