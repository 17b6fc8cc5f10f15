import BlueZ
import DBusKit
import Foundation
import Logging

/// Why a peer could not be identified.
struct IdentificationError: Error, CustomStringConvertible {
    let description: String
}

/// What one identification attempt came to.
public enum IdentificationResult: Sendable {
    case identified(UUID)
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
            let identity = try await identifyOnce(device)
            logger.info("identified a peer", metadata: ["peer.address": "\(address)", "peer.id": "\(identity.lowercased)",
                                                        "attempt": "\(attempt)"])
            return .identified(identity)
        } catch let error as IdentificationError {
            logger.warning("rejected a peer's identity", metadata: ["peer.address": "\(address)", "error": "\(error)"])
            return .rejected
        } catch {
            logger.notice("identification failed", metadata: ["peer.address": "\(address)", "attempt": "\(attempt)",
                                                             "error": "\(error)"])
            return .failed
        }
    }

    private func identifyOnce(_ path: ObjectPath) async throws -> UUID {
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

    private func readIdentity(_ path: ObjectPath) async throws -> UUID {
        // ServicesResolved is a Device1 property: the mirror wakes us when it changes.
        guard await mirror.waitForDevice(at: path, timeout: resolveTimeout, until: { $0?.servicesResolved == true }) else {
            throw BlueZTimeout(what: "ServicesResolved")
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
        guard let info = await mirror.characteristic(ProximityUUIDs.identityCharacteristic, inService: serviceUUID, of: path) else {
            throw IdentificationError(description: "no identity characteristic in the general service")
        }
        let bytes: [UInt8]
        do {
            var characteristic = GattCharacteristic(connection: connection, info)
            characteristic.timeout = gattTimeout
            bytes = try await characteristic.readAll(maxLength: maxLength)
        } catch let error as GattReadError {
            throw IdentificationError(description: "\(error)")
        }
        guard let text = String(validating: bytes, as: UTF8.self),
              let uuid = UUID(uuidString: text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw IdentificationError(description: "the identity characteristic holds \(bytes.count) bytes that are not a UUID")
        }
        return uuid
    }
}

struct BlueZTimeout: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out waiting for \(what)" }
}

