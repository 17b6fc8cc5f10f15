/// How the node turns samples into zones.
public struct RangingConfiguration: Sendable {
    /// A peer unheard for this long is removed from the table (the seed's
    /// "clearFoundDevicesInterval"). It has been reported unknown before: when it went stale, or at
    /// the latest in the report before its removal.
    public var clearInterval: Double
    /// A peer is stale, and its zone unknown, once unheard for the longest of: `minimumStale`
    /// seconds; `staleGaps` times its usual gap between samples (an average learnt per peer); and
    /// the silence that its holes in reception (``GapHistory``: gaps over `holeGaps` usual gaps and
    /// over `minimumHole` seconds, weighted over `gapMemory` seconds) say a present peer outlasts
    /// for at most `staleShare` of the time.
    /// Never later than one report before `clearInterval` (so a departing peer is reported unknown
    /// once, then removed within `clearInterval` plus one report interval of its last sample). Heard
    /// again before `clearInterval`, it comes back with its filter.
    public var staleGaps: Double
    public var minimumStale: Double
    public var staleShare: Double
    public var gapMemory: Double
    public var holeGaps: Double
    public var minimumHole: Double
    /// How often ``FoundDevicesTable/tick(at:)`` is called (the ranging report), seconds.
    public var reportInterval: Double
    /// The most peers the table holds. When it is full a new peer takes the place of a stale one
    /// (the least recently heard), else of the farthest if it is clearly nearer (by
    /// ``FoundDevicesTable/displacementFactor``); otherwise its sample is dropped. So a crowd keeps
    /// the nearest peers, without churn.
    public var maxPeers: Int
    public var thresholds: ZoneThresholds
    public var hysteresisMargin: Double
    public var dwell: Double
    public var distanceModel: any DistanceModel
    /// RSSI at 1 m for peers that do not say their own.
    public var defaultMeasuredPower: Double
    public var makeFilter: @Sendable () -> any RSSIFilter

    /// The defaults are the ones `ranging-bench` chose (docs/ranging.md).
    public init(clearInterval: Double = 10, staleGaps: Double = 4.5, minimumStale: Double = 3, staleShare: Double = 0.005,
                gapMemory: Double = 300, holeGaps: Double = 3, minimumHole: Double = 0.5, reportInterval: Double = 1,
                maxPeers: Int = 1024,
                thresholds: ZoneThresholds = ZoneThresholds(),
                hysteresisMargin: Double = 0.125, dwell: Double = 0, distanceModel: any DistanceModel = LogDistanceModel(),
                defaultMeasuredPower: Double = -59, makeFilter: @escaping @Sendable () -> any RSSIFilter = { KalmanRSSIFilter() }) {
        precondition(clearInterval > 0 && maxPeers > 0, "clear interval and peer cap must be positive")
        precondition(staleGaps > 0 && minimumStale > 0 && reportInterval > 0 && gapMemory > 0, "stale limits must be positive")
        precondition((0...1).contains(staleShare), "the stale share is a fraction")
        self.clearInterval = clearInterval
        self.reportInterval = reportInterval
        self.staleGaps = staleGaps
        self.minimumStale = minimumStale
        self.staleShare = staleShare
        self.gapMemory = gapMemory
        self.holeGaps = holeGaps
        self.minimumHole = minimumHole
        self.maxPeers = maxPeers
        self.thresholds = thresholds
        self.hysteresisMargin = hysteresisMargin
        self.dwell = dwell
        self.distanceModel = distanceModel
        self.defaultMeasuredPower = defaultMeasuredPower
        self.makeFilter = makeFilter
    }
}

extension RangingConfiguration {
    /// A gap longer than this is a hole in reception (``GapHistory``).
    func holeThreshold(typicalGap: Double) -> Double { max(minimumHole, holeGaps * typicalGap) }
}

/// How a peer is known, besides its samples: what kind it is, the address and name it was last
/// heard with, and its beacon frame. Kept in the table with the peer, so one peer's state lives in
/// one place.
public struct PeerDetails: Sendable, Hashable {
    public var kind: PeerKind
    public var address: String
    public var name: String?
    public var beacon: BeaconIdentity?

    public init(kind: PeerKind, address: String, name: String? = nil, beacon: BeaconIdentity? = nil) {
        self.kind = kind
        self.address = address
        self.name = name
        self.beacon = beacon
    }
}

/// What the table knows of one peer.
public struct PeerRanging: Sendable {
    public let identifier: PeerID
    public internal(set) var details: PeerDetails?
    public let firstSeen: Timestamp
    public internal(set) var lastSeen: Timestamp
    public internal(set) var rssi: Double
    public internal(set) var smoothedRSSI: Double
    /// How far its samples stray from the smoothed RSSI, dB: the root of an exponentially
    /// weighted mean of the squared differences (weight ``spreadWeight``), 0 until the second sample.
    public internal(set) var spread: Double = 0
    public internal(set) var distance: Double
    public internal(set) var measuredPower: Double
    public var proximity: Proximity { tracker.zone }
    /// The usual time between two of its samples: an exponentially weighted mean, each gap capped
    /// at twice the mean so far (nil until the second sample).
    public internal(set) var typicalGap: Double?
    /// Its recent gaps, for the stale rule.
    var gaps: GapHistory
    var filter: any RSSIFilter
    var tracker: ZoneTracker
    /// The zone the last report gave it (nil before its first report).
    var reported: Proximity?
    /// Set once the peer has been reported as unknown for silence; removed once unheard for the
    /// clear interval.
    var departing = false
    /// What it was heard with between the last two reports (with
    /// ``FoundDevicesTable/collectsSeconds``; nil when not heard in between).
    public internal(set) var lastSecond: HeardSecond?
    /// The samples since the last report (at most ``HeardSecond/keptSamples``), and how many.
    var secondSamples: [Float] = []
    var secondCount = 0

    /// Weight of one gap in `typicalGap`.
    static let gapWeight = 0.1
    /// Weight of one sample in ``spread``.
    static let spreadWeight = 0.1
    /// The window ``recentSamples`` counts over, seconds.
    public static let sampleWindow = 10.0

    /// About how many samples it was heard with in the last ``sampleWindow`` seconds (from its
    /// usual gap; 1 when heard once).
    public var recentSamples: Int {
        guard let typicalGap, typicalGap > 0 else { return 1 }
        return max(1, Int((min(Self.sampleWindow, lastSeen - firstSeen) / typicalGap).rounded()) + 1)
    }

    /// How long it may stay unheard before it is stale. Heard only once, its rate is unknown: the
    /// latest limit. The latest is one report before the clear interval, so the report that
    /// says "unknown" comes before the one that removes it (for clear intervals of 1.5 reports
    /// and more; below that, half a report).
    public func staleLimit(_ c: RangingConfiguration) -> Double {
        let latest = max(c.clearInterval - c.reportInterval, c.reportInterval / 2)
        guard let typicalGap else { return latest }
        let holes = c.staleShare < 1 ? c.holeThreshold(typicalGap: typicalGap) + gaps.silence(forShare: c.staleShare) : 0
        return min(max(c.minimumStale, c.staleGaps * typicalGap, holes), latest)
    }
}

/// A peer's zone in a report differs from the one in the report before.
public struct ZoneChange: Sendable, Hashable {
    public var peer: PeerID
    /// Nil for a peer in its first report.
    public var from: Proximity?
    public var to: Proximity
}

/// One report: every peer's zone (the seed's `foundDevices` callback), and who left.
public struct RangingReport: Sendable, Equatable {
    /// Zones that changed since the previous report, by identifier.
    public var changes: [ZoneChange]
    public var zones: [PeerID: Proximity]
    /// Peers reported as unknown for the first time because they fell silent (went stale).
    public var silenced: [PeerID]
    /// Peers removed from the table in this tick.
    public var removed: [PeerID]
}

/// The found-devices table: per-peer filter, distance and zone, expiry and a size cap. Pure; time
/// is passed in.
public struct FoundDevicesTable: Sendable {
    public var configuration: RangingConfiguration
    public private(set) var peers: [PeerID: PeerRanging] = [:]
    /// Peers pushed out by the cap, and samples of new peers dropped because the table was full.
    public private(set) var evictions = 0
    public private(set) var dropped = 0
    /// A new peer replaces the farthest of a full table only when nearer by this factor.
    public static let displacementFactor = 1.25
    /// How long the scan of a full table for a place (its stale peers and its farthest) is reused
    /// for other newcomers, seconds. A crowd beyond the cap sends thousands of samples a second
    /// that find no place; each would otherwise scan the whole table.
    public static let roomScanValidity = 0.1

    /// The last scan of the full table: its least recently heard stale peer, else its farthest.
    private struct RoomScan: Sendable {
        var at: Timestamp
        var stale: PeerID?
        var farthest: (id: PeerID, distance: Double)?
    }
    private var roomScan: RoomScan?
    /// Whether each peer keeps its samples between two reports for ``PeerRanging/lastSecond``
    /// (a node that publishes its hearings, docs/mqtt.md); off, nothing is kept.
    public var collectsSeconds = false

    /// New zone boundaries, for every peer at once: each keeps its zone until its next sample
    /// decides with the new boundaries (and the same hysteresis, a fraction of each boundary).
    public mutating func setThresholds(_ thresholds: ZoneThresholds) {
        configuration.thresholds = thresholds
        for id in Array(peers.keys) { peers[id]!.tracker.thresholds = thresholds }
    }

    public init(configuration: RangingConfiguration = RangingConfiguration()) {
        self.configuration = configuration
    }

    public var count: Int { peers.count }

    /// Feeds one RSSI sample. `measuredPower` is the peer's own RSSI-at-1 m when it says it (a
    /// beacon frame, or a per-peer override), else the configured default. Nil when the table is
    /// full and the sample's peer did not earn a place. `details`, when given, replaces what is
    /// known of the peer (a nil name keeps the one heard before).
    @discardableResult
    public mutating func observe(_ identifier: PeerID, rssi: Double, at t: Timestamp, measuredPower: Double? = nil,
                                 details: PeerDetails? = nil) -> PeerRanging? {
        var peer: PeerRanging
        // Taken out of the table while it changes, so its filter's buffers are not copied.
        if let existing = peers.removeValue(forKey: identifier) {
            peer = existing
        } else {
            if peers.count >= configuration.maxPeers {
                let distance = configuration.distanceModel.distance(rssi: rssi,
                                                                    measuredPower: measuredPower ?? configuration.defaultMeasuredPower)
                guard makeRoom(forDistance: distance, at: t) else {
                    dropped += 1
                    return nil
                }
            }
            peer = PeerRanging(identifier: identifier, firstSeen: t, lastSeen: t, rssi: rssi, smoothedRSSI: rssi,
                               distance: 0, measuredPower: configuration.defaultMeasuredPower,
                               gaps: GapHistory(memory: configuration.gapMemory), filter: configuration.makeFilter(),
                               tracker: ZoneTracker(thresholds: configuration.thresholds, margin: configuration.hysteresisMargin,
                                                    dwell: configuration.dwell))
        }
        if let measuredPower { peer.measuredPower = measuredPower }
        if var details {
            if details.name == nil { details.name = peer.details?.name }
            peer.details = details
        }
        if peer.lastSeen < t {
            let gap = t - peer.lastSeen
            if let typical = peer.typicalGap {
                peer.gaps.add(gap, threshold: configuration.holeThreshold(typicalGap: typical))
                peer.typicalGap = typical + PeerRanging.gapWeight * (min(gap, 2 * typical) - typical)
            } else {
                peer.typicalGap = gap
            }
        }
        let deviation = rssi - peer.smoothedRSSI, variance = peer.spread * peer.spread
        peer.spread = (variance + PeerRanging.spreadWeight * (deviation * deviation - variance)).squareRoot()
        peer.filter.add(rssi, at: t)
        if collectsSeconds {
            peer.secondCount += 1
            if peer.secondSamples.count < HeardSecond.keptSamples { peer.secondSamples.append(Float(rssi)) }
        }
        peer.rssi = rssi
        peer.lastSeen = t
        peer.departing = false
        peer.smoothedRSSI = peer.filter.estimate(at: t) ?? rssi
        peer.distance = configuration.distanceModel.distance(rssi: peer.smoothedRSSI, measuredPower: peer.measuredPower)
        peer.tracker.update(distance: peer.distance, at: t)
        peers[identifier] = peer
        return peer
    }

    /// Frees a place for a new peer at `distance`: a stale peer's, else the farthest's if the new
    /// one is clearly nearer. The scan behind the choice is reused for ``roomScanValidity``
    /// seconds, its candidate checked against the table again before it is evicted.
    private mutating func makeRoom(forDistance distance: Double, at t: Timestamp) -> Bool {
        if let scan = roomScan, t >= scan.at, t - scan.at < Self.roomScanValidity {
            if let id = scan.stale {
                if let peer = peers[id], t - peer.lastSeen > peer.staleLimit(configuration) { return evict(id) }
            } else if let farthest = scan.farthest {
                // Not clearly nearer than the farthest of a moment ago: no place.
                guard distance * Self.displacementFactor < farthest.distance else { return false }
                if let peer = peers[farthest.id], distance * Self.displacementFactor < peer.distance { return evict(farthest.id) }
            } else {
                return false
            }
        }
        var scan = RoomScan(at: t)
        var staleSeen = Timestamp.infinity
        for (id, peer) in peers {
            if t - peer.lastSeen > peer.staleLimit(configuration) {
                if peer.lastSeen < staleSeen { scan.stale = id; staleSeen = peer.lastSeen }
            } else if scan.farthest == nil || peer.distance > scan.farthest!.distance {
                scan.farthest = (id, peer.distance)
            }
        }
        roomScan = scan
        if let stale = scan.stale { return evict(stale) }
        if let farthest = scan.farthest, distance * Self.displacementFactor < farthest.distance { return evict(farthest.id) }
        return false
    }

    private mutating func evict(_ id: PeerID) -> Bool {
        peers[id] = nil
        roomScan = nil
        evictions += 1
        return true
    }

    /// Once per ranging interval: reports every zone. A peer gone stale is reported unknown (and
    /// listed in `silenced` once); a peer unheard for the clear interval that was already reported
    /// unknown is removed.
    public mutating func tick(at t: Timestamp) -> RangingReport {
        var silenced: [PeerID] = []
        var removed: [PeerID] = []
        for (id, peer) in peers {
            let silent = t - peer.lastSeen
            guard silent > peer.staleLimit(configuration) else { continue }
            if peer.departing {
                guard silent > configuration.clearInterval else { continue }
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
        if !removed.isEmpty { roomScan = nil }
        if collectsSeconds {
            // This report's second: each peer's samples since the last, then a fresh start
            // (in place: the buffers keep their capacity).
            for i in peers.indices {
                let p = peers.values[i]
                guard p.secondCount > 0 || p.lastSecond != nil else { continue }
                peers.values[i].lastSecond = HeardSecond(samples: p.secondSamples, count: p.secondCount)
                peers.values[i].secondSamples.removeAll(keepingCapacity: true)
                peers.values[i].secondCount = 0
            }
        }
        var changes: [ZoneChange] = []
        for (id, peer) in peers where peer.reported != peer.proximity {
            changes.append(ZoneChange(peer: id, from: peer.reported, to: peer.proximity))
            peers[id]!.reported = peer.proximity
        }
        changes.sort { $0.peer < $1.peer }
        return RangingReport(changes: changes, zones: peers.mapValues(\.proximity), silenced: silenced.sorted(), removed: removed.sorted())
    }

    /// Forgets a peer at once.
    public mutating func remove(_ identifier: PeerID) {
        peers[identifier] = nil
        roomScan = nil
    }
}
