import Foundation
import ProximityTesting
import Testing

/// Which bus `proximityctl` talks to: the node's options before or after the subcommand, and
/// without them `PROXIMITYD_BUS`, then the system bus at `DBUS_SYSTEM_BUS_ADDRESS`; against
/// proximityd on a private bus with no radio.
@Suite("proximityctl: which bus", .serialized)
struct ProximityctlBusTests {
    /// No bus from the test's own environment: each case says what it sets.
    static let clean = ["PROXIMITYD_BUS": "", "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent/system_bus_socket"]

    static func proximityctl(_ arguments: [String], _ environment: [String: String] = [:]) async throws -> CommandResult {
        try await runCommand(BuiltProducts.path("proximityctl"), arguments, environment: clean.merging(environment) { $1 })
    }

    @Test("--bus before or after the subcommand, PROXIMITYD_BUS, DBUS_SYSTEM_BUS_ADDRESS, and their precedence")
    func busSelection() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon(["--bus-name", "org.proximityd.Desk"], busName: "org.proximityd.Desk")
            let name = ["--bus-name", "org.proximityd.Desk"]
            let reference = try await Self.proximityctl(["status", "--json", "--bus", box.address] + name)
            #expect(reference.status == 0 && reference.stdout.contains("\"name\" : \"test-box\""), "\(reference)")

            let cases: [(String, [String], [String: String])] = [
                ("after", ["peers", "--bus", box.address] + name, [:]),
                ("before", ["--bus", box.address] + name + ["peers"], [:]),
                ("before, with =", ["--bus=\(box.address)", "--bus-name=org.proximityd.Desk", "peers"], [:]),
                ("between the subcommands", ["alerts", "--bus", box.address] + name + ["list", "--json"], [:]),
                ("PROXIMITYD_BUS", ["peers"] + name, ["PROXIMITYD_BUS": box.address]),
                ("DBUS_SYSTEM_BUS_ADDRESS", ["peers"] + name, ["DBUS_SYSTEM_BUS_ADDRESS": box.address]),
                ("--system over PROXIMITYD_BUS", ["--system", "peers"] + name, ["PROXIMITYD_BUS": "unix:path=/nonexistent", "DBUS_SYSTEM_BUS_ADDRESS": box.address]),
                ("--bus over PROXIMITYD_BUS", ["peers", "--bus", box.address] + name, ["PROXIMITYD_BUS": "bogus"]),
            ]
            for (what, arguments, environment) in cases {
                let result = try await Self.proximityctl(arguments, environment)
                #expect(result.status == 0, "\(what): \(result)")
                #expect(result.stdout.hasPrefix(arguments.contains("alerts") ? "{" : "IDENTIFIER") || result.stdout.contains("no peers"), "\(what): \(result)")
            }

            // The option wins over the variable, and the variable over the system bus.
            let optionWins = try await Self.proximityctl(["--bus", "unix:path=/nonexistent/bus", "peers"] + name, ["PROXIMITYD_BUS": box.address])
            #expect(optionWins.status == 69 && optionWins.stderr.contains("/nonexistent/bus"), "\(optionWins)")
            let variableWins = try await Self.proximityctl(["peers"] + name, ["PROXIMITYD_BUS": "unix:path=/nonexistent/bus",
                                                                              "DBUS_SYSTEM_BUS_ADDRESS": box.address])
            #expect(variableWins.status == 69 && variableWins.stderr.contains("/nonexistent/bus"), "\(variableWins)")

            // Refusals: a bad variable, two buses at once.
            let badVariable = try await Self.proximityctl(["peers"], ["PROXIMITYD_BUS": "nowhere"])
            #expect(badVariable.status == 64 && badVariable.stderr.contains("PROXIMITYD_BUS: 'nowhere' is not 'system', 'session' or a D-Bus address"),
                    "\(badVariable)")
            let two = try await Self.proximityctl(["--system", "peers", "--bus", box.address])
            #expect(two.status == 64 && two.stderr.contains("give one of --bus, --system, not several"), "\(two)")

            // The root's help says where the options go and where the bus comes from.
            let help = try await Self.proximityctl(["--help"])
            #expect(help.status == 0 && help.stdout.contains("PROXIMITYD_BUS") && help.stdout.contains("DBUS_SYSTEM_BUS_ADDRESS"), "\(help)")

            await daemon.stop()
            #expect(daemon.exitStatus == 0, "\(daemon.stderr)")
        }
    }
}
