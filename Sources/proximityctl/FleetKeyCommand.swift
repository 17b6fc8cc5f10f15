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

            The key is never written to a terminal. Standard output redirected to a file is made \
            mode 0600 before the key is written, whatever the umask; --output makes a new file, \
            mode 0600.

            Exit status: 0 on success, 64 for a bad argument or standard output on a terminal, \
            73 when --output cannot be created (it exists already, or its directory does not).

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
            guard let output else {
                // Never on a terminal: a key shown there stays in its scrollback and history.
                guard isatty(STDOUT_FILENO) == 0 else {
                    FileHandle.standardError.write(Data("proximityctl: error: standard output is a terminal: a key shown there stays in its scrollback; use --output FILE, or redirect it to a file\n".utf8))
                    throw ExitCode(64)
                }
                // Redirected to a file (`> fleet.key`): made the owner's alone, whatever the umask
                // the shell created it with, before the key is in it.
                var info = stat()
                if fstat(STDOUT_FILENO, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_mode & 0o077 != 0 {
                    guard fchmod(STDOUT_FILENO, 0o600) == 0 else {
                        FileHandle.standardError.write(Data("proximityctl: error: cannot make standard output's file mode 0600 (\(String(cString: strerror(errno)))): use --output FILE\n".utf8))
                        throw ExitCode(73)
                    }
                }
                FileHandle.standardOutput.write(Data(FleetKey.generate().fileText.utf8))
                return
            }
            let text = FleetKey.generate().fileText
            // O_EXCL: never over an existing file (another fleet's key, or anything else).
            let fd = open(output, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                let reason = String(cString: strerror(errno))
                FileHandle.standardError.write(Data("proximityctl: error: --output \(output): \(reason)\n".utf8))
                throw ExitCode(73)
            }
            defer { close(fd) }
            // 0600 whatever the umask (which can only take bits away from open's mode).
            guard fchmod(fd, 0o600) == 0 else {
                let reason = String(cString: strerror(errno))
                unlink(output)
                FileHandle.standardError.write(Data("proximityctl: error: --output \(output): \(reason)\n".utf8))
                throw ExitCode(73)
            }
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
