import Foundation
import MQTTKit
import ProximityAPI
import ProximityCore
import ProximityMQTT

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
    /// Whether peers' radio addresses go out (`mac`): not from a node with a fleet key, whose
    /// peers' addresses would undo their privacy for anyone who reads the broker.
    var publishesAddresses: Bool

    init(identity: UUID, name: String, settings: MQTTSettings, publishesAddresses: Bool = true) {
        self.identity = identity.lowercased
        self.name = name
        self.settings = settings
        self.publishesAddresses = publishesAddresses
    }

    var prefix: String { settings.prefix(name: name) }
    var room: String { settings.room(name: name) }
    var topics: NodeTopics { NodeTopics(prefix: prefix) }
    var espresenseStatusTopic: String { ESPresenseReport.statusTopic(room: room) }
    func espresenseTopic(_ peer: String) -> String { ESPresenseReport.topic(peer: peer, room: room) }
    var mqttRoomTopic: String { MQTTRoomReport.topic(room: room) }

    // MARK: - Availability and state

    func status(_ online: Bool) -> MQTTOutgoing {
        MQTTOutgoing(topic: topics.status, payload: online ? "online" : "offline", retain: true)
    }

    func espresenseStatus(_ online: Bool) -> MQTTOutgoing {
        MQTTOutgoing(topic: espresenseStatusTopic, payload: online ? "online" : "offline", retain: true)
    }

    /// The node as it is: retained.
    func state(_ node: NodeView) -> MQTTOutgoing {
        MQTTOutgoing(topic: topics.state, payload: MQTTJSON.encode(NodeStatePayload(
            id: identity, name: name, adapter: node.adapter, advertising: node.advertising, discovering: node.discovering,
            peers: node.peerCount, rssiOffset: node.rssiOffset, outboxDropped: node.outboxDropped, role: settings.role.rawValue,
            health: node.health, healthDetail: node.healthDetail.isEmpty ? nil : node.healthDetail)),
            retain: true)
    }

    /// A region's state: retained `inside`, `outside` or `unknown`; an empty payload clears it.
    func region(_ id: String, _ state: RegionState?) -> MQTTOutgoing {
        MQTTOutgoing(topic: topics.region(id), payload: state?.rawValue ?? "", retain: true)
    }

    // MARK: - Reports

    /// The reports of one peer that passed the rate control: native, and the compatibility ones.
    func reports(_ peer: PeerSnapshot, at time: Double) -> [MQTTOutgoing] {
        let native = PeerReport(peer, at: time, address: publishesAddresses)
        return [MQTTOutgoing(topic: topics.peer(peer.identifier.rawValue), payload: MQTTJSON.encode(native), qos: 0)]
            + compatibilityReports(peer)
    }

    /// The compatibility forms of one peer's report (`compat:`), none without them.
    func compatibilityReports(_ peer: PeerSnapshot) -> [MQTTOutgoing] {
        let id = peer.identifier.rawValue
        let distance = MQTTRounding.metres(peer.distance)
        var out: [MQTTOutgoing] = []
        let shownName = peer.name.isEmpty ? id : peer.name
        if settings.compatibility.contains(.espresense) {
            let mac = peer.address.isEmpty || !publishesAddresses ? nil : peer.address.replacingOccurrences(of: ":", with: "").lowercased()
            let report = ESPresenseReport(id: id, name: shownName, rssiAt1m: Int(peer.measuredPower), rssi: Int(peer.rssi),
                                          distance: distance, mac: mac)
            out.append(MQTTOutgoing(topic: espresenseTopic(id), payload: MQTTJSON.encode(report), qos: 0))
        }
        if settings.compatibility.contains(.mqttRoom) {
            out.append(MQTTOutgoing(topic: mqttRoomTopic,
                                    payload: MQTTJSON.encode(MQTTRoomReport(id: id, name: shownName, distance: distance)),
                                    qos: 0))
        }
        return out
    }

    /// What the node heard in the second before `time`: one message (more past
    /// ``HearingBatch/maxDevices`` peers), QoS 0; none when it heard nothing or `hearings:` is off.
    func hearings(_ peers: [PeerSnapshot], at time: Double) -> [MQTTOutgoing] {
        guard settings.hearings else { return [] }
        return HearingBatch.batches(peers, at: time).map { MQTTOutgoing(topic: topics.hearings, payload: MQTTJSON.encode($0), qos: 0) }
    }

    /// A peer no longer heard (silent, or gone from the table): one native report with no
    /// distance, so a fleet service hands over at once.
    func gone(_ peer: String, at time: Double) -> MQTTOutgoing {
        MQTTOutgoing(topic: topics.peer(peer), payload: MQTTJSON.encode(PeerReport.gone(peer, at: MQTTRounding.milliseconds(time))), qos: 0)
    }

    // MARK: - Events

    /// An event of the log: QoS 1, not retained, on `events/<source>`.
    func event(_ entry: LogEntryValue) -> MQTTOutgoing {
        let payload = EventPayload(seq: entry.seq, time: entry.time, source: entry.source, type: entry.type,
                                   data: entry.data.isEmpty ? nil : entry.data)
        return MQTTOutgoing(topic: topics.events(entry.source), payload: MQTTJSON.encode(payload))
    }

    // MARK: - Home Assistant discovery

    var nodeObjectID: String { DiscoveryConfig.nodeDeviceID(identity: identity) }

    func discoveryTopic(_ component: DiscoveryComponent, _ object: String) -> String {
        DiscoveryConfig.topic(prefix: settings.discoveryPrefix, component, node: nodeObjectID, object: object)
    }

    /// The topic pattern of this node's binary sensors' discovery (regions removed while the node
    /// was away are found there).
    var binarySensorDiscoveryPattern: String { discoveryTopic(.binarySensor, "+") }
    var homeAssistantStatusTopic: String { "\(settings.discoveryPrefix)/status" }

    static func regionObject(_ region: String) -> String { "region_\(MQTTTopic.objectID(region))" }

    private var device: DiscoveryConfig.Device {
        DiscoveryConfig.Device.node(identity: identity, name: name)
    }

    /// The config of one of the node's entities, `configure` filling in its own fields. Its entity
    /// id is `<component>.proximityd_<node name>_<object>`.
    private func config(_ component: DiscoveryComponent, _ object: String, name: String, stateTopic: String,
                        _ configure: (inout DiscoveryConfig) -> Void) -> MQTTOutgoing {
        var config = DiscoveryConfig(name: name, uniqueID: "\(nodeObjectID)_\(object)", stateTopic: stateTopic, device: device,
                                     origin: .init(name: "proximityd"))
        config.setEntityID(component, "proximityd_\(self.name)_\(object)")
        configure(&config)
        return MQTTOutgoing(topic: discoveryTopic(component, object), payload: MQTTJSON.encode(config), retain: true)
    }

    /// The node as a device: connectivity, the peer count, and one occupancy sensor per region.
    func discovery(regions: [String]) -> [MQTTOutgoing] {
        var out = [
            config(.binarySensor, "connectivity", name: "Connectivity", stateTopic: topics.status) {
                $0.deviceClass = "connectivity"
                $0.entityCategory = "diagnostic"
                $0.payloadOn = "online"
                $0.payloadOff = "offline"
            },
            config(.sensor, "peers", name: "Peers", stateTopic: topics.state) {
                $0.valueTemplate = "{{ value_json.peers }}"
                $0.stateClass = "measurement"
                $0.icon = "mdi:bluetooth"
                $0.setAvailability(topics.status)
            },
        ]
        for region in regions { out.append(regionDiscovery(region)) }
        return out
    }

    func regionDiscovery(_ region: String) -> MQTTOutgoing {
        config(.binarySensor, Self.regionObject(region), name: "Region \(region)", stateTopic: topics.region(region)) {
            $0.deviceClass = "occupancy"
            $0.valueTemplate = "{{ value if value in ('inside', 'outside') else 'None' }}"
            $0.payloadOn = "inside"
            $0.payloadOff = "outside"
            $0.setAvailability(topics.status)
        }
    }

    /// Deletes a region's entity (and its retained state).
    func regionRemoval(_ region: String) -> [MQTTOutgoing] {
        [MQTTOutgoing(topic: discoveryTopic(.binarySensor, Self.regionObject(region)), payload: "", retain: true),
         self.region(region, nil)]
    }
}

/// What the publisher knows of the node, from its events.
struct NodeView: Sendable, Hashable {
    var adapter: String
    var advertising = false
    var discovering = false
    var health = AdapterLink.Health.starting.state
    var healthDetail = AdapterLink.Health.starting.detail
    var peerCount = 0
    var rssiOffset: Double
    var outboxDropped: UInt64 = 0
}
