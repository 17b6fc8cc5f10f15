/// One peer as a report holds it: what ranging made of it, read by every stage after ranging
/// (regions, alerts, tracking) and published as it is; it becomes the bus's `Peer1` properties
/// only at the bus's edge.
public struct PeerSnapshot: Sendable, Hashable {
    public var identifier: PeerID
    public var kind: PeerKind
    public var address: String
    /// Its advertised name (or a peer node's alias); empty when it has none.
    public var name: String
    public var beacon: BeaconIdentity?
    public var proximity: Proximity
    /// Metres.
    public var distance: Double
    /// The last sample, dBm (with the node's RSSI offset).
    public var rssi: Int16
    public var smoothedRSSI: Double
    /// How far its samples stray from ``smoothedRSSI``, dB, and about how many it was heard with
    /// in the last 10 s (what a fleet's positioning weighs a hearing by).
    public var spread: Double = 0
    public var samples: Int = 1
    /// The power at 1 m ranging used, dBm.
    public var measuredPower: Int16
    /// When it entered the table, and when it was last heard.
    public var firstSeen: Timestamp
    public var lastSeen: Timestamp
    /// A node that proved its identity with the fleet's key (trusted fleets, docs/security.md);
    /// false for every other peer.
    public var verified = false
    /// What the node heard of it since its last report (nil: nothing, or the node does not
    /// collect it: ``FoundDevicesTable/collectsSeconds``).
    public var heard: HeardSecond?

    public init(identifier: PeerID, kind: PeerKind, address: String, name: String = "", beacon: BeaconIdentity? = nil,
                proximity: Proximity, distance: Double, rssi: Int16, smoothedRSSI: Double? = nil, measuredPower: Int16 = -59,
                firstSeen: Timestamp? = nil, lastSeen: Timestamp, spread: Double = 0, samples: Int = 1) {
        self.identifier = identifier
        self.kind = kind
        self.address = address
        self.name = name
        self.beacon = beacon
        self.proximity = proximity
        self.distance = distance
        self.rssi = rssi
        self.smoothedRSSI = smoothedRSSI ?? Double(rssi)
        self.measuredPower = measuredPower
        self.firstSeen = firstSeen ?? lastSeen
        self.lastSeen = lastSeen
        self.spread = spread
        self.samples = samples
    }
}

extension PeerSnapshot {
    /// `peer` as the table ranges it now, shown with `name` (its display name, or the name it
    /// advertises); nil for a peer the table holds no details of. The node's report and a replay
    /// of a node's samples make their snapshots here, so both publish the same.
    public init?(_ peer: PeerRanging, name: String) {
        guard let details = peer.details else { return nil }
        self.init(identifier: peer.identifier, kind: details.kind, address: details.address, name: name, beacon: details.beacon,
                  proximity: peer.proximity, distance: peer.distance, rssi: Int16(clamping: Int(peer.rssi.rounded())),
                  smoothedRSSI: peer.smoothedRSSI, measuredPower: Int16(clamping: Int(peer.measuredPower.rounded())),
                  firstSeen: peer.firstSeen, lastSeen: peer.lastSeen, spread: peer.spread, samples: peer.recentSamples)
        heard = peer.lastSecond
    }
}
