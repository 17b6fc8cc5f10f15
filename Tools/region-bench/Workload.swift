import ArgumentParser
import BlueZSim
import Foundation
import ProximityCore

/// What a simulated peer is, finer than ``PeerKind``: Eddystone-UID and Eddystone-URL are told
/// apart, since regions select them by different parts.
enum PeerForm: String, CaseIterable, Codable, Sendable {
    case node, ibeacon, altbeacon, eddystoneUID = "eddystone-uid", eddystoneURL = "eddystone-url"

    /// Shares of the peer table: a building with many fixed beacons and some nodes.
    static let weights: [PeerForm: Double] = [
        .node: 30, .ibeacon: 35, .altbeacon: 10, .eddystoneUID: 12, .eddystoneURL: 13,
    ]
}

/// The identifiers many peers share, as deployments do: a few iBeacon fleet UUIDs, AltBeacon ID1s,
/// Eddystone namespaces and URL domains, each with many beacons under it.
struct Fleets {
    var ibeacon: [UUID]
    var altbeacon: [UUID]
    var namespaces: [[UInt8]]
    /// Registered domains; hosts are these or subdomains of them.
    var domains = ["example.com", "museum.org", "transit.example.net", "beacons.io"]
    var subdomains = ["", "www.", "shop.", "m.", "exhibit.", "gate-a.", "gate-b."]

    /// Majors of a fleet (sites), minors of a major (beacons of a site).
    static let majors = 40
    static let minors = 2_000
    /// AltBeacon ID2 and ID3 ranges.
    static let id2s = 20
    static let id3s = 1_000

    init(_ g: inout SeededGenerator) {
        ibeacon = (0..<4).map { _ in g.uuid() }
        altbeacon = (0..<3).map { _ in g.uuid() }
        namespaces = (0..<4).map { _ in g.bytes(10) }
    }

    /// An Eddystone-URL under one of the domains.
    func url(_ g: inout SeededGenerator) -> String {
        let scheme = g.chance(0.9) ? "https" : "http"
        return "\(scheme)://\(g.pick(subdomains))\(g.pick(domains))/p/\(g.below(5_000))"
    }
}

/// One peer of the simulated table, and how it moves.
struct SimulatedPeer {
    var form: PeerForm
    var candidate: PeerSnapshot
    /// In range (heard now and then) or gone (not heard; it stays in the table with its old
    /// `lastSeen`, as the node's table keeps a departed peer until it is cleared).
    var here: Bool
    /// True distance, metres.
    var distance: Double
}

/// The peer table: `count` peers of every form, deterministic from the seed, and their movements
/// report after report.
struct PeerTable {
    static let zones = ZoneThresholds()
    /// Per report: a peer in range leaves with this probability (a stay of 60 s on average)...
    static let leave = 1.0 / 60
    /// ...and a departed one comes back with this one (20 s away on average).
    static let comeBack = 1.0 / 20
    /// A peer in range is heard in a given report with this probability.
    static let heard = 0.7
    /// Not heard for this long, a peer's zone is `unknown`.
    static let unknownAfter = 3.0

    var fleets: Fleets
    var peers: [SimulatedPeer] = []
    /// Indices of `peers` by form.
    var byForm: [PeerForm: [Int]] = [:]
    private var movement: SeededGenerator

    init(count: Int, seed: UInt64, at t0: Timestamp) {
        var g = SeededGenerator(seed: seed, stream: 1)
        fleets = Fleets(&g)
        movement = SeededGenerator(seed: seed, stream: 2)
        var seen = Set<PeerID>()
        let forms = PeerForm.allCases
        let weights = forms.map { PeerForm.weights[$0]! }
        while peers.count < count {
            let form = forms[g.weighted(weights)]
            let (kind, id, beacon): (PeerKind, PeerID, BeaconIdentity?)
            switch form {
            case .node:
                (kind, id, beacon) = (.node, .node(g.uuid()), nil)
            case .ibeacon:
                let b = BeaconIdentity.iBeacon(uuid: g.pick(fleets.ibeacon), major: UInt16(g.below(Fleets.majors)),
                                               minor: UInt16(g.below(Fleets.minors)), measuredPower: -59)
                (kind, id, beacon) = (b.peerKind, b.peerID, b)
            case .altbeacon:
                let b = BeaconIdentity.altBeacon(manufacturer: 0x0118, id1: g.pick(fleets.altbeacon), id2: UInt16(g.below(Fleets.id2s)),
                                                 id3: UInt16(g.below(Fleets.id3s)), referenceRSSI: -59)
                (kind, id, beacon) = (b.peerKind, b.peerID, b)
            case .eddystoneUID:
                let b = BeaconIdentity.eddystoneUID(namespace: g.pick(fleets.namespaces), instance: g.bytes(6), txPowerAt0m: -20)
                (kind, id, beacon) = (b.peerKind, b.peerID, b)
            case .eddystoneURL:
                let b = BeaconIdentity.eddystoneURL(url: fleets.url(&g), txPowerAt0m: -20)
                (kind, id, beacon) = (b.peerKind, b.peerID, b)
            }
            guard seen.insert(id).inserted else { continue }
            // Log-uniform in 0.2…20 m: about a fifth immediate, two fifths near, two fifths far.
            let distance = 0.2 * pow(100, g.unit())
            let here = g.chance(0.75)
            let lastSeen = here ? t0 - g.unit() * 0.9 : t0 - 1 - g.unit() * 30
            let proximity = t0 - lastSeen < Self.unknownAfter ? Self.zones.zone(forDistance: distance) : .unknown
            let candidate = PeerSnapshot(identifier: id, kind: kind, address: g.address(), beacon: beacon, proximity: proximity,
                                            distance: distance, rssi: Self.rssi(distance), lastSeen: lastSeen)
            byForm[form, default: []].append(peers.count)
            peers.append(SimulatedPeer(form: form, candidate: candidate, here: here, distance: distance))
        }
    }

    /// Log-distance RSSI for a beacon with -59 dBm at 1 m.
    static func rssi(_ distance: Double) -> Int16 { Int16((-59 - 20 * log10(distance)).rounded()) }

    /// Moves every peer on to `t` and returns the table as the monitor is fed it: every peer, the
    /// departed ones with their old `lastSeen`.
    mutating func report(at t: Timestamp) -> [PeerSnapshot] {
        var g = movement
        defer { movement = g }
        var out: [PeerSnapshot] = []
        out.reserveCapacity(peers.count)
        for i in peers.indices {
            var p = peers[i]
            let cameBack: Bool
            if p.here {
                cameBack = false
                if g.chance(Self.leave) { p.here = false }
            } else {
                cameBack = g.chance(Self.comeBack)
                if cameBack { p.here = true }
            }
            if p.here {
                p.distance = min(25, max(0.2, p.distance * exp(0.3 * (2 * g.unit() - 1))))
                if cameBack || g.chance(Self.heard) {
                    p.candidate.lastSeen = t - g.unit() * 0.9
                    p.candidate.distance = p.distance
                    p.candidate.rssi = Self.rssi(p.distance)
                }
            }
            p.candidate.proximity = t - p.candidate.lastSeen < Self.unknownAfter
                ? Self.zones.zone(forDistance: p.candidate.distance) : .unknown
            peers[i] = p
            out.append(p.candidate)
        }
        return out
    }

    /// A peer of `form` for a region to name, or nil when there is none.
    func some(_ form: PeerForm, _ g: inout SeededGenerator) -> SimulatedPeer? {
        guard let indices = byForm[form], !indices.isEmpty else { return nil }
        return peers[g.pick(indices)]
    }
}

/// The forms of region the matcher takes.
enum RegionForm: String, CaseIterable, Codable, Sendable {
    case nodeIdentifier = "identifier (node)"
    case beaconIdentifier = "identifier (beacon)"
    case uuid
    case uuidMajor = "uuid+major"
    case uuidMajorMinor = "uuid+major+minor"
    case id1
    case id1id2 = "id1+id2"
    case id1id2id3 = "id1+id2+id3"
    case namespace
    case namespaceInstance = "namespace+instance"
    case url
    case urlDomain = "url-domain"
    case address
    case kindOnly = "kind only"
    case withinOnly = "within only"
}

/// Which regions a run monitors.
enum Mix: String, CaseIterable, Codable, Sendable, ExpressibleByArgument {
    /// Every form, most naming one beacon or node, some a fleet, a site or a domain; a few
    /// wildcards.
    case realistic
    /// Each region names one peer (identifier or address): the best case for the index.
    case exact
    /// iBeacon regions of the few fleet UUIDs (UUID+major, UUID+major+minor): the index keys a
    /// region by its UUID alone, so each fleet's regions share one bucket.
    case fleet
    /// Kind-only and within-only regions: nothing to index, every region checked against every
    /// peer (the worst case for the index).
    case wildcard

    /// Shares of the regions by form.
    var weights: [RegionForm: Double] {
        switch self {
        case .realistic:
            [.nodeIdentifier: 1_580, .beaconIdentifier: 500, .uuid: 30, .uuidMajor: 800, .uuidMajorMinor: 2_500,
             .id1: 20, .id1id2: 300, .id1id2id3: 700, .namespace: 30, .namespaceInstance: 1_200,
             .url: 800, .urlDomain: 300, .address: 1_200, .kindOnly: 20, .withinOnly: 20]
        case .exact:
            [.nodeIdentifier: 40, .beaconIdentifier: 30, .address: 30]
        case .fleet:
            [.uuidMajor: 30, .uuidMajorMinor: 70]
        case .wildcard:
            [.kindOnly: 60, .withinOnly: 40]
        }
    }

    /// The share of regions (other than within-only, which always have it) given a `within`.
    var withinShare: Double { self == .wildcard ? 0.4 : 0.25 }

    static let help = """
        realistic: every matcher form, most naming one beacon or node, some a fleet, site or domain, 0.4% wildcards; \
        exact: identifiers and addresses only (best case for the index); \
        fleet: iBeacon UUID+major(+minor) of 4 fleet UUIDs (one index bucket per fleet); \
        wildcard: kind-only and within-only (nothing to index: every region against every peer)
        """
}

/// The regions of a run, deterministic from the seed and the mix.
enum RegionSet {
    /// A region naming a peer of the table this often; otherwise its values are drawn afresh and
    /// usually match nothing in range (regions for beacons elsewhere in the building).
    static let targeted = 0.6

    static func make(count: Int, mix: Mix, seed: UInt64, table: PeerTable) -> [(RegionForm, Region)] {
        var g = SeededGenerator(seed: seed, stream: 3)
        let fleets = table.fleets
        let forms = RegionForm.allCases.filter { mix.weights[$0] != nil }
        let weights = forms.map { mix.weights[$0]! }
        let beaconForms: [PeerForm] = [.ibeacon, .altbeacon, .eddystoneUID, .eddystoneURL]
        var out: [(RegionForm, Region)] = []
        out.reserveCapacity(count)
        for n in 0..<count {
            let form = forms[g.weighted(weights)]
            func target(_ peerForm: PeerForm) -> SimulatedPeer? {
                g.chance(targeted) ? table.some(peerForm, &g) : nil
            }
            var m = RegionMatcher()
            var kind: PeerKind?
            switch form {
            case .nodeIdentifier:
                m.identifier = target(.node)?.candidate.identifier.rawValue ?? g.uuid().uuidString.lowercased()
                kind = .node
            case .beaconIdentifier:
                if let p = target(g.pick(beaconForms)) {
                    m.identifier = p.candidate.identifier.rawValue
                    kind = p.candidate.kind
                } else {
                    let b = BeaconIdentity.iBeacon(uuid: g.pick(fleets.ibeacon), major: UInt16(g.below(Fleets.majors)),
                                                   minor: UInt16(g.below(Fleets.minors)), measuredPower: -59)
                    m.identifier = b.identifier
                    kind = .ibeacon
                }
            case .uuid, .uuidMajor, .uuidMajorMinor:
                if case .iBeacon(let u, let major, let minor, _)? = target(.ibeacon)?.candidate.beacon {
                    (m.uuid, m.major, m.minor) = (u, major, minor)
                } else {
                    (m.uuid, m.major, m.minor) = (g.pick(fleets.ibeacon), UInt16(g.below(Fleets.majors)), UInt16(g.below(Fleets.minors)))
                }
                if form != .uuidMajorMinor { m.minor = nil }
                if form == .uuid { m.major = nil }
                kind = .ibeacon
            case .id1, .id1id2, .id1id2id3:
                if case .altBeacon(_, let u, let id2, let id3, _)? = target(.altbeacon)?.candidate.beacon {
                    (m.id1, m.id2, m.id3) = (u, id2, id3)
                } else {
                    (m.id1, m.id2, m.id3) = (g.pick(fleets.altbeacon), UInt16(g.below(Fleets.id2s)), UInt16(g.below(Fleets.id3s)))
                }
                if form != .id1id2id3 { m.id3 = nil }
                if form == .id1 { m.id2 = nil }
                kind = .altbeacon
            case .namespace, .namespaceInstance:
                if case .eddystoneUID(let ns, let inst, _)? = target(.eddystoneUID)?.candidate.beacon {
                    (m.namespace, m.instance) = (hexString(ns), hexString(inst))
                } else {
                    (m.namespace, m.instance) = (hexString(g.pick(fleets.namespaces)), hexString(g.bytes(6)))
                }
                if form == .namespace { m.instance = nil }
                kind = .eddystone
            case .url:
                if case .eddystoneURL(let u, _)? = target(.eddystoneURL)?.candidate.beacon { m.url = u } else { m.url = fleets.url(&g) }
                kind = .eddystone
            case .urlDomain:
                // A registered domain, or one host under it.
                if g.chance(0.5) {
                    m.urlDomain = g.pick(fleets.domains)
                } else if case .eddystoneURL(let u, _)? = target(.eddystoneURL)?.candidate.beacon {
                    m.urlDomain = RegionMatcher.host(ofURL: u)
                } else {
                    m.urlDomain = "gate-\(g.below(50)).\(g.pick(fleets.domains))"
                }
                kind = .eddystone
            case .address:
                if let p = target(g.pick(PeerForm.allCases)) {
                    m.address = p.candidate.address
                    kind = p.candidate.kind
                } else {
                    m.address = g.address()
                }
            case .kindOnly:
                m.kind = g.pick(PeerKind.allCases)
            case .withinOnly:
                break
            }
            // Some clients repeat the kind a region's other parts imply.
            if m.kind == nil, let kind, g.chance(0.1) { m.kind = kind }
            if form == .withinOnly || g.chance(mix.withinShare) {
                m.within = [Proximity.immediate, .near, .far][g.weighted([20, 50, 30])]
            }
            if g.chance(0.1) { m.exitPeriod = g.pick([5.0, 15, 30]) }
            do { try m.validate() } catch { preconditionFailure("region-bench made an invalid matcher (\(error)): \(m)") }
            out.append((form, Region(identifier: String(format: "region-%06d", n), matcher: m, source: .bus)))
        }
        return out
    }

    /// Whether the monitor can find a region from a peer's parts (identifier, address, UUID, ID1,
    /// namespace, URL or domain), or must check it against every peer.
    static func isIndexed(_ m: RegionMatcher) -> Bool {
        m.identifier != nil || m.address != nil || m.uuid != nil || m.id1 != nil || m.namespace != nil || m.url != nil
            || m.urlDomain != nil
    }

    /// The part the monitor's index keys a region by (its most selective one, in the monitor's
    /// order), to show how many regions share a bucket; nil for an unindexed region.
    static func indexKey(_ m: RegionMatcher) -> String? {
        if let v = m.identifier { return "identifier \(v)" }
        if let v = m.address { return "address \(v)" }
        if let v = m.uuid { return "uuid \(v.uuidString.lowercased())" }
        if let v = m.id1 { return "id1 \(v.uuidString.lowercased())" }
        if let v = m.namespace { return "namespace \(v)" }
        if let v = m.url { return "url \(v)" }
        if let v = m.urlDomain { return "url-domain \(v)" }
        return nil
    }
}
