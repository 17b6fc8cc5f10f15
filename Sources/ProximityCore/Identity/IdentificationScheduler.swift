/// The identification stage: which unidentified nodes to connect to, when, and how many at once.
///
/// - **Concurrency.** At most ``Configuration/concurrency`` connections at once; the others wait
///   in a first-come queue. At most ``Configuration/maxTracked`` addresses are queued, connecting
///   or yielding: beyond that a device waits for a later sample (a flood of advertisers must not
///   grow the queue without bound).
/// - **A slot for members.** ``Configuration/reservedForMembers`` of the slots take only
///   *members*: addresses whose advertisement carries a trusted fleet's member tag for that address
///   (``MemberTagging``), and the node's own proofs of peers it knows (``prove(_:at:)``). Members
///   have a queue of their own, served first. Everyone else, outsiders among them, shares the other
///   slots: a flood of advertisers of the general UUID that never answer (each holding a slot until
///   BlueZ gives up, 20 s and more) delays other outsiders, not members.
/// - **Backoff and bans.** Attempt *n* failing waits 2^(n−1) s (at most `maxBackoff`) before the
///   next; after `maxAttempts` failures, or one rejected identity, the address is left alone for
///   `banTime`, and the count then starts again. A retry happens when the device is next heard
///   after its time.
/// - **Who connects.** When two nodes find each other, one of them connects (``ConnectionOrdering``
///   says which; both sides agree when each sees the other's address as the other knows it), and
///   in the same connection tells the other its identity (its hello), so one link identifies
///   both. The higher one yields: it waits up to `yieldTime` for that hello, holding no
///   connection slot, and connects itself only if none came (a peer that knew it already, or an
///   older node). Crossing links, two nodes connecting to each other at once, are what BlueZ and
///   the Linux kernel handle worst.
///
/// Pure: times are passed in, and every method returns the connections to start.
public struct IdentificationScheduler: Sendable {
    public struct Configuration: Sendable {
        public var concurrency: Int
        public var maxTracked: Int
        public var maxAttempts: Int
        public var maxBackoff: Double
        public var banTime: Double
        public var yieldTime: Double
        /// Slots only members take (at most `concurrency` − 1: others always have one). A trusted
        /// fleet's node keeps one; an open one none, since nothing tells its members from others.
        public var reservedForMembers: Int

        public init(concurrency: Int = 2, maxTracked: Int = 256, maxAttempts: Int = 8, maxBackoff: Double = 60,
                    banTime: Double = 600, yieldTime: Double = 30, reservedForMembers: Int = 0) {
            precondition(concurrency > 0 && maxTracked > 0 && maxAttempts > 0, "identification limits must be positive")
            self.concurrency = concurrency
            self.maxTracked = maxTracked
            self.maxAttempts = maxAttempts
            self.maxBackoff = maxBackoff
            self.banTime = banTime
            self.yieldTime = yieldTime
            self.reservedForMembers = reservedForMembers
        }

        /// The slots an address that is not a member may take.
        var ordinarySlots: Int { concurrency - min(max(reservedForMembers, 0), concurrency - 1) }
    }

    /// Connect to `address` and identify it; report the result with ``finished(_:_:at:)``.
    public struct Connect: Sendable, Hashable {
        public var address: String
        public var attempt: Int
        /// This node waited for the peer's hello first and none came.
        public var afterYield: Bool

        public init(address: String, attempt: Int, afterYield: Bool) {
            self.address = address
            self.attempt = attempt
            self.afterYield = afterYield
        }
    }

    /// What one attempt came to.
    public enum Outcome: Sendable, Hashable {
        case identified
        /// The peer answered with something that is not an identity: not worth asking again soon.
        case rejected
        /// The connection, a timeout or BlueZ failed: worth trying again.
        case failed
    }

    /// What the scheduler decided after an attempt, for the log.
    public enum Verdict: Sendable, Hashable {
        case done
        case retry(after: Double)
        /// Left alone for this long: too many failures, or a rejected identity.
        case leftAlone(for: Double, attempts: Int)
        /// The attempt was not one the scheduler started (already resolved): nothing to do.
        case unknown
    }

    enum State: Sendable, Hashable {
        case queued(attempt: Int, member: Bool)
        case connecting(attempt: Int, member: Bool)
        case yielding(until: Timestamp, member: Bool)
        case failed(attempts: Int, retryAt: Timestamp)
    }

    public var configuration: Configuration
    /// This node's adapter address (uppercase), for deciding who connects; nil until known.
    public var ownAddress: String?
    /// Who connects when two nodes find each other (``ConnectionOrdering``).
    public var ordering: any ConnectionOrdering = PairHashOrdering()
    private(set) var states: [String: State] = [:]
    private var queue = AddressQueue()
    private var memberQueue = AddressQueue()
    private var connecting = 0
    /// Connections in progress to addresses that are not members.
    private var connectingOrdinary = 0
    private var tracked = 0

    public init(configuration: Configuration = Configuration(), ownAddress: String? = nil) {
        self.configuration = configuration
        self.ownAddress = ownAddress
    }

    /// Connections in progress.
    public var inFlight: Int { connecting }
    /// The addresses being connected to now.
    public var connectingAddresses: [String] {
        states.compactMap { if case .connecting = $0.value { $0.key } else { nil } }.sorted()
    }
    /// Addresses queued, connecting or yielding.
    public var trackedCount: Int { tracked }
    /// Addresses the scheduler holds anything for, failures waiting out their time included.
    public var rememberedCount: Int { states.count }

    /// An unidentified node was heard at `address`; `member` (asked only when the address is
    /// taken up) says whether its advertisement carries the fleet's member tag for it.
    public mutating func heard(_ address: String, at t: Timestamp, member: @autoclosure () -> Bool = false) -> [Connect] {
        track(address, at: t, mayYield: true, member: member)
    }

    /// Whether `address` would be taken up if heard now (not queued, connecting, yielding, or
    /// waiting out a failure).
    public func wouldTrack(_ address: String, at t: Timestamp) -> Bool {
        switch states[address] {
        case .queued, .connecting, .yielding: false
        case .failed(_, let retryAt): t >= retryAt
        case nil: true
        }
    }

    /// Queues `address` for a connection (or, `mayYield`, a first attempt the ordering gives the
    /// peer, a yield), unless it is queued, connecting, yielding or waiting out a failure, or the
    /// tracked addresses are at their bound.
    private mutating func track(_ address: String, at t: Timestamp, mayYield: Bool, member: () -> Bool) -> [Connect] {
        guard wouldTrack(address, at: t), tracked < configuration.maxTracked else { return [] }
        var attempt = 1
        if case .failed(let attempts, _) = states[address] {
            // After a ban the count starts again.
            attempt = attempts >= configuration.maxAttempts ? 1 : attempts + 1
        }
        tracked += 1
        let isMember = member()
        if mayYield, attempt == 1, !connectsFirst(address) {
            states[address] = .yielding(until: t + configuration.yieldTime, member: isMember)
            return []
        }
        enqueue(address, attempt: attempt, member: isMember)
        return drain(afterYield: [])
    }

    /// The identity of `address` became known another way (its hello, or it turned out to be
    /// this node): no connection is needed. One already in progress runs to its end.
    public mutating func resolved(_ address: String) {
        switch states[address] {
        case .queued, .yielding:
            states[address] = nil
            tracked -= 1
        case .failed:
            states[address] = nil
        case .connecting, nil:
            break
        }
    }

    /// Whether this node is the one that connects to the node at `address` (false until this
    /// node's own address is known: it then yields).
    public func connectsFirst(_ address: String) -> Bool {
        guard let own = ownAddress else { return true }
        return ordering.connectsFirst(own: own, peer: address.uppercased())
    }

    /// Connect to `address` to have it prove its identity, this node starting the link (no
    /// yield): a known peer whose proof is old, or an address whose claim conflicts. Nothing when
    /// the address is already queued, connecting, yielding or waiting out a failure, or the
    /// tracked addresses are at their bound.
    public mutating func prove(_ address: String, at t: Timestamp) -> [Connect] {
        track(address, at: t, mayYield: false, member: { true })
    }

    /// Not before `seconds` from now: the address is identified again only then (when heard),
    /// this node connecting at once (no yield). Not a ban.
    public mutating func holdOff(_ address: String, for seconds: Double, at t: Timestamp) {
        switch states[address] {
        case .connecting:
            return
        case .queued, .yielding:
            tracked -= 1
        case .failed, nil:
            break
        }
        states[address] = .failed(attempts: 1, retryAt: t + seconds)
    }

    /// The peer at `address` was refused without a connection of this node's: its hello said an
    /// identity this node does not take (an open node's, to a node that accepts only verified
    /// ones; an identity proved by another). Connecting would only read the same claim again, so
    /// the address is left alone for `banTime`, as after a rejected identity, instead of waiting
    /// out its yield and connecting. A connection already in progress runs to its end. Returns
    /// the verdict (``Verdict/unknown`` when it was connecting).
    public mutating func refused(_ address: String, at t: Timestamp) -> Verdict {
        switch states[address] {
        case .connecting:
            return .unknown
        case .queued, .yielding:
            tracked -= 1
        case .failed, nil:
            break
        }
        states[address] = .failed(attempts: configuration.maxAttempts, retryAt: t + configuration.banTime)
        return .leftAlone(for: configuration.banTime, attempts: 0)
    }

    /// An attempt ended. Returns what was decided for the address and the next connections.
    public mutating func finished(_ address: String, _ outcome: Outcome, at t: Timestamp) -> (Verdict, [Connect]) {
        guard case .connecting(let attempt, let member) = states[address] else { return (.unknown, []) }
        connecting -= 1
        if !member { connectingOrdinary -= 1 }
        tracked -= 1
        let verdict: Verdict
        switch outcome {
        case .identified:
            states[address] = nil
            verdict = .done
        case .rejected:
            states[address] = .failed(attempts: configuration.maxAttempts, retryAt: t + configuration.banTime)
            verdict = .leftAlone(for: configuration.banTime, attempts: attempt)
        case .failed where attempt >= configuration.maxAttempts:
            states[address] = .failed(attempts: attempt, retryAt: t + configuration.banTime)
            verdict = .leftAlone(for: configuration.banTime, attempts: attempt)
        case .failed:
            let delay = min(Double(1 << min(attempt - 1, 30)), configuration.maxBackoff)
            states[address] = .failed(attempts: attempt, retryAt: t + delay)
            verdict = .retry(after: delay)
        }
        return (verdict, drain(afterYield: []))
    }

    /// Once in a while (each report): yields that ran out become connections, and failures long
    /// past are forgotten.
    public mutating func tick(at t: Timestamp) -> [Connect] {
        var expired: [(String, Bool)] = []
        for (address, state) in states {
            switch state {
            case .yielding(let until, let member) where t >= until:
                expired.append((address, member))
            case .failed(_, let retryAt) where t >= retryAt + configuration.banTime:
                states[address] = nil
            default:
                break
            }
        }
        for (address, member) in expired.sorted(by: { $0.0 < $1.0 }) {
            enqueue(address, attempt: 1, member: member)
        }
        return drain(afterYield: Set(expired.map(\.0)))
    }

    private mutating func enqueue(_ address: String, attempt: Int, member: Bool) {
        states[address] = .queued(attempt: attempt, member: member)
        if member { memberQueue.append(address) } else { queue.append(address) }
    }

    /// Starts queued connections while slots are free: members first, in any slot; the others
    /// only in the slots not kept for members.
    private mutating func drain(afterYield: Set<String>) -> [Connect] {
        var started: [Connect] = []
        func start(_ address: String) {
            // Resolved while queued: its entry is gone.
            guard case .queued(let attempt, let member) = states[address] else { return }
            states[address] = .connecting(attempt: attempt, member: member)
            connecting += 1
            if !member { connectingOrdinary += 1 }
            started.append(Connect(address: address, attempt: attempt, afterYield: afterYield.contains(address)))
        }
        while connecting < configuration.concurrency {
            if let address = memberQueue.popFirst() {
                start(address)
            } else if connectingOrdinary < configuration.ordinarySlots, let address = queue.popFirst() {
                start(address)
            } else {
                break
            }
        }
        return started
    }
}

/// A first-come queue of addresses that does not shift its storage at every pop.
struct AddressQueue: Sendable {
    private var items: [String] = []
    private var head = 0

    mutating func append(_ address: String) { items.append(address) }

    mutating func popFirst() -> String? {
        guard head < items.count else { return nil }
        let address = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024 {
            items.removeFirst(head)
            head = 0
        }
        return address
    }
}

/// Which of two nodes connects to the other (the other waits for its hello): the same answer on
/// both sides for the same pair of addresses, opposite roles. It must not tell an outsider how
/// the node's own address compares with one the outsider chooses: that would give the address
/// away one bit per probe, and with it the box after every rotation of its private address.
public protocol ConnectionOrdering: Sendable {
    /// Whether the node whose adapter address is `own` connects to `peer` (both uppercase).
    func connectsFirst(own: String, peer: String) -> Bool
}

/// The open protocol's ordering: a coin per pair, a public hash (FNV-1a) of the two addresses in
/// order, flipped by which one is lower. An open node advertises its name and identity, so its
/// address is not a secret an outsider needs to learn; a keyed node uses the fleet key's coin
/// (ProximityTrust's `KeyedConnectionOrdering`), which an outsider cannot compute.
public struct PairHashOrdering: ConnectionOrdering {
    public init() {}

    public func connectsFirst(own: String, peer: String) -> Bool {
        let lower = own < peer
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in (lower ? own + "|" + peer : peer + "|" + own).utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return lower != (hash >> 63 == 1)
    }
}
