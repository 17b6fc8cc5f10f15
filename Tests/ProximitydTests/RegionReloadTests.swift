import DBusKit
import Foundation
import ProximityAPI
import ProximityTesting
import Testing

/// The config file's regions, reloaded with SIGHUP and `Node1.Reload()`, as one change or none.
@Suite("regions: reloading the config file", .serialized)
struct RegionReloadTests {
    static let fleet = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"

    static func monitored(_ box: Box) async throws -> String {
        try await box.busctl(["call", "org.proximityd", "/org/proximityd", "org.proximityd.RegionMonitor1", "GetMonitoredRegions"])
            .stdout.trimmed
    }

    @Test("SIGHUP with a changed file adds, replaces and removes regions; a broken file changes nothing, is logged, and Reload() answers InvalidConfiguration")
    func reload() async throws {
        try await withBox { box in
            let file = box.bus.directory.appendingPathComponent("proximityd.yaml")
            try """
                region-monitor:
                  exit-period: 20
                regions:
                  - identifier: fleet
                    match: { uuid: \(Self.fleet), within: near }
                  - identifier: door
                    match: { kind: node }
                """.write(to: file, atomically: true, encoding: .utf8)
            let daemon = try await box.startDaemon(["--config", file.path])
            #expect(try await Self.monitored(box) == "ao 2 \"/org/proximityd/regions/door\" \"/org/proximityd/regions/fleet\"")
            #expect(try await box.busctl(["get-property", "org.proximityd", "/org/proximityd/regions/fleet", "org.proximityd.Region1",
                                          "Source"]).stdout.trimmed == "s \"config\"")
            // A region added over the bus stays through reloads.
            #expect(try await box.busctl(["call", "org.proximityd", "/org/proximityd", "org.proximityd.RegionMonitor1", "StartMonitoring",
                                          "sa{sv}", "mine", "1", "Kind", "s", "ibeacon"]).status == 0)

            // door removed, fleet's matcher changed, hall added: one SIGHUP.
            let objects = SignalLog(try await box.observer.subscribe(MatchRule(sender: "org.proximityd", interface: .objectManager)))
            defer { objects.cancel() }
            try """
                regions:
                  - identifier: fleet
                    match: { uuid: \(Self.fleet), major: 3 }
                  - identifier: hall
                    match: { url-domain: example.com, exit-period: 30 }
                """.write(to: file, atomically: true, encoding: .utf8)
            daemon.signal(SIGHUP)
            try await objects.wait(timeout: .seconds(10), "hall exported") {
                $0.member == "InterfacesAdded" && $0.body.first == .objectPath(ProximityBus.regionPath("hall"))
            }
            try await objects.wait(timeout: .seconds(10), "door removed") {
                $0.member == "InterfacesRemoved" && $0.body.first == .objectPath(ProximityBus.regionPath("door"))
            }
            #expect(try await Self.monitored(box)
                    == "ao 3 \"/org/proximityd/regions/fleet\" \"/org/proximityd/regions/hall\" \"/org/proximityd/regions/mine\"")
            #expect(try await box.busctl(["get-property", "org.proximityd", "/org/proximityd/regions/fleet", "org.proximityd.Region1",
                                          "Matcher"]).stdout.trimmed == "a{sv} 2 \"Major\" q 3 \"UUID\" s \"\(Self.fleet)\"")

            // A broken file: SIGHUP changes nothing and logs the line; Reload() answers it.
            try """
                regions:
                  - identifier: fleet
                    match: { uuid: not-a-uuid }
                """.write(to: file, atomically: true, encoding: .utf8)
            daemon.signal(SIGHUP)
            try await eventually("the reload refused in the log", timeout: .seconds(10)) {
                daemon.stderr.contains("the configuration was not reloaded")
            }
            #expect(daemon.stderr.contains("\(file.path):3:20: "), "\(daemon.stderr)")
            let reload = try await box.busctl(["call", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "Reload"])
            #expect(reload.status != 0 && reload.stderr.contains("\(file.path):3:20:"), "\(reload)")
            do {
                _ = try await box.observer.call(destination: "org.proximityd", path: "/org/proximityd", interface: "org.proximityd.Node1",
                                                member: "Reload")
                Issue.record("Reload() of a broken file succeeded")
            } catch let error as DBusError {
                #expect(error.name == ProximityBus.Errors.invalidConfiguration)
            }
            #expect(try await Self.monitored(box)
                    == "ao 3 \"/org/proximityd/regions/fleet\" \"/org/proximityd/regions/hall\" \"/org/proximityd/regions/mine\"")
            #expect(try await box.busctl(["get-property", "org.proximityd", "/org/proximityd/regions/fleet", "org.proximityd.Region1",
                                          "Matcher"]).stdout.trimmed == "a{sv} 2 \"Major\" q 3 \"UUID\" s \"\(Self.fleet)\"")

            // Fixed again: Reload() applies it and returns once it is on the bus.
            try "regions: []\n".write(to: file, atomically: true, encoding: .utf8)
            #expect(try await box.busctl(["call", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "Reload"]).status == 0)
            #expect(try await Self.monitored(box) == "ao 1 \"/org/proximityd/regions/mine\"")
            #expect(daemon.isRunning)
            await daemon.stop()
            #expect(daemon.exitStatus == 0)
        }
    }
}
