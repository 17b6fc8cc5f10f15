import Foundation
import ProximityCore

/// An alert's parts as `proximityctl alerts add` reads them: options (`--range near`,
/// `--match-uuid …`) and a JSON object of `AddAlert`'s keys (`--json FILE`). Each value is typed
/// by its key, and the parts are checked by ``Alert/parse(identifier:_:)``, as the node checks
/// them: a mistake reads the same whichever side refuses it (`Range must be one of immediate,
/// near, far, not "nearby"`).
enum AlertDefinitionText {
    /// A part given on the command line as text, typed by its key: seconds for
    /// `MaxTimeBeforeReset`, `Cooldown` and `CapWindow`, an integer for `CapCount`, text otherwise.
    static func value(_ key: Alert.Key, _ text: String) throws(AlertDefinitionError) -> Alert.Value {
        switch key {
        case .maxTimeBeforeReset, .cooldown, .capWindow:
            guard let seconds = Double(text) else {
                throw AlertDefinitionError(key, "must be \(key.expected), not \(text.debugDescription)")
            }
            return .number(seconds)
        case .capCount:
            guard let count = Int64(text) else { throw AlertDefinitionError(key, "must be \(key.expected), not \(text.debugDescription)") }
            return .integer(count)
        default:
            return .text(text)
        }
    }

    /// `--extra KEY=VALUE` arguments: the extra fields.
    static func extra(_ arguments: [String]) throws(AlertDefinitionError) -> [String: String] {
        var fields: [String: String] = [:]
        for argument in arguments {
            guard let equals = argument.firstIndex(of: "="), equals != argument.startIndex else {
                throw AlertDefinitionError(.extra, "\(argument.debugDescription) is not KEY=VALUE")
            }
            let name = String(argument[..<equals])
            guard fields.updateValue(String(argument[argument.index(after: equals)...]), forKey: name) == nil else {
                throw AlertDefinitionError(.extra, "\(name.debugDescription) is given twice")
            }
        }
        return fields
    }

    /// A matcher part given on the command line as text, typed by its key (``RegionText/value(_:_:)``).
    static func matcherValue(_ key: RegionMatcher.Key, _ text: String) throws(AlertDefinitionError) -> RegionMatcher.Value {
        do { return try RegionText.value(key, text) } catch { throw AlertDefinitionError(.match, "\(error)") }
    }

    /// The alert part a key names: its bus name (`MaxTimeBeforeReset`) or its config name
    /// (`max-time-before-reset`), in any case.
    static func key(named name: String) -> Alert.Key? {
        let lower = name.lowercased()
        return Alert.Key.allCases.first { $0.busName.lowercased() == lower || $0.configName == lower }
    }

    /// Why a JSON definition cannot be read: the text, or the parts it names.
    struct JSONError: Error, CustomStringConvertible {
        var description: String
    }

    /// A JSON object of `AddAlert`'s keys (bus or config names), as `alerts list --json` shows an
    /// alert's `definition`: strings, numbers, `Extra` an object of strings, `Match` an object of
    /// the matcher's parts.
    static func parts(json data: Data) throws -> [(Alert.Key, Alert.Value)] {
        let object: [String: JSONPart]
        do { object = try JSONDecoder().decode([String: JSONPart].self, from: data) } catch {
            throw JSONError(description: "not a JSON object of alert parts (\(jsonProblem(error)))")
        }
        var out: [(Alert.Key, Alert.Value)] = []
        for (name, part) in object.sorted(by: { $0.key < $1.key }) {
            guard let key = key(named: name) else {
                throw JSONError(description: "unknown alert key \(name.debugDescription) " +
                    "(known: \(Alert.Key.allCases.map(\.busName).joined(separator: ", ")))")
            }
            out.append((key, try value(key, part)))
        }
        return out
    }

    private static func value(_ key: Alert.Key, _ part: JSONPart) throws(AlertDefinitionError) -> Alert.Value {
        switch (key, part) {
        case (.match, .object(let entries)):
            var matcher: [String: RegionMatcher.Value] = [:]
            for (name, entry) in entries {
                let busName = RegionText.key(named: name)?.busName ?? name
                let value: RegionMatcher.Value
                switch entry {
                case .string(let s): value = .text(s)
                case .integer(let n): value = .integer(n)
                case .number(let d): value = .number(d)
                case .bool(let b): value = .boolean(b)
                default: throw AlertDefinitionError(key, "\(busName) must be a string, a number or a boolean, not \(entry.summary)")
                }
                guard matcher.updateValue(value, forKey: busName) == nil else {
                    throw AlertDefinitionError(key, "\(busName.debugDescription) is given twice")
                }
            }
            return .matcher(matcher)
        case (.extra, .object(let entries)):
            var fields: [String: String] = [:]
            for (name, entry) in entries {
                guard case .string(let s) = entry else {
                    throw AlertDefinitionError(key, "field \(name.debugDescription) must be a string, not \(entry.summary)")
                }
                fields[name] = s
            }
            return .map(fields)
        case (_, .string(let s)): return .text(s)
        case (_, .integer(let n)): return .integer(n)
        case (_, .number(let d)): return .number(d)
        default: throw AlertDefinitionError(key, "must be \(key.expected), not \(part.summary)")
        }
    }

    private static func jsonProblem(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context):
            context.underlyingError.map { "\($0.localizedDescription)" } ?? context.debugDescription
        case DecodingError.typeMismatch(_, let context): context.debugDescription
        default: "\(error)"
        }
    }

    /// A JSON value, as written.
    enum JSONPart: Decodable {
        case string(String), integer(Int64), number(Double), bool(Bool), object([String: JSONPart]), array, null

        init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if c.decodeNil() { self = .null }
            else if let s = try? c.decode(String.self) { self = .string(s) }
            else if let b = try? c.decode(Bool.self) { self = .bool(b) }
            else if let n = try? c.decode(Int64.self) { self = .integer(n) }
            else if let d = try? c.decode(Double.self) { self = .number(d) }
            else if let o = try? c.decode([String: JSONPart].self) { self = .object(o) }
            else if (try? c.decode([JSONPart].self)) != nil { self = .array }
            else { throw DecodingError.dataCorruptedError(in: c, debugDescription: "not a JSON value") }
        }

        var summary: String {
            switch self {
            case .string(let s): "the string \(s.debugDescription)"
            case .integer(let n): "the integer \(n)"
            case .number(let d): "the number \(d)"
            case .bool(let b): "\(b)"
            case .object: "an object"
            case .array: "an array"
            case .null: "null"
            }
        }
    }
}
