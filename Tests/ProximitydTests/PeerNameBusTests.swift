import BlueZSim
import DBusKit
import Foundation
import ProximityAPI
import ProximityTesting
import Testing

/// Names on a running node: the config file's `names:`, `SetPeerName` and `proximityctl names`,
/// `Peer1.Name` and `Node1.PeerNames`, `GetPeer`, and a SIGKILL in between.
@Suite("peer names on the bus", .serialized)
struct PeerNameBusTests {
    static let door = "ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:7:42"

    @Test("names: and SetPeerName show in Peer1.Name and PeerNames; the config file's win (NotPermitted); bad names refused; kept across SIGKILL; removed, the advertised name is back; GetPeer")
    func names() async throws {
        var scenario = NodeAcceptanceTests.scenario(seed: 12, [(0, 0), (2, 0)])
        scenario.beacons = [
            BeaconSpec(name: "door", address: "C0:00:00:00:00:01",
                       frame: .iBeacon(uuid: UUID(uuidString: "f7826da6-4fa2-4e98-8024-bc5b71e0893e")!, major: 7, minor: 42, measuredPower: -59),
                       trajectory: Trajectory(fixed: Position(x: 1, y: 0))),
        ]
        try await withNodes(scenario) { sim, daemons in
            let config = sim.buses["alpha"]!.directory.appendingPathComponent("alpha.yaml")
            try Data("names:\n  \(Self.door): Front door\n".utf8).write(to: config)
            daemons["alpha"] = try await sim.startDaemon("alpha", ["--config", config.path])
            daemons["bravo"] = try await sim.startDaemon("bravo")
            let bravo = try await sim.identifier("bravo")
            try await sim.waitRanging("alpha", "alpha ranges the door and bravo", timeout: .seconds(30)) { $0[Self.door] != nil && $0[bravo] != nil }
            func name(_ peer: String) async throws -> String { try await sim.peerProperty("alpha", peer, ["Name"]) }
            #expect(try await name(Self.door) == "s \"Front door\"")
            try await sim.until("alpha", "bravo shows the name it advertises", timeout: .seconds(10)) { try await name(bravo) == "s \"bravo\"" }

            // proximityctl names set: PeerNames has it when the call returns; Peer1.Name follows with the next report.
            let ctl = BuiltProducts.path("proximityctl")
            let set = try await runCommand(ctl, ["names", "set", bravo.uppercased(), "Meeting room", "--bus", sim.address("alpha")])
            #expect(set.status == 0 && set.stdout == "\(bravo) is \"Meeting room\"\n", "\(set)")
            #expect(try await sim.property("alpha", "PeerNames") == "a{ss} 2 \"\(bravo)\" \"Meeting room\" \"\(Self.door)\" \"Front door\"")
            try await sim.until("alpha", "Peer1.Name follows", timeout: .seconds(10)) { try await name(bravo) == "s \"Meeting room\"" }
            let settings = try String(contentsOf: sim.stateDirectory("alpha").appendingPathComponent("settings.json"), encoding: .utf8)
            #expect(settings.contains("\"Meeting room\""), "\(settings)")

            // Refused with a named error, nothing changed.
            let client = try await sim.buses["alpha"]!.connect()
            let cases: [([DBusValue], ErrorName, String)] = [
                ([.string(Self.door), .string("Door")], ProximityBus.Errors.notPermitted,
                 "\(Self.door) is named \"Front door\" in the config file's names; change it there and reload"),
                ([.string("kitchen"), .string("Kitchen")], ProximityBus.Errors.invalidArguments, ""),
                ([.string(bravo), .string("two\nlines")], ProximityBus.Errors.invalidArguments, "the name contains control characters"),
                ([.string(bravo), .string(String(repeating: "x", count: 65))], ProximityBus.Errors.invalidArguments,
                 "the name has 65 characters; at most 64"),
            ]
            for (arguments, expected, message) in cases {
                do {
                    _ = try await client.call(destination: "org.proximityd", path: ProximityBus.rootPath, interface: ProximityBus.Node1.interface,
                                              member: ProximityBus.Node1.setPeerName.name, arguments)
                    Issue.record("SetPeerName\(arguments) was accepted")
                } catch let error as DBusError {
                    #expect(error.name == expected, "\(arguments): \(error)")
                    if !message.isEmpty { #expect(error.message == message) }
                }
            }
            let refused = try await runCommand(ctl, ["names", "set", Self.door, "Door", "--bus", sim.address("alpha")])
            #expect(refused.status == 69 && refused.stderr.contains("in the config file's names"), "\(refused)")
            let bad = try await runCommand(ctl, ["names", "set", bravo, " padded", "--bus", sim.address("alpha")])
            #expect(bad.status == 64 && bad.stderr == "proximityctl: error: the name starts or ends with a space\n", "\(bad)")

            // GetPeer: the path of a peer in the table, by identifier.
            let path = try await sim.node("alpha", ["GetPeer", "s", Self.door])
            #expect(path.stdout.trimmed == "o \"/org/proximityd/peers/\(escaped(Self.door))\"", "\(path)")
            #expect(try await client.call(destination: "org.proximityd", path: ProximityBus.rootPath, interface: ProximityBus.Node1.interface,
                                          member: ProximityBus.Node1.getPeer.name, [.string(Self.door.uppercased().replacingOccurrences(of: "IBEACON", with: "ibeacon"))])
                        == [.objectPath(ProximityBus.peerPath(Self.door))])
            let absent = try await sim.node("alpha", ["GetPeer", "s", "ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:7:43"])
            #expect(absent.status != 0 && absent.stderr.contains("no peer ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:7:43 in the table"), "\(absent)")
            await client.close()

            // SIGKILL: the name was on disk before the reply.
            daemons["alpha"]!.signal(SIGKILL)
            _ = try await daemons["alpha"]!.waitForExit()
            daemons["alpha"] = try await sim.startDaemon("alpha", ["--config", config.path])
            #expect(try await sim.property("alpha", "PeerNames") == "a{ss} 2 \"\(bravo)\" \"Meeting room\" \"\(Self.door)\" \"Front door\"")
            try await sim.until("alpha", "bravo is named again after the restart", timeout: .seconds(30)) { try await name(bravo) == "s \"Meeting room\"" }
            let list = try await runCommand(ctl, ["names", "list", "--bus", sim.address("alpha")])
            let rows = list.stdout.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ") }
            #expect(rows == ["IDENTIFIER NAME", "\(bravo) Meeting room", "\(Self.door) Front door"], "\(list)")

            // Removed: the advertised name again.
            let removed = try await runCommand(ctl, ["names", "remove", bravo, "--bus", sim.address("alpha")])
            #expect(removed.status == 0, "\(removed)")
            #expect(try await sim.property("alpha", "PeerNames") == "a{ss} 1 \"\(Self.door)\" \"Front door\"")
            try await sim.until("alpha", "bravo shows its advertised name again", timeout: .seconds(10)) { try await name(bravo) == "s \"bravo\"" }
        }
    }
}
