import Foundation

/// Where a region was defined: in the config file (changed only by editing it and reloading), or
/// over the bus (kept in the state directory).
public enum RegionSource: String, Sendable, Hashable, Codable, CaseIterable {
    case config, bus
}

/// Whether a matching peer is present: `inside` once one is, `outside` once none has been for the
/// exit period, `unknown` until either is known.
public enum RegionState: String, Sendable, Hashable, Codable, CaseIterable {
    case inside, outside, unknown
}

/// A monitored region: a unique identifier and a matcher.
public struct Region: Sendable, Hashable {
    public var identifier: String
    public var matcher: RegionMatcher
    public var source: RegionSource

    public init(identifier: String, matcher: RegionMatcher, source: RegionSource) {
        self.identifier = identifier
        self.matcher = matcher
        self.source = source
    }

    /// Why `identifier` cannot name a region, or nil: 1 to 255 bytes of UTF-8, no control
    /// characters.
    public static func problem(identifier: String) -> String? {
        identifierProblem(identifier, called: "the region identifier")
    }
}

/// Why `identifier` cannot name a peer or a region (`called` in the message), or nil: 1 to 255
/// bytes of UTF-8, no control characters.
public func identifierProblem(_ identifier: String, called name: String) -> String? {
    if identifier.isEmpty { return "\(name) is empty" }
    if identifier.utf8.count > 255 { return "\(name) is longer than 255 bytes" }
    if identifier.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
        return "\(name) contains control characters"
    }
    return nil
}

/// What the monitor reports, in the order it happens. A `determined` comes before every
/// `entered` and `exited`, when monitoring of a region starts, and on request.
public enum RegionEvent: Sendable, Hashable {
    case determined(String, RegionState)
    case entered(String)
    case exited(String)

    public var region: String {
        switch self {
        case .determined(let id, _), .entered(let id), .exited(let id): id
        }
    }
}

/// A peer present in a region, as its ranging lists it.
public struct RangedPeer: Sendable, Hashable {
    public var identifier: PeerID
    public var proximity: Proximity
    /// Metres (the seeds' "accuracy").
    public var distance: Double
    public var rssi: Int16

    public init(identifier: PeerID, proximity: Proximity, distance: Double, rssi: Int16) {
        self.identifier = identifier
        self.proximity = proximity
        self.distance = distance
        self.rssi = rssi
    }
}

/// One region's ranging in one report: its present peers, nearest first.
public struct RegionRanging: Sendable, Hashable {
    public var region: String
    public var peers: [RangedPeer]
}

/// What one report did to the regions.
public struct RegionUpdate: Sendable, Hashable {
    public var events: [RegionEvent] = []
    /// Every region with present peers.
    public var ranging: [RegionRanging] = []
    /// A region changed state (what is on disk must follow before the events go out).
    public var stateChanged: Bool { !events.isEmpty }
}

/// A region as the monitor holds it.
public struct RegionStatus: Sendable, Hashable {
    public var region: Region
    public var state: RegionState
    /// When a matching peer was last present (nil: never, since the state was cleared).
    public var lastSeen: Timestamp?
    /// When monitoring of it began (or its state was cleared).
    public var since: Timestamp
}

/// A region's state as it was saved, to restore after a restart.
public struct SavedRegionState: Sendable, Hashable {
    public var matcher: RegionMatcher
    public var state: RegionState
    public var lastSeen: Timestamp?
    /// When it was written: the last time the state was known to hold.
    public var savedAt: Timestamp

    public init(matcher: RegionMatcher, state: RegionState, lastSeen: Timestamp?, savedAt: Timestamp) {
        self.matcher = matcher
        self.state = state
        self.lastSeen = lastSeen
        self.savedAt = savedAt
    }
}

/// The region monitor: a stage fed by the ranging report. Pure; time is passed in.
///
/// - Enter: at the first report in which a matching peer is present. A peer is present when it
///   matches, is at the region's `within` zone or nearer (if it has one), and was heard less than
///   the exit period ago.
/// - Exit: at the first report at least the exit period after a matching peer was last present.
///   Exit depends only on when a peer was last heard, not on the table's zones, so a peer that
///   keeps being heard, however irregularly, never causes an exit.
/// - A new region is `unknown` until a matching peer is present (inside) or none has been for its
///   exit period (outside, with a `determined` but no `exited`).
/// - Redefining a region (same identifier) with another selection clears its state; a new exit
///   period alone keeps it.
public struct RegionMonitor: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// Seconds without a matching peer before an exit, for regions without their own.
        public var defaultExitPeriod: Double
        /// The most regions monitored at once.
        public var maxRegions: Int
        /// How old a saved `inside` (by its last-seen time) or `outside` (by when it was saved) may
        /// be and still be restored at start; older state starts `unknown`.
        public var restoreLimit: Double

        public init(defaultExitPeriod: Double = 10, maxRegions: Int = 4096, restoreLimit: Double = 900) {
            self.defaultExitPeriod = defaultExitPeriod
            self.maxRegions = maxRegions
            self.restoreLimit = restoreLimit
        }

        /// The limits `maxRegions` may be set within.
        public static let maxRegionsRange: ClosedRange<Int> = 1_024...100_000
        public static let restoreLimitRange: ClosedRange<Double> = 0...86_400
    }

    /// The region limit is reached: stop some first.
    public struct LimitReached: Error, Sendable, Hashable {
        public var limit: Int
        public init(limit: Int) { self.limit = limit }
    }

    private struct Entry: Sendable {
        var status: RegionStatus
        var key: IndexKey?
    }

    /// The one part a region is found by from a peer, the most selective it has.
    enum IndexKey: Hashable, Sendable {
        case identifier(String), address(String), ibeacon(UUID, UInt16?, UInt16?), altbeacon(UUID, UInt16?, UInt16?)
        case namespace(String, String?), url(String), domain(String)

        init?(_ m: RegionMatcher) {
            if let v = m.identifier { self = .identifier(v) }
            else if let v = m.address { self = .address(v) }
            else if let v = m.uuid { self = .ibeacon(v, m.major, m.minor) }
            else if let v = m.id1 { self = .altbeacon(v, m.id2, m.id3) }
            else if let v = m.namespace { self = .namespace(v, m.instance) }
            else if let v = m.url { self = .url(v) }
            else if let v = m.urlDomain { self = .domain(v) }
            else { return nil }
        }
    }

    public var configuration: Configuration
    private var slots: [Entry?] = []
    private var free: [Int] = []
    private var slotOf: [String: Int] = [:]
    private var index: [IndexKey: [Int]] = [:]
    /// Regions with no index key: checked against every peer.
    private var general: [Int] = []

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    public var count: Int { slotOf.count }

    /// Every region, by identifier.
    public var regions: [RegionStatus] {
        slotOf.keys.sorted().map { slots[slotOf[$0]!]!.status }
    }

    public func status(of identifier: String) -> RegionStatus? {
        slotOf[identifier].map { slots[$0]!.status }
    }

    /// The exit period in force for a region.
    public func exitPeriod(of identifier: String) -> Double? {
        slotOf[identifier].map { exitPeriod(slots[$0]!) }
    }

    private func exitPeriod(_ entry: Entry) -> Double {
        entry.status.region.matcher.exitPeriod ?? configuration.defaultExitPeriod
    }

    /// Starts monitoring `region`, or replaces the region with its identifier. Its state is
    /// restored from `saved` when that is young enough and for the same selection, else kept from
    /// the region it replaces if the selection is the same, else `unknown`. Returns the
    /// `determined` of its state.
    public mutating func start(_ region: Region, restoring saved: SavedRegionState? = nil, at t: Timestamp)
        throws(LimitReached) -> [RegionEvent] {
        var status = RegionStatus(region: region, state: .unknown, lastSeen: nil, since: t)
        if let slot = slotOf[region.identifier] {
            let old = slots[slot]!.status
            if old.region.matcher.selection == region.matcher.selection {
                status.state = old.state
                status.lastSeen = old.lastSeen
                status.since = old.since
            }
            unlink(slot, from: slots[slot]!.key)
            slots[slot] = nil
            free.append(slot)
            slotOf[region.identifier] = nil
        } else if slotOf.count >= configuration.maxRegions {
            throw LimitReached(limit: configuration.maxRegions)
        }
        if let saved, saved.matcher.selection == region.matcher.selection {
            switch saved.state {
            case .inside:
                // The node heard nothing while it was down: the exit period counts from now.
                if let seen = saved.lastSeen, t - seen <= configuration.restoreLimit {
                    status.state = .inside
                    status.lastSeen = t
                }
            case .outside:
                if t - saved.savedAt <= configuration.restoreLimit { status.state = .outside }
            case .unknown:
                break
            }
        }
        let key = IndexKey(region.matcher)
        let entry = Entry(status: status, key: key)
        let slot: Int
        if let reused = free.popLast() {
            slot = reused
            slots[slot] = entry
        } else {
            slot = slots.count
            slots.append(entry)
        }
        slotOf[region.identifier] = slot
        if let key { index[key, default: []].append(slot) } else { general.append(slot) }
        return [.determined(region.identifier, status.state)]
    }

    /// Stops monitoring a region; returns it, or nil if there was none.
    @discardableResult
    public mutating func stop(_ identifier: String) -> Region? {
        guard let slot = slotOf.removeValue(forKey: identifier), let entry = slots[slot] else { return nil }
        unlink(slot, from: entry.key)
        slots[slot] = nil
        free.append(slot)
        return entry.status.region
    }

    private mutating func unlink(_ slot: Int, from key: IndexKey?) {
        if let key {
            index[key]?.removeAll { $0 == slot }
            if index[key]?.isEmpty == true { index[key] = nil }
        } else {
            general.removeAll { $0 == slot }
        }
    }

    /// The region's state, as a `determined` event; nil for an unknown identifier.
    public func requestState(_ identifier: String) -> RegionEvent? {
        status(of: identifier).map { .determined(identifier, $0.state) }
    }

    /// Feeds one report: every peer in the table.
    public mutating func update(_ peers: [PeerSnapshot], at t: Timestamp) -> RegionUpdate {
        // Peers nearest first: each region's present peers come out in ranging order.
        let order = peers.indices.sorted {
            (peers[$0].proximity, peers[$0].distance, peers[$0].identifier)
                < (peers[$1].proximity, peers[$1].distance, peers[$1].identifier)
        }
        var present: [Int: [Int32]] = [:]
        let defaultExitPeriod = configuration.defaultExitPeriod
        slots.withUnsafeBufferPointer { entries in
            func consider(_ bucket: [Int]?, _ p: Int, _ peer: PeerSnapshot, _ keys: RegionMatcher.PeerKeys) {
                guard let bucket else { return }
                for slot in bucket {
                    guard t - peer.lastSeen < entries[slot]!.status.region.matcher.exitPeriod ?? defaultExitPeriod,
                          entries[slot]!.status.region.matcher.admits(peer.proximity),
                          entries[slot]!.status.region.matcher.matches(peer, keys) else { continue }
                    present[slot, default: []].append(Int32(p))
                }
            }
            for p in order {
                let peer = peers[p]
                var keys = RegionMatcher.PeerKeys()
                consider(index[.identifier(peer.identifier.rawValue)], p, peer, keys)
                consider(index[.address(peer.address)], p, peer, keys)
                switch peer.beacon {
                case .iBeacon(let uuid, let ma, let mi, _)?:
                    consider(index[.ibeacon(uuid, ma, mi)], p, peer, keys)
                    consider(index[.ibeacon(uuid, ma, nil)], p, peer, keys)
                    consider(index[.ibeacon(uuid, nil, nil)], p, peer, keys)
                case .altBeacon(_, let id1, let a, let b, _)?:
                    consider(index[.altbeacon(id1, a, b)], p, peer, keys)
                    consider(index[.altbeacon(id1, a, nil)], p, peer, keys)
                    consider(index[.altbeacon(id1, nil, nil)], p, peer, keys)
                case .eddystoneUID(let ns, let inst, _)?:
                    let n = hex(ns), i = hex(inst)
                    keys.namespace = n
                    keys.instance = i
                    consider(index[.namespace(n, i)], p, peer, keys)
                    consider(index[.namespace(n, nil)], p, peer, keys)
                case .eddystoneURL(let url, _)?:
                    consider(index[.url(url)], p, peer, keys)
                    if let host = RegionMatcher.host(ofURL: url) {
                        keys.host = host
                        var domain = Substring(host.hasSuffix(".") ? String(host.dropLast()) : host)
                        while true {
                            consider(index[.domain(String(domain))], p, peer, keys)
                            guard let dot = domain.firstIndex(of: ".") else { break }
                            domain = domain[domain.index(after: dot)...]
                        }
                    }
                case nil: break
                }
                consider(general, p, peer, keys)
            }
        }

        var update = RegionUpdate()
        for slot in slots.indices where slots[slot] != nil {
            if let indices = present[slot] {
                let id = slots[slot]!.status.region.identifier
                var latest = -Double.infinity
                for p in indices { latest = max(latest, peers[Int(p)].lastSeen) }
                slots[slot]!.status.lastSeen = max(slots[slot]!.status.lastSeen ?? latest, latest)
                if slots[slot]!.status.state != .inside {
                    slots[slot]!.status.state = .inside
                    update.events += [.determined(id, .inside), .entered(id)]
                }
                update.ranging.append(RegionRanging(region: id, peers: indices.map {
                    let peer = peers[Int($0)]
                    return RangedPeer(identifier: peer.identifier, proximity: peer.proximity, distance: peer.distance, rssi: peer.rssi)
                }))
            } else {
                switch slots[slot]!.status.state {
                case .inside:
                    guard t - (slots[slot]!.status.lastSeen ?? slots[slot]!.status.since) >= exitPeriod(slots[slot]!) else { continue }
                    slots[slot]!.status.state = .outside
                    let id = slots[slot]!.status.region.identifier
                    update.events += [.determined(id, .outside), .exited(id)]
                case .unknown:
                    guard t - slots[slot]!.status.since >= exitPeriod(slots[slot]!) else { continue }
                    slots[slot]!.status.state = .outside
                    update.events.append(.determined(slots[slot]!.status.region.identifier, .outside))
                case .outside:
                    continue
                }
            }
        }
        update.ranging.sort { $0.region < $1.region }
        return update
    }
}
