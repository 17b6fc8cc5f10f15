import Foundation

/// The served side of the trusted identification (``TrustedIdentification``, docs/security.md) as
/// a pure state machine: what this node's challenge, hello and identity characteristics answer
/// each reader (BlueZ's device path for the link), on an injected clock (seconds, monotonic).
///
/// - A read of the challenge at offset 0 issues a fresh challenge for this reader; one hello may
///   use it, once, whatever comes of it.
/// - A hello that opens with it, under the fleet's key (or the previous key, during a rotation's
///   grace), makes the next identity read answer with this node's identity sealed to both
///   challenges, once. Anyone else reading the identity gets fresh random bytes.
/// - A hello that carries this node's own identity (its own hello relayed back to it) is refused.
/// - Outsiders' work is bounded: at most ``Configuration/maxReaders`` readers with state (the
///   oldest forgotten first), each for ``Configuration/lifetime``; at most
///   ``Configuration/hellosPerReader`` hellos per reader per lifetime, and
///   ``Configuration/hellosPerSecond`` in all (a token bucket of ``Configuration/helloBurst``);
///   the readers whose refusal was logged are as bounded.
public struct TrustedResponder: Sendable {
    public struct Configuration: Sendable, Hashable {
        public var maxReaders = 256
        /// How long a challenge, a pending answer and a reader's counts last, seconds.
        public var lifetime = 60.0
        /// Hellos one reader may write per lifetime (a member writes one per link).
        public var hellosPerReader = 3
        /// Hellos all readers together may write per second, on average …
        public var hellosPerSecond = 10.0
        /// … and at once.
        public var helloBurst = 20.0

        public init() {}
    }

    /// What a hello came to.
    public enum HelloOutcome: Sendable, Hashable {
        /// A member, proved with the fleet's key (`previousKey`: the key being rotated out).
        case member(UUID, previousKey: Bool)
        /// Not made for this reader's challenge with a key this node holds: another fleet's key,
        /// a replay, a relay to another challenge, or no challenge read first. `firstTime`: the
        /// first refusal of this reader (logged once).
        case refused(firstTime: Bool)
        /// This node's own identity: its own hello relayed back to it.
        case reflected
        /// Too many hellos, from this reader or from everyone.
        case limited
        /// Not a trusted hello's length.
        case wrongLength
    }

    struct Reader: Sendable {
        /// The challenge issued and not yet used.
        var challenge: [UInt8]?
        /// The last challenge read's value, for reads at an offset.
        var issued: [UInt8]?
        /// After a hello that opened: both challenges and the key it opened with, for one answer.
        var pending: (theirs: [UInt8], ours: [UInt8], key: Int)?
        /// The last identity read's value, for reads at an offset.
        var identity: [UInt8]?
        var since: Double
        var hellos = 0
    }

    public let configuration: Configuration
    public let identity: UUID
    /// The keys hellos may open with: the fleet's, then the previous one until its grace ends.
    private var keys: [(trust: TrustedIdentification, until: Double)]
    private var readers: [String: Reader] = [:]
    /// Readers whose refused hello was logged, and when: kept a lifetime ×10, bounded as readers are.
    private var refusedLogged: [String: Double] = [:]
    private var tokens: Double
    private var refilled: Double?

    /// `previous`: a key still accepted until `graceUntil` (a rotation, docs/security.md).
    public init(identity: UUID, key: FleetKey, previous: FleetKey? = nil, graceUntil: Double = 0,
                configuration: Configuration = Configuration()) {
        self.identity = identity
        self.configuration = configuration
        keys = [(TrustedIdentification(key), .infinity)]
        if let previous { keys.append((TrustedIdentification(previous), graceUntil)) }
        tokens = configuration.helloBurst
    }

    /// Readers with state (bounded by ``Configuration/maxReaders``).
    public var readerCount: Int { readers.count }
    /// Readers whose refusal is remembered (bounded by ``Configuration/maxReaders``).
    public var refusedCount: Int { refusedLogged.count }

    /// The reader's state, expired ones dropped and the oldest forgotten when full.
    private mutating func reader(_ id: String, at t: Double) -> Reader {
        if let reader = readers[id], t - reader.since < configuration.lifetime { return reader }
        if readers.count >= configuration.maxReaders {
            readers = readers.filter { t - $0.value.since < configuration.lifetime }
            if readers.count >= configuration.maxReaders, let oldest = readers.min(by: { $0.value.since < $1.value.since })?.key {
                readers[oldest] = nil
            }
        }
        return Reader(since: t)
    }

    /// The challenge characteristic's value for `id` (`fresh`: a read at offset 0, which issues a
    /// new one).
    public mutating func challenge(for id: String, fresh: Bool, at t: Double) -> [UInt8] {
        var reader = reader(id, at: t)
        if fresh || reader.issued == nil {
            let challenge = TrustedIdentification.challenge()
            reader.challenge = challenge
            reader.issued = challenge
            reader.pending = nil
        }
        readers[id] = reader
        return reader.issued!
    }

    /// The identity characteristic's value for `id` (nil: BlueZ did not say who reads; random
    /// bytes then). After a hello that opened, the first fresh read is the sealed answer; every
    /// other read is fresh random bytes of the same length.
    public mutating func identity(for id: String?, fresh: Bool, at t: Double) -> [UInt8] {
        guard let id else { return SecureRandom.bytes(TrustedIdentification.sealedLength) }
        var reader = reader(id, at: t)
        if fresh || reader.identity == nil {
            if let pending = reader.pending, pending.key < keys.count,
               let answer = try? keys[pending.key].trust.answer(identity: identity, challenge: pending.theirs, ownChallenge: pending.ours) {
                reader.identity = answer
            } else {
                reader.identity = SecureRandom.bytes(TrustedIdentification.sealedLength)
            }
            // One answer per hello.
            reader.pending = nil
        }
        readers[id] = reader
        return reader.identity!
    }

    /// A trusted hello `id` wrote (``TrustedIdentification/helloLength`` bytes).
    public mutating func hello(_ value: [UInt8], from id: String, at t: Double) -> HelloOutcome {
        guard value.count == TrustedIdentification.helloLength else { return .wrongLength }
        var reader = reader(id, at: t)
        // The challenge is used once, whatever comes of it.
        let challenge = reader.challenge
        reader.challenge = nil
        reader.pending = nil
        reader.hellos += 1
        defer { readers[id] = reader }
        guard reader.hellos <= configuration.hellosPerReader, take(at: t) else { return .limited }
        if let challenge {
            for (index, key) in keys.enumerated() where t < key.until {
                guard let opened = key.trust.openHello(value, challenge: challenge) else { continue }
                guard opened.identity != identity else { return .reflected }
                reader.pending = (opened.challenge, challenge, index)
                return .member(opened.identity, previousKey: index > 0)
            }
        }
        return .refused(firstTime: noteRefusal(id, at: t))
    }

    /// One token of the hellos' bucket, if there is one.
    private mutating func take(at t: Double) -> Bool {
        if let refilled { tokens = min(configuration.helloBurst, tokens + max(0, t - refilled) * configuration.hellosPerSecond) }
        refilled = t
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// Whether this is the first refusal of `id` remembered (so it is logged once), bounded.
    private mutating func noteRefusal(_ id: String, at t: Double) -> Bool {
        let keep = configuration.lifetime * 10
        if let at = refusedLogged[id], t - at < keep { return false }
        if refusedLogged.count >= configuration.maxReaders {
            refusedLogged = refusedLogged.filter { t - $0.value < keep }
            if refusedLogged.count >= configuration.maxReaders, let oldest = refusedLogged.min(by: { $0.value < $1.value })?.key {
                refusedLogged[oldest] = nil
            }
        }
        refusedLogged[id] = t
        return true
    }
}
