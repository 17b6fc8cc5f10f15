import Foundation
import ProximityCore

/// The JSON of every payload proximityd and proximity-fleet publish: sorted keys, slashes as they
/// are (what `mosquitto_sub` shows and Home Assistant reads).
public enum MQTTJSON {
    public static func encode(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Every payload type here encodes; a failure would be a programming error.
        guard let data = try? encoder.encode(value) else { preconditionFailure("cannot encode \(type(of: value))") }
        return String(decoding: data, as: UTF8.self)
    }

    /// `bytes` as a `T`, or nil when they are not one.
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: some Sequence<UInt8>) -> T? {
        try? JSONDecoder().decode(type, from: Data(bytes))
    }
}

/// Seconds rounded to the millisecond and metres to the centimetre, as payloads carry them.
public enum MQTTRounding {
    public static func metres(_ d: Double) -> Double { (d * 100).rounded() / 100 }
    public static func milliseconds(_ t: Double) -> Double { (t * 1000).rounded() / 1000 }
    public static func tenths(_ t: Double) -> Double { (t * 10).rounded() / 10 }
}

// MARK: - A node's topics (`docs/mqtt.md`)

/// The topics of one node under its prefix (`proximityd/<name>` by default).
public struct NodeTopics: Sendable, Hashable {
    public let prefix: String

    public init(prefix: String) { self.prefix = prefix }

    /// `online`/`offline`, retained; the will.
    public var status: String { "\(prefix)/status" }
    /// ``NodeStatePayload``, retained.
    public var state: String { "\(prefix)/state" }
    /// ``PeerReport``s of one peer.
    public func peer(_ id: String) -> String { "\(prefix)/peers/\(MQTTTopic.segment(id))" }
    /// A region's state, retained: `inside`, `outside`, `unknown`.
    public func region(_ id: String) -> String { "\(prefix)/regions/\(MQTTTopic.segment(id))" }
    /// ``EventPayload``s of one source of the event log.
    public func events(_ source: String) -> String { "\(prefix)/events/\(MQTTTopic.segment(source))" }
    /// ``HearingBatch``es: what the node heard in each second, QoS 0, not retained.
    public var hearings: String { "\(prefix)/hearings" }
    /// The last level of ``hearings``.
    public static let hearingsLevel = "hearings"
}

/// What `<prefix>/hearings` holds: every peer the node heard in the second before `time`, with
/// how many samples, their median and their spread (``HeardSecond``); one message a second (more
/// only past ``maxDevices`` peers), so a node hearing 200 devices sends one or two messages, not
/// 200. A fleet's positioning reads these: they are at most a second old, where a peer report
/// waits for the zone filter and the rate control (docs/mqtt.md, hearings).
public struct HearingBatch: Codable, Hashable, Sendable {
    public struct Device: Codable, Hashable, Sendable {
        /// The peer's identifier, as in `<prefix>/peers/<id>`.
        public var id: String
        /// How many samples.
        public var n: Int
        /// Their median, dBm (0.1 dB; with the node's RSSI offset).
        public var rssi: Double
        /// 1.4826 × their median absolute deviation, dB (0.1 dB).
        public var spread: Double
        /// `rssi@1m`: the measured power the node ranges the peer with, dBm.
        public var rssiAt1m: Int

        enum CodingKeys: String, CodingKey { case id, n, rssi, spread, rssiAt1m = "rssi@1m" }

        public init(id: String, n: Int, rssi: Double, spread: Double, rssiAt1m: Int) {
            self.id = id
            self.n = n
            self.rssi = rssi
            self.spread = spread
            self.rssiAt1m = rssiAt1m
        }
    }

    /// Seconds since the Unix epoch (0.001 s): the end of the second the samples fall in.
    public var time: Double
    public var devices: [Device]

    /// Peers per message: a batch of more is split (each message about 80 bytes a peer).
    public static let maxDevices = 100

    public init(time: Double, devices: [Device]) {
        self.time = time
        self.devices = devices
    }

    /// What a node publishes at its report at `time` (seconds since the Unix epoch): the peers
    /// heard since the report before, by identifier, in messages of at most ``maxDevices``. The
    /// one place a batch is made, for the node and for `proximity-fleet replay`.
    public static func batches(_ peers: [PeerSnapshot], at time: Double) -> [HearingBatch] {
        let heard = peers.compactMap { peer in
            peer.heard.map {
                Device(id: peer.identifier.rawValue, n: $0.count, rssi: MQTTRounding.tenths($0.rssi),
                       spread: MQTTRounding.tenths($0.spread), rssiAt1m: Int(peer.measuredPower))
            }
        }.sorted { $0.id < $1.id }
        let t = MQTTRounding.milliseconds(time)
        return stride(from: 0, to: heard.count, by: maxDevices).map {
            HearingBatch(time: t, devices: Array(heard[$0 ..< min($0 + maxDevices, heard.count)]))
        }
    }
}

/// What `<prefix>/state` holds: the node as it is.
public struct NodeStatePayload: Codable, Hashable, Sendable {
    public var id: String
    public var name: String
    public var adapter: String
    public var advertising: Bool
    public var discovering: Bool
    public var peers: Int
    public var rssiOffset: Double
    public var outboxDropped: UInt64
    /// `fixed` (a room for `proximity-fleet`) or `mobile` (never a room); absent from nodes
    /// older than the role: fixed.
    public var role: String?
    /// `Node1.Health`: `ok`, `recovering` or `failed`; absent from older nodes.
    public var health: String?
    /// `Node1.HealthDetail`: why, when not `ok`.
    public var healthDetail: String?

    enum CodingKeys: String, CodingKey {
        case id, name, adapter, advertising, discovering, peers, role, health
        case rssiOffset = "rssi_offset", outboxDropped = "outbox_dropped", healthDetail = "health_detail"
    }

    /// Whether the node moves, so that its reports make no room.
    public var isMobile: Bool { role == "mobile" }

    public init(id: String, name: String, adapter: String, advertising: Bool, discovering: Bool, peers: Int, rssiOffset: Double,
                outboxDropped: UInt64, role: String? = nil, health: String? = nil, healthDetail: String? = nil) {
        self.id = id
        self.name = name
        self.adapter = adapter
        self.advertising = advertising
        self.discovering = discovering
        self.peers = peers
        self.rssiOffset = rssiOffset
        self.outboxDropped = outboxDropped
        self.role = role
        self.health = health
        self.healthDetail = healthDetail
    }
}

/// What `<prefix>/peers/<id>` holds: one peer's report, or, with `distance` null and no RSSI, a
/// peer no longer heard. The node writes every field it knows; a reader (the fleet service) needs
/// only `id` and `distance`, so reports from other publishers in the same form are read too.
public struct PeerReport: Codable, Hashable, Sendable {
    public var id: String
    public var kind: String?
    public var rssi: Int?
    /// `rssi@1m`: the measured power the peer was ranged with.
    public var rssiAt1m: Int?
    /// Metres; null for a peer no longer heard.
    public var distance: Double?
    /// `immediate`, `near`, `far` or `unknown`.
    public var proximity: String?
    /// Seconds since the Unix epoch.
    public var time: Double?
    public var name: String?
    public var mac: String?
    /// The smoothed RSSI the distance rests on, dBm (0.1 dB).
    public var rssiFiltered: Double?
    /// How far the samples stray from it, dB (0.1 dB).
    public var rssiSpread: Double?
    /// About how many samples the node heard it with in the last 10 s.
    public var samples: Int?
    /// For a node: whether it proved its identity to the reporting node with the fleet's key
    /// (docs/security.md). Absent for other kinds.
    public var verified: Bool?

    enum CodingKeys: String, CodingKey {
        case id, kind, rssi, rssiAt1m = "rssi@1m", distance, proximity, time, name, mac
        case rssiFiltered = "rssi_filtered", rssiSpread = "rssi_spread", samples, verified
    }

    public init(id: String, kind: String?, rssi: Int?, rssiAt1m: Int?, distance: Double?, proximity: String?, time: Double?,
                name: String? = nil, mac: String? = nil, rssiFiltered: Double? = nil, rssiSpread: Double? = nil, samples: Int? = nil,
                verified: Bool? = nil) {
        self.id = id
        self.kind = kind
        self.rssi = rssi
        self.rssiAt1m = rssiAt1m
        self.distance = distance
        self.proximity = proximity
        self.time = time
        self.name = name
        self.mac = mac
        self.rssiFiltered = rssiFiltered
        self.rssiSpread = rssiSpread
        self.samples = samples
        self.verified = verified
    }

    /// What a node publishes of `peer` at `time` (seconds since the Unix epoch): the one place
    /// a report is made, for the node and for `proximity-fleet replay`. `address`: whether the
    /// peer's radio address goes in (`mac`); a node with a fleet key never publishes one.
    public init(_ peer: PeerSnapshot, at time: Double, address: Bool = true) {
        self.init(id: peer.identifier.rawValue, kind: peer.kind.rawValue, rssi: Int(peer.rssi), rssiAt1m: Int(peer.measuredPower),
                  distance: MQTTRounding.metres(peer.distance), proximity: peer.proximity.rawValue, time: MQTTRounding.milliseconds(time),
                  name: peer.name.isEmpty ? nil : peer.name, mac: peer.address.isEmpty || !address ? nil : peer.address,
                  rssiFiltered: MQTTRounding.tenths(peer.smoothedRSSI), rssiSpread: MQTTRounding.tenths(peer.spread), samples: peer.samples,
                  verified: peer.kind == .node ? peer.verified : nil)
    }

    /// A peer no longer heard: no distance, so a fleet service hands over at once.
    public static func gone(_ id: String, at time: Double) -> PeerReport {
        PeerReport(id: id, kind: nil, rssi: nil, rssiAt1m: nil, distance: nil, proximity: "unknown", time: time)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encodeIfPresent(kind, forKey: .kind)
        try c.encodeIfPresent(rssi, forKey: .rssi)
        try c.encodeIfPresent(rssiAt1m, forKey: .rssiAt1m)
        try c.encode(distance, forKey: .distance)   // null, not absent, for a peer no longer heard
        try c.encodeIfPresent(proximity, forKey: .proximity)
        try c.encodeIfPresent(time, forKey: .time)
        try c.encodeIfPresent(name, forKey: .name)
        try c.encodeIfPresent(mac, forKey: .mac)
        try c.encodeIfPresent(rssiFiltered, forKey: .rssiFiltered)
        try c.encodeIfPresent(rssiSpread, forKey: .rssiSpread)
        try c.encodeIfPresent(samples, forKey: .samples)
        try c.encodeIfPresent(verified, forKey: .verified)
    }
}

/// ESPresense's report (`espresense/devices/<id>/<room>`), as its companion and Home Assistant read it.
public struct ESPresenseReport: Codable, Hashable, Sendable {
    public var id: String
    public var name: String
    public var rssiAt1m: Int
    public var rssi: Int
    public var distance: Double
    public var raw: Double
    /// Lowercase hex, no colons.
    public var mac: String?

    enum CodingKeys: String, CodingKey { case id, name, rssiAt1m = "rssi@1m", rssi, distance, raw, mac }

    public init(id: String, name: String, rssiAt1m: Int, rssi: Int, distance: Double, mac: String?) {
        self.id = id
        self.name = name
        self.rssiAt1m = rssiAt1m
        self.rssi = rssi
        self.distance = distance
        raw = distance
        self.mac = mac
    }

    public static func topic(peer: String, room: String) -> String {
        "espresense/devices/\(MQTTTopic.segment(peer))/\(MQTTTopic.segment(room))"
    }

    public static func statusTopic(room: String) -> String { "espresense/rooms/\(MQTTTopic.segment(room))/status" }
}

/// Home Assistant's `mqtt_room` report (`room_presence/<room>`).
public struct MQTTRoomReport: Codable, Hashable, Sendable {
    public var id: String
    public var name: String
    public var distance: Double

    public init(id: String, name: String, distance: Double) {
        self.id = id
        self.name = name
        self.distance = distance
    }

    public static func topic(room: String) -> String { "room_presence/\(MQTTTopic.segment(room))" }
}

/// An entry of the event log on `<prefix>/events/<source>`.
public struct EventPayload: Codable, Hashable, Sendable {
    public var seq: UInt64
    public var time: Double
    public var source: String
    public var type: String
    public var data: [String: String]?

    public init(seq: UInt64, time: Double, source: String, type: String, data: [String: String]?) {
        self.seq = seq
        self.time = time
        self.source = source
        self.type = type
        self.data = data
    }
}

// MARK: - The fleet service's topics (`docs/fleet.md`)

/// The fleet service's topics under its prefix (`proximity-fleet` by default).
public struct FleetTopics: Sendable, Hashable {
    public let prefix: String

    public init(prefix: String) { self.prefix = prefix }

    /// `online`/`offline`, retained; the will.
    public var status: String { "\(prefix)/status" }
    /// The device's room, retained: a node's name or `not_home`.
    public func room(_ device: String) -> String { "\(prefix)/devices/\(MQTTTopic.segment(device))/room" }
    /// ``FleetAttributes``, retained.
    public func attributes(_ device: String) -> String { "\(prefix)/devices/\(MQTTTopic.segment(device))/attributes" }
    /// ``FleetTable``, retained.
    public var table: String { "\(prefix)/table" }
    /// ``FleetPosition``, retained, with a floor plan (`--plan`); emptied (the retained message
    /// deleted) when the device has no position any more.
    public func position(_ device: String) -> String { "\(prefix)/devices/\(MQTTTopic.segment(device))/position" }
    /// ``FleetCalibrationPayload``, retained, with a floor plan, after each fit.
    public var calibration: String { "\(prefix)/calibration" }
    /// ``FleetRoomOccupancy``, retained: the devices in a room, when they change.
    public func occupancy(_ room: String) -> String { "\(prefix)/rooms/\(MQTTTopic.segment(room))" }
}

/// What `<prefix>/rooms/<room>` holds: the tracked devices whose room it is, by identifier and by
/// name (a device's display name, or its identifier when it has none), both in the identifiers'
/// order. Home Assistant's occupancy and count entities of the room read it.
public struct FleetRoomOccupancy: Codable, Hashable, Sendable {
    public var room: String
    public var count: Int
    public var devices: [String]
    public var names: [String]

    public init(room: String, devices: [String], names: [String]) {
        self.room = room
        count = devices.count
        self.devices = devices
        self.names = names
    }
}

/// What `<prefix>/devices/<id>/position` holds, with a floor plan: where the device is on it.
/// Metres (0.1 m), `floor` the floor's name (null on a plan without floors), `uncertainty` the
/// radial standard deviation, `room` the room whose outline holds it (null: in none), `time` when
/// it was estimated (seconds since the Unix epoch). Also a row's `position` in ``FleetTable``.
public struct FleetPosition: Codable, Hashable, Sendable {
    public var x: Double
    public var y: Double
    public var z: Double
    public var floor: String?
    public var uncertainty: Double
    public var room: String?
    public var time: Double

    enum CodingKeys: String, CodingKey { case x, y, z, floor, uncertainty, room, time }

    public init(x: Double, y: Double, z: Double, floor: String?, uncertainty: Double, room: String?, time: Double) {
        self.x = x
        self.y = y
        self.z = z
        self.floor = floor
        self.uncertainty = uncertainty
        self.room = room
        self.time = time
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(x, forKey: .x)
        try c.encode(y, forKey: .y)
        try c.encode(z, forKey: .z)
        try c.encode(floor, forKey: .floor)   // null, not absent
        try c.encode(uncertainty, forKey: .uncertainty)
        try c.encode(room, forKey: .room)     // null, not absent: in no room
        try c.encode(time, forKey: .time)
    }
}

/// What `<prefix>/devices/<id>/attributes` holds: the room, each node's distance and its age.
public struct FleetAttributes: Codable, Hashable, Sendable {
    public var room: String
    public var distances: [String: Double]
    public var ages: [String: Double]
    public var since: Double
    public var rule: String
    /// With a floor plan, while the device has a position: where (metres), on which floor (its
    /// name; absent on a plan without floors), and how uncertain (metres). Absent otherwise.
    public var x: Double?
    public var y: Double?
    public var floor: String?
    public var uncertainty: Double?
    /// For a node of the fleet: whether the nodes that hear it say it proved its identity with
    /// the fleet's key (false when one says it did not); absent for other devices.
    public var verified: Bool?

    public init(room: String, distances: [String: Double], ages: [String: Double], since: Double, rule: String,
                position: FleetPosition? = nil, verified: Bool? = nil) {
        self.room = room
        self.distances = distances
        self.ages = ages
        self.since = since
        self.rule = rule
        x = position?.x
        y = position?.y
        floor = position?.floor
        uncertainty = position?.uncertainty
        self.verified = verified
    }
}

/// What `<prefix>/table` holds: every device, its room and the nodes' readings of it (and, with a
/// floor plan, its position).
public struct FleetTable: Codable, Hashable, Sendable {
    public struct Reading: Codable, Hashable, Sendable {
        public var node: String
        public var distance: Double
        public var age: Double

        public init(node: String, distance: Double, age: Double) {
            self.node = node
            self.distance = distance
            self.age = age
        }
    }

    public struct Device: Codable, Hashable, Sendable {
        public var id: String
        /// Its display name, as the nodes report it (`names:`, `SetPeerName`, or what it
        /// advertises); absent when it has none.
        public var name: String?
        public var room: String
        public var readings: [Reading]
        /// Where it is on the floor plan, with a plan (`--plan`) and while it has a position;
        /// absent otherwise (and from tables of services before positions).
        public var position: FleetPosition?
        /// Since when it has been in `room`, seconds since the epoch (absent when not known).
        public var since: Double?
        /// For a node of the fleet: whether the nodes that hear it say it proved its identity
        /// with the fleet's key (``FleetAttributes/verified``); absent for other devices.
        public var verified: Bool?

        public init(id: String, name: String? = nil, room: String, readings: [Reading], position: FleetPosition? = nil,
                    since: Double? = nil, verified: Bool? = nil) {
            self.id = id
            self.name = name
            self.room = room
            self.readings = readings
            self.position = position
            self.since = since
            self.verified = verified
        }
    }

    public var time: Double
    public var rule: String
    public var devices: [Device]

    public init(time: Double, rule: String, devices: [Device]) {
        self.time = time
        self.rule = rule
        self.devices = devices
    }
}

// MARK: - Home Assistant discovery

/// The Home Assistant entity platforms the node and the fleet service discover: the second level of
/// a discovery topic, and the domain of an entity id.
public enum DiscoveryComponent: String, Sendable, Hashable {
    case sensor
    case binarySensor = "binary_sensor"
    case deviceTracker = "device_tracker"
}

/// One entity's discovery config (`<discovery-prefix>/<component>/<object>/<entity>/config`):
/// the fields the node's and the fleet service's entities use.
public struct DiscoveryConfig: Codable, Hashable, Sendable {
    public struct Device: Codable, Hashable, Sendable {
        public var identifiers: [String]
        public var name: String
        public var manufacturer: String
        public var model: String

        public init(identifiers: [String], name: String, manufacturer: String, model: String) {
            self.identifiers = identifiers
            self.name = name
            self.manufacturer = manufacturer
            self.model = model
        }

        /// The fleet service itself: its rooms' entities.
        public static let fleet = Device(identifiers: ["proximity_fleet"], name: "proximity-fleet", manufacturer: "proximityd",
                                         model: "fleet service")

        /// A proximityd node, named `name`: its own entities' device, and the fleet's
        /// `device_tracker` of it when it is tracked.
        public static func node(identity: String, name: String) -> Device {
            Device(identifiers: [DiscoveryConfig.nodeDeviceID(identity: identity)], name: name, manufacturer: "proximityd",
                   model: "proximityd node")
        }
    }

    public struct Origin: Codable, Hashable, Sendable {
        public var name: String
        public init(name: String) { self.name = name }
    }

    /// The entity's name; nil (sent as null) for the device's main entity, which Home Assistant
    /// then names after the device alone.
    public var name: String?
    public var uniqueID: String
    /// The entity id Home Assistant gives the entity when it first sees it, without its domain:
    /// `object_id` for releases before 2025.10, and `default_entity_id` (`<domain>.<object id>`),
    /// which replaces it from 2025.10 on (``setEntityID(_:_:)`` sets both).
    public private(set) var objectID: String?
    public private(set) var defaultEntityID: String?
    public var deviceClass: String?
    public var entityCategory: String?
    public var stateTopic: String
    public var valueTemplate: String?
    public var stateClass: String?
    public var icon: String?
    public var payloadOn: String?
    public var payloadOff: String?
    public var jsonAttributesTopic: String?
    public var payloadHome: String?
    public var payloadNotHome: String?
    public var sourceType: String?
    public var availabilityTopic: String?
    public var payloadAvailable: String?
    public var payloadNotAvailable: String?
    public var device: Device
    public var origin: Origin

    enum CodingKeys: String, CodingKey {
        case name, uniqueID = "unique_id", objectID = "object_id", defaultEntityID = "default_entity_id"
        case deviceClass = "device_class", entityCategory = "entity_category"
        case stateTopic = "state_topic", valueTemplate = "value_template", stateClass = "state_class", icon
        case payloadOn = "payload_on", payloadOff = "payload_off", jsonAttributesTopic = "json_attributes_topic"
        case payloadHome = "payload_home", payloadNotHome = "payload_not_home", sourceType = "source_type"
        case availabilityTopic = "availability_topic", payloadAvailable = "payload_available", payloadNotAvailable = "payload_not_available"
        case device, origin
    }

    public init(name: String?, uniqueID: String, stateTopic: String, device: Device, origin: Origin) {
        self.name = name
        self.uniqueID = uniqueID
        self.stateTopic = stateTopic
        self.device = device
        self.origin = origin
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)   // null, not absent: absent, Home Assistant makes up a name
        try c.encode(uniqueID, forKey: .uniqueID)
        try c.encodeIfPresent(objectID, forKey: .objectID)
        try c.encodeIfPresent(defaultEntityID, forKey: .defaultEntityID)
        try c.encodeIfPresent(deviceClass, forKey: .deviceClass)
        try c.encodeIfPresent(entityCategory, forKey: .entityCategory)
        try c.encode(stateTopic, forKey: .stateTopic)
        try c.encodeIfPresent(valueTemplate, forKey: .valueTemplate)
        try c.encodeIfPresent(stateClass, forKey: .stateClass)
        try c.encodeIfPresent(icon, forKey: .icon)
        try c.encodeIfPresent(payloadOn, forKey: .payloadOn)
        try c.encodeIfPresent(payloadOff, forKey: .payloadOff)
        try c.encodeIfPresent(jsonAttributesTopic, forKey: .jsonAttributesTopic)
        try c.encodeIfPresent(payloadHome, forKey: .payloadHome)
        try c.encodeIfPresent(payloadNotHome, forKey: .payloadNotHome)
        try c.encodeIfPresent(sourceType, forKey: .sourceType)
        try c.encodeIfPresent(availabilityTopic, forKey: .availabilityTopic)
        try c.encodeIfPresent(payloadAvailable, forKey: .payloadAvailable)
        try c.encodeIfPresent(payloadNotAvailable, forKey: .payloadNotAvailable)
        try c.encode(device, forKey: .device)
        try c.encode(origin, forKey: .origin)
    }

    /// The Home Assistant device of the node whose identity is `identity` (its lowercase UUID):
    /// the node's own entities and, when the node is tracked, the fleet's `device_tracker` share
    /// it, so a tracked node is one device.
    public static func nodeDeviceID(identity: String) -> String { "proximityd_\(MQTTTopic.objectID(identity.lowercased()))" }

    /// Where an entity's config is published: `<prefix>/<component>/[<node>/]<object>/config`.
    public static func topic(prefix: String, _ component: DiscoveryComponent, node: String? = nil, object: String) -> String {
        "\(prefix)/\(component.rawValue)/" + (node.map { "\($0)/" } ?? "") + "\(object)/config"
    }

    /// The entity's id in Home Assistant, `<component>.<slug>`, in both keys (``objectID``,
    /// ``defaultEntityID``); `id` made an entity id's object part as Home Assistant would
    /// (``entitySlug(_:)``).
    public mutating func setEntityID(_ component: DiscoveryComponent, _ id: String) {
        let slug = Self.entitySlug(id)
        objectID = slug
        defaultEntityID = "\(component.rawValue).\(slug)"
    }

    /// `text` as the object part of a Home Assistant entity id, as Home Assistant's `slugify` makes
    /// it: lowercase letters and digits, every run of other characters one `_`, none at either end.
    public static func entitySlug(_ text: String) -> String {
        var out = ""
        var gap = false
        for s in text.lowercased().unicodeScalars {
            if s.isASCII, ("a"..."z").contains(s) || ("0"..."9").contains(s) {
                if gap, !out.isEmpty { out += "_" }
                gap = false
                out.unicodeScalars.append(s)
            } else {
                gap = true
            }
        }
        return out.isEmpty ? "unknown" : out
    }

    /// Available while `topic` says `online`.
    public mutating func setAvailability(_ topic: String) {
        availabilityTopic = topic
        payloadAvailable = "online"
        payloadNotAvailable = "offline"
    }
}
