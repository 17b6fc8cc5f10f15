import BlueZSim
import DBusKit
import Foundation
import ProximityAPI
import ProximityTesting
import Testing

/// Calibration on bluez-sim, with real proximityd processes: nodes advertise their measured power
/// and peers range them with it (an override over the bus still wins), and `--rssi-offset` /
/// `rssi-offset:` shifts every sample a node receives, changed by a reload.
@Suite("advertised measured power and the receiver offset on bluez-sim", .serialized)
struct CalibrationEndToEndTests {
    /// Boxes named alpha, bravo, … at fixed points, addresses AA:00:00:00:00:01, 02, …
    static func scenario(seed: UInt64, shadowing: Double, _ points: [(x: Double, y: Double)]) -> Scenario {
        let names = ["alpha", "bravo", "charlie"]
        var radio = RadioParameters()
        radio.shadowingSigma = shadowing
        radio.packetLoss = 0
        return Scenario(seed: seed, radio: radio, boxes: points.enumerated().map { i, p in
            BoxSpec(name: names[i], address: String(format: "AA:00:00:00:00:%02X", i + 1), trajectory: Trajectory(fixed: Position(x: p.x, y: p.y)))
        })
    }

    @Test("each node ranges its peers with the power they advertise, not its own; SetMeasuredPower wins over it until reset")
    func advertisedPower() async throws {
        // Bravo in the middle, alpha and charlie 2 m from it: the same RSSI, different calibrations.
        let scenario = Self.scenario(seed: 31, shadowing: 1, [(2, 0), (0, 0), (0, 2)])
        try await withNodes(scenario) { sim, daemons in
            daemons["alpha"] = try await sim.startDaemon("alpha", ["--measured-power", "-70"])
            daemons["bravo"] = try await sim.startDaemon("bravo", ["--measured-power", "-65"])
            daemons["charlie"] = try await sim.startDaemon("charlie")
            let alpha = try await sim.identifier("alpha"), bravo = try await sim.identifier("bravo")
            let charlie = try await sim.identifier("charlie")
            #expect(try await sim.property("alpha", "MeasuredPower") == "n -70")
            #expect(try await sim.property("bravo", "MeasuredPower") == "n -65")
            for (box, peers) in [("alpha", [bravo, charlie]), ("bravo", [alpha, charlie]), ("charlie", [alpha, bravo])] {
                try await sim.waitRanging(box, "\(box) ranges its two peers", timeout: .seconds(60)) { Set($0.keys) == Set(peers) }
            }
            // Each peer's power is the one it advertises, whoever ranges it: bravo's own -65 is
            // used for neither of its peers, and charlie advertises the default, -59.
            let expected = [("bravo", alpha, "n -70"), ("charlie", alpha, "n -70"), ("alpha", bravo, "n -65"),
                            ("charlie", bravo, "n -65"), ("alpha", charlie, "n -59"), ("bravo", charlie, "n -59")]
            for (box, peer, power) in expected {
                try await sim.until(box, "\(box) ranges \(peer) with \(power)", timeout: .seconds(10)) {
                    try await sim.peerProperty(box, peer, ["MeasuredPower"]) == power
                }
            }
            // Both 2 m from bravo: alpha, said to be 11 dB weaker at 1 m, is computed nearer.
            @Sendable func distance(_ peer: String) async throws -> Double {
                Double(try await sim.peerProperty("bravo", peer, ["Distance"]).dropFirst(2)) ?? -1
            }
            let toAlpha = try await distance(alpha), toCharlie = try await distance(charlie)
            #expect(toAlpha > 0 && toAlpha < toCharlie / 2, "alpha \(toAlpha) m, charlie \(toCharlie) m")

            // An override on bravo beats what alpha advertises, and resetting it brings that back.
            #expect(try await sim.node("bravo", ["SetMeasuredPower", "sn", alpha, "--", "-80"]).status == 0)
            try await sim.until("bravo", "bravo uses its override for alpha", timeout: .seconds(10)) {
                try await sim.peerProperty("bravo", alpha, ["MeasuredPower"]) == "n -80"
            }
            #expect(try await sim.peerProperty("charlie", alpha, ["MeasuredPower"]) == "n -70", "an override is one node's")
            #expect(try await sim.node("bravo", ["ResetMeasuredPower", "s", alpha]).status == 0)
            try await sim.until("bravo", "bravo uses what alpha advertises again", timeout: .seconds(10)) {
                try await sim.peerProperty("bravo", alpha, ["MeasuredPower"]) == "n -70"
            }
            // What bravo's BlueZ heard from alpha: the frame under 0xFFFF with the general UUID.
            let heard = try await sim.busctl("bravo", ["get-property", "org.bluez", "/org/bluez/hci0/dev_AA_00_00_00_00_01",
                                                       "org.bluez.Device1", "ManufacturerData"]).stdout.trimmed
            #expect(heard == "a{qv} 1 65535 ay 4 80 88 1 186", "\(heard)")
        }
    }

    @Test("--rssi-offset shifts every sample the node ranges with; a reload changes it (RSSIOffset), a bad value in the file changes nothing")
    func receiverOffset() async throws {
        // No shadowing: 2 m is -65.02 dBm, so every sample is -65.
        let scenario = Self.scenario(seed: 32, shadowing: 0, [(0, 0), (2, 0)])
        try await withNodes(scenario) { sim, daemons in
            let file = sim.buses["alpha"]!.directory.appendingPathComponent("proximityd.yaml")
            try "rssi-offset: 12\n".write(to: file, atomically: true, encoding: .utf8)
            daemons["alpha"] = try await sim.startDaemon("alpha", ["--config", file.path])
            daemons["bravo"] = try await sim.startDaemon("bravo")
            let alpha = try await sim.identifier("alpha"), bravo = try await sim.identifier("bravo")
            #expect(try await sim.property("alpha", "RSSIOffset") == "d 12")
            #expect(try await sim.property("bravo", "RSSIOffset") == "d 0")
            try await sim.waitRanging("alpha", "alpha ranges bravo", timeout: .seconds(60)) { $0[bravo] != nil }
            try await sim.waitRanging("bravo", "bravo ranges alpha", timeout: .seconds(60)) { $0[alpha] != nil }
            // The same link both ways; alpha adds 12 dB to what it receives.
            try await sim.until("bravo", "bravo hears alpha at -65", timeout: .seconds(10)) {
                try await sim.peerProperty("bravo", alpha, ["RSSI", "SmoothedRSSI"]) == "n -65\nd -65"
            }
            try await sim.until("alpha", "alpha hears bravo at -65 + 12", timeout: .seconds(10)) {
                try await sim.peerProperty("alpha", bravo, ["RSSI", "SmoothedRSSI"]) == "n -53\nd -53"
            }

            // A reload applies a new offset from the next sample, announced with PropertiesChanged.
            let observer = try await sim.buses["alpha"]!.connect()
            let changes = SignalLog(try await observer.subscribe(MatchRule(sender: "org.proximityd", path: "/org/proximityd",
                                                                          interface: "org.freedesktop.DBus.Properties",
                                                                          member: "PropertiesChanged")))
            defer { changes.cancel() }
            try "rssi-offset: -6.5\n".write(to: file, atomically: true, encoding: .utf8)
            let reload = try await sim.node("alpha", ["Reload"])
            #expect(reload.status == 0, "\(reload)")
            #expect(try await sim.property("alpha", "RSSIOffset") == "d -6.5")
            try await changes.wait(timeout: .seconds(5), "RSSIOffset changed") {
                $0.body.first?.string == ProximityBus.Node1.interface.rawValue
                    && $0.body.count > 1 && $0.body[1].stringKeyedDictionary?["RSSIOffset"]?.unwrapped == .double(-6.5)
            }
            // -71.5, shown rounded away from zero.
            try await sim.until("alpha", "alpha hears bravo at -65 - 6.5", timeout: .seconds(10)) {
                try await sim.peerProperty("alpha", bravo, ["RSSI"]) == "n -72"
            }
            #expect(!daemons["alpha"]!.stderr.contains("rssi-offset changed in the configuration"), "no restart needed")

            // A value out of range: the reload is refused at its line and column, nothing changes.
            try "# calibrated\nrssi-offset: 45\n".write(to: file, atomically: true, encoding: .utf8)
            let refused = try await sim.node("alpha", ["Reload"])
            #expect(refused.status != 0, "\(refused)")
            #expect(refused.stderr.contains("\(file.path):2:14: rssi-offset: an offset of 45 dB is outside -40…40"), "\(refused)")
            do {
                _ = try await observer.call(destination: "org.proximityd", path: ProximityBus.rootPath, interface: ProximityBus.Node1.interface,
                                            member: "Reload")
                Issue.record("Reload() of a file with rssi-offset: 45 succeeded")
            } catch let error as DBusError {
                #expect(error.name == ProximityBus.Errors.invalidConfiguration, "\(error)")
            }
            #expect(try await sim.property("alpha", "RSSIOffset") == "d -6.5")
            #expect(try await sim.peerProperty("alpha", bravo, ["RSSI"]) == "n -72")
            // Read-only on the bus.
            let set = try await sim.busctl("alpha", ["set-property", "org.proximityd", "/org/proximityd", "org.proximityd.Node1",
                                                     "RSSIOffset", "d", "3"])
            #expect(set.status != 0 && set.stderr.contains("not writable"), "\(set)")
            await observer.close()
        }
    }
}
