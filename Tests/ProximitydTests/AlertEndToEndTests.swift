import BlueZSim
import DBusKit
import Foundation
import ProximityAPI
import ProximityTesting
import Testing
import SimTesting

/// The seed's "Albert" walk-through on bluez-sim in real time: a proximityd box (Albert's) walks
/// past two iBeacons, Beacon1 and Beacon2, each with an alert (range near, strategy `=`, action
/// popup, a 3 s reset), added with busctl. A bus client plays the app: it observes the offers and
/// answers them.
@Suite("alerts end to end on bluez-sim", .serialized)
struct AlertEndToEndTests {
    static let fleet = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"
    static let reset = 3.0

    static func scenario() -> Scenario {
        var radio = RadioParameters()
        radio.shadowingSigma = 1
        radio.packetLoss = 0.05
        return Scenario(seed: 23, radio: radio, boxes: [
            BoxSpec(name: "albert", address: "AA:00:00:00:00:01", trajectory: Trajectory(fixed: Position(x: -30, y: 0))),
        ])
    }

    /// Beacon1 at the origin, Beacon2 4 m further along.
    static func beacon(_ minor: Int, x: Double) -> String {
        """
        {"name": "beacon\(minor)", "address": "C0:00:00:00:00:0\(minor)", "ibeacon": {"uuid": "\(fleet)", "major": 1, "minor": \(minor), "measured_power": -59}, "position": [\(x), 0]}
        """
    }

    static func path(_ minor: Int) -> ObjectPath {
        ProximityBus.alertPath(alert: "beacon\(minor)", target: "ibeacon:\(fleet):1:\(minor)")
    }

    /// `AddAlert` with busctl, as the docs show it.
    static func addAlert(_ sim: SimBoxes, _ minor: Int) async throws {
        let result = try await sim.busctl("albert", [
            "call", "org.proximityd", "/org/proximityd", "org.proximityd.AlertManager1", "AddAlert", "sa{sv}", "beacon\(minor)", "6",
            "Title", "s", "Beacon\(minor)", "Action", "s", "popup", "Range", "s", "near", "Comparison", "s", "=",
            "MaxTimeBeforeReset", "d", String(reset),
            "Match", "a{sv}", "3", "UUID", "s", fleet, "Major", "q", "1", "Minor", "q", String(minor),
        ])
        #expect(result.status == 0, "\(result)")
    }

    static func move(_ sim: SimBoxes, x: Double) async throws {
        _ = try await sim.control("MoveBox", [.string("albert"), .double(x), .double(0), .double(0)])
    }

    func status(_ sim: SimBoxes, _ minor: Int) async throws -> String {
        try await sim.busctl("albert", ["get-property", "org.proximityd", Self.path(minor).rawValue, "org.proximityd.Alert1", "ActionStatus"])
            .stdout.trimmed
    }

    func call(_ sim: SimBoxes, _ member: String, _ minor: Int) async throws -> CommandResult {
        try await sim.busctl("albert", ["call", "org.proximityd", "/org/proximityd", "org.proximityd.AlertManager1", member, "o",
                                        Self.path(minor).rawValue])
    }

    static func ready(_ m: DBusMessage, _ minor: Int) -> Bool {
        m.member?.rawValue == "AlertReady" && m.body.first?.objectPath == path(minor)
    }

    static func offers(_ log: SignalLog, from mark: Int) -> [String] {
        log.messages.dropFirst(mark).filter { $0.member?.rawValue == "AlertReady" }.compactMap { $0.body.first?.objectPath?.decodedLastElement }
    }

    @Test("Albert's walk: Beacon1 offered and accepted; no offer for Beacon2 while it is in progress; Done, then Beacon2 offered; a SIGKILL re-fires nothing done; walking away takes Beacon2 back with its reason; Beacon1 offered again after its reset")
    func albert() async throws {
        try await withNodes(Self.scenario()) { sim, daemons in
            daemons["albert"] = try await sim.startDaemon("albert")
            let observer = try await sim.buses["albert"]!.connect()
            let log = SignalLog(try await observer.subscribe(MatchRule(sender: "org.proximityd", interface: "org.proximityd.AlertManager1")))
            defer { log.cancel() }
            _ = try await sim.control(["AddBeacon", "s", Self.beacon(1, x: 0)])
            _ = try await sim.control(["AddBeacon", "s", Self.beacon(2, x: 4)])
            try await Self.addAlert(sim, 1)
            try await Self.addAlert(sim, 2)

            // Step 1: Albert in the far region of both: their targets appear, nothing is offered.
            try await Self.move(sim, x: -8)
            try await sim.until("albert", "both targets exported", timeout: .seconds(15)) {
                let alerts = try await sim.busctl("albert", ["call", "org.proximityd", "/org/proximityd", "org.proximityd.AlertManager1", "GetAlerts"])
                return alerts.stdout.contains(Self.path(1).rawValue) && alerts.stdout.contains(Self.path(2).rawValue)
            }
            #expect(Self.offers(log, from: 0).isEmpty)

            // Step 2A: near Beacon1 (1 m; Beacon2 5 m away, far): Beacon1 offered, accepted.
            try await Self.move(sim, x: -1)
            let offer1 = try await log.wait(timeout: .seconds(20), "AlertReady for Beacon1") { Self.ready($0, 1) }
            let content = offer1.body[1].stringKeyedDictionary?.mapValues(\.unwrapped) ?? [:]
            #expect(content["Title"]?.string == "Beacon1" && content["Action"]?.string == "popup" && content["Proximity"]?.string == "near",
                    "\(content)")
            // Only the offered alert can be accepted or declined (Beacon2 is not on offer).
            for member in ["Accept", "Decline", "Done"] {
                let refused = try await call(sim, member, 2)
                #expect(refused.status != 0 && refused.stderr.contains("is not on offer") || refused.stderr.contains("neither offered nor in progress"),
                        "\(member): \(refused)")
            }
            #expect(try await call(sim, "Accept", 1).status == 0)
            #expect(try await status(sim, 1) == "s \"inProgress\"")

            // Between the two (1.6 m and 2.4 m): Beacon2 ready, but not offered while Beacon1 is in progress.
            var mark = log.count
            try await Self.move(sim, x: 1.6)
            try await sim.until("albert", "Beacon2 ready for action", timeout: .seconds(20)) {
                try await sim.busctl("albert", ["get-property", "org.proximityd", Self.path(2).rawValue, "org.proximityd.Alert1",
                                                "ReadyForAction"]).stdout.trimmed == "b true"
            }
            #expect(Self.offers(log, from: mark).isEmpty, "no offer while Beacon1 is in progress")
            let current = try await sim.busctl("albert", ["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.AlertManager1", "Current"])
            #expect(current.stdout.trimmed == "o \"\(Self.path(1).rawValue)\"")

            // Step 2B: Albert closes the popup: Done, then Beacon2 offered; the app accepts it.
            mark = log.count
            #expect(try await call(sim, "Done", 1).status == 0)
            _ = try await log.wait(from: mark, timeout: .seconds(5), "AlertReady for Beacon2") { Self.ready($0, 2) }
            #expect(try await call(sim, "Accept", 2).status == 0)
            #expect(try await status(sim, 1) == "s \"done\"")

            // SIGKILL mid-walk, Albert still near both: after the restart Beacon1 stays done and is
            // not offered, Beacon2 is still in progress.
            daemons["albert"]!.signal(SIGKILL)
            _ = try await daemons["albert"]!.waitForExit(timeout: .seconds(10))
            mark = log.count
            daemons["albert"] = try await sim.startDaemon("albert")
            #expect(try await status(sim, 1) == "s \"done\"")
            #expect(try await status(sim, 2) == "s \"inProgress\"")
            try await sim.until("albert", "both targets detected after the restart", timeout: .seconds(15)) {
                try await sim.busctl("albert", ["get-property", "org.proximityd", Self.path(1).rawValue, "org.proximityd.Alert1",
                                                "Detected"]).stdout.trimmed == "b true"
            }
            // Past the restore grace (10 s), with Albert near both the whole time: 12 reports.
            let reports = SignalLog(try await observer.subscribe(MatchRule(sender: "org.proximityd", interface: "org.proximityd.Node1",
                                                                           member: "FoundDevices")))
            defer { reports.cancel() }
            try await reports.wait(from: 11, timeout: .seconds(30), "12 reports") { _ in true }
            print("alerts end to end: 12 reports after the restart, from \(reports.entries.first!.at) to \(reports.entries[11].at)")
            #expect(Self.offers(log, from: mark).isEmpty, "nothing re-fired after SIGKILL: \(Self.offers(log, from: mark))")
            #expect(try await status(sim, 1) == "s \"done\"")
            #expect(try await status(sim, 2) == "s \"inProgress\"")

            // Step 3: Albert walks away: Beacon2 taken back, with its reason.
            mark = log.count
            try await Self.move(sim, x: -30)
            let removed = try await log.wait(from: mark, timeout: .seconds(20), "AlertRemoved for Beacon2") {
                $0.member?.rawValue == "AlertRemoved" && $0.body.first?.objectPath == Self.path(2)
            }
            #expect(["not-detected", "condition-not-valid"].contains(removed.body[1].string ?? ""), "\(removed.body)")
            #expect(try await status(sim, 2) == "s \"done\"")
            // Beacon1 resets 3 s after its condition stopped holding.
            try await sim.until("albert", "Beacon1 reset", timeout: .seconds(15)) { try await status(sim, 1) == "s \"waitingForAction\"" }

            // Step 4: Albert comes back near Beacon1: offered again.
            mark = log.count
            try await Self.move(sim, x: -1)
            _ = try await log.wait(from: mark, timeout: .seconds(20), "AlertReady for Beacon1 again") { Self.ready($0, 1) }
            let b1 = "ibeacon:\(Self.fleet):1:1", b2 = "ibeacon:\(Self.fleet):1:2"
            #expect(Self.offers(log, from: 0) == [b1, b2, b1])
            await observer.close()
        }
    }
}
