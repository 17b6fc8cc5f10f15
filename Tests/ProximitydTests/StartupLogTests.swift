import DBusKit
import Foundation
import ProximityAPI
import ProximityNode
import ProximityTesting
import Testing

/// What the node says at the start about its config file and bluetoothd, so a user who reads
/// its log knows which file it runs on and how to see why nothing is ranged.
@Suite("the start's log", .serialized)
struct StartupLogTests {
    @Test("the node logs the config file it loaded, and without org.bluez says once that it waits for it and how to check")
    func configAndBlueZ() async throws {
        try await withBox { box in
            let config = box.stateDirectory.deletingLastPathComponent().appendingPathComponent("proximityd.yaml")
            try "regions:\n  - identifier: fleet\n    match: {}\n".write(to: config, atomically: true, encoding: .utf8)
            let daemon = try await box.startDaemon(["--config", config.path])
            try await daemon.waitForOutput(containing: "loaded the config file", inStderr: true)
            let line = try #require(daemon.stderr.split(separator: "\n").first { $0.contains("loaded the config file") })
            #expect(line.contains("config.file=\(config.path)") && line.contains("regions=1") && line.contains("rules=0"), "\(line)")
            let reports = SignalLog(try await box.observer.subscribe(MatchRule(sender: "org.proximityd", interface: ProximityBus.Node1.interface,
                                                                               member: ProximityBus.Node1.foundDevices)))
            let check = "busctl --address=\(box.address) status org.bluez"
            try await daemon.waitForOutput(containing: check, inStderr: true)
            // Three reports later, still without bluetoothd, it has not said it again.
            try await reports.wait(from: 2, timeout: .seconds(10), "the third FoundDevices") { _ in true }
            #expect(daemon.stderr.components(separatedBy: "waiting for bluetoothd").count == 2, "\(daemon.stderr)")
            reports.cancel()
            await daemon.stop()
        }
    }

    @Test("without a config file the node says so", .enabled(if: !FileManager.default.fileExists(atPath: ConfigFile.defaultPath)))
    func noConfig() async throws {
        try await withBox { box in
            let daemon = try ManagedProcess(BuiltProducts.path("proximityd"),
                                            ["run", "--bus", box.address, "--state-dir", box.stateDirectory.path, "--name", "test-box"])
            defer { daemon.signal(SIGKILL) }
            try await daemon.waitForOutput(containing: "running without a config file", inStderr: true, timeout: .seconds(20))
        }
    }
}
