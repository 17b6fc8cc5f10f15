import Foundation

/// The identity stage: who is behind an address, for nodes and beacons alike, and what to do with
/// an observation: range it as a known peer, identify the device, or ignore it.
///
/// - A node's identity is learnt once (read over GATT, or written to us by the node itself in its
///   hello) and remembered by address; later samples are ranged with no connection.
/// - A beacon's identity is in its frame. The frame is parsed when an observation carries one
///   (new or changed advertising data) and the result kept by address, so samples are not parsed.
///
/// - A device whose resolvable private address one of the node's IRKs made (``privateAddresses``)
///   is the peer `irk:<name>`, at every address it rotates to.
///
/// Pure: times are passed in. ``nodes`` is what the node persists (`peers.json`).
public struct IdentityResolver: Sendable {
    public struct Configuration: Sendable {
        /// The general service UUID, lowercase 128-bit: a device advertising it is a node.
        public var serviceUUID: String
        /// This node's own identity: an address that turns out to be ours is ignored.
        public var ownIdentity: UUID
        /// Range iBeacon, AltBeacon and Eddystone frames too.
        public var rangeBeacons: Bool
        /// The most node addresses remembered; the least recently heard go first.
        public var maxRememberedAddresses: Int
        /// The most addresses whose advertised frame is remembered (beacons, and devices that are
        /// neither beacon nor node); the least recently heard half goes when full.
        public var maxFrames: Int

        public init(serviceUUID: String, ownIdentity: UUID, rangeBeacons: Bool = true, maxRememberedAddresses: Int = 4096,
                    maxFrames: Int = 8192) {
            self.serviceUUID = serviceUUID.lowercased()
            self.ownIdentity = ownIdentity
            self.rangeBeacons = rangeBeacons
            self.maxRememberedAddresses = maxRememberedAddresses
            self.maxFrames = maxFrames
        }
    }

    /// What to do with an observation.
    public enum Resolution: Sendable, Hashable {
        /// A sample of a known peer: feed the ranging stage.
        case range(PeerID, PeerKind, beacon: BeaconIdentity?)
        /// A node whose identity is unknown: ask the identification scheduler.
        case identify
        /// Not a sample of anything the node ranges, or not a device it ranges.
        case ignore
        /// The address is unknown and the observation carries no frame: resolve it again with its
        /// advertised data (the frames of addresses long unheard are forgotten).
        case needsFrame
    }

    /// What one address is known to be by its advertised data.
    enum Frame: Sendable, Hashable {
        case beacon(BeaconIdentity)
        case node
        case other
    }

    /// What is remembered of a node's address: whose it is, and when it was last heard.
    public struct Remembered: Sendable, Hashable {
        public var identity: UUID
        public var seen: Timestamp
        /// Whether the node proved its identity with the fleet's key (the trusted protocol).
        public var verified = false
        /// When it last proved it (kept in memory only: after a restart every peer proves its
        /// identity again).
        public var verifiedAt: Timestamp?
        public init(identity: UUID, seen: Timestamp) {
            self.identity = identity
            self.seen = seen
        }
    }

    /// What learning an identity changed.
    public struct Learnt: Sendable, Hashable {
        /// False when the address was already known as this identity.
        public var isNew: Bool
        /// The identity is this node's own: the address is ignored from now on.
        public var isOwn: Bool
        /// Addresses that named the same identity before (a rotated private address, a new adapter).
        public var previousAddresses: [String]
        /// Addresses forgotten to stay within the cap.
        public var evicted: [String]
        /// A verified claim at a new address while the identity's verified binding elsewhere was
        /// heard lately (a relay, or two devices with one key and one identity): nothing was
        /// changed; these are the identity's other addresses, to identify again with links the
        /// node starts itself.
        public var conflict: [String] = []
    }

    public var configuration: Configuration
    /// Address → identity of the peer nodes identified (persisted by the node).
    public private(set) var nodes: [String: Remembered]
    /// What each address's advertised data was found to be, with the data itself: BlueZ
    /// re-announces unchanged data at every report under `DuplicateData`, and unchanged data is
    /// not parsed again.
    private var frames: [String: (frame: Frame, source: AdvertisedFrame, seen: Timestamp)] = [:]
    private var own: Set<String> = []
    /// The IRKs the node knows (`irks:`, `Node1.AddIRK`), nil when it knows none: no address is
    /// then tried.
    public var privateAddresses: (any PrivateAddressResolving)?

    public init(configuration: Configuration, nodes: [String: Remembered] = [:]) {
        self.configuration = configuration
        self.nodes = nodes
    }

    /// Decides what `observation` is. A sample of a known node refreshes its address's last-heard
    /// time.
    public mutating func resolve(_ observation: Observation) -> Resolution {
        let address = observation.address
        if nodes[address] != nil {
            guard observation.rssi != nil else { return .ignore }
            nodes[address]!.seen = observation.time
            return .range(.node(nodes[address]!.identity), .node, beacon: nil)
        }
        if own.contains(address) { return .ignore }
        if let name = privateAddresses?.resolve(address) {
            guard observation.rssi != nil else { return .ignore }
            return .range(.irk(name), .irk, beacon: nil)
        }
        let frame: Frame
        if let advertised = observation.frame {
            if let known = frames[address], known.source == advertised {
                frame = known.frame
                frames[address]!.seen = observation.time
            } else {
                frame = classify(advertised)
                remember(frame, advertised, for: address, at: observation.time)
            }
        } else if let known = frames[address] {
            frame = known.frame
            if observation.rssi != nil { frames[address]!.seen = observation.time }
        } else {
            return .needsFrame
        }
        switch frame {
        case .beacon(let beacon):
            guard configuration.rangeBeacons, observation.rssi != nil else { return .ignore }
            return .range(beacon.peerID, beacon.peerKind, beacon: beacon)
        case .node:
            return .identify
        case .other:
            return .ignore
        }
    }

    private func classify(_ frame: AdvertisedFrame) -> Frame {
        if configuration.rangeBeacons, !frame.manufacturerData.isEmpty || !frame.serviceData.isEmpty,
           let beacon = BeaconParser.parse(manufacturerData: frame.manufacturerData, serviceData: frame.serviceData) {
            return .beacon(beacon)
        }
        return frame.advertises(configuration.serviceUUID) ? .node : .other
    }

    private mutating func remember(_ frame: Frame, _ source: AdvertisedFrame, for address: String, at t: Timestamp) {
        frames[address] = (frame, source, t)
        if frames.count > configuration.maxFrames {
            // Amortised: drop the least recently heard half at once.
            let keep = frames.sorted { $0.value.seen > $1.value.seen }.prefix(configuration.maxFrames / 2)
            frames = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
        }
    }

    /// How many addresses' frames are remembered (at most ``Configuration/maxFrames``).
    public var rememberedFrames: Int { frames.count }

    /// Forgets the frames of addresses not heard for `seconds`; how many. A phone's private
    /// address is never heard again once it rotated (1,000 new ones a minute in a busy street),
    /// and BlueZ itself forgets a device 30 s after it was last heard, so a frame unheard for
    /// minutes is only memory: without this the frames fill to ``Configuration/maxFrames`` and
    /// stay there. An address heard again is classified again from its advertised data
    /// (``Resolution/needsFrame`` when an observation carries none).
    public mutating func forgetFrames(notHeardFor seconds: Double, at t: Timestamp) -> Int {
        let before = frames.count
        frames = frames.filter { t - $0.value.seen <= seconds }
        return before - frames.count
    }

    /// Whether an address is known to advertise the general service (a node) and is not yet
    /// identified.
    public func isUnidentifiedNode(_ address: String) -> Bool {
        nodes[address] == nil && !own.contains(address) && frames[address]?.frame == .node
    }

    /// The identity of the node at `address`, if known.
    public func identity(at address: String) -> UUID? { nodes[address]?.identity }

    /// Whether the node at `address` proved its identity with the fleet's key.
    public func isVerified(at address: String) -> Bool { nodes[address]?.verified == true }

    /// Whether `identity` is known at some address as proved with the fleet's key.
    public func isVerified(_ identity: UUID) -> Bool { nodes.values.contains { $0.identity == identity && $0.verified } }

    /// Records that `address` is the node `identity` (read over GATT, or the node's own hello).
    ///
    /// A verified claim never displaces a verified binding of the same identity at another
    /// address heard within `heardWithin` seconds (a one-shot relay would otherwise move a member
    /// to the relay's address and lock the real one out): the claim is not taken, and
    /// ``Learnt/conflict`` names the addresses to identify again.
    public mutating func learn(_ identity: UUID, at address: String, verified: Bool = false, time t: Timestamp,
                               heardWithin: Double = 0) -> Learnt {
        if identity == configuration.ownIdentity {
            own.insert(address)
            nodes[address] = nil
            return Learnt(isNew: false, isOwn: true, previousAddresses: [], evicted: [])
        }
        let isNew = nodes[address]?.identity != identity || nodes[address]?.verified != verified
        let previous = nodes.filter { $0.key != address && $0.value.identity == identity }.map(\.key).sorted()
        if verified {
            let held = previous.filter { nodes[$0]!.verified && t - nodes[$0]!.seen <= heardWithin }
            if !held.isEmpty {
                var learnt = Learnt(isNew: false, isOwn: false, previousAddresses: [], evicted: [])
                learnt.conflict = held
                return learnt
            }
        }
        for old in previous { nodes[old] = nil }
        var remembered = Remembered(identity: identity, seen: t)
        remembered.verified = verified
        if verified { remembered.verifiedAt = t }
        nodes[address] = remembered
        var evicted: [String] = []
        if nodes.count > configuration.maxRememberedAddresses {
            // The least recently heard go first, unverified before verified: a flood of
            // addresses that claim identities never evicts a member.
            let excess = nodes.count - configuration.maxRememberedAddresses
            evicted = nodes.sorted { ($0.value.verified ? 1 : 0, $0.value.seen) < ($1.value.verified ? 1 : 0, $1.value.seen) }
                .prefix(excess).map(\.key)
            for old in evicted { nodes[old] = nil }
        }
        return Learnt(isNew: isNew || !previous.isEmpty, isOwn: false, previousAddresses: previous, evicted: evicted)
    }

    /// The verified bindings whose proof is older than `age` seconds and that were heard within
    /// `heardWithin` seconds: to prove again (sorted).
    public func dueForProof(olderThan age: Double, heardWithin: Double, at t: Timestamp) -> [String] {
        nodes.filter { $0.value.verified && t - ($0.value.verifiedAt ?? -.infinity) >= age && t - $0.value.seen <= heardWithin }
            .map(\.key).sorted()
    }

    /// Verified bindings whose last proof is older than `age` seconds become unverified (the
    /// peer could not prove it again); their addresses, sorted.
    public mutating func expireProofs(olderThan age: Double, at t: Timestamp) -> [String] {
        let expired = nodes.filter { $0.value.verified && t - ($0.value.verifiedAt ?? -.infinity) >= age }.map(\.key).sorted()
        for address in expired { nodes[address]!.verified = false }
        return expired
    }

    /// Forgets the verified bindings not heard for `seconds` (with a fleet key a binding lasts
    /// while its address is heard: one learnt from a relay's hello, at an address that never
    /// advertises, goes a minute after the relay stops). Their addresses, sorted.
    public mutating func forgetVerified(notHeardFor seconds: Double, at t: Timestamp) -> [String] {
        let gone = nodes.filter { $0.value.verified && t - $0.value.seen > seconds }.map(\.key).sorted()
        for address in gone { nodes[address] = nil }
        return gone
    }

    /// Forgets every node (a new fleet key, or none: every identity is proved again). Returns
    /// their addresses, sorted.
    public mutating func forgetAll() -> [String] {
        let all = nodes.keys.sorted()
        nodes = [:]
        return all
    }

    /// Forgets the nodes that did not prove their identity with the fleet's key (learnt the open
    /// way, before the node had a key): with a key they are identified again, the trusted way.
    /// Returns their addresses, sorted.
    public mutating func forgetUnverified() -> [String] {
        let open = nodes.filter { !$0.value.verified }.map(\.key).sorted()
        for address in open { nodes[address] = nil }
        return open
    }

    /// Identity by address of every identified node, lowercase (`Node1.GetIdentities`).
    public var identities: [String: String] { nodes.mapValues { $0.identity.uuidString.lowercased() } }
}

/// Who made a resolvable private address: the name of the identity resolving key whose `ah` hash
/// the address holds, or nil (ProximityTrust's `AddressResolver`; the core does no cryptography).
public protocol PrivateAddressResolving: Sendable {
    /// The name of the key that made `address` (`AA:BB:CC:DD:EE:FF`), or nil.
    mutating func resolve(_ address: String) -> String?
}
