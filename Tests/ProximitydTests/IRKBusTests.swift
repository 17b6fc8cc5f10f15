import BlueZSim
import DBusKit
import Foundation
import ProximityAPI
import ProximityTesting
import ProximityTrust
import Testing

/// Phones by their IRK on a running node: bluez-sim's private devices rotate their resolvable
/// private address every 2 s; the node ranges each one it has the key of as one peer `irk:<name>`
/// across rotations, in regions too, and ignores the others. Keys from the config file's `irks:`
/// and from `proximityctl irks add` (`Node1.AddIRK`), kept across SIGKILL in a 0600 file.
@Suite("IRKs on the bus", .serialized)
struct IRKBusTests {
    static let anna = try! IdentityResolvingKey(hex: "ec0234a357c8ad05341010a60a397d9b")
    static let bob = try! IdentityResolvingKey(hex: "00112233445566778899aabbccddeeff")
    static let carol = try! IdentityResolvingKey(hex: "0f1e2d3c4b5a69788796a5b4c3d2e1f0")

    @Test("irks: ranges a rotating phone as irk:anna at every address, enters its region; AddIRK/proximityctl irks add another, kept across SIGKILL (settings.json 0600); the config's names NotPermitted; bad names and keys refused; unknown phones ignored")
    func irks() async throws {
        var scenario = NodeAcceptanceTests.scenario(seed: 25, [(0, 0)])
        scenario.privateDevices = [
            PrivateDeviceSpec(name: "anna-phone", irk: Self.anna, rotation: 2, trajectory: Trajectory(fixed: Position(x: 1, y: 0))),
            PrivateDeviceSpec(name: "bob-watch", irk: Self.bob, rotation: 2, trajectory: Trajectory(fixed: Position(x: 1.5, y: 0))),
            PrivateDeviceSpec(name: "carol-phone", irk: Self.carol, rotation: 2, trajectory: Trajectory(fixed: Position(x: 0.5, y: 0))),
        ]
        try await withNodes(scenario) { sim, daemons in
            let config = sim.buses["alpha"]!.directory.appendingPathComponent("alpha.yaml")
            try writeSecret("""
                irks:
                  anna: \(Hex.text(Self.anna.bytes))
                regions:
                  - identifier: anna-here
                    match: { identifier: "irk:anna", kind: irk }
                """, to: config.path)
            daemons["alpha"] = try await sim.startDaemon("alpha", ["--config", config.path])
            try await sim.waitRanging("alpha", "alpha ranges anna's phone", timeout: .seconds(30)) { $0["irk:anna"] != nil }
            #expect(try await sim.peerProperty("alpha", "irk:anna", ["Kind"]) == "s \"irk\"")
            let first = try await sim.peerProperty("alpha", "irk:anna", ["Address"])
            // Each later address resolves to the same peer (and only the keyed phones are ranged).
            try await sim.until("alpha", "anna's phone is ranged from a new address", timeout: .seconds(30)) {
                try await sim.peerProperty("alpha", "irk:anna", ["Address"]) != first
            }
            #expect(Set(try await sim.ranging("alpha").keys) == ["irk:anna"])
            try await sim.until("alpha", "the region of anna's phone is entered", timeout: .seconds(30)) {
                try await sim.busctl("alpha", ["get-property", "org.proximityd", ProximityBus.regionPath("anna-here").rawValue, "org.proximityd.Region1", "State"]).stdout.trimmed == "s \"inside\""
            }

            // proximityctl irks add: bob's watch from then on; the key never shows on the bus.
            let ctl = BuiltProducts.path("proximityctl")
            let keyFile = sim.buses["alpha"]!.directory.appendingPathComponent("bob.irk")
            try Data((Hex.text(Self.bob.bytes).uppercased() + "\n").utf8).write(to: keyFile)
            let add = try await runCommand(ctl, ["irks", "add", "bob", "--key-file", keyFile.path, "--bus", sim.address("alpha")])
            #expect(add.status == 0 && add.stdout == "bob added: the node ranges its device as irk:bob\n", "\(add)")
            #expect(try await sim.property("alpha", "IRKs") == "a{ss} 2 \"anna\" \"config\" \"bob\" \"bus\"")
            try await sim.waitRanging("alpha", "alpha ranges bob's watch", timeout: .seconds(30)) { $0["irk:bob"] != nil }
            let settingsPath = sim.stateDirectory("alpha").appendingPathComponent("settings.json").path
            let mode = try FileManager.default.attributesOfItem(atPath: settingsPath)[.posixPermissions] as? Int
            #expect(mode == 0o600)
            #expect(try String(contentsOfFile: settingsPath, encoding: .utf8).contains(Hex.text(Self.bob.bytes)))

            // Refused with a named error, nothing changed.
            let client = try await sim.buses["alpha"]!.connect()
            let cases: [([DBusValue], ErrorName, String)] = [
                ([.string("anna"), .string(Hex.text(Self.carol.bytes))], ProximityBus.Errors.notPermitted,
                 "the IRK \"anna\" is given in the config file's irks:; change it there and reload"),
                ([.string("carol phone"), .string(Hex.text(Self.carol.bytes))], ProximityBus.Errors.invalidArguments,
                 "\"carol phone\" is not an IRK name: letters, digits, '-', '_' and '.' only"),
                ([.string("carol"), .string("0f1e2d")], ProximityBus.Errors.invalidArguments,
                 "an IRK is 32 hexadecimal digits (16 bytes, most significant first), e.g. ec0234a357c8ad05341010a60a397d9b, or its 16 bytes in base64 as the Keychain shows them, e.g. m305CqYQEDQFrchXozQC7A=="),
            ]
            for (arguments, expected, message) in cases {
                do {
                    _ = try await client.call(destination: "org.proximityd", path: ProximityBus.rootPath, interface: ProximityBus.Node1.interface,
                                              member: ProximityBus.Node1.addIRK.name, arguments)
                    Issue.record("AddIRK\(arguments) was accepted")
                } catch let error as DBusError {
                    #expect(error.name == expected, "\(arguments): \(error)")
                    #expect(error.message == message)
                }
            }
            await client.close()
            let badKey = try await runCommand("/bin/sh", ["-c", "echo xyz | \"$0\" irks add carol --bus \"$1\"", ctl, sim.address("alpha")])
            #expect(badKey.status == 64 && badKey.stderr.contains("standard input: an IRK is 32 hexadecimal digits"), "\(badKey)")
            #expect(try await sim.property("alpha", "IRKs") == "a{ss} 2 \"anna\" \"config\" \"bob\" \"bus\"")

            // SIGKILL: bob's key was on disk before the reply.
            daemons["alpha"]!.signal(SIGKILL)
            _ = try await daemons["alpha"]!.waitForExit()
            daemons["alpha"] = try await sim.startDaemon("alpha", ["--config", config.path])
            #expect(try await sim.property("alpha", "IRKs") == "a{ss} 2 \"anna\" \"config\" \"bob\" \"bus\"")
            try await sim.waitRanging("alpha", "both keyed devices again, carol's phone never", timeout: .seconds(30)) {
                $0["irk:bob"] != nil && $0["irk:anna"] != nil
            }
            #expect(Set(try await sim.ranging("alpha").keys) == ["irk:anna", "irk:bob"])
            let list = try await runCommand(ctl, ["irks", "list", "--bus", sim.address("alpha")])
            let rows = list.stdout.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ") }
            #expect(rows == ["NAME PEER SOURCE", "anna irk:anna config", "bob irk:bob bus"], "\(list)")

            let removeConfigured = try await runCommand(ctl, ["irks", "remove", "anna", "--bus", sim.address("alpha")])
            #expect(removeConfigured.status == 69 && removeConfigured.stderr.contains("remove it there and reload"), "\(removeConfigured)")
            let nothing = try await runCommand(ctl, ["irks", "remove", "--bus", sim.address("alpha")])
            #expect(nothing.status == 64 && nothing.stderr.contains("Missing expected argument '<name> ...'"), "\(nothing)")
            let remove = try await runCommand(ctl, ["irks", "remove", "bob", "--bus", sim.address("alpha")])
            #expect(remove.status == 0 && remove.stdout == "bob removed\n", "\(remove)")
            #expect(try await sim.property("alpha", "IRKs") == "a{ss} 1 \"anna\" \"config\"")
        }
    }
}
