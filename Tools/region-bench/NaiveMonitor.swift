import ProximityCore

/// The baseline: the straightforward region monitor, with the rules ``RegionMonitor`` documents
/// and no index. Every report, every region is checked against every peer
/// (``RegionMatcher/matches(_:)`` and ``RegionMatcher/admits(_:)``), in the order the regions were
/// started.
///
/// - A peer is present in a region when it matches, is at the region's `within` zone or nearer,
///   and was heard less than the exit period ago.
/// - Enter (`determined inside`, `entered`) at the first report with a present peer.
/// - Exit (`determined outside`, `exited`) at the first report at least the exit period after a
///   present peer was last heard; an `unknown` region becomes `outside` (with a `determined` only)
///   once the exit period has passed since it was started without a present peer.
/// - Ranging: every region with present peers, sorted by region identifier, its peers nearest
///   first (zone, distance, identifier).
///
/// It also serves as the cross-check: the benchmark fails when its events, ranging or region
/// states differ from the monitor's.
struct NaiveMonitor {
    /// One region and its state.
    struct Entry {
        var region: Region
        var exitPeriod: Double
        var state: RegionState = .unknown
        var lastSeen: Timestamp?
        var since: Timestamp
    }

    /// What one report did: the fields of ``RegionUpdate`` (whose initialisers are internal to
    /// ProximityCore).
    struct Outcome: Equatable {
        var events: [RegionEvent] = []
        var ranging: [Ranging] = []
    }

    /// One region's present peers, nearest first.
    struct Ranging: Equatable {
        var region: String
        var peers: [RangedPeer]
    }

    let defaultExitPeriod: Double
    private(set) var entries: [Entry] = []

    init(defaultExitPeriod: Double) {
        self.defaultExitPeriod = defaultExitPeriod
    }

    /// Starts a new region (the benchmark never redefines one) as `unknown`.
    mutating func start(_ region: Region, at t: Timestamp) -> [RegionEvent] {
        entries.append(Entry(region: region, exitPeriod: region.matcher.exitPeriod ?? defaultExitPeriod, since: t))
        return [.determined(region.identifier, .unknown)]
    }

    /// Feeds one report: every peer in the table.
    mutating func update(_ peers: [PeerSnapshot], at t: Timestamp) -> Outcome {
        var outcome = Outcome()
        var present: [PeerSnapshot] = []
        for i in entries.indices {
            let m = entries[i].region.matcher
            let exitPeriod = entries[i].exitPeriod
            let id = entries[i].region.identifier
            present.removeAll(keepingCapacity: true)
            for peer in peers where t - peer.lastSeen < exitPeriod && m.admits(peer.proximity) && m.matches(peer) {
                present.append(peer)
            }
            if let latest = present.map(\.lastSeen).max() {
                entries[i].lastSeen = max(entries[i].lastSeen ?? latest, latest)
                if entries[i].state != .inside {
                    entries[i].state = .inside
                    outcome.events += [.determined(id, .inside), .entered(id)]
                }
                present.sort { ($0.proximity, $0.distance, $0.identifier) < ($1.proximity, $1.distance, $1.identifier) }
                outcome.ranging.append(Ranging(region: id, peers: present.map {
                    RangedPeer(identifier: $0.identifier, proximity: $0.proximity, distance: $0.distance, rssi: $0.rssi)
                }))
            } else {
                switch entries[i].state {
                case .inside where t - (entries[i].lastSeen ?? entries[i].since) >= exitPeriod:
                    entries[i].state = .outside
                    outcome.events += [.determined(id, .outside), .exited(id)]
                case .unknown where t - entries[i].since >= exitPeriod:
                    entries[i].state = .outside
                    outcome.events.append(.determined(id, .outside))
                default:
                    break
                }
            }
        }
        outcome.ranging.sort { $0.region < $1.region }
        return outcome
    }
}

extension NaiveMonitor.Outcome {
    /// The monitor's update in the baseline's terms, to compare them.
    init(_ update: RegionUpdate) {
        events = update.events
        ranging = update.ranging.map { NaiveMonitor.Ranging(region: $0.region, peers: $0.peers) }
    }

    /// The first difference from `other`, in words, or nil when they are the same.
    func difference(from other: Self, _ name: String, _ otherName: String) -> String? {
        if events != other.events {
            let i = zip(events, other.events).enumerated().first { $0.element.0 != $0.element.1 }?.offset
                ?? min(events.count, other.events.count)
            func at(_ e: [RegionEvent]) -> String { i < e.count ? "\(e[i])" : "no more events" }
            return "event \(i): \(name) \(at(events)), \(otherName) \(at(other.events)) (\(events.count) and \(other.events.count) events)"
        }
        if ranging != other.ranging {
            let i = zip(ranging, other.ranging).enumerated().first { $0.element.0 != $0.element.1 }?.offset
                ?? min(ranging.count, other.ranging.count)
            func at(_ r: [NaiveMonitor.Ranging]) -> String {
                i < r.count ? "\(r[i].region) with \(r[i].peers.map(\.identifier.rawValue))" : "no more regions"
            }
            return "ranging entry \(i): \(name) \(at(ranging)), \(otherName) \(at(other.ranging))"
        }
        return nil
    }
}
