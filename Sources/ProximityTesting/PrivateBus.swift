import DBusKit
import Foundation

/// A private `dbus-daemon`, started for one test (or one simulated box) and stopped after it.
///
/// It never touches the machine's own buses. Its socket lives in a fresh temporary directory; its
/// policy lets every local user own any name and call anything, unless `policy` gives the
/// `<policy>` elements to use instead.
///
/// The daemon is tied to the process that started it: a small watchdog shell reads a pipe whose
/// write end only this process holds, and kills the daemon when the pipe closes. So a test run
/// that crashes or is killed leaves no bus behind.
public final class PrivateBus: Sendable {
    public let address: String
    public let directory: URL
    private let daemon: ManagedProcess
    private let watchdog: ManagedProcess

    private init(address: String, directory: URL, daemon: ManagedProcess, watchdog: ManagedProcess) {
        self.address = address
        self.directory = directory
        self.daemon = daemon
        self.watchdog = watchdog
    }

    public static func start(name: String = "bus", policy: String? = nil) async throws -> PrivateBus {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("proximityd-\(name)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let socket = directory.appendingPathComponent("bus").path
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <listen>unix:path=\(socket)</listen>
              <auth>EXTERNAL</auth>
              \(policy ?? """
              <policy context="default">
                <allow user="*"/>
                <allow own="*"/>
                <allow send_type="method_call"/>
                <allow send_destination="*"/>
                <allow receive_sender="*"/>
              </policy>
              """)
              <limit name="max_incoming_bytes">1000000000</limit>
              <limit name="max_outgoing_bytes">1000000000</limit>
              <limit name="max_message_size">134217728</limit>
              <limit name="max_connections_per_user">10000</limit>
              <limit name="max_match_rules_per_connection">50000</limit>
              <limit name="max_replies_per_connection">50000</limit>
            </busconfig>
            """
        let configPath = directory.appendingPathComponent("bus.conf").path
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        let daemon = try ManagedProcess(resolveExecutable("dbus-daemon"),
                                        ["--config-file=\(configPath)", "--nofork", "--nopidfile", "--print-address"])
        let watchdog = try ManagedProcess("/bin/sh", ["-c", "while read -r _; do :; done; kill -9 \(daemon.pid) 2>/dev/null"],
                                          keepStdinOpen: true)
        try await daemon.waitForOutput(containing: "\n", timeout: .seconds(10))
        let address = daemon.stdout.split(separator: "\n").first.map(String.init) ?? "unix:path=\(socket)"
        return PrivateBus(address: address, directory: directory, daemon: daemon, watchdog: watchdog)
    }

    public var busAddress: BusAddress { .address(address) }

    /// A new DBusKit connection to this bus.
    public func connect() async throws -> DBusConnection {
        try await DBusConnection.connect(to: busAddress)
    }

    public var isRunning: Bool { daemon.isRunning }

    public func stop() async {
        await daemon.stop(grace: .seconds(2))
        watchdog.signal(SIGKILL)
        try? FileManager.default.removeItem(at: directory)
    }

    deinit {
        daemon.signal(SIGKILL)
        watchdog.signal(SIGKILL)
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Finds the executables SwiftPM built next to the running test binary.
public enum BuiltProducts {
    public static var directory: URL {
        if let dir = ProcessInfo.processInfo.environment["PROXIMITYD_BIN_DIR"] {
            return URL(fileURLWithPath: dir)
        }
        let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return exe.deletingLastPathComponent()
    }

    public static func path(_ product: String) -> String {
        directory.appendingPathComponent(product).path
    }
}
