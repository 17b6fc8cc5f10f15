import Foundation
import ProximityTesting
import ProximityTrust
import Testing

/// `proximityctl fleet-key new`: a fresh key each time, on standard output or in a new file of
/// mode 0600, never over an existing one.
@Suite("proximityctl fleet-key new")
struct FleetKeyCommandTests {
    @Test("standard output: a key the node reads, a different one each time")
    func standardOutput() async throws {
        let first = try await runCommand(BuiltProducts.path("proximityctl"), ["fleet-key", "new"])
        let second = try await runCommand(BuiltProducts.path("proximityctl"), ["fleet-key", "new"])
        #expect(first.status == 0 && second.status == 0, "\(first) \(second)")
        let a = try FleetKey(parsing: first.stdout), b = try FleetKey(parsing: second.stdout)
        #expect(a != b)
        #expect(first.stdout.hasPrefix("# proximityd fleet key") && first.stdout.split(separator: "\n").last?.count == 64, "\(first.stdout)")
    }

    @Test("--output: a new file of mode 0600 holding the key; an existing file is left alone (73); a bad argument is 64")
    func outputFile() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-key-\(getpid())-\(UInt32.random(in: 0 ... .max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("fleet.key").path
        let made = try await runCommand(BuiltProducts.path("proximityctl"), ["fleet-key", "new", "--output", file])
        #expect(made.status == 0 && made.stdout.isEmpty, "\(made)")
        var info = stat()
        #expect(stat(file, &info) == 0 && info.st_mode & 0o777 == 0o600, "mode \(String(info.st_mode & 0o777, radix: 8))")
        let key = try FleetKey(parsing: String(contentsOfFile: file, encoding: .utf8))
        let again = try await runCommand(BuiltProducts.path("proximityctl"), ["fleet-key", "new", "-o", file])
        #expect(again.status == 73, "\(again)")
        #expect(again.stderr == "proximityctl: error: --output \(file): File exists\n", "\(again)")
        #expect(try FleetKey(parsing: String(contentsOfFile: file, encoding: .utf8)) == key)
        let nowhere = try await runCommand(BuiltProducts.path("proximityctl"), ["fleet-key", "new", "--output", directory.path + "/none/fleet.key"])
        #expect(nowhere.status == 73 && nowhere.stderr.contains("No such file or directory"), "\(nowhere)")
        let bad = try await runCommand(BuiltProducts.path("proximityctl"), ["fleet-key", "new", "--output", ""])
        #expect(bad.status == 64 && bad.stderr.hasPrefix("proximityctl: error: --output: must not be empty"), "\(bad)")
    }

    @Test("issue 32: 0600 whatever the umask, redirected (> file) or with --output; never to a terminal (64)")
    func umaskAndTerminal() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-key-umask-\(getpid())-\(UInt32.random(in: 0 ... .max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let ctl = BuiltProducts.path("proximityctl")
        for (name, command) in [("redirected.key", "\(ctl) fleet-key new > \(directory.path)/redirected.key"),
                                ("output.key", "\(ctl) fleet-key new --output \(directory.path)/output.key")] {
            // A umask that would leave the file readable by everyone (0644), or writable by the
            // group: the key's file is 0600 all the same.
            for umask in ["022", "002"] {
                try? FileManager.default.removeItem(atPath: "\(directory.path)/\(name)")
                let made = try await runCommand("/bin/sh", ["-c", "umask \(umask); \(command)"])
                #expect(made.status == 0, "\(made)")
                var info = stat()
                #expect(stat("\(directory.path)/\(name)", &info) == 0 && info.st_mode & 0o777 == 0o600,
                        "\(name), umask \(umask): mode \(String(info.st_mode & 0o777, radix: 8))")
                #expect((try? FleetKey(parsing: String(contentsOfFile: "\(directory.path)/\(name)", encoding: .utf8))) != nil)
            }
        }
        // At a terminal (util-linux's script gives it one): refused, nothing shown.
        let terminal = try await runCommand("/usr/bin/script", ["-qec", "\(ctl) fleet-key new", "/dev/null"])
        #expect(terminal.status == 64 && terminal.stdout.contains("standard output is a terminal") && !terminal.stdout.contains("fleet key:"),
                "\(terminal)")
    }
}
