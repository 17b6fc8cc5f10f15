import Foundation

/// What bluetoothd keeps of a bond, read from its storage directory: for each adapter and device,
/// `STORAGEDIR/<adapter address>/<device address>/info`, a GLib key file (BlueZ 5.66
/// `src/adapter.c`, `store_irk`, `store_longtermkey`). BlueZ offers no D-Bus call for a device's
/// keys, so a program that needs the identity resolving key a phone gave reads this file, as root.
///
/// The directory is named after the device's identity address, the one it gave in the key
/// distribution (and the device's `Address` from then on). The key is in the group
/// `[IdentityResolvingKey]`, as `Key=` and 32 hexadecimal digits in the order the key
/// distribution carried them: least significant byte first, the reverse of how Home Assistant,
/// ESPresense and this project write an IRK.
public enum BondStore {
    /// bluetoothd's `STORAGEDIR`.
    public static let defaultDirectory = "/var/lib/bluetooth"
    /// The most of an `info` file read (BlueZ's are well under 4 KiB).
    public static let maxInfoSize = 65_536

    public struct Problem: Error, Sendable, Hashable, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// `storage/ADAPTER/DEVICE/info`, the addresses in uppercase as bluetoothd names them.
    public static func infoPath(storage: String, adapter: String, device: String) -> String {
        (storage as NSString).appendingPathComponent("\(adapter.uppercased())/\(device.uppercased())/info")
    }

    /// The `Key=` of the `info` file's `[IdentityResolvingKey]` group as stored: 32 hexadecimal
    /// digits, **least significant byte first**; nil when the file has none (the device gave no
    /// IRK: it uses its identity address on the air, or it did not bond).
    public static func storedIdentityResolvingKey(info text: String) throws(Problem) -> String? {
        var group = ""
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]") else { throw Problem("line \(number + 1): a group header without ]") }
                group = String(line.dropFirst().dropLast())
                continue
            }
            guard group == "IdentityResolvingKey", let eq = line.firstIndex(of: "=") else { continue }
            guard line[..<eq].trimmingCharacters(in: .whitespaces) == "Key" else { continue }
            let value = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            guard value.utf8.count == 32, value.allSatisfy({ $0.isHexDigit && $0.isASCII }) else {
                throw Problem("line \(number + 1): the IdentityResolvingKey's Key is not 32 hexadecimal digits")
            }
            return value
        }
        return nil
    }

    /// Reads an `info` file without following a link or blocking on a FIFO, at most
    /// ``maxInfoSize`` bytes. The errors say what to do: bluetoothd's storage is root's.
    public static func readInfo(at path: String) throws(Problem) -> String {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            switch code {
            case EACCES, EPERM: throw Problem("\(path): permission denied (bluetoothd's storage is root's: run this as root)")
            case ENOENT: throw Problem("\(path): no such file (bluetoothd stored no bond there)")
            case ELOOP: throw Problem("\(path): is a symbolic link; refused")
            default: throw Problem("\(path): \(String(cString: strerror(code)))")
            }
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { throw Problem("\(path): not a regular file") }
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while data.count <= maxInfoSize {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Problem("\(path): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            data += buffer[0..<n]
        }
        guard data.count <= maxInfoSize else { throw Problem("\(path): larger than \(maxInfoSize) bytes") }
        return String(decoding: data, as: UTF8.self)
    }
}
