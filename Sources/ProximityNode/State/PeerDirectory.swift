import Foundation
import Logging
import ProximityCore

/// The peers identified so far, address → identity, kept in the state directory's `peers.json`
/// so a restart does not connect again. It is a cache: an unreadable file is ignored (the peers
/// are identified again), with a warning. Times are kept as Unix time in the file and as the
/// engine's clock in memory.
struct PeerDirectory: Sendable {
    static let fileName = "peers.json"
    private struct Entry: Codable {
        var identity: String
        var seen: Double
        /// Proved with the fleet's key; absent (false) in files from before trusted fleets.
        var verified: Bool?
    }
    private struct File: Codable {
        var version: Int
        /// Version 2.
        var peers: [String: Entry]?
        /// Version 1: no times.
        var identities: [String: String]?
    }

    let state: StateDirectory
    let clock: any NodeClock
    let logger: Logger

    func load() -> [String: IdentityResolver.Remembered] {
        let now = clock.now
        do {
            guard let data = try state.read(Self.fileName) else { return [:] }
            let file = try JSONDecoder().decode(File.self, from: data)
            switch file.version {
            case 1:
                return (file.identities ?? [:]).compactMapValues {
                    UUID(uuidString: $0).map { IdentityResolver.Remembered(identity: $0, seen: now) }
                }
            case 2:
                return (file.peers ?? [:]).compactMapValues { e in
                    UUID(uuidString: e.identity).map {
                        // `verified` is not taken from disk: after a restart each peer proves its
                        // identity again (docs/security.md).
                        IdentityResolver.Remembered(identity: $0, seen: clock.timestamp(fromEpoch: e.seen))
                    }
                }
            default:
                throw StateError(kind: .corrupt, path: state.file(Self.fileName).path,
                                 detail: "version \(file.version) is not supported")
            }
        } catch {
            logger.warning("ignoring the cache of identified peers",
                           metadata: ["state.file": "\(state.file(Self.fileName).path)", "error": "\(error)"])
            return [:]
        }
    }

    func save(_ peers: [String: IdentityResolver.Remembered]) throws(StateError) {
        let entries = peers.mapValues {
            Entry(identity: $0.identity.uuidString.lowercased(), seen: (clock.epoch($0.seen) * 1000).rounded() / 1000,
                  verified: $0.verified ? true : nil)
        }
        try state.writeJSON(Self.fileName, File(version: 2, peers: entries, identities: nil))
    }
}
