import BlueZ
import DBusKit
import Foundation
import Logging

/// Why a peer could not be identified.
struct IdentificationError: Error, CustomStringConvertible {
    let description: String
}

/// What one identification attempt came to.
enum IdentificationResult: Sendable {
    case identified(UUID)
    /// The peer answered with something that is not an identity: not worth asking again soon.
    case rejected
    /// The attempt failed (connection, timeout, BlueZ error): worth trying again.
    case failed
}

/// Identifies one peer over GATT: connect, wait for `ServicesResolved`, find the identity
/// characteristic, read it (bounded), check it holds a UUID, disconnect. One attempt per call:
/// the engine schedules retries with backoff, so a worker is never held by a peer that fails.
/// Runs in the engine's identification workers, never in the event loop, so ranging of known
/// peers never waits for a connection.
struct Identifier: Sendable {
    let connection: DBusConnection
    let mirror: BlueZObjectMirror
    let serviceUUID: String
    let logger: Logger
    /// The most bytes read from a peer's identity characteristic.
    var maxLength = 64
    var resolveTimeout: Duration = .seconds(10)
    var incomingLinkTimeout: Duration = .seconds(15)
    /// How long a node that yields waits for the peer to connect first. The peer's whole
    /// identification, disconnect included, takes about 2.5 s on BlueZ, but its connection can
    /// take over 10 s to come up while both scan (btvirt: 13 s seen), and it shows here only once
    /// up; connecting meanwhile would cross it. A peer that knows this node already never comes,
    /// and then this is the cost, once per peer.
    var yieldTime: Duration = .seconds(30)
    /// How long after the peer's link ended before connecting.
    var linkSettleTime: Duration = .seconds(3)

    func identify(_ device: ObjectPath, address: String, attempt: Int, yields: Bool = false) async -> IdentificationResult {
        if yields {
            // The peer, with the lower address, connects first; its link shows here as Connected,
            // and identifyOnce waits for it to end.
            logger.debug("letting the peer connect first", metadata: ["peer.address": "\(address)"])
            _ = await mirror.waitForDevice(at: device, timeout: yieldTime) { $0?.connected == true }
        }
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
        try await device.connect()
        do {
            let identity = try await readIdentity(path)
            try? await device.disconnect()
            return identity
        } catch {
            try? await device.disconnect()
            throw error
        }
    }

    private func readIdentity(_ path: ObjectPath) async throws -> UUID {
        // ServicesResolved is a Device1 property: the mirror wakes us when it changes.
        guard await mirror.waitForDevice(at: path, timeout: resolveTimeout, until: { $0?.servicesResolved == true }) else {
            throw BlueZTimeout(what: "ServicesResolved")
        }
        guard let info = await mirror.characteristic(ProximityUUIDs.identityCharacteristic, inService: serviceUUID, of: path) else {
            throw IdentificationError(description: "no identity characteristic in the general service")
        }
        let bytes: [UInt8]
        do {
            bytes = try await GattCharacteristic(connection: connection, info).readAll(maxLength: maxLength)
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

/// What is remembered of one address: whose it is, and when it was last heard (seconds since the
/// Unix epoch), so the least recently heard go first when the cache is full.
struct RememberedAddress: Sendable, Equatable {
    var identity: UUID
    var seen: Double
}

/// The peers identified so far, address → identity, kept in the state directory's `peers.json`
/// so a restart does not connect again. It is a cache: an unreadable file is ignored (the peers
/// are identified again), with a warning.
struct PeerDirectory: Sendable {
    static let fileName = "peers.json"
    private struct Entry: Codable {
        var identity: String
        var seen: Double
    }
    private struct File: Codable {
        var version: Int
        /// Version 2.
        var peers: [String: Entry]?
        /// Version 1: no times.
        var identities: [String: String]?
    }

    static func load(from state: StateDirectory, now: Double, logger: Logger) -> [String: RememberedAddress] {
        do {
            guard let data = try state.read(fileName) else { return [:] }
            let file = try JSONDecoder().decode(File.self, from: data)
            switch file.version {
            case 1:
                return (file.identities ?? [:]).compactMapValues { UUID(uuidString: $0).map { RememberedAddress(identity: $0, seen: now) } }
            case 2:
                return (file.peers ?? [:]).compactMapValues { e in UUID(uuidString: e.identity).map { RememberedAddress(identity: $0, seen: e.seen) } }
            default:
                throw StateError(kind: .corrupt, path: state.file(fileName).path, detail: "version \(file.version) is not supported")
            }
        } catch {
            logger.warning("ignoring the cache of identified peers", metadata: ["state.file": "\(state.file(fileName).path)",
                                                                                "error": "\(error)"])
            return [:]
        }
    }

    static func save(_ peers: [String: RememberedAddress], to state: StateDirectory, logger: Logger) {
        do {
            let entries = peers.mapValues { Entry(identity: $0.identity.lowercased, seen: ($0.seen * 1000).rounded() / 1000) }
            try state.writeJSON(fileName, File(version: 2, peers: entries, identities: nil))
        } catch {
            logger.error("cannot save the identified peers", metadata: ["error": "\(error)"])
        }
    }
}
