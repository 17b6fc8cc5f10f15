import Foundation

/// The D-Bus address of another box's system bus over ssh, as `busctl -H` and `systemctl -H` make
/// it (sd-bus's `bus_set_address_system_remote`): libdbus runs `ssh -xT [-p PORT] -- [USER@]HOST
/// systemd-stdio-bridge` (the `unixexec:` transport) and speaks D-Bus over its standard input and
/// output; on the other box, `systemd-stdio-bridge` relays to that box's system bus. ssh
/// authenticates as it always does (keys, an agent, `~/.ssh/config`); nothing asks for a password.
///
/// `PROXIMITYCTL_SSH`, when set, replaces the `ssh` program: its words (split at blanks, no
/// quoting) are the program and arguments put first, e.g. `ssh -i ~/.ssh/node -o
/// ServerAliveInterval=15`.
enum RemoteBus {
    /// The environment variable replacing `ssh`.
    static let sshVariable = "PROXIMITYCTL_SSH"

    struct HostError: Error, CustomStringConvertible {
        var description: String
    }

    /// `[USER@]HOST[:PORT]`, with an IPv6 address in brackets (`[fe80::1]:2222`, `pi@[::1]`):
    /// the ssh destination and the port, if given.
    static func destination(_ host: String) throws(HostError) -> (destination: String, port: String?) {
        var user = "", rest = Substring(host)
        if let at = host.firstIndex(of: "@") {
            user = String(host[...at])
            rest = host[host.index(after: at)...]
        }
        let name: Substring, after: Substring
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else {
                throw HostError(description: "\(host.debugDescription): no ] after the [ of an IPv6 address")
            }
            name = rest[rest.index(after: rest.startIndex)..<close]
            after = rest[rest.index(after: close)...]
        } else {
            name = rest.prefix { $0 != ":" }
            after = rest[name.endIndex...]
        }
        guard !name.isEmpty, !name.contains("@") else { throw HostError(description: "\(host.debugDescription) is not [USER@]HOST[:PORT]") }
        guard user.count != 1 else { throw HostError(description: "\(host.debugDescription) has an empty user before @") }
        var port: String?
        if !after.isEmpty {
            let digits = after.dropFirst()
            guard after.first == ":", !digits.isEmpty, digits.allSatisfy(\.isASCII), let n = Int(digits), (1...65535).contains(n) else {
                throw HostError(description: "\(host.debugDescription): the port after : must be 1 to 65535")
            }
            port = String(digits)
        }
        return (user + name, port)
    }

    /// The `unixexec:` address reaching `host`'s system bus; `ssh` is the program and its first
    /// arguments (``sshVariable``'s words, or `ssh`).
    static func address(host: String, ssh: [String] = command()) throws(HostError) -> String {
        let (destination, port) = try destination(host)
        let arguments = Array(ssh.dropFirst()) + ["-xT"] + (port.map { ["-p", $0] } ?? []) + ["--", destination, "systemd-stdio-bridge"]
        return "unixexec:path=\(escape(ssh.first ?? "ssh"))"
            + arguments.enumerated().map { ",argv\($0.offset + 1)=\(escape($0.element))" }.joined()
    }

    /// ``sshVariable``'s words, or `ssh`.
    static func command(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        let words = (environment[sshVariable] ?? "").split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        return words.isEmpty ? ["ssh"] : words
    }

    /// A D-Bus address value: letters, digits and `_-/.` as they are, any other byte as `%xx`
    /// (sd-bus's `bus_address_escape`).
    static func escape(_ value: String) -> String {
        var out = ""
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "/"), UInt8(ascii: "."):
                out.append(Character(UnicodeScalar(byte)))
            default:
                out += String(format: "%%%02x", byte)
            }
        }
        return out
    }
}
