import DBusKit

/// The properties of one `org.proximityd.Peer1` object, typed (`dbus/org.proximityd.Peer1.xml`,
/// `docs/dbus-api.md`).
///
/// This is the one place the Peer1 property names and types are spelt: the daemon must build the
/// values it exports from ``values`` (and the interface from ``interface``), clients decode what
/// they read with ``init(_:)``. Neither writes a property name itself (the daemon's bus exporter
/// makes a `PeerProperties` of each peer it exports; `APIModuleTests` checks this type against
/// `dbus/org.proximityd.Peer1.xml`).
///
/// Decoding is lenient (the values come from another process): a missing or wrongly typed
/// property reads as empty, 0 or `unknown`; an optional beacon property as nil.
public struct PeerProperties: Sendable, Hashable {
    /// A node's identity (its specific UUID), or a beacon's identifier from its frame.
    public var identifier: String
    /// `node`, `ibeacon`, `altbeacon` or `eddystone`.
    public var kind: String
    /// The Bluetooth address the peer was last heard from.
    public var address: String
    /// Its advertised name, "" if none was heard.
    public var name: String
    /// The last RSSI sample, dBm.
    public var rssi: Int16
    /// The filtered RSSI, dBm.
    public var smoothedRSSI: Double
    /// The RSSI at 1 m the distance is computed with, dBm.
    public var measuredPower: Int16
    /// The estimated distance, metres.
    public var distance: Double
    /// The zone: `immediate`, `near`, `far` or `unknown`.
    public var proximity: String
    /// When the peer entered the table, microseconds since the Unix epoch.
    public var firstSeen: UInt64
    /// The last sample, microseconds since the Unix epoch.
    public var lastSeen: UInt64
    /// A node that proved its identity with the fleet's key (docs/security.md); false otherwise.
    public var verified: Bool
    /// iBeacon major, AltBeacon id2. Only on peers of those kinds.
    public var major: UInt16?
    /// iBeacon minor, AltBeacon id3. Only on peers of those kinds.
    public var minor: UInt16?
    /// Eddystone-UID namespace (10 bytes, lowercase hex). Only on those peers.
    public var namespace: String?
    /// Eddystone-UID instance (6 bytes, lowercase hex). Only on those peers.
    public var instance: String?
    /// The decoded URL of an Eddystone-URL beacon. Only on those peers.
    public var url: String?

    public init(identifier: String, kind: String = "node", address: String = "", name: String = "", rssi: Int16 = 0,
                smoothedRSSI: Double = 0, measuredPower: Int16 = 0, distance: Double = 0, proximity: String = "unknown",
                firstSeen: UInt64 = 0, lastSeen: UInt64 = 0, verified: Bool = false, major: UInt16? = nil, minor: UInt16? = nil,
                namespace: String? = nil, instance: String? = nil, url: String? = nil) {
        self.identifier = identifier
        self.kind = kind
        self.address = address
        self.name = name
        self.rssi = rssi
        self.smoothedRSSI = smoothedRSSI
        self.measuredPower = measuredPower
        self.distance = distance
        self.proximity = proximity
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
        self.verified = verified
        self.major = major
        self.minor = minor
        self.namespace = namespace
        self.instance = instance
        self.url = url
    }

    /// The properties, in the order of the interface's declaration. The last five exist only on
    /// peers of the kinds that have them (a peer's kind never changes, so neither does its set).
    public enum Key: String, Sendable, CaseIterable {
        case identifier = "Identifier"
        case kind = "Kind"
        case address = "Address"
        case name = "Name"
        case rssi = "RSSI"
        case smoothedRSSI = "SmoothedRSSI"
        case measuredPower = "MeasuredPower"
        case distance = "Distance"
        case proximity = "Proximity"
        case firstSeen = "FirstSeen"
        case lastSeen = "LastSeen"
        case verified = "Verified"
        case major = "Major"
        case minor = "Minor"
        case namespace = "Namespace"
        case instance = "Instance"
        case url = "URL"

        public var descriptor: PropertyDescriptor {
            switch self {
            case .identifier, .kind: PropertyDescriptor(rawValue, .string, const: true)
            case .address, .name, .proximity: PropertyDescriptor(rawValue, .string)
            case .rssi, .measuredPower: PropertyDescriptor(rawValue, .int16)
            case .smoothedRSSI, .distance: PropertyDescriptor(rawValue, .double)
            case .firstSeen: PropertyDescriptor(rawValue, .uint64, const: true)
            case .lastSeen: PropertyDescriptor(rawValue, .uint64)
            case .verified: PropertyDescriptor(rawValue, .boolean)
            case .major, .minor: PropertyDescriptor(rawValue, .uint16, const: true)
            case .namespace, .instance, .url: PropertyDescriptor(rawValue, .string, const: true)
            }
        }

        /// Present only on peers of some kinds.
        public var isOptional: Bool {
            switch self {
            case .major, .minor, .namespace, .instance, .url: true
            default: false
            }
        }
    }

    /// Decodes `Properties.GetAll`, `InterfacesAdded` or `GetManagedObjects` values.
    public init(_ values: [String: DBusValue]) {
        func v(_ key: Key) -> DBusValue? { values[key.rawValue] }
        identifier = Lenient.string(v(.identifier)) ?? ""
        kind = Lenient.string(v(.kind)) ?? ""
        address = Lenient.string(v(.address)) ?? ""
        name = Lenient.string(v(.name)) ?? ""
        rssi = Lenient.integer(v(.rssi)) ?? 0
        smoothedRSSI = Lenient.double(v(.smoothedRSSI)) ?? 0
        measuredPower = Lenient.integer(v(.measuredPower)) ?? 0
        distance = Lenient.double(v(.distance)) ?? 0
        proximity = Lenient.string(v(.proximity)) ?? "unknown"
        firstSeen = Lenient.integer(v(.firstSeen)) ?? 0
        lastSeen = Lenient.integer(v(.lastSeen)) ?? 0
        verified = v(.verified)?.unwrapped.bool ?? false
        major = Lenient.integer(v(.major))
        minor = Lenient.integer(v(.minor))
        namespace = Lenient.string(v(.namespace))
        instance = Lenient.string(v(.instance))
        url = Lenient.string(v(.url))
    }

    /// Every property with exactly the type `dbus/org.proximityd.Peer1.xml` declares; the optional
    /// beacon properties only when set.
    public var values: [String: DBusValue] {
        var out: [String: DBusValue] = [:]
        for key in Key.allCases {
            if let value = value(of: key) { out[key.rawValue] = value }
        }
        return out
    }

    /// One property's value as exported, nil for an optional property the peer lacks.
    public func value(of key: Key) -> DBusValue? {
        switch key {
        case .identifier: .string(identifier)
        case .kind: .string(kind)
        case .address: .string(address)
        case .name: .string(name)
        case .rssi: .int16(rssi)
        case .smoothedRSSI: .double(smoothedRSSI)
        case .measuredPower: .int16(measuredPower)
        case .distance: .double(distance)
        case .proximity: .string(proximity)
        case .firstSeen: .uint64(firstSeen)
        case .lastSeen: .uint64(lastSeen)
        case .verified: .boolean(verified)
        case .major: major.map { .uint16($0) }
        case .minor: minor.map { .uint16($0) }
        case .namespace: namespace.map { .string($0) }
        case .instance: instance.map { .string($0) }
        case .url: url.map { .string($0) }
        }
    }

    /// The values that differ from `old`'s: what a `PropertiesChanged` for the change carries.
    public func changes(since old: PeerProperties) -> [String: DBusValue] {
        var out: [String: DBusValue] = [:]
        for key in Key.allCases {
            if let value = value(of: key), value != old.value(of: key) { out[key.rawValue] = value }
        }
        return out
    }

    /// Applies a `PropertiesChanged`: the changed values, and the invalidated properties read as
    /// absent.
    public mutating func apply(changed: [String: DBusValue], invalidated: [String] = []) {
        var merged = values
        for (name, value) in changed { merged[name] = value }
        for name in invalidated { merged[name] = nil }
        self = PeerProperties(merged)
    }

    /// The declaration of `org.proximityd.Peer1` holding these values, for the daemon to export:
    /// the properties in declaration order, the optional ones only when set. Its introspection is
    /// `dbus/org.proximityd.Peer1.xml`.
    public var interface: DBusInterface {
        DBusInterface(ProximityBus.Peer1.interface, properties: Key.allCases.compactMap { key in
            value(of: key).map {
                DBusProperty(key.rawValue, key.descriptor.type, $0, changeSignal: key.descriptor.isConst ? .const : .emits)
            }
        })
    }

    /// The object path of this peer.
    public var path: ObjectPath { ProximityBus.peerPath(identifier) }
}
