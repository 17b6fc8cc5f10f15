import Foundation

/// A rule as a client writes it: the same tree in the config file (an item of `rules:`), on the
/// bus (`AddRule`'s JSON) and in the state directory.
///
/// ```yaml
/// on: [tracking]                       # profile, tracking, region, alert (default: all)
/// when:                                # a test, or a group: all: […] / any: […], nested
///   all:
///     - {key: a.beacon.major, op: eq, value: "12"}
///     - {key: a.beacon.prox, op: within, value: near}   # near or immediate, not unknown
/// do:                                  # one or more actions
///   - signal: {major: "{%a.beacon.major%}"}
///   - set: {a.visited: "yes"}
///   - remove: [a.coupon]
///   - offer-alert: lighthouse
///   - log: {note: "near major {%a.beacon.major%}"}
/// frequency: once                      # always (default), once, cooldown
/// cooldown: 60                         # seconds, with frequency: cooldown
/// ```
public indirect enum RuleValue: Sendable, Hashable, Codable {
    case text(String)
    case number(Double)
    case bool(Bool)
    case list([RuleValue])
    /// Entries in the order written.
    case map([String: RuleValue], order: [String])

    public static func map(_ entries: [(String, RuleValue)]) -> RuleValue {
        .map(Dictionary(entries) { a, _ in a }, order: entries.map(\.0))
    }

    public var summary: String {
        switch self {
        case .text(let s): "the string \(s.debugDescription)"
        case .number(let d): "the number \(d)"
        case .bool(let b): "the boolean \(b)"
        case .list: "a list"
        case .map: "a mapping"
        }
    }

    /// A scalar as text (numbers without a needless `.0`).
    public var scalarText: String? {
        switch self {
        case .text(let s): s
        case .number(let d): d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
        case .bool(let b): String(b)
        default: nil
        }
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let d = try? c.decode(Double.self) { self = .number(d) }
        else if let s = try? c.decode(String.self) { self = .text(s) }
        else if let l = try? c.decode([RuleValue].self) { self = .list(l) }
        else {
            let m = try c.decode([String: RuleValue].self)
            self = .map(m, order: m.keys.sorted())
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .text(let s): try c.encode(s)
        case .number(let d): try c.encode(d)
        case .bool(let b): try c.encode(b)
        case .list(let l): try c.encode(l)
        case .map(let m, _): try c.encode(m)
        }
    }

    /// From JSON text (the bus's form).
    public static func json(_ text: String) throws(RuleDefinitionError) -> RuleValue {
        do { return try JSONDecoder().decode(RuleValue.self, from: Data(text.utf8)) } catch {
            var reason = "\(error)"
            if case DecodingError.dataCorrupted(let context) = error {
                reason = (context.underlyingError as NSError?)?.userInfo[NSDebugDescriptionErrorKey] as? String ?? context.debugDescription
            }
            throw RuleDefinitionError([], "is not valid JSON (\(reason))")
        }
    }

    /// As compact JSON with sorted keys.
    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).flatMap { String(data: $0, encoding: .utf8) } ?? "null"
    }
}

/// Why a rule cannot be: where (`when.all[1].op`), and the problem.
public struct RuleDefinitionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Keys and list indices from the rule's root.
    public var path: [String]
    public var problem: String
    public init(_ path: [String], _ problem: String) {
        self.path = path
        self.problem = problem
    }
    /// `when.all[1].op`.
    public var location: String {
        var out = ""
        for part in path {
            if part.first == "[" { out += part } else { out += out.isEmpty ? part : "." + part }
        }
        return out
    }
    public var description: String { location.isEmpty ? problem : "\(location): \(problem)" }
}

extension Rule {
    public static let keys = ["on", "when", "do", "frequency", "cooldown"]
    public static let actionKeys = ["signal", "set", "remove", "offer-alert", "log"]
    /// The deepest nesting of groups.
    public static let maxDepth = 16

    /// Builds a rule from its tree, checking everything; throws the first problem with its path.
    public static func parse(identifier: String, _ value: RuleValue) throws(RuleDefinitionError) -> Rule {
        if let problem = problem(identifier: identifier) { throw RuleDefinitionError(["identifier"], problem) }
        guard case .map(let entries, let order) = value else {
            throw RuleDefinitionError([], "a rule must be a mapping of \(keys.joined(separator: ", ")), not \(value.summary)")
        }
        for key in order where !keys.contains(key) && key != "identifier" {
            throw RuleDefinitionError([key], "unknown key (known: \(keys.joined(separator: ", ")))")
        }
        var triggers = Set(RuleTrigger.allCases)
        if let on = entries["on"] {
            let items: [RuleValue]
            switch on {
            case .list(let l): items = l
            case .text: items = [on]
            default: throw RuleDefinitionError(["on"], "must be a trigger or a list of triggers, not \(on.summary)")
            }
            triggers = []
            for (i, item) in items.enumerated() {
                guard case .text(let s) = item, let trigger = RuleTrigger(rawValue: s) else {
                    throw RuleDefinitionError(["on", "[\(i)]"],
                        "must be one of \(RuleTrigger.allCases.map(\.rawValue).joined(separator: ", ")), not \(item.summary)")
                }
                triggers.insert(trigger)
            }
            if triggers.isEmpty { throw RuleDefinitionError(["on"], "is empty: name at least one trigger") }
        }
        guard let when = entries["when"] else { throw RuleDefinitionError([], "a rule needs when: (its condition)") }
        let condition = try parseCondition(when, path: ["when"], depth: 0)
        guard let actionsValue = entries["do"] else { throw RuleDefinitionError([], "a rule needs do: (its actions)") }
        let actions = try parseActions(actionsValue)
        var frequency = RuleFrequency.always
        let cooldown: Double?
        switch entries["cooldown"] {
        case nil: cooldown = nil
        case .number(let d)? where d > 0 && d <= 2_592_000: cooldown = d
        case let other?:
            throw RuleDefinitionError(["cooldown"], "must be a number of seconds from 0 (excluded) to 2592000, not \(other.summary)")
        }
        if let f = entries["frequency"] {
            switch f {
            case .text("always"): frequency = .always
            case .text("once"): frequency = .once
            case .text("cooldown"):
                guard let cooldown else { throw RuleDefinitionError(["frequency"], "cooldown needs cooldown: SECONDS") }
                frequency = .cooldown(cooldown)
            default: throw RuleDefinitionError(["frequency"], "must be always, once or cooldown, not \(f.summary)")
            }
        }
        if cooldown != nil, case .cooldown = frequency {} else if cooldown != nil {
            throw RuleDefinitionError(["cooldown"], "goes with frequency: cooldown")
        }
        return Rule(identifier: identifier, triggers: triggers, condition: condition, actions: actions, frequency: frequency)
    }

    static func parseCondition(_ value: RuleValue, path: [String], depth: Int) throws(RuleDefinitionError) -> RuleCondition {
        guard depth <= maxDepth else { throw RuleDefinitionError(path, "groups are nested deeper than \(maxDepth)") }
        guard case .map(let entries, let order) = value else {
            throw RuleDefinitionError(path, "must be a test {key, op, value(s)} or a group {all: […]} / {any: […]}, not \(value.summary)")
        }
        if order.contains("all") || order.contains("any") {
            guard order.count == 1 else { throw RuleDefinitionError(path, "a group has one key, all or any, and nothing else") }
            let name = order[0]
            guard case .list(let items) = entries[name]!, !items.isEmpty else {
                throw RuleDefinitionError(path + [name], "must be a non-empty list of conditions")
            }
            var conditions: [RuleCondition] = []
            for (i, item) in items.enumerated() {
                conditions.append(try parseCondition(item, path: path + [name, "[\(i)]"], depth: depth + 1))
            }
            return name == "all" ? .all(conditions) : .any(conditions)
        }
        for key in order where !["key", "op", "value", "values"].contains(key) {
            throw RuleDefinitionError(path + [key], "unknown key in a test (known: key, op, value, values; or all, any for a group)")
        }
        guard case .text(let key)? = entries["key"], !key.isEmpty else {
            throw RuleDefinitionError(path + ["key"], "a test needs key: (a profile attribute, or event.<field>)")
        }
        if let problem = Profile.problem(key: key) { throw RuleDefinitionError(path + ["key"], problem) }
        guard case .text(let opText)? = entries["op"], let op = RuleOperator(rawValue: opText) else {
            throw RuleDefinitionError(path + ["op"], "must be one of " +
                "\(RuleOperator.allCases.map(\.rawValue).joined(separator: ", "))\(entries["op"].map { ", not \($0.summary)" } ?? "")")
        }
        var values: [String] = []
        if entries["value"] != nil && entries["values"] != nil { throw RuleDefinitionError(path, "give value or values, not both") }
        if let v = entries["value"] {
            guard let text = v.scalarText else {
                throw RuleDefinitionError(path + ["value"], "must be a string, a number or a boolean, not \(v.summary)")
            }
            values = [text]
        } else if let v = entries["values"] {
            guard case .list(let items) = v else { throw RuleDefinitionError(path + ["values"], "must be a list, not \(v.summary)") }
            for (i, item) in items.enumerated() {
                guard let text = item.scalarText else {
                    throw RuleDefinitionError(path + ["values", "[\(i)]"], "must be a string, a number or a boolean, not \(item.summary)")
                }
                values.append(text)
            }
        }
        if op.takesValues, values.isEmpty { throw RuleDefinitionError(path, "\(op.rawValue) needs value: or values:") }
        if !op.takesValues, !values.isEmpty { throw RuleDefinitionError(path, "\(op.rawValue) takes no value") }
        if [.gt, .ge, .lt, .le].contains(op), let bad = values.first(where: { RuleOperator.number($0) == nil }) {
            let hint = Proximity(rawValue: bad).map { _ in " (for a zone or nearer, and known, write op: within, value: \(bad))" } ?? ""
            throw RuleDefinitionError(path, "\(op.rawValue) compares numbers: \(bad.debugDescription) is not a number\(hint)")
        }
        if op == .within, let bad = values.first(where: { Proximity(rawValue: $0) == nil || $0 == Proximity.unknown.rawValue }) {
            throw RuleDefinitionError(path, "within takes a zone, immediate, near or far, not \(bad.debugDescription)")
        }
        return .test(key: key, op: op, values: values)
    }

    static func parseActions(_ value: RuleValue) throws(RuleDefinitionError) -> [RuleAction] {
        guard case .list(let items) = value, !items.isEmpty else {
            throw RuleDefinitionError(["do"], "must be a non-empty list of actions")
        }
        var actions: [RuleAction] = []
        for (i, item) in items.enumerated() {
            let path = ["do", "[\(i)]"]
            guard case .map(let entries, let order) = item, order.count == 1, let name = order.first else {
                throw RuleDefinitionError(path, "an action is a mapping with one key: \(actionKeys.joined(separator: ", "))")
            }
            let body = entries[name]!
            func texts() throws(RuleDefinitionError) -> [String: String] {
                guard case .map(let m, let keys) = body else {
                    throw RuleDefinitionError(path + [name], "must be a mapping of names to text, not \(body.summary)")
                }
                var out: [String: String] = [:]
                for k in keys {
                    guard let text = m[k]!.scalarText else {
                        throw RuleDefinitionError(path + [name, k], "must be text, not \(m[k]!.summary)")
                    }
                    out[k] = text
                }
                return out
            }
            switch name {
            case "signal": actions.append(.signal(try texts()))
            case "log": actions.append(.log(try texts()))
            case "set":
                let values = try texts()
                for (k, v) in values {
                    if let problem = Profile.problem(key: k) { throw RuleDefinitionError(path + [name, k], problem) }
                    if let problem = Profile.problem(value: v) { throw RuleDefinitionError(path + [name, k], problem) }
                }
                actions.append(.set(values))
            case "remove":
                let keys: [RuleValue]
                switch body {
                case .list(let l): keys = l
                case .text: keys = [body]
                default: throw RuleDefinitionError(path + [name], "must be a key or a list of keys, not \(body.summary)")
                }
                var out: [String] = []
                for (j, k) in keys.enumerated() {
                    guard case .text(let s) = k, Profile.problem(key: s) == nil else {
                        throw RuleDefinitionError(path + [name, "[\(j)]"], "must be an attribute key, not \(k.summary)")
                    }
                    out.append(s)
                }
                actions.append(.remove(out))
            case "offer-alert":
                guard case .text(let id) = body, Alert.problem(identifier: id) == nil else {
                    throw RuleDefinitionError(path + [name], "must be an alert identifier, not \(body.summary)")
                }
                actions.append(.offerAlert(id))
            default:
                throw RuleDefinitionError(path + [name], "unknown action (known: \(actionKeys.joined(separator: ", ")))")
            }
        }
        return actions
    }

    /// The rule's tree, as ``parse(identifier:_:)`` reads it back.
    public var definition: RuleValue {
        var entries: [(String, RuleValue)] = []
        if triggers != Set(RuleTrigger.allCases) { entries.append(("on", .list(triggers.sorted().map { .text($0.rawValue) }))) }
        entries.append(("when", Self.tree(condition)))
        entries.append(("do", .list(actions.map(Self.tree))))
        switch frequency {
        case .always: break
        case .once: entries.append(("frequency", .text("once")))
        case .cooldown(let s):
            entries.append(("frequency", .text("cooldown")))
            entries.append(("cooldown", .number(s)))
        }
        return .map(entries)
    }

    static func tree(_ condition: RuleCondition) -> RuleValue {
        switch condition {
        case .test(let key, let op, let values):
            var entries: [(String, RuleValue)] = [("key", .text(key)), ("op", .text(op.rawValue))]
            if op.takesValues { entries.append(("values", .list(values.map { .text($0) }))) }
            return .map(entries)
        case .all(let c): return .map([("all", .list(c.map(tree)))])
        case .any(let c): return .map([("any", .list(c.map(tree)))])
        }
    }

    static func tree(_ action: RuleAction) -> RuleValue {
        func m(_ d: [String: String]) -> RuleValue { .map(d.sorted { $0.key < $1.key }.map { ($0.key, RuleValue.text($0.value)) }) }
        switch action {
        case .signal(let d): return .map([("signal", m(d))])
        case .set(let d): return .map([("set", m(d))])
        case .log(let d): return .map([("log", m(d))])
        case .remove(let keys): return .map([("remove", .list(keys.map { .text($0) }))])
        case .offerAlert(let id): return .map([("offer-alert", .text(id))])
        }
    }
}
