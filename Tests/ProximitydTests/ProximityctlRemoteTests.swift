import DBusKit
import Foundation
import ProximityAPI
import ProximityTesting
import Testing
import ClientTesting

/// `proximityctl -H [USER@]HOST[:PORT]`: the node of another box, reached as `busctl -H` reaches
/// one (`ssh -xT … systemd-stdio-bridge`). The other box is this one: a real sshd on 127.0.0.1
/// (``SSHServer``) whose sessions run `systemd-stdio-bridge --bus-path=` the node's private bus,
/// standing in for that box's system bus; the client's ssh takes the test's key through
/// `PROXIMITYCTL_SSH`.
@Suite("proximityctl -H: a node on another box over ssh", .serialized, .enabled(if: SSHServer.isAvailable, "needs openssh-server"))
struct ProximityctlRemoteTests {
    static let bridge = "/usr/bin/systemd-stdio-bridge"

    static func sshd(bridgingTo address: String) async throws -> SSHServer {
        try await SSHServer.start(forceCommand: "\(bridge) '--bus-path=\(address)'")
    }

    static func proximityctl(_ server: SSHServer, _ arguments: [String], _ environment: [String: String] = [:]) async throws -> CommandResult {
        try await runCommand(BuiltProducts.path("proximityctl"), arguments,
                             environment: ["PROXIMITYCTL_SSH": server.sshCommand.joined(separator: " "), "PROXIMITYD_BUS": ""]
                                .merging(environment) { $1 })
    }

    @Test("-H USER@127.0.0.1:PORT before or after the subcommand: status, peers and alerts add and list of the remote node; a host that refuses the key is one error line, exit 69")
    func remoteCommands() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            let server = try await Self.sshd(bridgingTo: box.address)

            let local = try await Self.proximityctl(server, ["peers", "--json", "--bus", box.address])
            let remote = try await Self.proximityctl(server, ["peers", "--json", "-H", server.host])
            #expect(remote.status == 0, "\(remote)\n\(server.log)")
            #expect(remote.stdout == local.stdout, "\(remote)")

            let status = try await Self.proximityctl(server, ["--host", server.host, "status", "--json"])
            #expect(status.status == 0 && status.stdout.contains("\"name\" : \"test-box\""), "\(status)\n\(server.log)")

            let added = try await Self.proximityctl(server, ["-H", server.host, "alerts", "add", "remote", "--title", "From afar", "--every-peer"])
            #expect(added.status == 0 && added.stdout == "added alert remote\n", "\(added)")
            let list = try await Self.proximityctl(server, ["alerts", "list", "--json", "--bus", box.address])
            #expect(list.stdout.contains("\"Title\" : \"From afar\""), "\(list)")

            // Another key: ssh is refused, and says so; proximityctl ends with one line, exit 69.
            let stranger = server.directory.appendingPathComponent("stranger")
            #expect(try await runCommand("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", stranger.path]).status == 0)
            let ssh = server.sshCommand.map { $0.hasSuffix("client_key") ? stranger.path : $0 }
            let refused = try await Self.proximityctl(server, ["peers", "-H", server.host], ["PROXIMITYCTL_SSH": ssh.joined(separator: " ")])
            #expect(refused.status == 69, "\(refused)")
            #expect(refused.stderr.contains("Permission denied") && refused.stderr.contains("proximityctl: error: cannot connect to the unixexec:path=ssh"),
                    "\(refused)")

            // The address is sd-bus's for busctl -H (bus_set_address_system_remote), the host escaped.
            let cases: [(String, String)] = [
                ("pi@meeting-room:2222", "argv1=-xT,argv2=-p,argv3=2222,argv4=--,argv5=pi%40meeting-room,argv6=systemd-stdio-bridge"),
                ("meeting-room.lan", "argv1=-xT,argv2=--,argv3=meeting-room.lan,argv4=systemd-stdio-bridge"),
                ("pi@[fe80::1]:22", "argv1=-xT,argv2=-p,argv3=22,argv4=--,argv5=pi%40fe80%3a%3a1,argv6=systemd-stdio-bridge"),
            ]
            for (host, arguments) in cases {
                let result = try await Self.proximityctl(server, ["peers", "-H", host], ["PROXIMITYCTL_SSH": "false"])
                #expect(result.status == 69 && result.stderr.contains("cannot connect to the unixexec:path=false,\(arguments) bus"), "\(host): \(result)")
            }
            for (arguments, message) in [(["peers", "-H", "pi@"], "--host: \"pi@\" is not [USER@]HOST[:PORT]"),
                                         (["peers", "-H", "pi@box:ssh"], "--host: \"pi@box:ssh\": the port after : must be 1 to 65535"),
                                         (["--system", "peers", "-H", "box"], "give one of --system, --host, not several")] {
                let result = try await Self.proximityctl(server, arguments)
                #expect(result.status == 64 && result.stderr.contains(message), "\(arguments): \(result)")
            }

            await server.stop()
            await daemon.stop()
            #expect(daemon.exitStatus == 0, "\(daemon.stderr)")
        }
    }

    @Test("alerts consume --host: an alert offered by the remote node runs the command here, is accepted and marked done over ssh")
    func remoteConsume() async throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("proximityctl-remote-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: out) }
        try await withNodes(ProximityctlAlertsTests.scenario()) { sim, daemons in
            daemons["box"] = try await sim.startDaemon("box")
            let node = try await ProximityctlAlertsTests.Node.observe(sim)
            let server = try await Self.sshd(bridgingTo: sim.address("box"))

            let consume = try ManagedProcess(
                BuiltProducts.path("proximityctl"),
                ["alerts", "consume", "--host", server.host, "--exec", #"echo "$PROXIMITY_TITLE" > "$OUT/$PROXIMITY_ALERT.title""#],
                environment: ["OUT": out.path, "PROXIMITYCTL_SSH": server.sshCommand.joined(separator: " "), "PROXIMITYD_BUS": "",
                              "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"])
            defer { consume.signal(SIGKILL) }
            try await consume.waitForOutput(containing: "waiting for alerts", inStderr: true, timeout: .seconds(15))

            _ = try await sim.control(["AddBeacon", "s", ProximityctlAlertsTests.tag])
            try await node.add("welcome", ProximityctlAlertsTests.alert("Welcome from the meeting room"))
            try await node.waitSignal("AlertReady", "welcome")
            try await node.waitStatus("welcome", "done")
            let title = try String(contentsOf: out.appendingPathComponent("welcome.title"), encoding: .utf8)
            #expect(title == "Welcome from the meeting room\n")
            #expect(consume.stderr.contains("accepted welcome/\(ProximityctlAlertsTests.beacon)"), "\(consume.stderr)")

            consume.signal(SIGTERM)
            #expect(try await consume.waitForExit(timeout: .seconds(10)) == 0, "\(consume.stderr)")
            await server.stop()
            await node.close()
        }
    }

    @Test("the user unit dbus/proximityctl-consume.service passes systemd-analyze --user verify, takes its options from ~/.config/proximityd/consume.env, and debian/rules installs it as a user unit")
    func userUnit() async throws {
        let unit = "proximityctl-consume.service"
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("dbus").appendingPathComponent(unit), encoding: .utf8)
        #expect(text.contains("\nEnvironmentFile=-%E/proximityd/consume.env\n")
                && text.contains("\nExecStart=/usr/bin/proximityctl alerts consume $CONSUME_OPTIONS\n"), "\(text)")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("proximityd-unit-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(unit)
        try text.replacingOccurrences(of: "ExecStart=/usr/bin/proximityctl ", with: "ExecStart=\(BuiltProducts.path("proximityctl")) ")
            .write(to: path, atomically: true, encoding: .utf8)
        // The user manager's runtime directory: none in a test's environment, so one of its own.
        let verify = try await runCommand("systemd-analyze", ["--user", "verify", "--man=no", path.path],
                                          environment: ["XDG_RUNTIME_DIR": directory.path], timeout: .seconds(60))
        #expect(verify.status == 0 && verify.stdout.isEmpty && verify.stderr.isEmpty, "\(verify)")
        let rules = try String(contentsOf: repositoryRoot.appendingPathComponent("debian/rules"), encoding: .utf8)
        #expect(rules.contains("dbus/\(unit) $(PKG)/usr/lib/systemd/user/\(unit)"))
    }
}
