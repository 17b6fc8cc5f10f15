import Foundation
import MQTTKit
import ProximityMQTT

/// Where and how the node publishes to an MQTT broker: the config file's `mqtt:` section
/// (`docs/mqtt.md`). Nil in ``NodeConfiguration/mqtt``: the node does not publish.
public struct MQTTSettings: Sendable, Hashable {
    /// The broker, from `broker: mqtt://host[:port]` or `mqtts://host[:port]`.
    public typealias Broker = MQTTBrokerURL

    /// `broker:`, checked.
    public static func checked(broker text: String) throws(OptionProblem) -> Broker {
        do { return try MQTTBrokerURL.parse(text) } catch { throw OptionProblem(error.message) }
    }

    /// What else the node publishes, so that existing setups consume it unchanged.
    public enum Compatibility: String, Sendable, Hashable, CaseIterable {
        /// ESPresense's `espresense/devices/<id>/<room>` reports and `espresense/rooms/<room>/status`.
        case espresense
        /// Home Assistant `mqtt_room`'s `room_presence/<room>` reports (`{"id","name","distance"}`).
        case mqttRoom = "mqtt-room"
    }

    /// Whether the node stands in a room or moves (`role:`).
    public enum Role: String, Sendable, Hashable, CaseIterable {
        /// It stays in one place: `proximity-fleet` takes it for a room.
        case fixed
        /// It moves (a cart, a bag): its reports never make a room, and it publishes no
        /// compatibility forms, which would make it one in ESPresense or `mqtt_room`.
        case mobile
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
    /// `hearings:`: what the node heard of each peer in each second (`<prefix>/hearings`, one
    /// batch a second): what a fleet's positioning reads.
    public var hearings = true
    /// `allow-plaintext:`: a node with a fleet key publishes to an `mqtt://` broker off this host
    /// only when this says so.
    public var allowPlaintext = false
    public var compatibility: [Compatibility] = []
    /// `role:`: fixed (default) or mobile.
    public var role = Role.fixed
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

    /// A topic prefix (``MQTTTopic/prefixProblem(_:)``).
    public static func checked(prefix text: String) throws(OptionProblem) -> String {
        if let problem = MQTTTopic.prefixProblem(text) { throw OptionProblem(problem) }
        return text
    }

    /// One topic level, a room name (``MQTTTopic/levelProblem(_:)``).
    public static func checked(level text: String) throws(OptionProblem) -> String {
        if let problem = MQTTTopic.levelProblem(text) { throw OptionProblem(problem) }
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
