import DBusKit
import Foundation

/// The properties of `org.proximityd.Node1`, typed (`dbus/org.proximityd.Node1.xml`,
/// `docs/dbus-api.md`): the one place their names and types are spelt, for the daemon and its
/// clients alike.
///
/// Decoding is lenient (the values come from another process): a missing or wrongly typed
/// property reads as empty, `false` or 0.
public struct NodeProperties: Sendable, Hashable {
    /// This node's specific UUID, lowercase.
    public var identifier: String
    /// The general service UUID of the deployment, lowercase.
    public var serviceUUID: String
    /// The node's human-readable name.
    public var name: String
    /// The BlueZ adapter the node uses (`hci0`).
    public var adapter: String
    /// Its advertisement is registered with BlueZ.
    public var advertising: Bool
    /// It scans for peers.
    public var discovering: Bool
    /// How its link with the radio is: `ok`, `recovering` (a lost adapter or bluetoothd, or a
    /// scanner gone deaf, being recovered) or `failed` (the recovery did not help; it tries again
    /// later).
    public var health: String
    /// Why, when not `ok` (empty then).
    public var healthDetail: String
    /// Seconds a peer may stay silent before it is dropped (writable: ``NodeProxy/setClearInterval(_:)``).
    public var clearInterval: Double
    /// This node's RSSI at 1 m, dBm (advertised to peers).
    public var measuredPower: Int16
    /// n of the node's log-distance model.
    public var pathLossExponent: Double
    /// dB added to every RSSI sample the node receives, before ranging.
    public var rssiOffset: Double
    /// Where its zones end, metres: `immediate` and `near` (far beyond).
    public var zoneDistances: [String: Double]
    /// Peer identifier → display name: the config file's `names:` and those given with
    /// `SetPeerName` (``NodeProxy/setPeerName(_:for:)``).
    public var peerNames: [String: String]
    /// The IRKs the node recognises devices by, name → where it was given: `config` (the config
    /// file's `irks:`) or `bus` (``NodeProxy/addIRK(_:key:)``). Never the keys themselves.
    public var irks: [String: String]

    public init(identifier: String, serviceUUID: String = ProximityBus.defaultServiceUUID.uuidString.lowercased(),
                name: String, adapter: String = "hci0", advertising: Bool = false, discovering: Bool = false,
                health: String = "ok", healthDetail: String = "", clearInterval: Double = 10, measuredPower: Int16 = -59,
                pathLossExponent: Double = 2, rssiOffset: Double = 0,
                zoneDistances: [String: Double] = ["immediate": 0.5, "near": 3.0], peerNames: [String: String] = [:],
                irks: [String: String] = [:]) {
        self.identifier = identifier
        self.serviceUUID = serviceUUID
        self.name = name
        self.adapter = adapter
        self.advertising = advertising
        self.discovering = discovering
        self.health = health
        self.healthDetail = healthDetail
        self.clearInterval = clearInterval
        self.measuredPower = measuredPower
        self.pathLossExponent = pathLossExponent
        self.rssiOffset = rssiOffset
        self.zoneDistances = zoneDistances
        self.peerNames = peerNames
        self.irks = irks
    }

    /// The properties, in the order of the interface's declaration.
    public enum Key: String, Sendable, CaseIterable {
        case identifier = "Identifier"
        case serviceUUID = "ServiceUUID"
        case name = "Name"
        case adapter = "Adapter"
        case advertising = "Advertising"
        case discovering = "Discovering"
        case health = "Health"
        case healthDetail = "HealthDetail"
        case clearInterval = "ClearInterval"
        case measuredPower = "MeasuredPower"
        case pathLossExponent = "PathLossExponent"
        case rssiOffset = "RSSIOffset"
        case zoneDistances = "ZoneDistances"
        case peerNames = "PeerNames"
        case irks = "IRKs"

        public var descriptor: PropertyDescriptor {
            switch self {
            case .identifier, .serviceUUID, .name, .adapter: PropertyDescriptor(rawValue, .string, const: true)
            case .advertising, .discovering: PropertyDescriptor(rawValue, .boolean)
            case .health, .healthDetail: PropertyDescriptor(rawValue, .string)
            case .clearInterval: PropertyDescriptor(rawValue, .double, writable: true)
            case .measuredPower: PropertyDescriptor(rawValue, .int16, const: true)
            case .pathLossExponent: PropertyDescriptor(rawValue, .double, const: true)
            case .rssiOffset: PropertyDescriptor(rawValue, .double)
            case .zoneDistances: PropertyDescriptor(rawValue, .dictionary(key: .string, value: .double))
            case .peerNames, .irks: PropertyDescriptor(rawValue, .dictionary(key: .string, value: .string))
            }
        }
    }

    /// Decodes `Properties.GetAll` values.
    public init(_ values: [String: DBusValue]) {
        func v(_ key: Key) -> DBusValue? { values[key.rawValue] }
        identifier = Lenient.string(v(.identifier)) ?? ""
        serviceUUID = Lenient.string(v(.serviceUUID)) ?? ""
        name = Lenient.string(v(.name)) ?? ""
        adapter = Lenient.string(v(.adapter)) ?? ""
        advertising = Lenient.bool(v(.advertising)) ?? false
        discovering = Lenient.bool(v(.discovering)) ?? false
        health = Lenient.string(v(.health)) ?? ""
        healthDetail = Lenient.string(v(.healthDetail)) ?? ""
        clearInterval = Lenient.double(v(.clearInterval)) ?? 0
        measuredPower = Lenient.integer(v(.measuredPower)) ?? 0
        pathLossExponent = Lenient.double(v(.pathLossExponent)) ?? 0
        rssiOffset = Lenient.double(v(.rssiOffset)) ?? 0
        var zones: [String: Double] = [:]
        for entry in v(.zoneDistances)?.unwrapped.dictEntries ?? [] {
            if let key = entry.key.string, let metres = Lenient.double(entry.value) { zones[key] = metres }
        }
        zoneDistances = zones
        peerNames = Lenient.stringMap(v(.peerNames))
        irks = Lenient.stringMap(v(.irks))
    }

    /// Every property with exactly the type `dbus/org.proximityd.Node1.xml` declares.
    public var values: [String: DBusValue] {
        Dictionary(uniqueKeysWithValues: Key.allCases.map { ($0.rawValue, value(of: $0)) })
    }

    public func value(of key: Key) -> DBusValue {
        switch key {
        case .identifier: .string(identifier)
        case .serviceUUID: .string(serviceUUID)
        case .name: .string(name)
        case .adapter: .string(adapter)
        case .advertising: .boolean(advertising)
        case .discovering: .boolean(discovering)
        case .health: .string(health)
        case .healthDetail: .string(healthDetail)
        case .clearInterval: .double(clearInterval)
        case .measuredPower: .int16(measuredPower)
        case .pathLossExponent: .double(pathLossExponent)
        case .rssiOffset: .double(rssiOffset)
        case .zoneDistances: Self.zoneDistances(zoneDistances)
        case .peerNames: .stringMap(peerNames)
        case .irks: .stringMap(irks)
        }
    }

    /// `ZoneDistances`' value: `immediate` and `near`, metres.
    public static func zoneDistances(immediate: Double, near: Double) -> DBusValue {
        zoneDistances(["immediate": immediate, "near": near])
    }

    static func zoneDistances(_ zones: [String: Double]) -> DBusValue {
        .dictionary(key: .string, value: .double, zones.sorted { $0.key < $1.key }.map { .init(.string($0.key), .double($0.value)) })
    }
}
