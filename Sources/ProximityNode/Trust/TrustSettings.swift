import Foundation
import ProximityTrust

/// The trusted fleet's settings (`fleet-key:`, `accept-unverified:`; docs/security.md): the key
/// read from its file, or none (the open protocol, as the seeds' scheme has it).
public struct TrustSettings: Sendable, Hashable {
    /// The fleet key's file, as the config file names it.
    public var keyFile: String?
    /// The key read from it (checked: ``FleetKeyFile``).
    public var key: FleetKey?
    /// Whether peers identified the open way (without the fleet's key) are ranged, marked
    /// unverified; false ignores them entirely. Meaningful with a key only.
    public var acceptUnverified = true

    public init(keyFile: String? = nil, key: FleetKey? = nil, acceptUnverified: Bool = true) {
        self.keyFile = keyFile
        self.key = key
        self.acceptUnverified = acceptUnverified
    }

    /// Whether the node speaks the trusted protocol.
    public var isTrusted: Bool { key != nil }
}

/// Reads a fleet key file the way a secret must be kept: a regular file of at most 4 KiB, owned
/// by root or by the user the node runs as, readable and writable by its owner only (no group or
/// other bits). Each problem says how to fix it.
public enum FleetKeyFile {
    public static let maxSize = 4096

    /// Why a fleet key file is refused: a sentence, or the key file's own position.
    public enum Problem: Error, Sendable, Hashable {
        case file(String)
        case content(FleetKeyError)
    }

    public static func load(path: String, ownerMayBe uid: uid_t = geteuid()) throws(Problem) -> FleetKey {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            let reason = errno == ELOOP ? "is a symbolic link: name the file itself" : "cannot be read: \(String(cString: strerror(errno)))"
            throw .file("\(path) \(reason)")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .file("\(path) cannot be read: \(String(cString: strerror(errno)))") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw .file("\(path) is not a regular file") }
        guard info.st_uid == 0 || info.st_uid == uid else {
            throw .file("\(path) is owned by uid \(info.st_uid): a fleet key must be owned by root or by the user proximityd runs as (uid \(uid)); chown root \(path)")
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw .file("\(path) is readable or writable by group or others (mode \(String(mode, radix: 8))): the fleet's secret must be its owner's alone; chmod 600 \(path)")
        }
        guard info.st_size <= maxSize else { throw .file("\(path) is larger than \(maxSize) bytes: not a fleet key file") }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
        var total = 0
        while total < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + total, $0.count - total) }
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else { throw .file("\(path) cannot be read: \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            total += n
        }
        guard total <= maxSize, let text = String(validating: bytes[0 ..< total], as: UTF8.self) else {
            throw .file("\(path) is not a fleet key file (not UTF-8 text of at most \(maxSize) bytes)")
        }
        do { return try FleetKey(parsing: text) } catch { throw .content(error) }
    }
}
