import Foundation
import ProximityTesting
#if canImport(Glibc)
import Glibc
#endif

/// A real OpenSSH server on 127.0.0.1, for `proximityctl -H`: the other box of a test.
///
/// It runs as the current user (`sshd -D -e -f CONFIG`), with its own host key and one client key
/// made with ssh-keygen, password logins off, and every session's command forced to
/// `forceCommand`: in the tests `systemd-stdio-bridge --bus-path=ADDRESS`, the bridge to a private
/// bus standing in for the remote box's system bus (the bridge's own default). ``sshCommand`` is
/// the client side: `ssh` with the key, no config file and no known hosts, for `PROXIMITYCTL_SSH`.
///
/// Needs `/usr/sbin/sshd` (Debian's openssh-server) and `ssh`, `ssh-keygen` (openssh-client).
/// Run as root, sshd wants its privilege separation directory, `/run/sshd`, which this creates
/// when it is missing (as the package's tmpfiles would).
public final class SSHServer: Sendable {
    public let port: Int
    public let directory: URL
    /// The user ssh logs in as: the current one.
    public let user: String
    private let process: ManagedProcess

    private init(port: Int, directory: URL, user: String, process: ManagedProcess) {
        self.port = port
        self.directory = directory
        self.user = user
        self.process = process
    }

    public static let sshd = "/usr/sbin/sshd"

    /// Whether sshd is installed.
    public static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: sshd) }

    /// `user@127.0.0.1:PORT`, as `proximityctl -H` takes it.
    public var host: String { "\(user)@127.0.0.1:\(port)" }

    /// The client: `ssh` with this server's key, and no config, known hosts or prompt.
    public var sshCommand: [String] {
        ["ssh", "-F", "/dev/null", "-i", directory.appendingPathComponent("client_key").path, "-o", "IdentitiesOnly=yes",
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR"]
    }

    /// Starts sshd, returning once it listens.
    public static func start(forceCommand: String) async throws -> SSHServer {
        guard isAvailable else { throw TestKitError("\(sshd) is not installed (apt-get install openssh-server)") }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("proximityd-sshd-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
        for key in ["host_key", "client_key"] {
            let made = try await runCommand("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "proximityd-test", "-f", path(key)])
            guard made.status == 0 else { throw TestKitError("ssh-keygen: \(made)") }
        }
        try FileManager.default.copyItem(atPath: path("client_key.pub"), toPath: path("authorized_keys"))
        if getuid() == 0, !FileManager.default.fileExists(atPath: "/run/sshd") {
            try FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o755])
        }
        let user = getpwuid(getuid()).flatMap { $0.pointee.pw_name.map { String(cString: $0) } } ?? "root"
        let port = try freeTCPPort()
        try """
            ListenAddress 127.0.0.1
            Port \(port)
            HostKey \(path("host_key"))
            PidFile none
            AuthorizedKeysFile \(path("authorized_keys"))
            StrictModes no
            PubkeyAuthentication yes
            PasswordAuthentication no
            KbdInteractiveAuthentication no
            UsePAM no
            PermitRootLogin prohibit-password
            AllowUsers \(user)
            AllowTcpForwarding no
            X11Forwarding no
            PrintMotd no
            LogLevel INFO
            ForceCommand \(forceCommand)
            """.write(toFile: path("sshd_config"), atomically: true, encoding: .utf8)
        let process = try ManagedProcess(sshd, ["-D", "-e", "-f", path("sshd_config")])
        do {
            try await process.waitForOutput(containing: "Server listening on", inStderr: true, timeout: .seconds(10))
        } catch {
            process.signal(SIGKILL)
            throw TestKitError("sshd did not start: \(process.stderr)")
        }
        return SSHServer(port: port, directory: directory, user: user, process: process)
    }

    /// What sshd logged (on standard error).
    public var log: String { process.stderr }

    public func stop() async {
        await process.stop(grace: .seconds(2))
        try? FileManager.default.removeItem(at: directory)
    }

    deinit {
        process.signal(SIGKILL)
    }
}
