import Foundation

/// HTTP spoken by hand over a TCP socket to 127.0.0.1, for the raw answers of a server under test
/// (the live map's headers, chunks and event streams), with no HTTP client library in between.
public enum RawHTTP {
    /// A TCP connection to 127.0.0.1:`port` that sends `request` and reads what comes.
    public static func connect(port: Int, request: String) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { close(fd); throw TestKitError("cannot connect to 127.0.0.1:\(port)") }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = request.withCString { send(fd, $0, strlen($0), 0) }
        return fd
    }

    /// Reads from `fd` until `done` holds on what came, the peer closes, a read times out (20 s),
    /// or 30 s have passed.
    public static func read(_ fd: Int32, until done: (String) -> Bool) -> (text: String, closed: Bool) {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n == 0 { return (String(decoding: data, as: UTF8.self), true) }
            // A signal (a child process of another test ending) interrupts the wait: wait again.
            if n < 0, errno == EINTR { continue }
            if n < 0 { return (String(decoding: data, as: UTF8.self), false) }
            data.append(contentsOf: buffer[0 ..< n])
            if done(String(decoding: data, as: UTF8.self)) { return (String(decoding: data, as: UTF8.self), false) }
        }
        return (String(decoding: data, as: UTF8.self), false)
    }

    /// `GET path` with `Connection: close`: the whole answer as it came (status line, headers and
    /// body), once the server has closed the connection.
    public static func get(port: Int, _ path: String) throws -> String {
        let fd = try connect(port: port, request: "GET \(path) HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        defer { close(fd) }
        return read(fd) { _ in false }.text
    }
}
