import Foundation

/// Writes a file that holds a secret as a careful user does: mode 0600 whatever the umask, so
/// that the node's checks of a secret's file (fleet key, IRK file, password file, a config file
/// with inline IRKs) accept it.
public func writeSecret(_ text: String, to path: String) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
    guard fd >= 0 else { throw TestKitError("cannot write \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    guard fchmod(fd, 0o600) == 0 else { throw TestKitError("cannot chmod \(path): \(String(cString: strerror(errno)))") }
    let bytes = Array(text.utf8)
    var written = 0
    while written < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
        if n < 0, errno == EINTR { continue }
        guard n > 0 else { throw TestKitError("cannot write \(path): \(String(cString: strerror(errno)))") }
        written += n
    }
}
