import BlueZSim
import DBusKit
import Foundation
import ProximityAPI
import ProximityTesting
import Testing
import SimTesting

/// Region monitoring as a user scripts it: proximityd processes on bluez-sim in real time, regions
/// added with busctl, signals observed by a bus client.
///
/// Its bounds (entered and exited within the exit period plus one second) are read off the wall
/// clock, so it is one of the suites named `…RealTimeTests`, which scripts/test.sh runs after the
/// rest of the suite, one at a time: a busy machine's other tests do not stretch its clock.
@Suite("regions end to end on bluez-sim, in real time", .serialized)
struct RegionRealTimeTests {
    static let fleet = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"
    static let exitPeriod = 5.0

    /// `watcher` at the origin; `visitor` far away until the test walks it in.
    static func scenario() -> Scenario {
        var radio = RadioParameters()
        radio.shadowingSigma = 2
        radio.packetLoss = 0.1
        return Scenario(seed: 17, radio: radio, boxes: [
            BoxSpec(name: "watcher", address: "AA:00:00:00:00:01", trajectory: Trajectory(fixed: Position(x: 0, y: 0))),
            BoxSpec(name: "visitor", address: "AA:00:00:00:00:02", trajectory: Trajectory(fixed: Position(x: 5_000, y: 0))),
        ])
    }

    static let tag = """
        {"name": "tag", "address": "C0:00:00:00:00:01", "ibeacon": {"uuid": "\(fleet)", "major": 1, "minor": 2, "measured_power": -59}, "position": [1, 1]}
        """

    /// A bus client's log of every Region1 signal on `box`.
    static func regionSignals(_ sim: SimBoxes, _ box: String) async throws -> (DBusConnection, SignalLog) {
        let observer = try await sim.buses[box]!.connect()
        let log = SignalLog(try await observer.subscribe(MatchRule(sender: "org.proximityd", interface: "org.proximityd.Region1")))
        return (observer, log)
    }

    static func isSignal(_ m: DBusMessage, _ member: String, _ region: String, _ state: String? = nil) -> Bool {
        m.member?.rawValue == member && m.path == ProximityBus.regionPath(region) && (state == nil || m.body.first?.string == state)
    }

    @Test("a box and an iBeacon walk in and out: StateDetermined then Entered, StateDetermined then Exited, each within the exit period plus one second; a restart after SIGKILL while inside enters nothing again")
    func walkInAndOut() async throws {
        try await withNodes(Self.scenario()) { sim, daemons in
            daemons["watcher"] = try await sim.startDaemon("watcher")
            daemons["visitor"] = try await sim.startDaemon("visitor")
            let visitor = try await sim.identifier("visitor")
            let (observer, signals) = try await Self.regionSignals(sim, "watcher")
            defer { signals.cancel() }

            let period = String(Self.exitPeriod)
            let add1 = try await sim.busctl("watcher", ["call", "org.proximityd", "/org/proximityd", "org.proximityd.RegionMonitor1",
                                                        "StartMonitoring", "sa{sv}", "fleet", "2", "UUID", "s", Self.fleet,
                                                        "ExitPeriod", "d", period])
            #expect(add1.status == 0, "\(add1)")
            let add2 = try await sim.busctl("watcher", ["call", "org.proximityd", "/org/proximityd", "org.proximityd.RegionMonitor1",
                                                        "StartMonitoring", "sa{sv}", "visitor", "2", "Identifier", "s", visitor,
                                                        "ExitPeriod", "d", period])
            #expect(add2.status == 0, "\(add2)")
            // Monitoring starts with a state determined: unknown, then outside once nobody came for the exit period.
            try await signals.wait("StateDetermined(unknown)") { Self.isSignal($0, "StateDetermined", "fleet", "unknown") }
            try await signals.wait(timeout: .seconds(Self.exitPeriod + 3), "StateDetermined(outside)") {
                Self.isSignal($0, "StateDetermined", "fleet", "outside")
            }

            // proximityctl follows the same signals, as JSON lines; a state it prints proves it
            // is subscribed.
            let watch = try ManagedProcess(BuiltProducts.path("proximityctl"),
                                           ["regions", "watch", "--json", "fleet", "visitor", "--bus", sim.address("watcher")])
            defer { watch.signal(SIGTERM) }
            // Whether proximityctl has subscribed yet is its own state: asked again until it prints.
            try await eventually("proximityctl regions watch subscribed", timeout: .seconds(10)) {
                _ = try await sim.busctl("watcher", ["call", "org.proximityd", "/org/proximityd", "org.proximityd.RegionMonitor1",
                                                     "RequestState", "s", "fleet"])
                return watch.stdout.contains("\"event\":\"state\"")
            }

            // Walk in. The peers arrive while the calls run: a bound is read from after they
            // returned (the latest they can have arrived).
            var mark = signals.count
            _ = try await sim.control(["AddBeacon", "s", Self.tag])
            _ = try await sim.control(["MoveBox", "sddd", "visitor", "1.5", "0", "0"])
            let walkedIn = ContinuousClock.now
            for region in ["fleet", "visitor"] {
                let entered = try await signals.waitEntry(from: mark, timeout: .seconds(Self.exitPeriod + 5), "Entered \(region)") {
                    Self.isSignal($0, "Entered", region)
                }
                #expect(walkedIn.duration(to: entered.at) <= .seconds(Self.exitPeriod + 1), "\(region) entered \(walkedIn.duration(to: entered.at)) after")
                print("regions end to end: \(region) entered \(walkedIn.duration(to: entered.at)) after the walk-in")
                let before = signals.entries.dropFirst(mark).filter { $0.message.path == ProximityBus.regionPath(region) && $0.at <= entered.at }
                    .map(\.message).filter { $0.member?.rawValue != "Ranged" }
                #expect(before.suffix(2).map { "\($0.member!.rawValue)\($0.body.first?.string.map { "(\($0))" } ?? "")" }
                        == ["StateDetermined(inside)", "Entered"])
            }
            let state = try await sim.busctl("watcher", ["get-property", "org.proximityd", "/org/proximityd/regions/fleet",
                                                         "org.proximityd.Region1", "State"])
            #expect(state.stdout.trimmed == "s \"inside\"")
            // Ranged lists the tag, with its zone, distance and RSSI.
            let ranged = try await signals.wait(from: mark, "Ranged fleet") { Self.isSignal($0, "Ranged", "fleet") }
            let first = ranged.body.first?.arrayElements?.first
            guard case .structure(let fields)? = first else { Issue.record("Ranged \(ranged.body)"); return }
            #expect(fields[0].string == "ibeacon:\(Self.fleet):1:2" && ["immediate", "near"].contains(fields[1].string ?? ""), "\(fields)")

            // Walk out: exits within the exit period plus one second (0.3 s for the signal's way
            // here). The peers leave while the calls run: the upper bound is read from after they
            // returned (the latest the peers were last heard), the lower one from before them.
            mark = signals.count
            let leaving = ContinuousClock.now
            _ = try await sim.control(["RemoveBeacon", "s", "tag"])
            _ = try await sim.control(["MoveBox", "sddd", "visitor", "5000", "0", "0"])
            let walkedOut = ContinuousClock.now
            for region in ["fleet", "visitor"] {
                let exited = try await signals.waitEntry(from: mark, timeout: .seconds(Self.exitPeriod + 5), "Exited \(region)") {
                    Self.isSignal($0, "Exited", region)
                }
                let after = walkedOut.duration(to: exited.at)
                print("regions end to end: \(region) exited \(after) after the walk-out (exit period \(Self.exitPeriod) s)")
                #expect(after <= .seconds(Self.exitPeriod + 1) + .milliseconds(300), "\(region) exited \(after) after")
                #expect(leaving.duration(to: exited.at) >= .seconds(Self.exitPeriod) - .milliseconds(500),
                        "\(region) exited early: \(leaving.duration(to: exited.at))")
                let before = signals.entries.dropFirst(mark).filter { $0.message.path == ProximityBus.regionPath(region) && $0.at <= exited.at }
                    .map(\.message).filter { $0.member?.rawValue != "Ranged" }
                #expect(before.map(\.member!.rawValue) == ["StateDetermined", "Exited"])
            }

            // proximityctl printed each enter and exit, as one JSON object a line (it may print a
            // moment after this client saw the signal).
            @Sendable func printed(_ region: String, in output: String? = nil) -> [String] {
                (output ?? watch.stdout).split(separator: "\n").compactMap {
                    try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
                }.filter { $0["region"] as? String == region }.compactMap { $0["event"] as? String }
            }
            let printedBoth = await watch.waitForOutput(timeout: .seconds(5)) { out in
                ["fleet", "visitor"].allSatisfy { printed($0, in: out).contains("entered") && printed($0, in: out).contains("exited") }
            }
            #expect(printedBoth, "proximityctl did not print the enters and exits: \(watch.stdout)")

            // In again, then SIGKILL while inside and restart: no second Entered, a StateDetermined(inside).
            mark = signals.count
            _ = try await sim.control(["AddBeacon", "s", Self.tag])
            _ = try await sim.control(["MoveBox", "sddd", "visitor", "1.5", "0", "0"])
            for region in ["fleet", "visitor"] {
                try await signals.wait(from: mark, timeout: .seconds(Self.exitPeriod + 5), "Entered \(region)") { Self.isSignal($0, "Entered", region) }
            }
            daemons["watcher"]!.signal(SIGKILL)
            _ = try await daemons["watcher"]!.waitForExit(timeout: .seconds(10))
            mark = signals.count
            daemons["watcher"] = try await sim.startDaemon("watcher")
            for region in ["fleet", "visitor"] {
                try await signals.wait(from: mark, timeout: .seconds(5), "StateDetermined(inside) for \(region) after the restart") {
                    Self.isSignal($0, "StateDetermined", region, "inside")
                }
                // Ranged again with its peer: the peer is back in the table and the region still inside.
                try await signals.wait(from: mark, timeout: .seconds(10), "\(region) ranged after the restart") {
                    Self.isSignal($0, "Ranged", region) && !($0.body.first?.arrayElements ?? []).isEmpty
                }
            }
            // Two more reports' worth of signals, then: still no Entered since the restart.
            let settled = signals.count
            try await signals.wait(from: settled, timeout: .seconds(5), "another Ranged") { Self.isSignal($0, "Ranged", "visitor") }
            let again = signals.entries.dropFirst(mark).map(\.message).filter { $0.member?.rawValue == "Entered" || $0.member?.rawValue == "Exited" }
            #expect(again.isEmpty, "after the restart: \(again.map(\.description))")
            #expect(try await sim.busctl("watcher", ["get-property", "org.proximityd", "/org/proximityd/regions/visitor",
                                                     "org.proximityd.Region1", "State"]).stdout.trimmed == "s \"inside\"")
            await observer.close()
        }
    }
}
