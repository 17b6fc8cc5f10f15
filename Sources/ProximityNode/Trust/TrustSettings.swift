import Foundation
import ProximityCore
import ProximityTrust

/// The trusted fleet's settings (`fleet-key:`, `accept-unverified:`, `irks:`; docs/security.md):
/// the key read from its file, or none (the open protocol, as the seeds' scheme has it), and the
/// identity resolving keys of the devices the node recognises at any address.
public struct TrustSettings: Sendable, Hashable {
    /// The key read from the config's `fleet-key:` file (checked: ``FleetKeyFile``).
    public var key: FleetKey?
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

/// Reads a file that holds a secret the way a secret must be kept: a regular file (not a symbolic
/// link) of at most `maxSize` bytes of UTF-8, owned by root or by the user the node runs as,
/// readable and writable by its owner only (no group or other bits). Each problem says how to fix
/// it. `what` names the file in the messages (`a fleet key`).
public enum SecretFile {
    public static func read(path: String, maxSize: Int, what: String, ownerMayBe uid: uid_t = geteuid()) throws(SecretFileError) -> String {
        // Not blocking: a FIFO named here (or a device) is refused below, not waited on for a
        // writer that never comes (which would hang a reload).
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else {
            let reason = errno == ELOOP ? "is a symbolic link: name the file itself" : "cannot be read: \(String(cString: strerror(errno)))"
            throw SecretFileError("\(path) \(reason)")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw SecretFileError("\(path) cannot be read: \(String(cString: strerror(errno)))") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw SecretFileError("\(path) is not a regular file") }
        guard info.st_uid == 0 || info.st_uid == uid else {
            throw SecretFileError("\(path) is owned by uid \(info.st_uid): \(what) must be owned by root or by the user proximityd runs as (uid \(uid)); chown root \(path)")
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw SecretFileError("\(path) is readable or writable by group or others (mode \(String(mode, radix: 8))): \(what) must be its owner's alone; chmod 600 \(path)")
        }
        guard info.st_size <= maxSize else { throw SecretFileError("\(path) is larger than \(maxSize) bytes: not \(what) file") }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
        var total = 0
        while total < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + total, $0.count - total) }
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else { throw SecretFileError("\(path) cannot be read: \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            total += n
        }
        guard total <= maxSize, let text = String(validating: bytes[0 ..< total], as: UTF8.self) else {
            throw SecretFileError("\(path) is not \(what) file (not UTF-8 text of at most \(maxSize) bytes)")
        }
        return text
    }
}

/// Why a secret's file is refused, in a sentence.
public struct SecretFileError: Error, Sendable, Hashable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
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
