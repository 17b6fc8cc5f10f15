import BlueZ
import DBusKit
import Foundation
import Logging

/// Why a peer could not be identified.
struct IdentificationError: Error, CustomStringConvertible {
    let description: String
}

/// Identifies one peer over GATT: connect, wait for `ServicesResolved`, find the identity
/// characteristic, read it (bounded), check it holds a UUID, disconnect. Retries with backoff.
/// Runs in the engine's identification workers, never in the event loop, so ranging of known
/// peers never waits for a connection.
struct Identifier: Sendable {
    let connection: DBusConnection
    let mirror: BlueZObjectMirror
    let serviceUUID: String
    let logger: Logger
    /// The most bytes read from a peer's identity characteristic.
    var maxLength = 64
    var attempts = 3
    var resolveTimeout: Duration = .seconds(10)
    var incomingLinkTimeout: Duration = .seconds(10)

    /// The peer's identity, or nil once every attempt failed.
    func identify(_ device: ObjectPath, address: String) async -> UUID? {
        var backoff: Duration = .seconds(1)
        for attempt in 1...attempts {
            if Task.isCancelled { return nil }
            do {
                let identity = try await identifyOnce(device)
                logger.info("identified a peer", metadata: ["peer.address": "\(address)", "peer.id": "\(identity.lowercased)",
                                                            "attempt": "\(attempt)"])
                return identity
            } catch is CancellationError {
                return nil
            } catch let error as IdentificationError {
                // A peer that answers with something else than a UUID is not retried.
                logger.warning("rejected a peer's identity", metadata: ["peer.address": "\(address)", "error": "\(error)"])
                return nil
            } catch {
                logger.notice("identification failed", metadata: ["peer.address": "\(address)", "attempt": "\(attempt)",
                                                                 "error": "\(error)"])
            }
            if attempt < attempts {
                try? await Task.sleep(for: backoff)
                backoff *= 2
            }
        }
        return nil
    }

    private func identifyOnce(_ path: ObjectPath) async throws -> UUID {
        // A peer identifying this node holds a link to it as central; BlueZ then reports the
        // device connected but without services, and Connect succeeds at once without
        // resolving them. Let that link end first (bounded), so the read is not left waiting.
        _ = await mirror.waitForDevice(at: path, timeout: incomingLinkTimeout) { $0?.connected != true }
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

/// The peers identified so far, address → identity, kept in the state directory's `peers.json`
/// so a restart does not connect again.
struct PeerDirectory: Sendable {
    static let fileName = "peers.json"
    private struct File: Codable {
        var version: Int
        var identities: [String: String]
    }

    static func load(from state: StateDirectory, logger: Logger) -> [String: UUID] {
        do {
            guard let data = try state.read(fileName) else { return [:] }
            let file = try JSONDecoder().decode(File.self, from: data)
            return file.identities.compactMapValues { UUID(uuidString: $0) }
        } catch {
            logger.warning("ignoring the cache of identified peers", metadata: ["state.file": "\(state.file(fileName).path)",
                                                                                "error": "\(error)"])
            return [:]
        }
    }

    static func save(_ identities: [String: UUID], to state: StateDirectory, logger: Logger) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        do {
            let data = try encoder.encode(File(version: 1, identities: identities.mapValues(\.lowercased)))
            try state.write(fileName, data)
        } catch {
            logger.error("cannot save the identified peers", metadata: ["error": "\(error)"])
        }
    }
}
