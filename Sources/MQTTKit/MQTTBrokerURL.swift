import Foundation

/// A broker's address: `mqtt://host[:port]` (1883) or `mqtts://host[:port]` (8883, TLS).
public struct MQTTBrokerURL: Sendable, Hashable, CustomStringConvertible {
    public var tls: Bool
    public var host: String
    public var port: Int

    /// Whether the broker is on this host (`localhost`, 127.0.0.0/8, `::1`): what is sent to it
    /// never crosses a network.
    public var isLoopback: Bool {
        let h = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        return h == "localhost" || h == "::1" || h.hasPrefix("127.") && h.split(separator: ".").count == 4
    }

    public init(tls: Bool = false, host: String, port: Int? = nil) {
        self.tls = tls
        self.host = host
        self.port = port ?? (tls ? 8883 : 1883)
    }

    public var description: String {
        "\(tls ? "mqtts" : "mqtt")://\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }

    /// Parses `mqtt://host[:port]` or `mqtts://host[:port]` (a bracketed IPv6 address as host).
    public static func parse(_ text: String) throws(MQTTURLError) -> MQTTBrokerURL {
        let expected = "must be mqtt://HOST[:PORT] or mqtts://HOST[:PORT]"
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), ["mqtt", "mqtts"].contains(scheme)
        else { throw MQTTURLError("\(expected), not '\(text)'") }
        guard let host = url.host, !host.isEmpty else { throw MQTTURLError("\(expected): '\(text)' names no host") }
        guard url.user == nil, url.password == nil else {
            throw MQTTURLError("'\(text)' holds credentials: give them as a username and a password file")
        }
        guard url.path.isEmpty || url.path == "/", url.query == nil, url.fragment == nil else {
            throw MQTTURLError("\(expected): '\(text)' has a path, query or fragment")
        }
        if let port = url.port, !(1...65535).contains(port) { throw MQTTURLError("port \(port) is not in 1...65535") }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return MQTTBrokerURL(tls: scheme == "mqtts", host: bare, port: url.port)
    }
}

/// Why a broker URL cannot be used.
public struct MQTTURLError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

extension MQTTOptions.TLS {
    /// Debian's directory of hashed CA certificates: the broker's CA when no file is named.
    public static let systemCAPath = "/etc/ssl/certs"
}
