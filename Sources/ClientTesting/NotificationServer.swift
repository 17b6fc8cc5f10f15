import DBusKit
import Foundation
import ProximityTesting

/// A real desktop notification server for one test: `Xvfb` on a free display, a private session
/// bus (``PrivateBus``), and `dunst` drawing on that display and owning
/// `org.freedesktop.Notifications` on that bus (Debian's `xvfb` and `dunst`).
///
/// Every wait is on the event itself, bounded: Xvfb writes its display number once it accepts
/// connections (`-displayfd`, which also picks a free display, so parallel tests never race for
/// one), and dunst is ready once the bus announces the name's new owner.
///
/// Like ``PrivateBus``, the processes are tied to the test process: a watchdog shell kills Xvfb
/// when the pipe only this process holds closes (dunst exits when its display goes, the bus has
/// its own watchdog), so a crashed test run leaves nothing behind.
public final class NotificationServer: Sendable {
    public static let busName: BusName = "org.freedesktop.Notifications"

    /// The display, `:N`.
    public let display: String
    /// The session bus dunst serves on.
    public let bus: PrivateBus
    /// dunstrc and whatever else the test puts there.
    public let directory: URL
    private let xvfb: ManagedProcess
    private let dunst: ManagedProcess
    private let watchdog: ManagedProcess

    private init(display: String, bus: PrivateBus, directory: URL, xvfb: ManagedProcess, dunst: ManagedProcess, watchdog: ManagedProcess) {
        self.display = display
        self.bus = bus
        self.directory = directory
        self.xvfb = xvfb
        self.dunst = dunst
        self.watchdog = watchdog
    }

    /// `DISPLAY` and `DBUS_SESSION_BUS_ADDRESS`, as a desktop session has them.
    public var environment: [String: String] {
        ["DISPLAY": display, "DBUS_SESSION_BUS_ADDRESS": bus.address]
    }

    /// Starts Xvfb, the bus and dunst; returns once dunst owns `org.freedesktop.Notifications`.
    public static func start(timeout: Duration = .seconds(20)) async throws -> NotificationServer {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("proximityd-notifications-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Xvfb picks a free display and writes its number on fd 1 once it is ready.
        let xvfb = try ManagedProcess(resolveExecutable("Xvfb"), ["-displayfd", "1", "-nolisten", "tcp", "-screen", "0", "1024x768x24"])
        let watchdog = try ManagedProcess("/bin/sh", ["-c", "while read -r _; do :; done; kill -9 \(xvfb.pid) 2>/dev/null"],
                                          keepStdinOpen: true)
        do {
            try await xvfb.waitForOutput(containing: "\n", timeout: timeout)
        } catch {
            xvfb.signal(SIGKILL)
            throw TestKitError("Xvfb did not start: \(error)")
        }
        let number = xvfb.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        guard Int(number) != nil, FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)") else {
            xvfb.signal(SIGKILL)
            throw TestKitError("Xvfb wrote \(number.debugDescription) but /tmp/.X11-unix/X\(number) is not there\n\(xvfb.stderr)")
        }
        let display = ":\(number)"

        let bus: PrivateBus
        do { bus = try await PrivateBus.start(name: "session") } catch {
            await xvfb.stop(grace: .seconds(2))
            throw error
        }
        let config = directory.appendingPathComponent("dunstrc")
        try """
            [global]
                font = Monospace 8
                idle_threshold = 0
                history_length = 50
                sticky_history = yes
                show_indicators = no
            [urgency_low]
                timeout = 0
            [urgency_normal]
                timeout = 0
            [urgency_critical]
                timeout = 0
            """.write(to: config, atomically: true, encoding: .utf8)

        let observer = try await bus.connect()
        let owners = SignalLog(try await observer.subscribe(MatchRule(sender: .bus, interface: .bus, member: "NameOwnerChanged",
                                                                      arg0: busName.rawValue)))
        defer { owners.cancel() }
        let dunst = try ManagedProcess(resolveExecutable("dunst"), ["-config", config.path],
                                       environment: ["DISPLAY": display, "DBUS_SESSION_BUS_ADDRESS": bus.address])
        let server = NotificationServer(display: display, bus: bus, directory: directory, xvfb: xvfb, dunst: dunst, watchdog: watchdog)
        do {
            if try await observer.nameOwner(of: busName) == nil {
                try await owners.wait(timeout: timeout, "\(busName) owned by dunst") { m in
                    m.body.count == 3 && m.body[2].string?.isEmpty == false
                }
            }
        } catch {
            await observer.close()
            let log = dunst.stderr
            await server.stop()
            throw TestKitError("dunst did not take \(busName): \(error)\n\(log)")
        }
        await observer.close()
        return server
    }

    // MARK: - What dunst shows (through dunstctl, as a user would)

    /// `dunstctl …` with this session's environment.
    public func dunstctl(_ arguments: [String]) async throws -> CommandResult {
        try await runCommand("dunstctl", arguments, environment: environment)
    }

    /// How many notifications are on the screen now.
    public func displayedCount() async throws -> Int {
        let result = try await dunstctl(["count", "displayed"])
        guard result.status == 0, let n = Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw TestKitError("dunstctl count displayed: \(result)")
        }
        return n
    }

    /// Closes the newest notification on the screen, as its user would: the server announces
    /// `NotificationClosed` with reason 2 (dismissed).
    public func closeLast() async throws {
        let result = try await dunstctl(["close"])
        guard result.status == 0 else { throw TestKitError("dunstctl close: \(result)") }
    }

    /// Closes every notification on the screen (reason 2 each).
    public func closeAll() async throws {
        let result = try await dunstctl(["close-all"])
        guard result.status == 0 else { throw TestKitError("dunstctl close-all: \(result)") }
    }

    /// One notification of dunst's history (those closed), newest first.
    public struct Closed: Sendable, Hashable {
        public var id: Int
        public var appName: String
        public var summary: String
        public var body: String
        public var iconPath: String
    }

    /// `dunstctl history`: the notifications closed so far, newest first.
    public func history() async throws -> [Closed] {
        let result = try await dunstctl(["history"])
        guard result.status == 0,
              let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
              let data = object["data"] as? [[[String: Any]]] else {
            throw TestKitError("dunstctl history: \(result)")
        }
        func field(_ n: [String: Any], _ key: String) -> Any? { (n[key] as? [String: Any])?["data"] }
        return (data.first ?? []).map { n in
            Closed(id: field(n, "id") as? Int ?? -1, appName: field(n, "appname") as? String ?? "",
                   summary: field(n, "summary") as? String ?? "", body: field(n, "body") as? String ?? "",
                   iconPath: field(n, "icon_path") as? String ?? "")
        }
    }

    public var isRunning: Bool { dunst.isRunning && xvfb.isRunning }

    /// dunst's output so far, for failure messages.
    public var log: String { dunst.stdout + dunst.stderr }

    public func stop() async {
        await dunst.stop(grace: .seconds(2))
        await xvfb.stop(grace: .seconds(2))
        watchdog.signal(SIGKILL)
        await bus.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    deinit {
        dunst.signal(SIGKILL)
        xvfb.signal(SIGKILL)
        watchdog.signal(SIGKILL)
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Runs `body` with a notification server, stopping it whatever happens.
public func withNotificationServer<T>(_ body: (NotificationServer) async throws -> T) async throws -> T {
    let server = try await NotificationServer.start()
    do {
        let result = try await body(server)
        await server.stop()
        return result
    } catch {
        await server.stop()
        throw error
    }
}
