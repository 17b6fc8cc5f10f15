import Foundation
import ProximityCore
import ProximityTrust

/// The trusted fleet's settings (`fleet-key:`, `accept-unverified:`, `irks:`; docs/security.md):
/// the key read from its file, or none (the open protocol, as the seeds' scheme has it), and the
/// identity resolving keys of the devices the node recognises at any address.
public struct TrustSettings: Sendable, Hashable {
    /// The key read from the config's `fleet-key:` file (checked: ``FleetKeyFile``).
    public var key: FleetKey?
    /// A key being rotated out (`previous-fleet-key:`): still accepted from peers, and tried when
    /// a peer refuses the new one, until `until` (at most ``maxGrace`` after the file is read).
    public var previousKey: PreviousKey?

    public struct PreviousKey: Sendable, Hashable {
        public var key: FleetKey
        public var until: Date
        public init(key: FleetKey, until: Date) {
            self.key = key
            self.until = until
        }
    }

    /// The longest a previous key may stay accepted, from the moment the config is read.
    public static let maxGrace: TimeInterval = 7 * 86_400
    /// Whether peers identified the open way (without the fleet's key) are ranged, marked
    /// unverified; false ignores them entirely. Meaningful with a key only.
    public var acceptUnverified = true
    /// `irks:` (inline, or read from its ``IRKFile``): name → key.
    public var irks: [String: IdentityResolvingKey] = [:]

    /// The most IRKs a node holds, the config file's and those given over the bus together: each
    /// address a node has not heard before is tried against every one (docs/security.md, IRKs).
    public static let maxIRKs = 512

    public init(key: FleetKey? = nil, acceptUnverified: Bool = true) {
        self.key = key
        self.acceptUnverified = acceptUnverified
    }

    /// Whether the node speaks the trusted protocol.
    public var isTrusted: Bool { key != nil }
}

/// Reads a fleet key file (``SecretFile``, at most 4 KiB).
public enum FleetKeyFile {
    public static let maxSize = 4096

    /// Why a fleet key file is refused: a sentence, or the key file's own position.
    public enum Problem: Error, Sendable, Hashable {
        case file(String)
        case content(FleetKeyError)
    }

    public static func load(path: String, ownerMayBe uid: uid_t = geteuid()) throws(Problem) -> FleetKey {
        let text: String
        do { text = try SecretFile.read(path: path, maxSize: maxSize, what: "a fleet key", ownerMayBe: uid) } catch {
            throw .file(error.description)
        }
        do { return try FleetKey(parsing: text) } catch { throw .content(error) }
    }
}

/// An IRK file (`irks: FILE`): a YAML mapping of names to keys, as `irks:` takes them inline,
/// kept as a secret (``SecretFile``, at most 64 KiB). Its problems are reported at its own
/// FILE:LINE:COLUMN by the config's parser.
public enum IRKFile {
    public static let maxSize = 64 << 10
}
