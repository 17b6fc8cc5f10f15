import Foundation
import Logging

/// Why the state directory cannot be used.
public struct StateError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Sendable { case cannotCreate, cannotRead, cannotWrite, corrupt }
    public let kind: Kind
    public let path: String
    public let detail: String
    public var description: String {
        switch kind {
        case .cannotCreate: "cannot create state directory \(path): \(detail)"
        case .cannotRead: "cannot read \(path): \(detail)"
        case .cannotWrite: "cannot write \(path): \(detail)"
        case .corrupt: "\(path) is corrupt (\(detail)); it was left untouched: repair it or move it away to start afresh"
        }
    }
}

/// The daemon's persistent state: a directory of small files, each written atomically
/// (temporary file, `fsync`, `rename`, `fsync` of the directory), so a crash or power loss leaves
/// either the old or the new content, never a torn one.
public struct StateDirectory: Sendable {
    public let url: URL

    /// Opens (creating if needed, mode 0750) the directory.
    public init(_ url: URL) throws(StateError) {
        self.url = url
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw StateError(kind: .cannotCreate, path: url.path, detail: "it exists and is not a directory")
            }
        } else {
            do {
                try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true,
                                                        attributes: [.posixPermissions: 0o750])
            } catch {
                throw StateError(kind: .cannotCreate, path: url.path, detail: describe(error))
            }
        }
        guard access(url.path, W_OK) == 0 else {
            throw StateError(kind: .cannotWrite, path: url.path, detail: String(cString: strerror(errno)))
        }
    }

    public func file(_ name: String) -> URL { url.appendingPathComponent(name) }

    /// Removes the temporary files (`.NAME.tmp-PID`) of writes that a process ended before their
    /// rename, a SIGKILL say, and returns their names. Those of a process still running (another
    /// pid, alive) are left alone. The daemon calls it once, at start.
    @discardableResult
    public func removeInterruptedWrites() -> [String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: url.path) else { return [] }
        var removed: [String] = []
        for name in names where name.hasPrefix(".") {
            guard let marker = name.range(of: ".tmp-", options: .backwards),
                  let pid = Int32(name[marker.upperBound...]), pid > 0 else { continue }
            if pid != getpid(), kill(pid, 0) == 0 || errno == EPERM { continue }
            if unlink(file(name).path) == 0 { removed.append(name) }
        }
        return removed.sorted()
    }

    /// The file's content, or nil if it does not exist.
    /// A state file's bytes, nil when it does not exist. It must be a regular file (not a symbolic
    /// link, a FIFO or a device) owned by the user the node runs as; `secret` (settings.json,
    /// which holds IRKs): readable by its owner only, or it is refused with the `chmod` that
    /// fixes it.
    public func read(_ name: String, secret: Bool = false) throws(StateError) -> Data? {
        let path = file(name).path
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            let detail = errno == ELOOP ? "is a symbolic link: the node's state files are its own regular files"
                : String(cString: strerror(errno))
            throw StateError(kind: .cannotRead, path: path, detail: detail)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw StateError(kind: .cannotRead, path: path, detail: String(cString: strerror(errno))) }
        guard info.st_mode & S_IFMT == S_IFREG else { throw StateError(kind: .cannotRead, path: path, detail: "is not a regular file") }
        guard info.st_uid == geteuid() else {
            throw StateError(kind: .cannotRead, path: path,
                             detail: "is owned by uid \(info.st_uid), not by the user the node runs as (uid \(geteuid())): " +
                                 "chown \(geteuid()) \(path)")
        }
        if secret, info.st_mode & 0o077 != 0 {
            throw StateError(kind: .cannotRead, path: path,
                             detail: "is readable or writable by group or others (mode \(String(info.st_mode & 0o777, radix: 8))) " +
                                 "and holds IRKs: chmod 600 \(path)")
        }
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw StateError(kind: .cannotRead, path: path, detail: String(cString: strerror(errno)))
            }
            if n == 0 { return data }
            data.append(contentsOf: chunk[0 ..< n])
        }
    }

    /// Writes `value` as sorted, indented JSON (what the node's state files are), atomically.
    /// `mode`: the file's permissions (0640: the group may read it; 0600 for secrets).
    public func writeJSON<T: Encodable>(_ name: String, _ value: T, mode: mode_t = 0o640) throws(StateError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let data: Data
        do { data = try encoder.encode(value) } catch {
            throw StateError(kind: .cannotWrite, path: file(name).path, detail: "\(error)")
        }
        try write(name, data + Data("\n".utf8), mode: mode)
    }

    /// Replaces the file's content atomically and durably.
    public func write(_ name: String, _ data: Data, mode: mode_t = 0o640) throws(StateError) {
        let target = file(name)
        let temporary = url.appendingPathComponent(".\(name).tmp-\(getpid())")
        // A new file, never one found there (O_EXCL, O_NOFOLLOW): a leftover of this pid (a crash
        // of a process with the same pid) is removed first; a symbolic link is not followed.
        func create() -> Int32 { open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode) }
        var fd = create()
        if fd < 0, errno == EEXIST, unlink(temporary.path) == 0 { fd = create() }
        guard fd >= 0 else {
            throw StateError(kind: .cannotWrite, path: temporary.path, detail: String(cString: strerror(errno)))
        }
        // The mode asked for, whatever the umask.
        _ = fchmod(fd, mode)
        let written = data.withUnsafeBytes { raw -> Int in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 { if errno == EINTR { continue }; return -1 }
                offset += n
            }
            return offset
        }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == data.count, synced else {
            let detail = String(cString: strerror(errno))
            unlink(temporary.path)
            throw StateError(kind: .cannotWrite, path: target.path, detail: detail)
        }
        guard rename(temporary.path, target.path) == 0 else {
            let detail = String(cString: strerror(errno))
            unlink(temporary.path)
            throw StateError(kind: .cannotWrite, path: target.path, detail: detail)
        }
        let dirFD = open(url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFD >= 0 {
            fsync(dirFD)
            close(dirFD)
        }
    }
}

private func describe(_ error: Error) -> String {
    if let cocoa = error as? CocoaError, let underlying = cocoa.userInfo[NSUnderlyingErrorKey] as? NSError,
       underlying.domain == NSPOSIXErrorDomain {
        return String(cString: strerror(Int32(underlying.code)))
    }
    return (error as NSError).localizedDescription
}

/// The node's identity: its *specific* UUID, generated at first start and kept in the state
/// directory's `identity` file for the life of the installation.
public enum NodeIdentity {
    public static let fileName = "identity"

    /// Loads the identity, creating it on first start. A file that exists but does not hold a UUID
    /// is an error, never silently replaced: peers know this node by it.
    public static func loadOrCreate(in state: StateDirectory, logger: Logger) throws(StateError) -> UUID {
        if let data = try state.read(fileName) {
            let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard let uuid = UUID(uuidString: text) else {
                throw StateError(kind: .corrupt, path: state.file(fileName).path,
                                 detail: "expected one UUID, found \(text.debugDescription.prefix(60))")
            }
            return uuid
        }
        let uuid = UUID()
        try state.write(fileName, Data((uuid.uuidString.lowercased() + "\n").utf8))
        logger.notice("generated a new node identity", metadata: ["node.id": "\(uuid.uuidString.lowercased())",
                                                                  "state.file": "\(state.file(fileName).path)"])
        return uuid
    }
}

/// A state file with a version number, which ``StateDirectory/readVersioned(_:_:what:version:)`` checks.
protocol VersionedStateFile: Decodable {
    var version: Int { get }
}

extension StateDirectory {
    /// Reads the versioned JSON file `name`: nil when it does not exist; a `corrupt` error (the
    /// file left as it is) when it is not `what` or has another version than `version`.
    func readVersioned<File: VersionedStateFile>(_ type: File.Type, _ name: String, what: String,
                                                 version: Int) throws(StateError) -> File? {
        guard let data = try read(name) else { return nil }
        let path = file(name).path
        let decoded: File
        do { decoded = try JSONDecoder().decode(File.self, from: data) } catch {
            throw StateError(kind: .corrupt, path: path, detail: "not \(what): \(error)")
        }
        guard decoded.version == version else {
            throw StateError(kind: .corrupt, path: path, detail: "version \(decoded.version) is not supported (expected \(version))")
        }
        return decoded
    }
}

