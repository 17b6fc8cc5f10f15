import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import Testing

/// Issue 33, item 1: the node's watchdog, end to end on bluez-sim's faults. A node ranging a beacon
/// (ten advertisements a second) meets a deaf scanner (`SetFault` deaf: `Discovering` stays true,
/// nothing is delivered until the adapter is power-cycled), an unplugged and replugged adapter (also
/// back as another `hciN`), and a restarted bluetoothd; each time `Node1.Health` says `recovering`, then the beacon is ranged
/// again within 60 s and `Health` is `ok`; the daemon is never restarted.
@Suite("the radio watchdog", .serialized)
struct WatchdogTests {
    static let uuid = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"
    static let beacon = "ibeacon:\(uuid):1:2"

    /// The Health and HealthDetail a PropertiesChanged of Node1 carries, if it carries them.
    static func health(_ m: DBusMessage) -> (String, String)? {
        guard m.member == "PropertiesChanged", m.body.first?.string == "org.proximityd.Node1",
              let changed = m.body.dropFirst().first?.stringKeyedDictionary,
              let state = changed["Health"]?.unwrapped.string else { return nil }
        return (state, changed["HealthDetail"]?.unwrapped.string ?? "")
    }

    @Test("deaf scanner, unplugged adapter, restarted bluetoothd: Health recovering, then the beacon ranged again within 60 s and Health ok; each recovery logged once")
    func recovers() async throws {
        var scenario = NodeAcceptanceTests.scenario(seed: 33, [(0, 0)])
        scenario.beacons = [BeaconSpec(name: "door", address: "C0:00:00:00:00:01",
                                       frame: .iBeacon(uuid: UUID(uuidString: Self.uuid)!, major: 1, minor: 2, measuredPower: -59),
                                       trajectory: Trajectory(fixed: Position(x: 1, y: 0)))]
        try await withNodes(scenario) { sim, daemons in
            daemons["alpha"] = try await sim.startDaemon("alpha")
            let alpha = daemons["alpha"]!
            try await sim.waitRanging("alpha", "the beacon ranged", timeout: .seconds(30)) { $0[Self.beacon] != nil }
            try await sim.until("alpha", "Health ok", timeout: .seconds(10)) { try await sim.property("alpha", "Health") == "s \"ok\"" }

            func recovery(_ what: String, fault: () async throws -> Void) async throws -> Double {
                // Announced, however short: a restarted bluetoothd is back within a second.
                let signals = try await sim.nodeSignals("alpha")
                defer { signals.cancel() }
                try await fault()
                let lastSeen = try await sim.peerProperty("alpha", Self.beacon, ["LastSeen"])
                let start = ContinuousClock.now
                let announced = try await signals.wait(timeout: .seconds(45), "\(what): Health recovering") { Self.health($0)?.0 == "recovering" }
                let detail = Self.health(announced)?.1 ?? ""
                #expect(detail.count > 4, "\(what): \(detail)")
                try await sim.until("alpha", "\(what): the beacon ranged again and Health ok", timeout: .seconds(60)) {
                    // Heard again since the fault: its LastSeen moved on.
                    let ok = try await sim.property("alpha", "Health") == "s \"ok\""
                    let zone = try await sim.ranging("alpha")[Self.beacon] ?? "unknown"
                    let seen = try? await sim.peerProperty("alpha", Self.beacon, ["LastSeen"])
                    return ok && zone != "unknown" && seen != nil && seen != lastSeen
                }
                let seconds = Double((ContinuousClock.now - start).components.seconds)
                print("watchdog: \(what): recovering (\(detail)), ranging again \(seconds) s after the fault was seen")
                return seconds
            }

            // The watchdog judges a silence by what was heard before it (at least 10 reports in
            // the minute before): the beacon ranged for 15 s first, on a busy machine too.
            try await sim.until("alpha", "the beacon heard for 15 s", timeout: .seconds(60)) {
                let seen = try await sim.peerProperty("alpha", Self.beacon, ["FirstSeen", "LastSeen"])
                    .split(separator: "\n").compactMap { UInt64($0.split(separator: " ").last ?? "") }
                return seen.count == 2 && seen[1] >= seen[0] + 15_000_000
            }
            // A deaf scanner: discovery restarted, then the adapter power-cycled (which clears it).
            _ = try await recovery("deaf scanner") { _ = try await sim.control("SetFault", [.string("alpha"), .string("deaf")]) }
            #expect(alpha.stderr.components(separatedBy: "discovery delivers nothing (deaf scanner?)").count == 2, "logged once")
            #expect(alpha.stderr.contains("powering the adapter off and on"))
            #expect(alpha.stderr.contains("the radio delivers again"))

            // The adapter unplugged and plugged in again (bluetoothd powers it).
            _ = try await recovery("unplugged adapter") {
                _ = try await sim.control("Unplug", [.string("alpha")])
                _ = try await sim.control("Replug", [.string("alpha"), .string("")])
            }
            #expect(alpha.stderr.contains("the adapter was removed"))

            // Unplugged, and back under another name: followed by its address.
            _ = try await recovery("adapter back as hci1") {
                _ = try await sim.control("Unplug", [.string("alpha")])
                _ = try await sim.control("Replug", [.string("alpha"), .string("hci1")])
            }
            #expect(alpha.stderr.contains("the adapter came back under another name: following it by its address"))

            // bluetoothd restarted.
            _ = try await recovery("restarted bluetoothd") { _ = try await sim.control("RestartBluetoothd", [.string("alpha")]) }
            #expect(alpha.isRunning, "never restarted")
        }
    }
}
