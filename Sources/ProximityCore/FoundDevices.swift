/// How the node turns samples into zones.
public struct RangingConfiguration: Sendable {
    /// A peer unheard for this long is dropped: its zone becomes unknown in one report, then it is
    /// removed (the seed's "clearFoundDevicesInterval").
    public var clearInterval: Double
    /// The most peers the table holds; a new peer past the cap evicts the one heard least recently.
    public var maxPeers: Int
    public var thresholds: ZoneThresholds
    public var hysteresisMargin: Double
    public var dwell: Double
    public var distanceModel: any DistanceModel
    /// RSSI at 1 m for peers that do not say their own.
    public var defaultMeasuredPower: Double
    public var makeFilter: @Sendable () -> any RSSIFilter

    public init(clearInterval: Double = 10, maxPeers: Int = 1024, thresholds: ZoneThresholds = ZoneThresholds(),
                hysteresisMargin: Double = 0.2, dwell: Double = 1.0, distanceModel: any DistanceModel = LogDistanceModel(),
                defaultMeasuredPower: Double = -59, makeFilter: @escaping @Sendable () -> any RSSIFilter = { KalmanRSSIFilter() }) {
        precondition(clearInterval > 0 && maxPeers > 0, "clear interval and peer cap must be positive")
        self.clearInterval = clearInterval
        self.maxPeers = maxPeers
        self.thresholds = thresholds
        self.hysteresisMargin = hysteresisMargin
        self.dwell = dwell
        self.distanceModel = distanceModel
        self.defaultMeasuredPower = defaultMeasuredPower
        self.makeFilter = makeFilter
    }
}

/// What the table knows of one peer.
public struct PeerRanging: Sendable {
    public let identifier: String
    public let firstSeen: Timestamp
    public internal(set) var lastSeen: Timestamp
    public internal(set) var rssi: Double
    public internal(set) var smoothedRSSI: Double
    public internal(set) var distance: Double
    public internal(set) var measuredPower: Double
    public var proximity: Proximity { tracker.zone }
    var filter: any RSSIFilter
    var tracker: ZoneTracker
    /// Set once the peer has been reported as unknown for silence; removed at the next tick.
    var departing = false
}

/// One report: every peer's zone (the seed's `foundDevices` callback), and who left.
public struct RangingReport: Sendable, Equatable {
    public var zones: [String: Proximity]
    /// Peers reported as unknown for the first time because they fell silent.
    public var silenced: [String]
    /// Peers removed from the table in this tick.
    public var removed: [String]
}

/// The found-devices table: per-peer filter, distance and zone, expiry and a size cap. Pure; time
/// is passed in.
public struct FoundDevicesTable: Sendable {
    public var configuration: RangingConfiguration
    public private(set) var peers: [String: PeerRanging] = [:]

    public init(configuration: RangingConfiguration = RangingConfiguration()) {
        self.configuration = configuration
    }

    public var count: Int { peers.count }

    /// Feeds one RSSI sample. `measuredPower` is the peer's own RSSI-at-1 m when it says it (a
    /// beacon frame, or a per-peer override), else the configured default.
    @discardableResult
    public mutating func observe(_ identifier: String, rssi: Double, at t: Timestamp, measuredPower: Double? = nil) -> PeerRanging {
        var peer: PeerRanging
        if let existing = peers[identifier] {
            peer = existing
        } else {
            if peers.count >= configuration.maxPeers { evictLeastRecentlySeen() }
            peer = PeerRanging(identifier: identifier, firstSeen: t, lastSeen: t, rssi: rssi, smoothedRSSI: rssi,
                               distance: 0, measuredPower: configuration.defaultMeasuredPower,
                               filter: configuration.makeFilter(),
                               tracker: ZoneTracker(thresholds: configuration.thresholds, margin: configuration.hysteresisMargin,
                                                    dwell: configuration.dwell))
        }
        if let measuredPower { peer.measuredPower = measuredPower }
        peer.filter.add(rssi, at: t)
        peer.rssi = rssi
        peer.lastSeen = t
        peer.departing = false
        peer.smoothedRSSI = peer.filter.estimate(at: t) ?? rssi
        peer.distance = configuration.distanceModel.distance(rssi: peer.smoothedRSSI, measuredPower: peer.measuredPower)
        peer.tracker.update(distance: peer.distance, at: t)
        peers[identifier] = peer
        return peer
    }

    private mutating func evictLeastRecentlySeen() {
        guard let oldest = peers.min(by: { $0.value.lastSeen < $1.value.lastSeen })?.key else { return }
        peers[oldest] = nil
    }

    /// Once per ranging interval: expires silent peers and reports every zone.
    public mutating func tick(at t: Timestamp) -> RangingReport {
        var silenced: [String] = []
        var removed: [String] = []
        for (id, peer) in peers where t - peer.lastSeen > configuration.clearInterval {
            if peer.departing {
                peers[id] = nil
                removed.append(id)
            } else {
                var p = peer
                p.departing = true
                p.tracker.reset()
                peers[id] = p
                silenced.append(id)
            }
        }
        return RangingReport(zones: peers.mapValues(\.proximity), silenced: silenced.sorted(), removed: removed.sorted())
    }

    /// Forgets a peer at once.
    public mutating func remove(_ identifier: String) { peers[identifier] = nil }
}
