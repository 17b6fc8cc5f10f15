import DBusKit
import Foundation
import ProximityCore

/// The names of the node's D-Bus API (`docs/dbus-api.md`).
public enum NodeAPI {
    public static let rootPath: ObjectPath = "/org/proximityd"
    public static let peersPath: ObjectPath = "/org/proximityd/peers"
    public static let node1: InterfaceName = "org.proximityd.Node1"
    public static let peer1: InterfaceName = "org.proximityd.Peer1"
    public static let invalidArguments: ErrorName = "org.proximityd.Error.InvalidArguments"
    public static let doesNotExist: ErrorName = "org.proximityd.Error.DoesNotExist"
    public static let failed: ErrorName = "org.proximityd.Error.Failed"

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

extension DBusValue {
    /// `a{ss}` from a dictionary, sorted by key.
    static func stringMap(_ map: [String: String]) -> DBusValue {
        .dictionary(key: .string, value: .string, map.sorted { $0.key < $1.key }.map { DictEntry(.string($0.key), .string($0.value)) })
    }
}

extension NodeAPI {
    /// The declaration of `org.proximityd.Node1`. `dbus/org.proximityd.Node1.xml` is this
    /// declaration's introspection, checked by a test against the running daemon.
    ///
    /// Queries are answered from what the exporter last published (`GetPeers`, `GetRanging`) or
    /// asked of the engine (`GetIdentities`); changes are commands to the engine, answered once
    /// saved.
    public static func node1Interface(status: NodeStatus, engine: NodeEngine, exporter: BusExporter) -> DBusInterface {
        DBusInterface(node1, methods: [
            DBusMethod("GetPeers", outputs: [DBusArgument("peers", .array(.objectPath))]) { _ in
                [.array(element: .objectPath, exporter.published.paths.map { .objectPath($0) })]
            },
            DBusMethod("GetRanging", outputs: [DBusArgument("zones", .dictionary(key: .string, value: .string))]) { _ in
                [.stringMap(exporter.published.zones)]
            },
            DBusMethod("GetIdentities", outputs: [DBusArgument("identities", .dictionary(key: .string, value: .string))]) { _ in
                [.stringMap(await engine.identities)]
            },
            DBusMethod("SetMeasuredPower", inputs: [DBusArgument("identifier", .string), DBusArgument("power", .int16)]) { call in
                let identifier = call.arguments[0].string ?? ""
                let power = Int16(call.arguments[1].integer ?? 0)
                if let problem = NodeSettings.problem(identifier: identifier) ?? NodeSettings.problem(measuredPower: power) {
                    throw DBusError(invalidArguments, problem)
                }
                try await engine.setMeasuredPower(power, for: identifier)
                return []
            },
            DBusMethod("ResetMeasuredPower", inputs: [DBusArgument("identifier", .string)]) { call in
                let identifier = call.arguments[0].string ?? ""
                if let problem = NodeSettings.problem(identifier: identifier) { throw DBusError(invalidArguments, problem) }
                try await engine.resetMeasuredPower(for: identifier)
                return []
            },
        ], properties: [
            DBusProperty("Identifier", .string, .string(status.identifier), changeSignal: .const),
            DBusProperty("ServiceUUID", .string, .string(status.serviceUUID), changeSignal: .const),
            DBusProperty("Name", .string, .string(status.name), changeSignal: .const),
            DBusProperty("Adapter", .string, .string(status.adapter), changeSignal: .const),
            DBusProperty("Advertising", .boolean, .boolean(status.advertising)),
            DBusProperty("Discovering", .boolean, .boolean(status.discovering)),
            DBusProperty("ClearInterval", .double, .double(status.clearInterval)) { value in
                guard case .double(let seconds) = value, NodeSettings.clearIntervalRange.contains(seconds) else {
                    throw DBusError(invalidArguments, "ClearInterval must be a number of seconds above 0 and at most 3600")
                }
                try await engine.setClearInterval(seconds)
                return .double(seconds)
            },
            DBusProperty("MeasuredPower", .int16, .int16(status.measuredPower), changeSignal: .const),
        ], signals: [
            DBusSignal("FoundDevices", arguments: [DBusArgument("zones", .dictionary(key: .string, value: .string))]),
        ])
    }

    /// Properties of `org.proximityd.Peer1` only peers of some kinds have: `Major`/`Minor`
    /// (iBeacon, AltBeacon), `Namespace`/`Instance` (Eddystone-UID), `URL` (Eddystone-URL). A
    /// peer's kind never changes, so its set of properties does not either.
    public static let beaconProperties: [(name: String, type: DBusType)] = [
        ("Major", .uint16), ("Minor", .uint16), ("Namespace", .string), ("Instance", .string), ("URL", .string),
    ]

    /// The declaration of `org.proximityd.Peer1`, with the peer's current values. The
    /// kind-specific properties are declared when `values` has them.
    public static func peer1Interface(_ values: [String: DBusValue]) -> DBusInterface {
        func p(_ name: String, _ type: DBusType, _ fallback: DBusValue, const: Bool = false) -> DBusProperty {
            DBusProperty(name, type, values[name] ?? fallback, changeSignal: const ? .const : .emits)
        }
        var properties = [
            p("Identifier", .string, .string(""), const: true),
            p("Kind", .string, .string("node"), const: true),
            p("Address", .string, .string("")),
            p("Name", .string, .string("")),
            p("RSSI", .int16, .int16(0)),
            p("SmoothedRSSI", .double, .double(0)),
            p("MeasuredPower", .int16, .int16(0)),
            p("Distance", .double, .double(0)),
            p("Proximity", .string, .string("unknown")),
            p("FirstSeen", .uint64, .uint64(0), const: true),
            p("LastSeen", .uint64, .uint64(0)),
        ]
        for (name, type) in beaconProperties {
            if let value = values[name] { properties.append(DBusProperty(name, type, value, changeSignal: .const)) }
        }
        return DBusInterface(peer1, properties: properties)
    }
}
