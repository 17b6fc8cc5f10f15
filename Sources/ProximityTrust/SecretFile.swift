import Foundation

/// Reads a file that holds a secret the way a secret must be kept: a regular file (not a symbolic
/// link) of at most `maxSize` bytes of UTF-8, owned by root, by the user the program runs as, or
/// by the `proximityd` system user (what the packaged service runs as, so that `check-config` run
/// as root accepts the files the service reads), readable and writable by its owner only (no
/// group or other bits). Each problem says how to fix it. `what` names the file in the messages
/// (`a fleet key`). The fleet key, an IRK file and an MQTT password file are read this way.
public enum SecretFile {
    /// The system user the packaged service runs as.
    public static let serviceUser = "proximityd"

    /// The owners a secret's file may have: root, `uid`, and ``serviceUser`` when it exists.
    static func owners(_ uid: uid_t) -> Set<uid_t> {
        var owners: Set<uid_t> = [0, uid]
        if let entry = getpwnam(serviceUser) { owners.insert(entry.pointee.pw_uid) }
        return owners
    }

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
        guard owners(uid).contains(info.st_uid) else {
            throw SecretFileError("\(path) is owned by uid \(info.st_uid): \(what) must be owned by root or by the user proximityd " +
                "runs as (uid \(uid)); chown \(getpwnam(serviceUser) != nil ? serviceUser : "root") \(path)")
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw SecretFileError("\(path) is readable or writable by group or others (mode \(String(mode, radix: 8))): " +
                "\(what) must be its owner's alone; chmod 600 \(path)")
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

extension SecretFile {
    /// The most bytes of a password file.
    public static let maxPasswordSize = 4096

    /// An MQTT password file: its first line, the file read as a secret (``read(path:maxSize:what:ownerMayBe:)``).
    public static func password(path: String, ownerMayBe uid: uid_t = geteuid()) throws(SecretFileError) -> String {
        let text = try read(path: path, maxSize: maxPasswordSize, what: "a password", ownerMayBe: uid)
        return String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
    }
}
