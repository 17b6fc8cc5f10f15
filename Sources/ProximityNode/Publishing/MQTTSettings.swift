import Foundation

/// Where and how the node publishes to an MQTT broker: the config file's `mqtt:` section
/// (`docs/mqtt.md`). Nil in ``NodeConfiguration/mqtt``: the node does not publish.
public struct MQTTSettings: Sendable, Hashable {
    /// The broker, from `broker: mqtt://host[:port]` or `mqtts://host[:port]`.
    public struct Broker: Sendable, Hashable, CustomStringConvertible {
        public var tls: Bool
        public var host: String
        public var port: Int

        public init(tls: Bool = false, host: String, port: Int? = nil) {
            self.tls = tls
            self.host = host
            self.port = port ?? (tls ? 8883 : 1883)
        }

        public var description: String {
            "\(tls ? "mqtts" : "mqtt")://\(host.contains(":") ? "[\(host)]" : host):\(port)"
        }

        /// Parses `mqtt://host[:port]` or `mqtts://host[:port]` (a bracketed IPv6 address as host).
        public static func parse(_ text: String) throws(OptionProblem) -> Broker {
            let expected = "must be mqtt://HOST[:PORT] or mqtts://HOST[:PORT]"
            guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), ["mqtt", "mqtts"].contains(scheme)
            else { throw OptionProblem("\(expected), not '\(text)'") }
            guard let host = url.host, !host.isEmpty else { throw OptionProblem("\(expected): '\(text)' names no host") }
            guard url.user == nil, url.password == nil else {
                throw OptionProblem("'\(text)' holds credentials: give them as mqtt.username and mqtt.password-file")
            }
            guard url.path.isEmpty || url.path == "/", url.query == nil, url.fragment == nil else {
                throw OptionProblem("\(expected): '\(text)' has a path, query or fragment")
            }
            if let port = url.port, !(1...65535).contains(port) { throw OptionProblem("port \(port) is not in 1...65535") }
            let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
            return Broker(tls: scheme == "mqtts", host: bare, port: url.port)
        }
    }

    /// What else the node publishes, so that existing setups consume it unchanged.
    public enum Compatibility: String, Sendable, Hashable, CaseIterable {
        /// ESPresense's `espresense/devices/<id>/<room>` reports and `espresense/rooms/<room>/status`.
        case espresense
        /// Home Assistant `mqtt_room`'s `room_presence/<room>` reports (`{"id","name","distance"}`).
        case mqttRoom = "mqtt-room"
    }

    public static let keepaliveRange = 5...3600
    public static let reportIntervalRange = 0.0...3600
    public static let reportMovedRange = 0.0...100
    public static let outboxSizeRange = 1...1_000_000
    public static let reconnectRange = 1...3600

    public var broker: Broker
    /// PEM file of the CA that signs the broker's certificate (`mqtts://`); nil: the system's CAs.
    public var caFile: String?
    /// A client certificate and its key, when the broker asks for one.
    public var certificateFile: String?
    public var keyFile: String?
    public var username: String?
    /// A file whose first line is the password (read at every connection, so a reload or a
    /// rotation takes a new one).
    public var passwordFile: String?
    /// Default `proximityd-<node name>`.
    public var clientID: String?
    /// The node's topics start with it. Default `proximityd/<node name>`.
    public var prefix: String?
    /// Seconds between keepalive pings; the broker publishes the node's will after 1.5 × this
    /// without a word.
    public var keepalive = 30
    /// A peer's distance report goes out at most once per this many seconds …
    public var reportInterval = 5.0
    /// … unless its distance changed by at least this many metres since the last one sent.
    public var reportMoved = 0.5
    public var compatibility: [Compatibility] = []
    /// The room name in the compatibility topics. Default the node's name.
    public var room: String?
    /// Home Assistant discovery.
    public var discovery = true
    public var discoveryPrefix = "homeassistant"
    /// The most events kept for the broker while it cannot be reached; past it, the oldest go.
    public var outboxSize = 10_000
    /// The longest wait between reconnection attempts, seconds (the first is 1 s, doubled each
    /// failure up to this).
    public var reconnectMax = 60

    public init(broker: Broker) { self.broker = broker }

    /// The client id used for `name`.
    public func clientID(name: String) -> String { clientID ?? "proximityd-\(name)" }
    /// The topic prefix used for `name`.
    public func prefix(name: String) -> String { prefix ?? "proximityd/\(MQTTTopic.segment(name))" }
    /// The room name used for `name`.
    public func room(name: String) -> String { room ?? name }

    // MARK: - Checks, in the config file's words

    /// A topic prefix: levels separated by `/`, none empty, no wildcard, no NUL.
    public static func checked(prefix text: String) throws(OptionProblem) -> String {
        guard !text.isEmpty else { throw OptionProblem("is empty") }
        guard !text.contains("+"), !text.contains("#") else { throw OptionProblem("'\(text)' contains a wildcard (+ or #)") }
        guard !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw OptionProblem("contains control characters")
        }
        guard !text.split(separator: "/", omittingEmptySubsequences: false).contains(where: \.isEmpty) else {
            throw OptionProblem("'\(text)' has an empty level (a leading, trailing or double /)")
        }
        guard text.utf8.count <= 1024 else { throw OptionProblem("is longer than 1024 bytes") }
        return text
    }

    /// One topic level (a room name): not empty, no `/`, no wildcard, no control character.
    public static func checked(level text: String) throws(OptionProblem) -> String {
        guard !text.isEmpty else { throw OptionProblem("is empty") }
        guard !text.contains("/"), !text.contains("+"), !text.contains("#") else {
            throw OptionProblem("'\(text)' contains /, + or #, which a topic level cannot")
        }
        guard !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw OptionProblem("contains control characters")
        }
        guard text.utf8.count <= 255 else { throw OptionProblem("is longer than 255 bytes") }
        return text
    }

    /// An MQTT client id: 1 to 23 characters is all MQTT 3.1.1 promises; Mosquitto takes up to 65535.
    public static func checked(clientID text: String) throws(OptionProblem) -> String {
        guard !text.isEmpty else { throw OptionProblem("is empty") }
        guard text.utf8.count <= 256 else { throw OptionProblem("is longer than 256 bytes") }
        guard !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw OptionProblem("contains control characters")
        }
        return text
    }
}

/// Topic levels made from names that may hold anything (region and peer identifiers, node names).
public enum MQTTTopic {
    /// `text` as one topic level: letters, digits and `-._:~@` as they are, every other byte
    /// percent-encoded (`/` → `%2F`, `+` → `%2B`, `#` → `%23`, `%` → `%25`, space → `%20`), so that
    /// it is never a wildcard or two levels, and distinct names stay distinct.
    public static func segment(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "~"), UInt8(ascii: "@"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out.isEmpty ? "%00" : out
    }

    /// `text` as a Home Assistant object id (`[a-zA-Z0-9_-]`): other characters become `_`, and
    /// when any did, a hash of the whole name follows, so distinct names stay distinct.
    public static func objectID(_ text: String) -> String {
        var changed = false
        let mapped = String(text.unicodeScalars.map { s -> Character in
            if s.isASCII, s.properties.isAlphabetic || ("0"..."9").contains(s) || s == "_" || s == "-" { return Character(s) }
            changed = true
            return "_"
        })
        guard changed else { return mapped }
        var hash: UInt32 = 2_166_136_261
        for byte in text.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return mapped + "_" + String(format: "%08x", hash)
    }
}
