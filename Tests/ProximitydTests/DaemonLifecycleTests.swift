import DBusKit
import Foundation
import ProximityNode
import ProximityTesting
import Testing

@Suite("proximityd start, stop and failure")
struct DaemonLifecycleTests {
    @Test("the identity is generated once and survives restarts, SIGTERM and SIGINT exit 0")
    func identityPersists() async throws {
        try await withBox { box in
            let first = try await box.startDaemon()
            let before = try await box.busctl(["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "Identifier"])
            first.signal(SIGTERM)
            #expect(try await first.waitForExit() == 0, "\(first.stderr)")
            #expect(first.stderr.contains("stopped"))

            let second = try await box.startDaemon()
            let after = try await box.busctl(["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "Identifier"])
            #expect(before.stdout == after.stdout)
            #expect(!second.stderr.contains("generated a new node identity"))
            second.signal(SIGINT)
            #expect(try await second.waitForExit() == 0, "\(second.stderr)")
            // The name is released on the way out.
            #expect(try await box.observer.nameOwner(of: "org.proximityd") == nil)
        }
    }

    @Test("SIGKILL and restart keeps the identity; the restart removes the temporary files of writes the kill cut short")
    func killAndRestart() async throws {
        try await withBox { box in
            let first = try await box.startDaemon()
            let before = try await box.busctl(["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "Identifier"])
            first.signal(SIGKILL)
            _ = try await first.waitForExit()
            // What a SIGKILL between a state file's write and its rename leaves: `.NAME.tmp-PID`
            // of the killed process. One of a live process (this test's) stays.
            let directory = box.stateDirectory
            let interrupted = [".profile.json.tmp-\(first.pid)", ".regions.json.tmp-\(first.pid)"]
            for name in interrupted + [".alerts.json.tmp-\(getpid())"] {
                try Data("{\"torn\": ".utf8).write(to: directory.appendingPathComponent(name))
            }
            let second = try await box.startDaemon()
            let after = try await box.busctl(["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "Identifier"])
            #expect(before.stdout == after.stdout)
            let left = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".tmp-") }
            #expect(left == [".alerts.json.tmp-\(getpid())"], "\(left)")
            #expect(second.stderr.contains("removed the temporary files of 2 interrupted writes"), "\(second.stderr)")
            await second.stop()
        }
    }

    /// Runs proximityd to its exit and checks it printed exactly one line, no backtrace.
    func expectFailure(_ arguments: [String], status: Int32, startsWith prefix: String,
                       sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let result = try await runCommand(BuiltProducts.path("proximityd"), arguments)
        #expect(result.status == status, "\(result)", sourceLocation: sourceLocation)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1, "expected one line:\n\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.hasPrefix(prefix), "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(!result.stderr.contains("Backtrac") && !result.stderr.contains("Fatal error"), sourceLocation: sourceLocation)
    }

    @Test("a missing bus, a bad address, a taken name: one clear line, non-zero")
    func startupFailures() async throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("proximityd-fail-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: state) }
        try await expectFailure(["run", "--bus", "unix:path=/nonexistent/bus", "--state-dir", state.path], status: 69,
                                startsWith: "proximityd: error: cannot connect to the bus at unix:path=/nonexistent/bus: Failed to connect to socket")
        try await expectFailure(["run", "--bus", "tcp:host=", "--state-dir", state.path], status: 69,
                                startsWith: "proximityd: error: cannot connect to the bus at tcp:host=")
        // Nothing was written for a node that never started.
        #expect(!FileManager.default.fileExists(atPath: state.path))
        let usage = try await runCommand(BuiltProducts.path("proximityd"), ["run", "--bus", "nonsense"])
        #expect(usage.status == 64)
        #expect(usage.stderr.contains("--bus: 'nonsense' is not 'system', 'session' or a D-Bus address"))
        for bad in [["--service-uuid", "not-a-uuid"], ["--log-level", "loud"], ["--bus-name", "org..x"], ["--name", ""],
                    ["--clear-interval", "0"], ["--clear-interval", "3601"], ["--clear-interval", "nan"], ["--clear-interval", "x"],
                    ["--measured-power", "21"], ["--measured-power=-128"], ["--max-peers", "0"], ["--adapter", "hci 0"], ["--path-loss-exponent", "1"], ["--path-loss-exponent", "nan"],
                    ["--rssi-offset", "40.5"], ["--rssi-offset", "-inf"]] {
            let result = try await runCommand(BuiltProducts.path("proximityd"), ["run"] + bad)
            #expect(result.status == 64, "\(bad): \(result)")
        }

        try await withBox { box in
            let daemon = try await box.startDaemon()
            try await expectFailure(["run", "--bus", box.address, "--state-dir", box.stateDirectory.path + "-other"], status: 69,
                                    startsWith: "proximityd: error: org.proximityd is already owned on the bus at \(box.address)")
            #expect(daemon.isRunning)
            await daemon.stop()
        }
    }

    @Test("a corrupt identity is refused and left untouched; an unusable state directory is refused")
    func badState() async throws {
        try await withBox { box in
            try FileManager.default.createDirectory(at: box.stateDirectory, withIntermediateDirectories: true)
            let identity = box.stateDirectory.appendingPathComponent("identity")
            try "not a uuid\n".write(to: identity, atomically: true, encoding: .utf8)
            try await expectFailure(["run", "--bus", box.address, "--state-dir", box.stateDirectory.path], status: 78,
                                    startsWith: "proximityd: error: \(identity.path) is corrupt")
            #expect(try String(contentsOf: identity, encoding: .utf8) == "not a uuid\n")
            try FileManager.default.removeItem(at: identity)

            // Settings a client made are the user's: a file that cannot be read is refused, kept.
            let settings = box.stateDirectory.appendingPathComponent("settings.json")
            for (content, detail) in [("{\"clearInterval\": -1}", "clearInterval -1.0 is outside"),
                                      ("{\"measuredPower\": {\"x\": 99}}", "measuredPower[\"x\"]: a measured power of 99 dBm"),
                                      ("{\"version\": 7}", "version 7 is not supported"),
                                      ("[1, 2", "not a settings file")] {
                try writeSecret(content, to: settings.path)
                try await expectFailure(["run", "--bus", box.address, "--state-dir", box.stateDirectory.path], status: 78,
                                        startsWith: "proximityd: error: \(settings.path) is corrupt (\(detail)")
                #expect(try String(contentsOf: settings, encoding: .utf8) == content)
            }
            // It holds IRKs: readable by others, it is refused with the chmod (and kept).
            try writeSecret("{}", to: settings.path)
            chmod(settings.path, 0o644)
            try await expectFailure(["run", "--bus", box.address, "--state-dir", box.stateDirectory.path], status: 74,
                                    startsWith: "proximityd: error: cannot read \(settings.path): is readable or writable by group or others (mode 644) and holds IRKs: chmod 600 \(settings.path)")
            try FileManager.default.removeItem(at: settings)

            let notADirectory = box.bus.directory.appendingPathComponent("plain-file")
            try "x".write(to: notADirectory, atomically: true, encoding: .utf8)
            try await expectFailure(["run", "--bus", box.address, "--state-dir", notADirectory.path], status: 74,
                                    startsWith: "proximityd: error: cannot create state directory \(notADirectory.path): it exists and is not a directory")
            #expect(try await box.observer.nameOwner(of: "org.proximityd") == nil)
        }
    }

    @Test("the bus going away ends the daemon with status 69 and one line")
    func busLost() async throws {
        let box = try await Box.make()
        let daemon = try await box.startDaemon()
        await box.stop()
        let status = try await daemon.waitForExit(timeout: .seconds(10))
        #expect(status == 69, "\(daemon.stderr)")
        #expect(daemon.stderr.contains("proximityd: error: lost the connection to the bus at"), "\(daemon.stderr)")
        #expect(!daemon.stderr.contains("Backtrac"))
    }
}
