import Foundation

/// The seed's profile keys (`004_…`) and the ones the node adds for other peers.
///
/// | peer | keys |
/// |---|---|
/// | iBeacon | `a.beacon.uuid`, `a.beacon.major`, `a.beacon.minor`, `a.beacon.prox` |
/// | AltBeacon | the same, with id1, id2, id3 as uuid, major, minor |
/// | Eddystone-UID | `a.eddystone.namespace`, `a.eddystone.instance`, `a.eddystone.prox` |
/// | Eddystone-URL | `a.eddystone.url`, `a.eddystone.prox` |
/// | node | `a.node.id`, `a.node.prox` |
///
/// `prox` is 0 unknown, 1 immediate, 2 near, 3 far.
public enum TrackingKeys {
    public static let beaconUUID = "a.beacon.uuid"
    public static let beaconMajor = "a.beacon.major"
    public static let beaconMinor = "a.beacon.minor"
    public static let beaconProx = "a.beacon.prox"
    public static let eddystoneNamespace = "a.eddystone.namespace"
    public static let eddystoneInstance = "a.eddystone.instance"
    public static let eddystoneURL = "a.eddystone.url"
    public static let eddystoneProx = "a.eddystone.prox"
    public static let nodeID = "a.node.id"
    public static let nodeProx = "a.node.prox"

    /// Every key the tracker sets, so a clear removes them all.
    public static let all = [beaconUUID, beaconMajor, beaconMinor, beaconProx, eddystoneNamespace, eddystoneInstance, eddystoneURL,
                             eddystoneProx, nodeID, nodeProx]

    /// The seed's numbers: 0 unknown, 1 immediate, 2 near, 3 far.
    public static func prox(_ zone: Proximity) -> Int {
        switch zone {
        case .unknown: 0
        case .immediate: 1
        case .near: 2
        case .far: 3
        }
    }
}

/// What the tracker does at a report: the seed's `trackBeacon` (attributes set, the absent ones
/// removed, and a tracking event with the context data) or `clearCurrentBeacon`.
public enum TrackingAction: Sendable, Hashable {
    /// Set each key with a value, remove each key without one; then a `Tracked` event with
    /// `contextData` (the values set, and the configured custom data).
    case track(peer: PeerID?, attributes: [String: String?], contextData: [String: String])
    /// Remove the tracked attributes; then a `Cleared` event.
    case clear(peer: PeerID?)
}

/// Decides the current tracked peer at each report and when to track it (seed `004_…`): the
/// nearest peer the matcher accepts. It tracks when the current peer or its prox changes, and at
/// the heartbeat; it clears when the current peer has left and no other qualifies. Pure; time is
/// passed in.
///
/// The current peer is kept while it is in the report with a known zone, unless another is in a
/// strictly nearer zone: two beacons at about the same distance do not take turns.
public struct Tracker: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// Which peers may be tracked; nil: every iBeacon and AltBeacon.
        public var matcher: RegionMatcher?
        /// Track the current peer again every this many seconds, even when nothing changed; nil:
        /// only on changes.
        public var heartbeat: Double?
        /// Custom context data sent with every tracking event.
        public var contextData: [String: String]
        public init(matcher: RegionMatcher? = nil, heartbeat: Double? = nil, contextData: [String: String] = [:]) {
            self.matcher = matcher
            self.heartbeat = heartbeat
            self.contextData = contextData
        }
        public static let heartbeatRange: ClosedRange<Double> = 1...86_400
    }

    public var configuration: Configuration
    /// The current tracked peer, and the prox last tracked for it.
    public private(set) var current: PeerID?
    public private(set) var currentProx: Int?
    private var lastTracked: Timestamp = -.infinity
    /// After a restart: the restored current peer is not cleared for being absent before this.
    private var graceUntil: Timestamp?

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Restores the current peer after a restart. For `grace` seconds, while the table fills
    /// again, its absence does not clear it.
    public mutating func restore(current: PeerID, prox: Int, at t: Timestamp, grace: Double = 10) {
        self.current = current
        currentProx = prox
        lastTracked = t
        graceUntil = t + grace
    }

    /// Forgets the current peer (a manual clear): the next report tracks whichever qualifies.
    public mutating func reset() {
        current = nil
        currentProx = nil
        graceUntil = nil
    }

    public func qualifies(_ peer: PeerSnapshot) -> Bool {
        if let matcher = configuration.matcher { return matcher.matches(peer) }
        return peer.kind == .ibeacon || peer.kind == .altbeacon
    }

    public mutating func update(_ peers: [PeerSnapshot], at t: Timestamp) -> [TrackingAction] {
        let eligible = peers.filter(qualifies)
        let known = eligible.filter { $0.proximity != .unknown }
        let nearest = known.min { ($0.proximity, $0.distance, $0.identifier) < ($1.proximity, $1.distance, $1.identifier) }
        let present = current.flatMap { id in eligible.first { $0.identifier == id } }
        var next: PeerSnapshot?
        if let present, present.proximity != .unknown {
            next = nearest.map { $0.proximity < present.proximity ? $0 : present } ?? present
        } else {
            next = nearest ?? present  // unknown but still in the report: tracked with prox 0
        }
        if present == nil, let grace = graceUntil, t < grace, nearest == nil { return [] }
        graceUntil = nil
        guard let next else {
            guard let gone = current else { return [] }
            current = nil
            currentProx = nil
            return [.clear(peer: gone)]
        }
        let prox = TrackingKeys.prox(next.proximity)
        let heartbeat = configuration.heartbeat.map { t - lastTracked >= $0 } ?? false
        guard next.identifier != current || prox != currentProx || heartbeat else { return [] }
        current = next.identifier
        currentProx = prox
        lastTracked = t
        return [Self.track(next, prox: prox, data: configuration.contextData)]
    }

    /// The `trackBeacon` of a peer: its keys (the other kinds' keys removed) and context data.
    static func track(_ peer: PeerSnapshot, prox: Int, data: [String: String]) -> TrackingAction {
        var attributes: [String: String?] = Dictionary(uniqueKeysWithValues: TrackingKeys.all.map { ($0, nil) })
        switch peer.beacon {
        case .iBeacon(let uuid, let major, let minor, _):
            attributes[TrackingKeys.beaconUUID] = uuid.uuidString.lowercased()
            attributes[TrackingKeys.beaconMajor] = String(major)
            attributes[TrackingKeys.beaconMinor] = String(minor)
            attributes[TrackingKeys.beaconProx] = String(prox)
        case .altBeacon(_, let id1, let id2, let id3, _):
            attributes[TrackingKeys.beaconUUID] = id1.uuidString.lowercased()
            attributes[TrackingKeys.beaconMajor] = String(id2)
            attributes[TrackingKeys.beaconMinor] = String(id3)
            attributes[TrackingKeys.beaconProx] = String(prox)
        case .eddystoneUID:
            let ids = peer.beacon!.namespaceAndInstance!
            attributes[TrackingKeys.eddystoneNamespace] = ids.namespace
            attributes[TrackingKeys.eddystoneInstance] = ids.instance
            attributes[TrackingKeys.eddystoneProx] = String(prox)
        case .eddystoneURL(let url, _):
            attributes[TrackingKeys.eddystoneURL] = url
            attributes[TrackingKeys.eddystoneProx] = String(prox)
        case nil:
            attributes[TrackingKeys.nodeID] = peer.identifier.rawValue
            attributes[TrackingKeys.nodeProx] = String(prox)
        }
        return .track(peer: peer.identifier, attributes: attributes, contextData: Self.contextData(attributes, data))
    }

    /// The seed's context data: the custom data, then the values set.
    public static func contextData(_ attributes: [String: String?], _ data: [String: String]) -> [String: String] {
        var out = data
        for (key, value) in attributes { if let value { out[key] = value } }
        return out
    }

    /// The seed's manual `trackBeacon(uuid, major, minor, prox, data)`: an empty string removes
    /// its attribute.
    public static func manual(uuid: String, major: String, minor: String, prox: Int, data: [String: String]) -> TrackingAction {
        // One current peer: the other kinds' keys go.
        var attributes: [String: String?] = Dictionary(uniqueKeysWithValues: TrackingKeys.all.map { ($0, nil) })
        attributes.merge([
            TrackingKeys.beaconUUID: uuid.isEmpty ? nil : uuid,
            TrackingKeys.beaconMajor: major.isEmpty ? nil : major,
            TrackingKeys.beaconMinor: minor.isEmpty ? nil : minor,
            TrackingKeys.beaconProx: String(prox),
        ]) { _, given in given }
        return .track(peer: nil, attributes: attributes, contextData: contextData(attributes, data))
    }
}
