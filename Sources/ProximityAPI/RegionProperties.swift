import DBusKit
import ProximityCore

/// The properties of one `org.proximityd.Region1` object, typed (`dbus/org.proximityd.Region1.xml`,
/// `docs/dbus-api.md`): the one place their names and types are spelt, for the daemon and its
/// clients alike. Decoding is lenient, as for ``PeerProperties``.
public struct RegionProperties: Sendable, Hashable {
    /// The region's identifier, as given to `StartMonitoring` or in the config file.
    public var identifier: String
    /// The matcher, `a{sv}` with the keys `StartMonitoring` takes (only those given).
    public var matcher: [String: DBusValue]
    /// `inside`, `outside` or `unknown`.
    public var state: String
    /// The identifiers of the peers present in the region, sorted.
    public var peers: [String]
    /// `config` or `bus`: where it was defined.
    public var source: String

    public init(identifier: String, matcher: [String: DBusValue] = [:], state: String = "unknown", peers: [String] = [],
                source: String = "bus") {
        self.identifier = identifier
        self.matcher = matcher
        self.state = state
        self.peers = peers
        self.source = source
    }

    /// The object path.
    public var path: ObjectPath { ProximityBus.regionPath(identifier) }

    public enum Key: String, Sendable, CaseIterable {
        case identifier = "Identifier"
        case matcher = "Matcher"
        case state = "State"
        case peers = "Peers"
        case source = "Source"

        public var descriptor: PropertyDescriptor {
            switch self {
            case .identifier: PropertyDescriptor(rawValue, .string, const: true)
            case .matcher: PropertyDescriptor(rawValue, .dictionary(key: .string, value: .variant))
            case .state, .source: PropertyDescriptor(rawValue, .string)
            case .peers: PropertyDescriptor(rawValue, .array(.string))
            }
        }
    }

    /// Decodes `Properties.GetAll` values.
    public init(_ values: [String: DBusValue]) {
        func v(_ key: Key) -> DBusValue? { values[key.rawValue] }
        identifier = Lenient.string(v(.identifier)) ?? ""
        matcher = Lenient.properties(v(.matcher))
        state = Lenient.string(v(.state)) ?? "unknown"
        peers = (v(.peers)?.unwrapped.arrayElements ?? []).compactMap(\.string)
        source = Lenient.string(v(.source)) ?? ""
    }

    /// Every property with exactly the declared type.
    public var values: [String: DBusValue] {
        Dictionary(uniqueKeysWithValues: Key.allCases.map { ($0.rawValue, value(of: $0)) })
    }

    public func value(of key: Key) -> DBusValue {
        switch key {
        case .identifier: .string(identifier)
        case .matcher: .dictionary(key: .string, value: .variant,
                                   matcher.sorted { $0.key < $1.key }.map { DBusValue.DictEntry(.string($0.key), .variant($0.value)) })
        case .state: .string(state)
        case .peers: .array(element: .string, peers.map { .string($0) })
        case .source: .string(source)
        }
    }

    /// The changed properties from `old` to `self`.
    public func changes(since old: RegionProperties) -> [String: DBusValue] {
        var out: [String: DBusValue] = [:]
        for key in Key.allCases where !key.descriptor.isConst && value(of: key) != old.value(of: key) {
            out[key.rawValue] = value(of: key)
        }
        return out
    }
}

/// A matcher on the bus: `StartMonitoring`'s `a{sv}` and `Region1.Matcher`.
extension RegionMatcher {
    /// The matcher as `a{sv}` entries: text as `s`, `Major`/`Minor`/`ID2`/`ID3` as `q`,
    /// `ExitPeriod` as `d`, `Verified` as `b`.
    public var busValues: [String: DBusValue] {
        var out: [String: DBusValue] = [:]
        for (key, value) in parts {
            switch value {
            case .text(let s): out[key.busName] = .string(s)
            case .integer(let n): out[key.busName] = .uint16(UInt16(clamping: n))
            case .number(let d): out[key.busName] = .double(d)
            case .boolean(let b): out[key.busName] = .boolean(b)
            }
        }
        return out
    }

    /// Reads a client's `a{sv}`. Any integer type is taken where an integer is expected, and
    /// where seconds are; an unknown key or a wrongly typed value is refused, naming it.
    public init(busValues: [String: DBusValue]) throws(MatcherBusError) {
        var parts: [(Key, Value)] = []
        for (name, raw) in busValues.sorted(by: { $0.key < $1.key }) {
            guard let key = Key(rawValue: name) else {
                throw .unknownKey(name)
            }
            let value = raw.unwrapped
            switch value {
            case .string(let s): parts.append((key, .text(s)))
            case .double(let d): parts.append((key, .number(d)))
            case .boolean(let b): parts.append((key, .boolean(b)))
            case .byte, .int16, .uint16, .int32, .uint32, .int64: parts.append((key, .integer(value.integer!)))
            case .uint64(let u):
                parts.append((key, .integer(Int64(clamping: u))))
            default:
                throw .matcher(MatcherError(key, "must be \(key.valueType.description), not the D-Bus type '\(value.type)'"))
            }
        }
        do { self = try RegionMatcher.parse(parts) } catch { throw .matcher(error) }
    }
}

/// Why a matcher from the bus is refused.
public enum MatcherBusError: Error, Sendable, Hashable, CustomStringConvertible {
    case unknownKey(String)
    case matcher(MatcherError)

    public var description: String {
        switch self {
        case .unknownKey(let name):
            "unknown matcher key \(name.debugDescription) (known: \(RegionMatcher.Key.allCases.map(\.busName).joined(separator: ", ")))"
        case .matcher(let error): "matcher: \(error)"
        }
    }
}
