import Foundation

/// The operators of the seed's rules engine, and `within` for zones.
public enum RuleOperator: String, Sendable, Hashable, CaseIterable, Codable {
    case eq, ne, ex, nx, gt, ge, lt, le, co, nc, sw, ew, within

    /// `ex` and `nx` take no values.
    public var takesValues: Bool { self != .ex && self != .nx }
    /// `ne`, `nc` and `nx` are the negations of `eq`, `co` and `ex`.
    var negated: RuleOperator? {
        switch self {
        case .ne: .eq
        case .nc: .co
        case .nx: .ex
        default: nil
        }
    }

    /// Whether `actual` (nil: the attribute or field is missing) satisfies the operator for one
    /// `expected` value. Numbers compare as numbers when both sides are numbers (`"10" gt "9"`);
    /// `gt`, `ge`, `lt` and `le` hold only between numbers. `eq` compares zones when one side is a
    /// zone's name and the other a zone (`"2" eq "near"`, ``zone(_:)``). `within` holds for a known
    /// zone at `expected` or nearer (`"1" within "near"`), never for unknown (0). A missing value
    /// satisfies nothing (so its negations hold).
    func holds(_ actual: String?, _ expected: String) -> Bool {
        guard let actual else { return false }
        let numbers = Self.number(actual).flatMap { a in Self.number(expected).map { (a, $0) } }
        switch self {
        case .eq:
            if let zones = Self.zonesCompared(actual, expected) { return zones.0 == zones.1 }
            return numbers.map { $0.0 == $0.1 } ?? (actual == expected)
        case .gt: return numbers.map { $0.0 > $0.1 } ?? false
        case .ge: return numbers.map { $0.0 >= $0.1 } ?? false
        case .lt: return numbers.map { $0.0 < $0.1 } ?? false
        case .le: return numbers.map { $0.0 <= $0.1 } ?? false
        case .co: return expected.isEmpty || actual.contains(expected)
        case .sw: return actual.hasPrefix(expected)
        case .ew: return actual.hasSuffix(expected)
        case .ex: return true
        case .within:
            guard let zone = Self.zone(actual), zone != .unknown, let limit = Proximity(rawValue: expected) else { return false }
            return zone <= limit
        case .ne, .nc, .nx: return false
        }
    }

    /// Both sides as zones, when one is a zone's name and the other a zone (a name or a prox
    /// number); nil otherwise (they compare as numbers or text).
    static func zonesCompared(_ actual: String, _ expected: String) -> (Proximity, Proximity)? {
        guard Proximity(rawValue: actual) != nil || Proximity(rawValue: expected) != nil,
              let a = zone(actual), let e = zone(expected) else { return nil }
        return (a, e)
    }
}

extension RuleOperator {
    /// A decimal number as people write them (`12`, `-3.5`, `1e3`, surrounding spaces allowed);
    /// not hex, `nan` or `inf`.
    public static func number(_ text: String) -> Double? {
        let t = text.trimmingCharacters(in: .whitespaces)
        guard !t.isEmpty, t.allSatisfy({ $0.isASCII && ($0.isNumber || "+-.eE".contains($0)) }),
              t.contains(where: \.isNumber), let d = Double(t), d.isFinite else { return nil }
        return d
    }

    /// A zone as rules read it: its name (`immediate`, `near`, `far`, `unknown`, lowercase), or
    /// the seed's prox number the tracker sets (`a.beacon.prox`: 0 unknown, 1 immediate, 2 near,
    /// 3 far, ``TrackingKeys/prox(_:)``); nil for anything else.
    public static func zone(_ text: String) -> Proximity? {
        if let zone = Proximity(rawValue: text) { return zone }
        guard let n = number(text) else { return nil }
        return Proximity.allCases.first { Double(TrackingKeys.prox($0)) == n }
    }
}

/// A rule's condition: a test of one value, or a group.
public indirect enum RuleCondition: Sendable, Hashable {
    /// `key` names a profile attribute (`a.beacon.major`), or a field of the triggering event
    /// (`event.type`, `event.region`, …). The values are OR-ed: `eq [a, b]` holds when the value
    /// is a or b; a negative operator negates its positive one, so `ne [a, b]` holds when the
    /// value is neither.
    case test(key: String, op: RuleOperator, values: [String])
    case all([RuleCondition])
    case any([RuleCondition])

    public func holds(_ lookup: (String) -> String?) -> Bool {
        switch self {
        case .test(let key, let op, let values):
            let actual = lookup(key)
            if let positive = op.negated { return !RuleCondition.test(key: key, op: positive, values: values).holds(lookup) }
            if !op.takesValues { return op.holds(actual, "") }
            return values.contains { op.holds(actual, $0) }
        case .all(let conditions): return conditions.allSatisfy { $0.holds(lookup) }
        case .any(let conditions): return conditions.contains { $0.holds(lookup) }
        }
    }

    /// Why it holds or not, one line per test, indented by group.
    public func explain(_ lookup: (String) -> String?, depth: Int = 0) -> [String] {
        let pad = String(repeating: "  ", count: depth)
        let verdict = holds(lookup) ? "true " : "false"
        switch self {
        case .test(let key, let op, let values):
            let actual = lookup(key).map { $0.debugDescription } ?? "missing"
            let list = op.takesValues ? " " + values.map(\.debugDescription).joined(separator: " or ") : ""
            // A prox number in a test of zones, with the zone it stands for.
            let zones = op == .within || values.contains { Proximity(rawValue: $0) != nil }
            let zone = zones ? lookup(key).flatMap { Proximity(rawValue: $0) == nil ? RuleOperator.zone($0) : nil }
                .map { ", \($0.rawValue)" } ?? "" : ""
            return ["\(pad)\(verdict)  \(key) \(op.rawValue)\(list)  (\(key) is \(actual)\(zone))"]
        case .all(let conditions):
            return ["\(pad)\(verdict)  all of:"] + conditions.flatMap { $0.explain(lookup, depth: depth + 1) }
        case .any(let conditions):
            return ["\(pad)\(verdict)  any of:"] + conditions.flatMap { $0.explain(lookup, depth: depth + 1) }
        }
    }
}

/// What a rule listens to.
public enum RuleTrigger: String, Sendable, Hashable, CaseIterable, Codable, Comparable {
    /// The profile changed (by the tracker, a client, or a rule).
    case profile
    /// A tracking event (`Tracked` or `Cleared`).
    case tracking
    /// A region event (determined, entered, exited).
    case region
    /// An alert event (offered, removed, a status).
    case alert

    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}

/// What a rule does when it fires. Text may hold `{%key%}` tokens, replaced by the attribute or
/// event field (empty when missing).
public enum RuleAction: Sendable, Hashable {
    /// A `RuleFired(s rule, a{ss} data)` signal.
    case signal([String: String])
    /// Set profile attributes.
    case set([String: String])
    /// Remove profile attributes.
    case remove([String])
    /// Offer an alert (by identifier) for the event's peer, or the current tracked peer.
    case offerAlert(String)
    /// Append an entry with this data to the event log.
    case log([String: String])
}

/// How often a rule may fire.
public enum RuleFrequency: Sendable, Hashable {
    /// Every time a trigger finds its condition true.
    case always
    /// The first time only (until the rule is redefined).
    case once
    /// At most once per this many seconds.
    case cooldown(Double)
}

/// A rule: on its triggers, when its condition holds, its actions, as often as its frequency
/// lets it.
public struct Rule: Sendable, Hashable {
    public var identifier: String
    public var triggers: Set<RuleTrigger>
    public var condition: RuleCondition
    public var actions: [RuleAction]
    public var frequency: RuleFrequency

    public init(identifier: String, triggers: Set<RuleTrigger> = Set(RuleTrigger.allCases), condition: RuleCondition,
                actions: [RuleAction], frequency: RuleFrequency = .always) {
        self.identifier = identifier
        self.triggers = triggers
        self.condition = condition
        self.actions = actions
        self.frequency = frequency
    }

    public static func problem(identifier: String) -> String? {
        identifierProblem(identifier, called: "the rule identifier")
    }

    /// Replaces `{%key%}` tokens in `text` (an unclosed `{%` stays as it is).
    public static func replaceTokens(_ text: String, _ lookup: (String) -> String?) -> String {
        var out = ""
        var rest = Substring(text)
        while let open = rest.range(of: "{%") {
            out += rest[..<open.lowerBound]
            let after = rest[open.upperBound...]
            guard let close = after.range(of: "%}") else {
                out += rest[open.lowerBound...]
                return out
            }
            out += lookup(String(after[..<close.lowerBound]).trimmingCharacters(in: .whitespaces)) ?? ""
            rest = after[close.upperBound...]
        }
        return out + rest
    }
}

/// The event that triggers rules, with its fields (`event.<name>` in conditions and tokens).
public struct RuleEvent: Sendable, Hashable {
    public var trigger: RuleTrigger
    /// `type` (`tracked`, `cleared`, `entered`, …) and the event's own fields.
    public var fields: [String: String]
    /// The peer the event is about, if any (an `offer-alert` offers its alert for it).
    public var peer: PeerID?

    public init(trigger: RuleTrigger, fields: [String: String], peer: PeerID? = nil) {
        self.trigger = trigger
        self.fields = fields
        self.peer = peer
    }
}

/// One rule that fired, with its actions' text already resolved.
public struct RuleFiring: Sendable, Hashable {
    public var rule: String
    public var actions: [RuleAction]
    public var peer: PeerID?
}

/// The rules engine: at each event, the rules listening to its trigger whose condition holds fire,
/// in identifier order, as often as their frequency lets them. Pure; time is passed in. What
/// `once` and `cooldown` remember is in ``fired``, for the node to keep.
public struct RuleEngine: Sendable {
    public private(set) var rules: [String: Rule] = [:]
    /// When each rule last fired.
    public var fired: [String: Timestamp] = [:]
    public static let maxRules = 1000

    public init() {}

    /// Adds a rule or replaces the one with its identifier (a replaced rule may fire again).
    public mutating func add(_ rule: Rule) {
        if rules[rule.identifier] != rule { fired[rule.identifier] = nil }
        rules[rule.identifier] = rule
    }

    @discardableResult
    public mutating func remove(_ identifier: String) -> Bool {
        fired[identifier] = nil
        return rules.removeValue(forKey: identifier) != nil
    }

    /// The value a condition or token names: `event.<field>` from the event, else the profile.
    public static func lookup(_ key: String, profile: Profile, event: RuleEvent?) -> String? {
        if key.hasPrefix("event.") {
            let field = String(key.dropFirst(6))
            if field == "trigger" { return event?.trigger.rawValue }
            return event?.fields[field]
        }
        return profile[key]
    }

    /// The rules that fire for `event`, given the profile as it is after the event.
    public mutating func evaluate(_ event: RuleEvent, profile: Profile, at t: Timestamp) -> [RuleFiring] {
        var out: [RuleFiring] = []
        let lookup = { (key: String) in Self.lookup(key, profile: profile, event: event) }
        for rule in rules.values.sorted(by: { $0.identifier < $1.identifier }) where rule.triggers.contains(event.trigger) {
            guard rule.condition.holds(lookup) else { continue }
            switch rule.frequency {
            case .always: break
            case .once: if fired[rule.identifier] != nil { continue }
            case .cooldown(let period): if let last = fired[rule.identifier], t - last < period { continue }
            }
            fired[rule.identifier] = t
            out.append(RuleFiring(rule: rule.identifier, actions: rule.actions.map { Self.resolve($0, lookup) }, peer: event.peer))
        }
        return out
    }

    static func resolve(_ action: RuleAction, _ lookup: (String) -> String?) -> RuleAction {
        func text(_ map: [String: String]) -> [String: String] { map.mapValues { Rule.replaceTokens($0, lookup) } }
        switch action {
        case .signal(let data): return .signal(text(data))
        case .set(let values): return .set(text(values))
        case .log(let data): return .log(text(data))
        case .remove, .offerAlert: return action
        }
    }
}
