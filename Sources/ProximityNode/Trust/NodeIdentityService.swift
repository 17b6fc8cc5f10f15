import BlueZ
import DBusKit
import Foundation
import Logging
import ProximityTrust
import Synchronization

/// What this node's identity, challenge and hello characteristics answer (``GattIdentityService``):
/// the open protocol without a fleet key, the trusted one with it. The trusted one is
/// ProximityTrust's ``TrustedResponder``, a pure state machine this class holds behind a lock and
/// feeds the monotonic clock; the key can change at a reload, and turning it on or off changes the
/// protocol at once.
final class NodeIdentityService: GattIdentityService {
    let identity: UUID
    let open: OpenIdentityService
    let logger: Logger
    /// The responder (none without a key) and the fingerprints of its keys, the fleet's then the
    /// previous one, changed together under one lock.
    private struct Keyed {
        var responder: TrustedResponder?
        var fingerprints: [String] = []
    }
    private let state = Mutex(Keyed())
    private let start = ContinuousClock.now

    init(identity: UUID, trust: TrustSettings, logger: Logger) {
        self.identity = identity
        open = OpenIdentityService(identity: identity)
        self.logger = logger
        update(trust: trust)
    }

    /// The responder's clock: seconds since this service was made.
    private var now: Double {
        let elapsed = start.duration(to: .now).components
        return Double(elapsed.seconds) + Double(elapsed.attoseconds) * 1e-18
    }

    /// A reload: the new key (or none) and the previous one's grace; every reader's state dropped.
    func update(trust: TrustSettings) {
        let now = self.now
        let made = trust.key.map { key in
            TrustedResponder(identity: identity, key: key, previous: trust.previousKey?.key,
                             graceUntil: trust.previousKey.map { now + $0.until.timeIntervalSinceNow } ?? 0)
        }
        let prints = [trust.key?.fingerprint, trust.previousKey?.key.fingerprint].compactMap { $0 }
        state.withLock { $0 = Keyed(responder: made, fingerprints: prints) }
    }

    func identity(for device: ObjectPath?, fresh: Bool) throws(DBusError) -> [UInt8] {
        let now = self.now
        return state.withLock { state -> [UInt8] in
            guard state.responder != nil else { return open.value }
            return state.responder!.identity(for: device?.rawValue, fresh: fresh, at: now)
        }
    }

    func challenge(for device: ObjectPath, fresh: Bool) throws(DBusError) -> [UInt8] {
        let now = self.now
        let issued: [UInt8]? = state.withLock { state in
            guard state.responder != nil else { return nil }
            return state.responder!.challenge(for: device.rawValue, fresh: fresh, at: now)
        }
        guard let issued else { return try open.challenge(for: device, fresh: fresh) }
        return issued
    }

    func hello(_ value: [UInt8], from device: ObjectPath) throws(DBusError) -> GattHello {
        // An open node's hello: its identity, said, not proved.
        if value.count == 16 { return try open.hello(value, from: device) }
        let now = self.now
        let (outcome, prints): (TrustedResponder.HelloOutcome?, [String]) = state.withLock { state in
            guard state.responder != nil else { return (nil, []) }
            return (state.responder!.hello(value, from: device.rawValue, at: now), state.fingerprints)
        }
        switch outcome {
        case .member(let identity, let previousKey)?:
            if previousKey {
                logger.notice("a peer proved membership with the previous fleet key (previous-fleet-key): give it the new key",
                              metadata: ["peer.device": "\(device)"])
            }
            let key = prints.count > (previousKey ? 1 : 0) ? prints[previousKey ? 1 : 0] : nil
            return GattHello(device: device, identity: identity, verified: true, key: key)
        case nil, .wrongLength?:
            throw DBusError(GattApplication.invalidValueLengthError,
                            "a hello is 16 bytes (open) or \(TrustedIdentification.helloLength) (trusted), not \(value.count)")
        case .refused(let firstTime)?:
            if firstTime {
                logger.warning("refused a hello that does not prove membership of this fleet (another fleet's key, a replay, or no challenge read first)",
                               metadata: ["peer.device": "\(device)"])
            }
            throw DBusError(GattApplication.notAuthorizedError, "not a member of this fleet")
        case .reflected?:
            logger.warning("refused this node's own hello, relayed back to it", metadata: ["peer.device": "\(device)"])
            throw DBusError(GattApplication.notAuthorizedError, "not a member of this fleet")
        case .limited?:
            throw DBusError(GattApplication.notAuthorizedError, "too many hellos: try again later")
        }
    }
}
