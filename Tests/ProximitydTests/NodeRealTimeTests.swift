import BlueZSim
import DBusKit
import Foundation
import ProximityAPI
import ProximityTesting
import Testing

/// The node's promises about time, read off the wall clock: proximityd processes on bluez-sim in
/// real time. One of the suites named `…RealTimeTests`, which scripts/test.sh runs after the rest
/// of the suite, one at a time: a busy machine's other tests do not stretch its clock.
@Suite("proximityd on bluez-sim, in real time", .serialized)
struct NodeRealTimeTests {
    @Test("a box moved out of range is reported unknown, then gone within the clear interval plus one second (--clear-interval 3)")
    func outOfRange() async throws {
        let scenario = NodeAcceptanceTests.scenario(seed: 21, [(0, 0), (1, 0)])
        try await withNodes(scenario) { sim, daemons in
            daemons["alpha"] = try await sim.startDaemon("alpha", ["--clear-interval", "3"])
            daemons["bravo"] = try await sim.startDaemon("bravo")
            #expect(try await sim.property("alpha", "ClearInterval") == "d 3")
            let bravo = try await sim.identifier("bravo")
            try await sim.waitRanging("alpha", "alpha ranges bravo", timeout: .seconds(60)) { $0 == [bravo: "near"] }

            // The reports and the removal in one log, in the order the bus delivered them.
            let observer = try await sim.buses["alpha"]!.connect()
            let signals = SignalLog(try await observer.subscribe(MatchRule(sender: "org.proximityd")))
            defer { signals.cancel() }
            @Sendable func isReport(_ m: DBusMessage) -> Bool { m.interface?.rawValue == "org.proximityd.Node1" && m.member?.rawValue == "FoundDevices" }
            let peerPath = ObjectPath(stringLiteral: "/org/proximityd/peers/\(escaped(bravo))")
            let mark = signals.count
            #expect(try await sim.control(["MoveBox", "sddd", "bravo", "1000", "0", "0"]).status == 0)
            // Bravo was last heard before the call returned: the bound is read from then (0.3 s
            // covers the signal's way to this process).
            let moved = ContinuousClock.now
            let removed = try await signals.waitEntry(from: mark, timeout: .seconds(15), "InterfacesRemoved for bravo's peer object") {
                $0.member?.rawValue == "InterfacesRemoved" && $0.body.first == .objectPath(peerPath)
            }
            let elapsed = moved.duration(to: removed.at)
            #expect(elapsed <= .seconds(3 + 1) + .milliseconds(300), "removed \(elapsed) after the move")
            let entries = signals.entries
            let removal = try #require(entries.indices.dropFirst(mark).first {
                entries[$0].message.member?.rawValue == "InterfacesRemoved" && entries[$0].message.body.first == .objectPath(peerPath)
            })
            let seen = entries[mark..<removal].map(\.message).filter(isReport)
            let unknown = seen.firstIndex { zones($0)[bravo] == "unknown" }
            #expect(unknown != nil, "never reported unknown: \(seen.map(zones))")
            if let unknown {
                #expect(seen[..<unknown].allSatisfy { zones($0)[bravo] == "near" }, "\(seen.map(zones))")
            }
            // The report after the removal no longer lists bravo.
            let next = try await signals.wait(from: removal + 1, timeout: .seconds(10), "the next FoundDevices") { isReport($0) }
            #expect(zones(next)[bravo] == nil, "\(zones(next))")
            #expect(try await sim.ranging("alpha").isEmpty)
            await observer.close()
        }
    }
}
