import ArgumentParser
import Foundation
import ProximityTrust

/// `proximityctl fleet-key`: the fleet's shared secret for the trusted identification.
struct FleetKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet-key",
        abstract: "Make a fleet key, the secret the nodes of a trusted fleet share.",
        discussion: """
            Nodes whose config file names the same key (fleet-key: FILE) identify each other \
            with the trusted protocol: mutually, bound to fresh challenges, and without showing \
            their identities to anyone else (docs/security.md). The file must be owned by root \
            (or the user proximityd runs as) and readable by its owner only (mode 0600). No node \
            is needed: this runs on any box, and the file is copied to every node.

            Exit status: 0 on success, 64 for a bad argument, 73 when --output cannot be created \
            (it exists already, or its directory does not).

            Examples:
              $ proximityctl fleet-key new > fleet.key
                A new key on standard output (64 hexadecimal digits, after a comment line).
              $ proximityctl fleet-key new --output /etc/proximityd/fleet.key
                Written to a new file, mode 0600, never over an existing one (as root).
            """,
        subcommands: [New.self])
}

extension FleetKeyCommand {
    struct New: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a new fleet key from the system's secure random generator.",
            discussion: """
                Examples:
                  $ proximityctl fleet-key new > fleet.key
                    On standard output.
                  $ proximityctl fleet-key new --output /etc/proximityd/fleet.key
                    In a new file, mode 0600.
                """)

        @Option(name: .shortAndLong, help: ArgumentHelp("Write the key to this new file (mode 0600) instead of standard output.",
                                                          valueName: "file"))
        var output: String?

        func validate() throws {
            if output?.isEmpty == true { throw ValidationError("--output: must not be empty") }
        }

        func run() throws {
            let text = FleetKey.generate().fileText
            guard let output else {
                FileHandle.standardOutput.write(Data(text.utf8))
                return
            }
            // O_EXCL: never over an existing file (another fleet's key, or anything else).
            let fd = open(output, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                let reason = String(cString: strerror(errno))
                FileHandle.standardError.write(Data("proximityctl: error: --output \(output): \(reason)\n".utf8))
                throw ExitCode(73)
            }
            defer { close(fd) }
            let bytes = Array(text.utf8)
            guard write(fd, bytes, bytes.count) == bytes.count, fsync(fd) == 0 else {
                let reason = String(cString: strerror(errno))
                unlink(output)
                FileHandle.standardError.write(Data("proximityctl: error: --output \(output): \(reason)\n".utf8))
                throw ExitCode(73)
            }
        }
    }
}
