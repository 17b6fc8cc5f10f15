import BlueZSim
import DBusKit
import Foundation
import ProximityCore
import ProximityNode
import NodeTesting
import ProximityTesting
import Testing
import SimTesting

/// Region monitoring in the node, in simulated time: bluez-sim's air with 30 % loss in bursts, the
/// engine in this process, ten minutes in a few seconds.
@Suite("regions in simulated time", .serialized)
struct RegionSimulationTests {
    static let fleet = UUID(uuidString: "f7826da6-4fa2-4e98-8024-bc5b71e0893e")!
    static let seed: UInt64 = 11

    /// A watcher, a node 2 m away and an iBeacon 1.6 m away. Each link loses 30 % of the
    /// advertisements: 12.5 % independently, and all of them during bad spells (20 % of the time,
    /// 1 s on average); bluetoothd takes its reports in every 0.5 s, in bunches.
    static func scenario() -> Scenario {
        var radio = RadioParameters()
        radio.shadowingSigma = 3
        radio.packetLoss = 0.125
        radio.burstLossRate = 0.2
        radio.burstDuration = 1
        radio.reportBatching = 0.5
        let tag = BeaconSpec(name: "tag", address: "C0:00:00:00:00:01",
                             frame: .iBeacon(uuid: fleet, major: 1, minor: 2, measuredPower: -59),
                             trajectory: Trajectory(fixed: Position(x: 1.5, y: 0.5)))
        return Scenario(seed: seed, radio: radio, boxes: [
            BoxSpec(name: "watcher", address: "AA:00:00:00:00:01", trajectory: Trajectory(fixed: Position(x: 0, y: 0))),
            BoxSpec(name: "visitor", address: "AA:00:00:00:00:02", trajectory: Trajectory(fixed: Position(x: 2, y: 0))),
        ], beacons: [tag])
    }

    /// The region events among a node's events, each with the time of the report before it and
    /// the last time the node heard any peer before that report (its own clock).
    static func regionEvents(_ events: [NodeEvent]) -> [(time: Timestamp, lastHeard: Timestamp, event: RegionEvent)] {
        var entries: [(time: Timestamp, lastHeard: Timestamp, event: RegionEvent)] = []
        var now: Timestamp = 0
        var lastHeard: Timestamp = 0
        for event in events {
            switch event {
            case .report(let report):
                now = report.time
                if let latest = report.peers.map(\.lastSeen).max() {
                    lastHeard = max(lastHeard, latest)
                }
            case .regions(let changes):
                entries += changes.events.map { (now, lastHeard, $0) }
            default: break
            }
        }
        return entries
    }

    /// The longest bad spell of the link from `transmitter` to the watcher in the first `span` s.
    static func longestBadSpell(_ scenario: Scenario, from transmitter: String, span: Double) -> Double {
        var process = scenario.radioModel.burstProcess(seed: scenario.seed, from: transmitter, to: "watcher")
        var longest = 0.0
        var t = 0.0
        while t < span {
            if process.state(at: t) == .bad { longest = max(longest, process.spellEnd - process.spellStart) }
            t = process.spellEnd + 1e-6
        }
        return longest
    }

    @Test("a node and an iBeacon that stay in range under 30 % loss in bursts never cause an Exited in ten minutes; once gone, each exits within the exit period plus one second")
    func noSpuriousExit() async throws {
        let scenario = Self.scenario()
        // The scenario has real bursts, none as long as the exit period (else the peers would be
        // out of range for that long, and an exit right).
        let spells = ["visitor", "tag"].map { Self.longestBadSpell(scenario, from: $0, span: 620) }
        #expect(spells.allSatisfy { $0 > 2 && $0 < 10 }, "longest bad spells \(spells)")
        try await withSimBoxes(scenario, time: .simulated) { boxes in
            try await withNode("watcher", on: boxes) { watcher in try await withNode("visitor", on: boxes) { visitor in
                @Sendable func recorded() -> [(time: Timestamp, lastHeard: Timestamp, event: RegionEvent)] {
                    Self.regionEvents(watcher.events.events)
                }
                let visitorID = visitor.engine.identity
                var byUUID = RegionMatcher()
                byUUID.uuid = Self.fleet
                var byIdentifier = RegionMatcher()
                byIdentifier.identifier = visitorID.uuidString.lowercased()
                try await watcher.engine.command(.startMonitoring(Region(identifier: "fleet", matcher: byUUID, source: .bus)))
                try await watcher.engine.command(.startMonitoring(Region(identifier: "visitor", matcher: byIdentifier, source: .bus)))
                try await watcher.engine.command(.startMonitoring(Region(identifier: "anyone", matcher: RegionMatcher(), source: .bus)))

                // Ten minutes, never ahead of what the watcher has heard: on a busy machine a bare
                // loop outruns the samples on their way over D-Bus, and the watcher would rightly
                // find its peers silent for longer than the exit period.
                try await boxes.advance(600, keepingUp: [watcher])
                let stayed = recorded()
                let entered = stayed.compactMap { if case .entered(let id) = $0.event { id } else { nil } }
                #expect(entered.sorted() == ["anyone", "fleet", "visitor"], "\(stayed.map(\.event))")
                #expect(!stayed.contains { if case .exited = $0.event { true } else { false } }, "\(stayed.map { ($0.time, $0.event) })")

                // Both leave: the iBeacon is taken away, the node walks 5 km off.
                let left = boxes.simulator.clock.now
                _ = try await boxes.control("RemoveBeacon", [.string("tag")])
                _ = try await boxes.control("MoveBox", [.string("visitor"), .double(5_000), .double(0), .double(0)])
                // Finer steps: the clock moves without waiting for the node, so each step also gives
                // the node real time to take in what the air delivered before the clock moves on.
                // Until the three exits are in, once a report is due (a second after the last one)
                // the clock waits for it: on a loaded machine a report left behind would run late on
                // the simulated clock, and the exits it decides with it. So each report runs at most
                // a step after it was due. (Once its table is empty the node stops reporting, so the
                // waiting stops with the exits.)
                func exited() -> Int {
                    recorded().filter { if case .exited = $0.event { $0.time >= left } else { false } }.count
                }
                func lastReport() -> Timestamp {
                    watcher.events.events.reversed().lazy.compactMap { if case .report(let r) = $0 { r.time } else { nil } }.first ?? 0
                }
                var reported = lastReport()
                for _ in 1...750 {
                    await boxes.advance(0.02)
                    if exited() < 3, boxes.simulator.clock.now >= reported + 1 {
                        let after = reported
                        let report = await watcher.events.wait(timeout: .seconds(10)) { if case .report(let r) = $0 { r.time > after } else { false } }
                        if case .report(let r)? = report { reported = r.time } else { reported = lastReport() }
                    }
                }
                let exits = recorded().filter { $0.time >= left }.compactMap { entry -> (String, Timestamp, Timestamp)? in
                    if case .exited(let id) = entry.event { (id, entry.time, entry.lastHeard) } else { nil }
                }
                #expect(exits.map(\.0).sorted() == ["anyone", "fleet", "visitor"], "\(exits)")
                // At most the exit period after the node last heard the peers, plus one report: the
                // region monitor's promise, on the node's own clock. When the node last heard them
                // depends on bluetoothd's bunches (up to `report_batching` after the radio heard the
                // last advertisement) and, in this process, on how late the node takes in what the
                // air delivered while the simulated clock moves on (under load, a second or more);
                // the strict bound from the walk-out, exit period plus one second, is checked end to
                // end in real time (RegionRealTimeTests).
                // The report itself runs at most a step (0.02 s) after it was due, as above: 0.1 s
                // allowed for that.
                let lateReport = 0.1
                for (region, time, lastHeard) in exits {
                    #expect(time - lastHeard <= 10 + 1 + lateReport, "\(region) exited \(time - lastHeard) s after the node last heard its peers")
                    #expect(time - left >= 10 - 1, "\(region) exited early: \(time - left) s after its peers left")
                }
            } }
        }
    }
}
