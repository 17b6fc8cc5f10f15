import BlueZ
import DBusKit
import Foundation
import Logging
import ProximityTrust
import Synchronization

/// What this node's identity, challenge and hello characteristics answer (``GattIdentityService``):
/// the open protocol without a fleet key, the trusted one with it (``TrustedIdentification``,
/// docs/security.md). The key can change at a reload; turning it on or off changes the protocol
/// at once.
///
/// In the trusted protocol, per reader (BlueZ's device path): a read of the challenge at offset 0
/// makes a fresh challenge for this link, which one hello may use; a hello that opens with it
/// makes the reader a member for the identity read that follows, which answers with this node's
/// identity sealed to both challenges; anyone else reading the identity gets fresh random bytes
/// of the same length. A 16-byte hello (an open node's) is taken as it is, unverified. Per-reader
/// state is bounded (``maxReaders``) and lasts ``lifetime`` seconds.
final class NodeIdentityService: GattIdentityService {
    /// The most readers with state at once; the oldest is forgotten first.
    static let maxReaders = 256
    /// How long a challenge or a membership lasts, seconds: an identification takes a few.
    static let lifetime: Duration = .seconds(60)

    private struct Reader {
        var challenge: [UInt8]?
        /// The reader's own challenge, once its hello opened: it is a member, for this link.
        var member: [UInt8]?
        /// The identity read's value, for reads at an offset.
        var identity: [UInt8]?
        /// The challenge read's value, for reads at an offset.
        var issued: [UInt8]?
        var since: ContinuousClock.Instant
    }

    private struct State {
        var trust: TrustedIdentification?
        var readers: [ObjectPath: Reader] = [:]
        /// Readers whose refused hello was logged, so that a replayer is logged once.
        var refusedLogged: Set<ObjectPath> = []
    }

    let identity: UUID
    let open: OpenIdentityService
    let logger: Logger
    private let state: Mutex<State>

    init(identity: UUID, key: FleetKey?, logger: Logger) {
        self.identity = identity
        open = OpenIdentityService(identity: identity)
        self.logger = logger
        state = Mutex(State(trust: key.map(TrustedIdentification.init)))
    }

    /// A reload: the new key (or none), every reader's state dropped.
    func update(key: FleetKey?) {
        state.withLock { state in
            state.trust = key.map(TrustedIdentification.init)
            state.readers = [:]
        }
    }

    /// The reader's state (made, and the oldest forgotten when full), expired ones dropped.
    private static func reader(_ device: ObjectPath, in state: inout State, now: ContinuousClock.Instant) -> Reader {
        if let reader = state.readers[device], reader.since.duration(to: now) < lifetime { return reader }
        if state.readers.count >= maxReaders {
            state.readers = state.readers.filter { $0.value.since.duration(to: now) < lifetime }
            if state.readers.count >= maxReaders, let oldest = state.readers.min(by: { $0.value.since < $1.value.since })?.key {
                state.readers[oldest] = nil
            }
        }
        return Reader(since: now)
    }

    func identity(for device: ObjectPath?, fresh: Bool) throws(DBusError) -> [UInt8] {
        let now = ContinuousClock.now
        let identity = self.identity
        return state.withLock { state -> [UInt8] in
            guard let trust = state.trust else { return open.value }
            // Without a device BlueZ names, nobody to answer: random bytes.
            guard let device else { return SecureRandom.bytes(TrustedIdentification.sealedLength) }
            var reader = Self.reader(device, in: &state, now: now)
            if fresh || reader.identity == nil {
                if let theirs = reader.member, let ours = reader.challenge,
                   let answer = try? trust.answer(identity: identity, challenge: theirs, ownChallenge: ours) {
                    reader.identity = answer
                    // One answer per hello: a second read at offset 0 gets noise.
                    reader.member = nil
                    reader.challenge = nil
                } else {
                    reader.identity = SecureRandom.bytes(TrustedIdentification.sealedLength)
                }
            }
            state.readers[device] = reader
            return reader.identity!
        }
    }

    func challenge(for device: ObjectPath, fresh: Bool) throws(DBusError) -> [UInt8] {
        let now = ContinuousClock.now
        let issued: [UInt8]? = state.withLock { state in
            guard state.trust != nil else { return nil }
            var reader = Self.reader(device, in: &state, now: now)
            if fresh || reader.issued == nil {
                let challenge = TrustedIdentification.challenge()
                reader = Reader(challenge: challenge, issued: challenge, since: now)
            }
            state.readers[device] = reader
            return reader.issued
        }
        guard let issued else { return try open.challenge(for: device, fresh: fresh) }
        return issued
    }

    func hello(_ value: [UInt8], from device: ObjectPath) throws(DBusError) -> GattHello {
        // An open node's hello: its identity, said, not proved.
        if value.count == 16 { return try open.hello(value, from: device) }
        let now = ContinuousClock.now
        enum Outcome { case member(UUID), open, refused(firstTime: Bool), wrongLength }
        let outcome: Outcome = state.withLock { state in
            guard let trust = state.trust else { return .open }
            guard value.count == TrustedIdentification.helloLength else { return .wrongLength }
            var reader = Self.reader(device, in: &state, now: now)
            // The challenge is used once, whatever comes of it.
            let challenge = reader.challenge
            reader.challenge = nil
            reader.member = nil
            guard let challenge, let opened = trust.openHello(value, challenge: challenge) else {
                state.readers[device] = reader
                return .refused(firstTime: state.refusedLogged.insert(device).inserted)
            }
            reader.challenge = challenge
            reader.member = opened.challenge
            state.readers[device] = reader
            return .member(opened.identity)
        }
        switch outcome {
        case .member(let identity): return GattHello(device: device, identity: identity, verified: true)
        case .open, .wrongLength:
            throw DBusError(GattApplication.invalidValueLengthError, "a hello is 16 bytes (open) or \(TrustedIdentification.helloLength) (trusted), not \(value.count)")
        case .refused(let firstTime):
            if firstTime {
                logger.warning("refused a hello that does not prove membership of this fleet (another fleet's key, a replay, or no challenge read first)",
                               metadata: ["peer.device": "\(device)"])
            }
            throw DBusError(GattApplication.notAuthorizedError, "not a member of this fleet")
        }
    }
}
