import DBusKit
import Foundation
import Synchronization

/// The names of the node's D-Bus API (`docs/dbus-api.md`).
public enum NodeAPI {
    public static let rootPath: ObjectPath = "/org/proximityd"
    public static let peersPath: ObjectPath = "/org/proximityd/peers"
    public static let node1: InterfaceName = "org.proximityd.Node1"
    public static let peer1: InterfaceName = "org.proximityd.Peer1"
    public static let invalidArguments: ErrorName = "org.proximityd.Error.InvalidArguments"

    /// The object path of a peer: its identifier, escaped as one path element.
    public static func peerPath(_ identifier: String) -> ObjectPath {
        peersPath.appending(escaped: identifier)
    }
}

/// The current state of the node as `org.proximityd.Node1` shows it at start.
public struct NodeStatus: Sendable, Equatable {
    public var identifier: String
    public var serviceUUID: String
    public var name: String
    public var advertising: Bool
    public var discovering: Bool
    public var adapter: String = "hci0"
    public var clearInterval: Double = 10
    public var measuredPower: Int16 = -59
}

/// What the engine publishes and the node's method handlers read: the latest ranging report, the
/// peers' paths and the clear interval a client set. Shared between the bus's handlers and the
/// engine, behind a lock (handlers never wait for the engine).
public final class NodeShared: Sendable {
    struct State {
        var ranging: [String: String] = [:]
        var peers: [ObjectPath] = []
        var clearInterval: Double
    }
    let state: Mutex<State>

    public init(clearInterval: Double) {
        state = Mutex(State(clearInterval: clearInterval))
    }

    public var ranging: [String: String] {
        get { state.withLock { $0.ranging } }
        set { state.withLock { $0.ranging = newValue } }
    }
    public var peers: [ObjectPath] {
        get { state.withLock { $0.peers } }
        set { state.withLock { $0.peers = newValue } }
    }
    public var clearInterval: Double {
        get { state.withLock { $0.clearInterval } }
        set { state.withLock { $0.clearInterval = newValue } }
    }
}

extension DBusValue {
    /// `a{ss}` from a dictionary, sorted by key.
    static func stringMap(_ map: [String: String]) -> DBusValue {
        .dictionary(key: .string, value: .string, map.sorted { $0.key < $1.key }.map { DictEntry(.string($0.key), .string($0.value)) })
    }
}

extension NodeAPI {
    /// The declaration of `org.proximityd.Node1`. `dbus/org.proximityd.Node1.xml` is this
    /// declaration's introspection, checked by a test against the running daemon.
    public static func node1Interface(status: NodeStatus, shared: NodeShared) -> DBusInterface {
        DBusInterface(node1, methods: [
            DBusMethod("GetPeers", outputs: [DBusArgument("peers", .array(.objectPath))]) { _ in
                [.array(element: .objectPath, shared.peers.map { .objectPath($0) })]
            },
            DBusMethod("GetRanging", outputs: [DBusArgument("zones", .dictionary(key: .string, value: .string))]) { _ in
                [.stringMap(shared.ranging)]
            },
        ], properties: [
            DBusProperty("Identifier", .string, .string(status.identifier), changeSignal: .const),
            DBusProperty("ServiceUUID", .string, .string(status.serviceUUID), changeSignal: .const),
            DBusProperty("Name", .string, .string(status.name), changeSignal: .const),
            DBusProperty("Adapter", .string, .string(status.adapter), changeSignal: .const),
            DBusProperty("Advertising", .boolean, .boolean(status.advertising)),
            DBusProperty("Discovering", .boolean, .boolean(status.discovering)),
            DBusProperty("ClearInterval", .double, .double(status.clearInterval)) { value in
                guard case .double(let seconds) = value, seconds > 0, seconds <= 3600 else {
                    throw DBusError(invalidArguments, "ClearInterval must be a number of seconds above 0 and at most 3600")
                }
                shared.clearInterval = seconds
                return .double(seconds)
            },
            DBusProperty("MeasuredPower", .int16, .int16(status.measuredPower), changeSignal: .const),
        ], signals: [
            DBusSignal("FoundDevices", arguments: [DBusArgument("zones", .dictionary(key: .string, value: .string))]),
        ])
    }

    /// The declaration of `org.proximityd.Peer1`, with the peer's current values.
    public static func peer1Interface(_ values: [String: DBusValue]) -> DBusInterface {
        func p(_ name: String, _ type: DBusType, _ fallback: DBusValue, const: Bool = false) -> DBusProperty {
            DBusProperty(name, type, values[name] ?? fallback, changeSignal: const ? .const : .emits)
        }
        return DBusInterface(peer1, properties: [
            p("Identifier", .string, .string(""), const: true),
            p("Kind", .string, .string("node"), const: true),
            p("Address", .string, .string("")),
            p("Name", .string, .string("")),
            p("RSSI", .int16, .int16(0)),
            p("SmoothedRSSI", .double, .double(0)),
            p("Distance", .double, .double(0)),
            p("Proximity", .string, .string("unknown")),
            p("FirstSeen", .uint64, .uint64(0), const: true),
            p("LastSeen", .uint64, .uint64(0)),
        ])
    }
}
