import BlueZ
import DBusKit
import Foundation
import Logging
import ProximityTrust

/// Why a peer could not be identified.
struct IdentificationError: Error, CustomStringConvertible {
    let description: String
}

/// What one identification attempt came to.
public enum IdentificationResult: Sendable {
    /// Its identity: `verified` when it proved it with the fleet's key (the trusted protocol).
    case identified(UUID, verified: Bool = false)
    /// The peer answered with something that is not an identity: not worth asking again soon.
    case rejected
    /// The attempt failed (connection, timeout, BlueZ error): worth trying again.
    case failed
}

/// Identifies one peer over GATT: connect, wait for `ServicesResolved`, introduce this node
/// (write its identity to the peer's hello characteristic, so the peer need not connect back),
/// read the peer's identity (bounded), check it holds a UUID, disconnect. One attempt per call:
/// the engine's ``IdentificationScheduler`` decides when, how many at once, and retries.
/// Runs in its own task, never in the engine, so ranging of known peers never waits for a
/// connection.
struct Identifier: Sendable {
    let connection: DBusConnection
    let mirror: BlueZObjectMirror
    let serviceUUID: String
    /// This node's identity, written to the peer's hello characteristic.
    let identity: UUID
    /// With the fleet's key: the trusted protocol's messages (docs/security.md).
    let trust: TrustedIdentification?
    /// During a rotation's grace: the previous key, tried when a peer refuses the new one.
    var previousTrust: TrustedIdentification? = nil
    let logger: Logger
    /// The most bytes read from a peer's identity characteristic.
    var maxLength = 64
    var resolveTimeout: Duration = .seconds(10)
    var incomingLinkTimeout: Duration = .seconds(15)
    /// How long after the peer's link ended before connecting.
    var linkSettleTime: Duration = .seconds(3)
    /// The most one GATT operation (the hello's write, one read of the identity) may take. BlueZ
    /// waits for an ATT response for 30 s; a peer that does not answer within this bound will not
    /// answer at all (on bluetoothd 5.66 a first read was seen to get no answer for 32 s and then
    /// fail with ATT error 0x0e), and the attempt fails now, to be retried, instead of holding the
    /// link for half a minute.
    var gattTimeout: Duration = .seconds(10)

    func identify(_ device: ObjectPath, address: String, attempt: Int) async -> IdentificationResult {
        logger.debug("connecting to identify a peer", metadata: ["peer.address": "\(address)", "attempt": "\(attempt)"])
        do {
            let (identity, verified) = try await identifyOnce(device)
            logger.info("identified a peer", metadata: ["peer.address": "\(address)", "peer.id": "\(identity.lowercased)",
                                                        "attempt": "\(attempt)", "verified": "\(verified)"])
            return .identified(identity, verified: verified)
        } catch let error as IdentificationError {
            logger.warning("rejected a peer's identity", metadata: ["peer.address": "\(address)", "error": "\(error)"])
            return .rejected
        } catch {
            logger.notice("identification failed", metadata: ["peer.address": "\(address)", "attempt": "\(attempt)",
                                                             "error": "\(error)"])
            return .failed
        }
    }

    private func identifyOnce(_ path: ObjectPath) async throws -> (UUID, verified: Bool) {
        // A peer identifying this node holds a link to it as central; BlueZ then reports the
        // device connected but without services, and Connect succeeds at once without
        // resolving them. Let that link end first. Never connect over it: a second link between
        // the same two controllers is what BlueZ and the kernel handle worst. Still up after the
        // wait, the attempt fails and is retried later.
        let hadLink = await mirror.device(at: path)?.connected == true
        guard await mirror.waitForDevice(at: path, timeout: incomingLinkTimeout, until: { $0?.connected != true }) else {
            throw BlueZTimeout(what: "the peer's own link to this node to end")
        }
        // BlueZ shows the link gone before the controller has dropped it; connecting at once
        // would make a second link to the same peer.
        if hadLink { try await Task.sleep(for: linkSettleTime) }
        let device = Device(connection: connection, path: path)
        do {
            try await device.connect()
        } catch {
            // A Connect given up on (its timeout, or the node stopping) stays pending in
            // bluetoothd: the kernel makes the link later (once discovery pauses, or the peer
            // advertises again), for nobody. Every later attempt then waits for it as if it were
            // the peer's own link, and on btvirt it is a second link on the controller. Disconnect
            // cancels a pending Connect. A Connect that bluetoothd answered with an error left
            // nothing pending.
            if Self.leftPending(error) { await release(device) }
            throw error
        }
        do {
            let identity = try await readIdentity(path)
            await release(device)
            return identity
        } catch {
            await release(device)
            throw error
        }
    }

    /// Whether a failed `Connect` may still be pending in bluetoothd: it was given up on (no
    /// reply in time) or the task was cancelled, rather than answered with an error.
    static func leftPending(_ error: any Error) -> Bool {
        error is CancellationError || (error as? BlueZCallError)?.isTimeout == true
    }

    /// `Disconnect`, also when this task is cancelled (the node stopping): a call from a cancelled
    /// task is never sent, and the link or the pending Connect would outlive the node.
    private func release(_ device: Device) async {
        await Task { _ = try? await device.disconnect() }.value
    }

    private func readIdentity(_ path: ObjectPath) async throws -> (UUID, verified: Bool) {
        // ServicesResolved is a Device1 property: the mirror wakes us when it changes.
        guard await mirror.waitForDevice(at: path, timeout: resolveTimeout, until: { $0?.servicesResolved == true }) else {
            throw BlueZTimeout(what: "ServicesResolved")
        }
        if let trust {
            // A node of a trusted fleet: the challenge, the hello sealed to it, the answer sealed to
            // ours. A peer without a challenge (an open node) is read the open way, and this node's
            // identity is not given to it.
            if let challenge = try await challenge(path) {
                do {
                    return (try await trustedExchange(path, trust: trust, challenge: challenge), true)
                } catch let refused as HelloRefused {
                    // A peer that has not the new key yet: the previous one, on a fresh challenge.
                    guard let previousTrust, let again = try await self.challenge(path) else { throw refused.error }
                    let uuid: UUID
                    do { uuid = try await trustedExchange(path, trust: previousTrust, challenge: again) } catch let second as HelloRefused {
                        throw second.error
                    }
                    logger.notice("the peer proved membership with the previous fleet key only: give it the new key")
                    return (uuid, true)
                }
            }
            return (try await readOpenIdentity(path), false)
        }
        // Introduce this node first: the peer then knows it even if the read below fails. A peer
        // without the hello characteristic (an older node) connects back instead.
        if let hello = await mirror.characteristic(ProximityUUIDs.helloCharacteristic, inService: serviceUUID, of: path) {
            do {
                var characteristic = GattCharacteristic(connection: connection, hello)
                characteristic.timeout = gattTimeout
                try await characteristic.writeValue(GattApplication.helloValue(identity))
            } catch let error as BlueZCallError where error.isTimeout {
                // The peer did not answer: its ATT bearer still waits on the write, so a read now
                // would wait behind it. This attempt is over.
                throw error
            } catch {
                logger.notice("could not introduce this node to the peer", metadata: ["error": "\(error)"])
            }
        }
        return (try await readOpenIdentity(path), false)
    }

    /// The identity characteristic's whole value.
    private func readIdentityValue(_ path: ObjectPath) async throws -> [UInt8] {
        guard let info = await mirror.characteristic(ProximityUUIDs.identityCharacteristic, inService: serviceUUID, of: path) else {
            throw IdentificationError(description: "no identity characteristic in the general service")
        }
        do {
            var characteristic = GattCharacteristic(connection: connection, info)
            characteristic.timeout = gattTimeout
            return try await characteristic.readAll(maxLength: maxLength)
        } catch let error as GattReadError {
            throw IdentificationError(description: "\(error)")
        }
    }

    /// The open protocol's identity: a UUID in text.
    private func readOpenIdentity(_ path: ObjectPath) async throws -> UUID {
        let bytes = try await readIdentityValue(path)
        guard let text = String(validating: bytes, as: UTF8.self),
              let uuid = UUID(uuidString: text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw IdentificationError(description: "the identity characteristic holds \(bytes.count) bytes that are not a UUID")
        }
        return uuid
    }

    /// The peer's challenge for this link; nil when it has none (an open node: no challenge
    /// characteristic, or one that answers `NotSupported`).
    private func challenge(_ path: ObjectPath) async throws -> [UInt8]? {
        guard let info = await mirror.characteristic(ProximityUUIDs.challengeCharacteristic, inService: serviceUUID, of: path) else {
            return nil
        }
        var characteristic = GattCharacteristic(connection: connection, info)
        characteristic.timeout = gattTimeout
        let bytes: [UInt8]
        do {
            bytes = try await characteristic.readAll(maxLength: TrustedIdentification.challengeLength + 1)
        } catch let error as BlueZCallError where error.isTimeout {
            throw error
        } catch {
            // The open protocol answers NotSupported (ATT Request Not Supported, as BlueZ reports it).
            logger.debug("the peer has no challenge: identifying it the open way", metadata: ["error": "\(error)"])
            return nil
        }
        guard bytes.count == TrustedIdentification.challengeLength else {
            throw IdentificationError(
                description: "the peer's challenge is \(bytes.count) bytes, not \(TrustedIdentification.challengeLength)")
        }
        return bytes
    }

    /// The trusted protocol's hello and answer: the peer's identity, proved.
    private func trustedExchange(_ path: ObjectPath, trust: TrustedIdentification, challenge: [UInt8]) async throws -> UUID {
        guard let helloInfo = await mirror.characteristic(ProximityUUIDs.helloCharacteristic, inService: serviceUUID, of: path) else {
            throw IdentificationError(description: "the peer has a challenge but no hello characteristic")
        }
        let own = TrustedIdentification.challenge()
        var hello = GattCharacteristic(connection: connection, helloInfo)
        hello.timeout = gattTimeout
        do {
            try await hello.writeValue(try trust.hello(identity: identity, challenge: challenge, ownChallenge: own))
        } catch let error as BlueZCallError where error.isTimeout {
            throw error
        } catch {
            throw HelloRefused(error: IdentificationError(
                description: "the peer refused this node's hello: it is not of this fleet (another key) (\(error))"))
        }
        let answer = try await readIdentityValue(path)
        guard let uuid = trust.openAnswer(answer, ownChallenge: own, challenge: challenge) else {
            throw IdentificationError(description: "the peer's answer does not prove membership of this fleet (another key, or a replay)")
        }
        // This node's own identity: its own messages relayed back to it.
        guard uuid != identity else {
            throw IdentificationError(description: "the peer answered with this node's own identity (a relay back to it)")
        }
        return uuid
    }
}

/// The peer refused this node's hello (``GattApplication/notAuthorizedError``, or another error).
struct HelloRefused: Error {
    let error: IdentificationError
}

struct BlueZTimeout: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out waiting for \(what)" }
}

