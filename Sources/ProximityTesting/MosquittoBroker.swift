import Foundation
import Synchronization

/// A real Mosquitto broker (Debian's `mosquitto`) for one test: its own configuration in a
/// temporary directory, on 127.0.0.1 at a free port, no persistence, logging to standard error.
/// Started with ``start(_:port:)``; returns once the broker says it is running.
public final class MosquittoBroker: Sendable {
    public let port: Int
    public let directory: URL
    private let current: Mutex<ManagedProcess>
    /// The broker process running now (a new one after ``restart()``).
    public var process: ManagedProcess { current.withLock { $0 } }
    /// Its log (standard error) so far, of every process it ran as.
    public var log: String { earlier.withLock { $0 } + process.stderr }
    private let earlier = Mutex("")

    private init(port: Int, directory: URL, process: ManagedProcess) {
        self.port = port
        self.directory = directory
        current = Mutex(process)
    }

    var configurationFile: URL { directory.appendingPathComponent("mosquitto.conf") }

    private static func launch(_ file: URL) async throws -> ManagedProcess {
        let process = try ManagedProcess(resolveExecutable("/usr/sbin/mosquitto"), ["-c", file.path])
        do {
            try await process.waitForOutput(containing: " running", inStderr: true, timeout: .seconds(10))
        } catch {
            process.signal(SIGKILL)
            throw error
        }
        return process
    }

    /// Stops the broker process (SIGTERM: with persistence on, it saves its sessions), keeping its
    /// directory and port for ``resume()``.
    public func pause() async {
        let process = self.process
        await process.stop()
        earlier.withLock { $0 += process.stderr }
    }

    /// Starts the broker again, on the same port with the same configuration and directory.
    public func resume() async throws {
        let process = try await Self.launch(configurationFile)
        current.withLock { $0 = process }
    }

    /// ``pause()`` then ``resume()``.
    public func restart() async throws {
        await pause()
        try await resume()
    }

    /// `configuration`: lines added to the listener's (e.g. `allow_anonymous false`,
    /// `password_file …`); `{dir}` in them is replaced by the broker's directory.
    public static func start(_ configuration: [String] = ["allow_anonymous true"], port: Int? = nil) async throws -> MosquittoBroker {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mosquitto-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Started as root, mosquitto runs as user mosquitto: it must be able to write its
        // persistence file here (else a restart forgets every session, silently).
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory.path)
        let persistence = configuration.contains { $0.hasPrefix("persistence ") } ? [] : ["persistence false"]
        let file = directory.appendingPathComponent("mosquitto.conf")
        // A free port may be taken by another test between freeTCPPort() and the broker's bind:
        // then another port, a few times.
        var attempt = 0
        while true {
            attempt += 1
            let chosen = try port ?? freeTCPPort()
            let lines = ["per_listener_settings false", "log_dest stderr", "log_type all"] + persistence + ["listener \(chosen) 127.0.0.1"]
                + configuration.map { $0.replacingOccurrences(of: "{dir}", with: directory.path) }
            try (lines.joined(separator: "\n") + "\n").write(to: file, atomically: true, encoding: .utf8)
            do {
                let process = try await launch(file)
                return MosquittoBroker(port: chosen, directory: directory, process: process)
            } catch let error as TestKitError where port == nil && attempt < 5 && "\(error)".contains("Address already in use") {
                continue
            }
        }
    }

    /// Runs `body` with a broker started for it, and stops the broker after it, however it ends
    /// (a broker left running would keep its output reader, and so the test process, alive).
    public static func with<T>(_ configuration: [String] = ["allow_anonymous true"], port: Int? = nil,
                               _ body: (MosquittoBroker) async throws -> T) async throws -> T {
        let broker = try await start(configuration, port: port)
        do {
            let result = try await body(broker)
            await broker.stop()
            return result
        } catch {
            await broker.stop()
            throw error
        }
    }

    /// Stops the broker (SIGTERM, then SIGKILL) and removes its directory.
    public func stop() async {
        await process.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// `mosquitto_sub`/`mosquitto_pub` arguments that reach this broker.
    public var clientArguments: [String] { ["-h", "127.0.0.1", "-p", "\(port)"] }
}

/// A TCP port on 127.0.0.1 that nothing listens on now (the kernel's choice for port 0).
public func freeTCPPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestKitError("socket: \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw TestKitError("bind: \(String(cString: strerror(errno)))") }
    return Int(UInt16(bigEndian: address.sin_port))
}
