import DBusKit
import ProximityCore

/// An `Alert1` object's properties on the bus: its path, each property's type, lenient decoding
/// (as for ``PeerProperties``), the values and their changes.
extension AlertProperties {
    public var path: ObjectPath { ProximityBus.alertPath(alert: alert, target: target) }

    /// Decodes `Properties.GetAll` values.
    public init(_ values: [String: DBusValue]) {
        func s(_ key: Key) -> String? { Lenient.string(values[key.rawValue]) }
        func b(_ key: Key) -> Bool { Lenient.bool(values[key.rawValue]) ?? false }
        self.init(alert: s(.alert) ?? "", target: s(.target) ?? "")
        title = s(.title) ?? ""
        description = s(.description) ?? ""
        textToSpeech = s(.textToSpeech) ?? ""
        thumbnail = s(.thumbnail) ?? ""
        action = s(.action) ?? ""
        url = s(.url) ?? ""
        uri = s(.uri) ?? ""
        extra = Lenient.stringMap(values[Key.extra.rawValue])
        actionStatus = s(.actionStatus) ?? ""
        conditionValid = b(.conditionValid)
        readyForAction = b(.readyForAction)
        strategy = s(.strategy) ?? ""
        proximity = s(.proximity) ?? Proximity.unknown.rawValue
        detected = b(.detected)
    }

    public var values: [String: DBusValue] {
        Dictionary(uniqueKeysWithValues: Key.allCases.map { ($0.rawValue, value(of: $0)) })
    }

    public func value(of key: Key) -> DBusValue {
        switch key {
        case .alert: .string(alert)
        case .target: .string(target)
        case .title: .string(title)
        case .description: .string(description)
        case .textToSpeech: .string(textToSpeech)
        case .thumbnail: .string(thumbnail)
        case .action: .string(action)
        case .url: .string(url)
        case .uri: .string(uri)
        case .extra: .stringMap(extra)
        case .actionStatus: .string(actionStatus)
        case .conditionValid: .boolean(conditionValid)
        case .readyForAction: .boolean(readyForAction)
        case .strategy: .string(strategy)
        case .proximity: .string(proximity)
        case .detected: .boolean(detected)
        }
    }

    /// The changed properties from `old` to `self`.
    public func changes(since old: AlertProperties) -> [String: DBusValue] {
        var out: [String: DBusValue] = [:]
        for key in Key.allCases where !key.descriptor.isConst && value(of: key) != old.value(of: key) {
            out[key.rawValue] = value(of: key)
        }
        return out
    }

    /// `AlertReady`'s `a{sv}`: the content (`Title` … `Extra`), then `Alert`, `Target`,
    /// `Proximity` and `Distance` (metres).
    public func offer(distance: Double) -> [String: DBusValue] {
        var out: [String: DBusValue] = [:]
        for key in [Key.alert, .target, .title, .description, .textToSpeech, .thumbnail, .action, .url, .uri, .extra, .proximity] {
            out[key.rawValue] = value(of: key)
        }
        out["Distance"] = .double(distance.isFinite ? distance : -1)
        return out
    }
}

extension AlertProperties.Key {
    public var descriptor: PropertyDescriptor {
        switch self {
        case .alert, .target: PropertyDescriptor(rawValue, .string, const: true)
        case .extra: PropertyDescriptor(rawValue, .dictionary(key: .string, value: .string))
        case .conditionValid, .readyForAction, .detected: PropertyDescriptor(rawValue, .boolean)
        default: PropertyDescriptor(rawValue, .string)
        }
    }
}

/// An alert on the bus: `AddAlert`'s `a{sv}` and `GetDefinitions`' values.
extension Alert {
    /// Text as `s`, seconds as `d`, `CapCount` as `u`, `Extra` as `a{ss}`, `Match` as the
    /// matcher's `a{sv}`.
    public var busValues: [String: DBusValue] {
        var out: [String: DBusValue] = [:]
        for (key, value) in parts {
            switch value {
            case .text(let s): out[key.busName] = .string(s)
            case .number(let d): out[key.busName] = .double(d)
            case .integer(let n): out[key.busName] = .uint32(UInt32(clamping: n))
            case .map(let m): out[key.busName] = .stringMap(m)
            case .matcher: out[key.busName] = .variantMap(targets.busValues)
            }
        }
        return out
    }

    /// Reads a client's `a{sv}`. Any integer type is taken where an integer or seconds are
    /// expected; an unknown key or a wrongly typed value is refused, naming it.
    public init(identifier: String, busValues: [String: DBusValue]) throws(AlertBusError) {
        var parts: [(Key, Value)] = []
        for (name, raw) in busValues.sorted(by: { $0.key < $1.key }) {
            guard let key = Key(rawValue: name) else { throw .unknownKey(name) }
            let value = raw.unwrapped
            switch (key, value) {
            case (.match, _):
                guard let entries = value.dictEntries, value.type == .dictionary(key: .string, value: .variant) else {
                    throw .definition(AlertDefinitionError(key, "must be a{sv} (a matcher), not the D-Bus type '\(value.type)'"))
                }
                var matcher: [String: DBusValue] = [:]
                for entry in entries {
                    let name = entry.key.string ?? ""
                    guard matcher.updateValue(entry.value, forKey: name) == nil else {
                        throw .definition(AlertDefinitionError(key, "\(name.debugDescription) is given twice"))
                    }
                }
                do { _ = try RegionMatcher(busValues: matcher) } catch {
                    switch error {
                    case .matcher(let problem): throw .definition(AlertDefinitionError(key, "\(problem)"))
                    case .unknownKey: throw .definition(AlertDefinitionError(key, "has an \(error)"))
                    }
                }
                var matcherParts: [String: RegionMatcher.Value] = [:]
                for (k, v) in matcher {
                    switch v.unwrapped {
                    case .string(let s): matcherParts[k] = .text(s)
                    case .double(let d): matcherParts[k] = .number(d)
                    case .boolean(let b): matcherParts[k] = .boolean(b)
                    case let n: matcherParts[k] = .integer(n.integer ?? Int64.max)
                    }
                }
                parts.append((key, .matcher(matcherParts)))
            case (.extra, _):
                guard value.type == .dictionary(key: .string, value: .string), let entries = value.dictEntries else {
                    throw .definition(AlertDefinitionError(key, "must be a{ss}, not the D-Bus type '\(value.type)'"))
                }
                var map: [String: String] = [:]
                for entry in entries {
                    let name = entry.key.string ?? ""
                    guard map.updateValue(entry.value.string ?? "", forKey: name) == nil else {
                        throw .definition(AlertDefinitionError(key, "\(name.debugDescription) is given twice"))
                    }
                }
                parts.append((key, .map(map)))
            case (_, .string(let s)): parts.append((key, .text(s)))
            case (_, .double(let d)): parts.append((key, .number(d)))
            case (_, .byte), (_, .int16), (_, .uint16), (_, .int32), (_, .uint32), (_, .int64):
                parts.append((key, .integer(value.integer!)))
            case (_, .uint64(let u)): parts.append((key, .integer(Int64(clamping: u))))
            default:
                throw .definition(AlertDefinitionError(key, "must be \(key.expected), not the D-Bus type '\(value.type)'"))
            }
        }
        do { self = try Alert.parse(identifier: identifier, parts) } catch { throw .definition(error) }
    }
}

/// Why an alert from the bus is refused.
public enum AlertBusError: Error, Sendable, Hashable, CustomStringConvertible {
    case unknownKey(String)
    case definition(AlertDefinitionError)

    public var description: String {
        switch self {
        case .unknownKey(let name):
            "unknown alert key \(name.debugDescription) (known: \(Alert.Key.allCases.map(\.busName).joined(separator: ", ")))"
        case .definition(let error): "\(error)"
        }
    }
}
