import Foundation
import ProximityTesting
import Testing

/// `proximityd check-config` and `proximityd run --config`, as a user runs them.
@Suite("the config file on the command line: check-config and run --config")
struct ConfigCommandTests {
    static let example = repositoryRoot.appendingPathComponent("dbus/proximityd.yaml.example").path

    static let broken = """
        clear-interval: ten
        max-peers: 0
        regions:
          - identifier: fleet
            match:
              uuid: 12
          - identifier: fleet
        colour: red
        """

    /// A fresh directory for the test's files, removed by `body`'s end.
    func withDirectory(_ body: (URL) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("proximityd-config-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await body(directory)
    }

    /// `FILE:LINE:COLUMN: `, then the message.
    func isProblemLine(_ line: Substring, file: String) -> Bool {
        guard line.hasPrefix(file + ":") else { return false }
        let parts = line.dropFirst(file.count + 1).split(separator: ":", maxSplits: 2)
        return parts.count == 3 && Int(parts[0]) != nil && Int(parts[1]) != nil && parts[2].hasPrefix(" ")
    }

    @Test("a broken file: every problem on stderr as FILE:LINE:COLUMN: message, exit 65")
    func broken() async throws {
        try await withDirectory { directory in
            let file = directory.appendingPathComponent("broken.yaml").path
            try Self.broken.write(toFile: file, atomically: true, encoding: .utf8)
            let result = try await runCommand(BuiltProducts.path("proximityd"), ["check-config", file])
            #expect(result.status == 65, "\(result)")
            #expect(result.stdout.isEmpty)
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.count == 5, "\(result.stderr)")
            #expect(lines.allSatisfy { isProblemLine($0, file: file) }, "\(result.stderr)")
            #expect(lines.first == "\(file):1:17: clear-interval: must be a number of seconds, not the string \"ten\"")
            #expect(lines.last == "\(file):8:1: unknown key 'colour'")
        }
    }

    @Test("the annotated example passes check-config")
    func example() async throws {
        let result = try await runCommand(BuiltProducts.path("proximityd"), ["check-config", Self.example])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "\(Self.example): ok (0 regions, 0 alerts, 0 rules)\n", "the example is inert: everything commented out")
        #expect(result.stderr.isEmpty)
    }

    @Test("check-config counts the regions, the alerts and the rules")
    func counts() async throws {
        try await withDirectory { directory in
            let file = directory.appendingPathComponent("alerts.yaml").path
            try """
                regions:
                  - identifier: everyone
                alerts:
                  - identifier: lighthouse
                    title: The Lighthouse
                    match: {}
                  - identifier: fleet
                    range: immediate
                    match: {uuid: f7826da6-4fa2-4e98-8024-bc5b71e0893e}
                tracking:
                  heartbeat: 60
                rules:
                  - identifier: near-12
                    on: [tracking]
                    when: {key: a.beacon.major, op: eq, value: "12"}
                    do:
                      - offer-alert: lighthouse
                """.write(toFile: file, atomically: true, encoding: .utf8)
            let result = try await runCommand(BuiltProducts.path("proximityd"), ["check-config", file])
            #expect(result.status == 0 && result.stdout == "\(file): ok (1 region, 2 alerts, 1 rule)\n" && result.stderr.isEmpty, "\(result)")

            try """
                rules:
                  - {identifier: a, when: {key: a.x, op: ex}, do: [{log: {}}]}
                  - {identifier: b, when: {key: a.x, op: ex}, do: [{log: {}}]}
                """.write(toFile: file, atomically: true, encoding: .utf8)
            let two = try await runCommand(BuiltProducts.path("proximityd"), ["check-config", file])
            #expect(two.status == 0 && two.stdout == "\(file): ok (0 regions, 0 alerts, 2 rules)\n" && two.stderr.isEmpty, "\(two)")

            try "rules:\n  - identifier: near\n    when: {key: a.beacon.prox, op: about, value: 2}\n    do: [{log: {}}]\n"
                .write(toFile: file, atomically: true, encoding: .utf8)
            let badRule = try await runCommand(BuiltProducts.path("proximityd"), ["check-config", file])
            #expect(badRule.status == 65, "\(badRule)")
            #expect(badRule.stderr == "\(file):3:36: rules[0].when.op: must be one of eq, ne, ex, nx, gt, ge, lt, le, co, nc, sw, ew, within, not the string \"about\"\n",
                    "\(badRule)")

            try "alerts:\n  - identifier: lighthouse\n    range: nearby\n    match: {}\n".write(toFile: file, atomically: true, encoding: .utf8)
            let broken = try await runCommand(BuiltProducts.path("proximityd"), ["check-config", file])
            #expect(broken.status == 65, "\(broken)")
            #expect(broken.stderr == "\(file):3:12: alerts[0].range: must be one of immediate, near, far, not \"nearby\"\n", "\(broken)")
        }
    }

    @Test("a file that cannot be read: one line, exit 66")
    func unreadable() async throws {
        try await withDirectory { directory in
            let missing = directory.appendingPathComponent("missing.yaml").path
            let result = try await runCommand(BuiltProducts.path("proximityd"), ["check-config", missing])
            #expect(result.status == 66, "\(result)")
            #expect(result.stderr == "\(missing): cannot read: No such file or directory\n")
            let empty = directory.appendingPathComponent("empty.yaml").path
            try "# nothing yet\n".write(toFile: empty, atomically: true, encoding: .utf8)
            let ok = try await runCommand(BuiltProducts.path("proximityd"), ["check-config", empty])
            #expect(ok.status == 0 && ok.stdout == "\(empty): ok (0 regions, 0 alerts, 0 rules)\n", "\(ok)")
        }
    }

    @Test("run --config with a broken file: the same lines after proximityd: error:, exit 78, nothing started")
    func runBroken() async throws {
        try await withDirectory { directory in
            let file = directory.appendingPathComponent("broken.yaml").path
            try Self.broken.write(toFile: file, atomically: true, encoding: .utf8)
            let state = directory.appendingPathComponent("state")
            let result = try await runCommand(BuiltProducts.path("proximityd"), ["run", "--config", file, "--state-dir", state.path])
            #expect(result.status == 78, "\(result)")
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.count == 5, "\(result.stderr)")
            #expect(lines.allSatisfy { $0.hasPrefix("proximityd: error: ") && isProblemLine($0.dropFirst("proximityd: error: ".count), file: file) },
                    "\(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: state.path))

            let missing = directory.appendingPathComponent("missing.yaml").path
            let absent = try await runCommand(BuiltProducts.path("proximityd"), ["run", "--config", missing, "--state-dir", state.path])
            #expect(absent.status == 78, "\(absent)")
            #expect(absent.stderr == "proximityd: error: \(missing): cannot read: No such file or directory\n")
        }
    }

    @Test("rssi-offset: a bad value names the option on the command line (64) and the place in the file (check-config 65, run 78)")
    func rssiOffset() async throws {
        let proximityd = BuiltProducts.path("proximityd")
        for (argument, message) in [("41", "an offset of 41 dB is outside -40…40"), ("-40.5", "an offset of -40.5 dB is outside -40…40"),
                                    ("nan", "an offset must be a finite number of dB, not nan"),
                                    ("-inf", "an offset must be a finite number of dB, not -inf")] {
            let result = try await runCommand(proximityd, ["run", "--rssi-offset", argument])
            #expect(result.status == 64, "\(argument): \(result)")
            #expect(result.stderr == "proximityd: error: --rssi-offset: \(message)\nSee 'proximityd run --help'.\n", "\(argument): \(result.stderr)")
        }
        let words = try await runCommand(proximityd, ["run", "--rssi-offset", "high"])
        #expect(words.status == 64 && words.stderr.hasPrefix("proximityd: error: The value 'high' is invalid for '--rssi-offset <dB>'"), "\(words)")
        let help = try await runCommand(proximityd, ["run", "--help"])
        #expect(help.stdout.contains("--rssi-offset <dB>"), "\(help)")

        try await withDirectory { directory in
            let file = directory.appendingPathComponent("offset.yaml").path
            try "measured-power: -70\nrssi-offset: -41\n".write(toFile: file, atomically: true, encoding: .utf8)
            let check = try await runCommand(proximityd, ["check-config", file])
            #expect(check.status == 65, "\(check)")
            #expect(check.stderr == "\(file):2:14: rssi-offset: an offset of -41 dB is outside -40…40\n", "\(check)")
            let state = directory.appendingPathComponent("state")
            let run = try await runCommand(proximityd, ["run", "--config", file, "--state-dir", state.path])
            #expect(run.status == 78, "\(run)")
            #expect(run.stderr == "proximityd: error: \(file):2:14: rssi-offset: an offset of -41 dB is outside -40…40\n", "\(run)")
            #expect(!FileManager.default.fileExists(atPath: state.path))
            try "rssi-offset: [3]\n".write(toFile: file, atomically: true, encoding: .utf8)
            let list = try await runCommand(proximityd, ["check-config", file])
            #expect(list.status == 65 && list.stderr == "\(file):1:14: rssi-offset: must be a number (dB), not a list\n", "\(list)")
            try "rssi-offset: -7.5\n".write(toFile: file, atomically: true, encoding: .utf8)
            let ok = try await runCommand(proximityd, ["check-config", file])
            #expect(ok.status == 0 && ok.stdout == "\(file): ok (0 regions, 0 alerts, 0 rules)\n", "\(ok)")
        }
    }

    @Test("run --config uses the file's options, and the command line's over them")
    func runPrecedence() async throws {
        try await withDirectory { directory in
            let file = directory.appendingPathComponent("proximityd.yaml").path
            let state = directory.appendingPathComponent("state").path
            try "bus: unix:path=\(directory.path)/from-file\n".write(toFile: file, atomically: true, encoding: .utf8)
            // No bus is there: the daemon names the one it tried.
            let fromFile = try await runCommand(BuiltProducts.path("proximityd"), ["run", "--config", file, "--state-dir", state])
            #expect(fromFile.status == 69 && fromFile.stderr.split(separator: "\n").count == 1, "\(fromFile)")
            #expect(fromFile.stderr.hasPrefix("proximityd: error: cannot connect to the bus at unix:path=\(directory.path)/from-file:"),
                    "\(fromFile)")
            let overridden = try await runCommand(BuiltProducts.path("proximityd"),
                                                  ["run", "--config", file, "--state-dir", state, "--bus", "unix:path=\(directory.path)/given"])
            #expect(overridden.status == 69, "\(overridden)")
            #expect(overridden.stderr.hasPrefix("proximityd: error: cannot connect to the bus at unix:path=\(directory.path)/given:"),
                    "\(overridden)")
        }
    }
}
