import Foundation
import ProximityCore

/// `rules:`.
extension ConfigDecoder {
    // MARK: - Rules

    /// `rules:`: each item's identifier, and the rest of it as a ``RuleValue`` tree built by
    /// ``Rule/parse(identifier:_:)``. Returns the number of items, or nil when `rules:` is not a
    /// list (reported).
    mutating func decodeRules(_ node: ConfigNode) -> Int? {
        guard !node.isNull else { return 0 }
        guard case .sequence(let items) = node.kind else {
            report(at: node, "rules: must be a list of rules, not \(node.summary)")
            return nil
        }
        var defined: [String: ConfigPosition] = [:]
        for (i, item) in items.enumerated() {
            let path = "rules[\(i)]"
            let (identifier, rule) = decodeRule(item, path: path)
            guard let (id, position) = identifier else { continue }
            if let first = defined[id] {
                report(position, "\(path).identifier: rule '\(id)' is already defined at \(first)")
                continue
            }
            defined[id] = position
            if let rule { rules.append(rule) }
        }
        return items.count
    }

    /// Where each node of a rule's tree is, by its path from the rule's root as
    /// ``RuleDefinitionError/path`` gives it (keys and `[i]`): the key it is the value of (none for
    /// a list's item) and the value (the key, for an empty value).
    typealias RulePlaces = [[String]: (key: ConfigPosition?, value: ConfigPosition)]

    /// One item of `rules:`: its identifier and where it is (nil when it has none that may be used),
    /// and the rule (nil when anything of it is wrong). Every problem is reported.
    mutating func decodeRule(_ item: ConfigNode, path: String) -> (identifier: (String, ConfigPosition)?, rule: Rule?) {
        guard let entries = mapping(item, path: path, keys: ConfigFile.ruleKeys,
                                    expected: "a mapping with identifier:, when:, do: and the rule's other keys such as on:")
        else { return (nil, nil) }
        var identifier: (String, ConfigPosition)?
        var valid = true
        // The values that could not be read (reported): each stands in the tree as a placeholder,
        // and what the definition says at or under it is not reported, but the rest of the rule
        // is still checked.
        var unreadable: [[String]] = []
        var tree: [(String, RuleValue)] = []
        var places: RulePlaces = [:]
        for entry in entries {
            if entry.key == "identifier" {
                if let id = text(entry, path: "\(path).identifier", { s throws(OptionProblem) in
                    if let problem = Rule.problem(identifier: s) { throw OptionProblem(problem) }
                    return s
                }) {
                    identifier = (id, entry.value.position)
                } else {
                    valid = false
                }
                continue
            }
            // An empty value is as if the key were absent, as elsewhere in the file.
            places[[entry.key]] = (entry.keyPosition, entry.value.isEmpty ? entry.keyPosition : entry.value.position)
            guard !entry.value.isNull else { continue }
            tree.append((entry.key, ruleValue(entry.value, path: [entry.key], rule: path, places: &places, unreadable: &unreadable)))
        }
        if !entries.contains(where: { $0.key == "identifier" }) {
            report(item.position, "\(path): a rule needs an identifier")
            valid = false
        }
        if !unreadable.isEmpty { valid = false }
        var value = RuleValue.map(tree)
        var rule: Rule?
        // The definition stops at its first problem; the node it is about is then replaced by one
        // that is right, and the check runs again, so every problem of the rule is reported.
        for _ in 0 ... places.count + 2 {
            do {
                rule = try Rule.parse(identifier: identifier?.0 ?? "rule", value)
                break
            } catch {
                valid = false
                if !unreadable.contains(where: { error.path.starts(with: $0) }) {
                    reportRuleProblem(error, path: path, item: item, places: places)
                }
                guard let next = Self.ruleTree(value, without: error), next != value else { break }
                value = next
            }
        }
        return (identifier, valid ? rule : nil)
    }

    /// A node of a rule as a ``RuleValue``: a mapping with its keys in order (an empty value left
    /// out, as if absent), a list, and scalars as they look: a plain scalar YAML reads as a number
    /// is a number, a plain `true` or `false` a boolean, anything else (quoted, or `yes`, `on`, …)
    /// text. A node that cannot be one (a null list item, an integer beyond 64 bits) is reported,
    /// its path added to `unreadable`, and a placeholder stands for it: the text, or the number
    /// as near as a `Double` holds it. Records where every node is in `places`.
    mutating func ruleValue(_ node: ConfigNode, path: [String], rule: String, places: inout RulePlaces,
                            unreadable: inout [[String]]) -> RuleValue {
        let at = Self.rulePath(rule, path)
        switch node.kind {
        case .null:
            report(node.position, "\(at): must be a value, not \(node.summary)")
            unreadable.append(path)
            return .text(node.text)
        case .bool(let b):
            return node.isPlain && ["true", "false"].contains(node.text.lowercased()) ? .bool(b) : .text(node.text)
        case .integer(let n?):
            return node.isPlain ? .number(Double(n)) : .text(node.text)
        case .integer(nil):
            guard node.isPlain else { return .text(node.text) }
            report(at: node, "\(at): \(node.text) is out of range")
            unreadable.append(path)
            return Double(node.text).map(RuleValue.number) ?? .text(node.text)
        case .float(let d):
            return node.isPlain ? .number(d) : .text(node.text)
        case .string(let s):
            return .text(s)
        case .sequence(let items):
            var values: [RuleValue] = []
            for (i, item) in items.enumerated() {
                let itemPath = path + ["[\(i)]"]
                places[itemPath] = (nil, item.position)
                values.append(ruleValue(item, path: itemPath, rule: rule, places: &places, unreadable: &unreadable))
            }
            return .list(values)
        case .mapping:
            // Duplicate keys are reported, and the first occurrence taken.
            let entries = mapping(node, path: at, keys: nil, expected: "a mapping") ?? []
            var values: [(String, RuleValue)] = []
            for entry in entries {
                let entryPath = path + [entry.key]
                places[entryPath] = (entry.keyPosition, entry.value.isEmpty ? entry.keyPosition : entry.value.position)
                guard !entry.value.isNull else { continue }
                values.append((entry.key, ruleValue(entry.value, path: entryPath, rule: rule, places: &places, unreadable: &unreadable)))
            }
            return .map(values)
        }
    }

    /// `rules[0]`, `rules[0].when.all[1].op`: the path of a node of the rule at `rule`.
    static func rulePath(_ rule: String, _ path: [String]) -> String {
        let location = RuleDefinitionError(path, "").location
        return location.isEmpty ? rule : location.first == "[" ? rule + location : "\(rule).\(location)"
    }

    /// Reports a problem of ``Rule/parse(identifier:_:)`` at the node its path names, or the
    /// nearest one there is (the item itself for a problem of the whole rule): at the key for an
    /// unknown key or action, else at the value.
    mutating func reportRuleProblem(_ error: RuleDefinitionError, path: String, item: ConfigNode, places: RulePlaces) {
        let message = "\(Self.rulePath(path, error.path)): \(error.problem)"
        var at = error.path
        while !at.isEmpty, places[at] == nil { at.removeLast() }
        guard let place = places[at] else {
            report(item.position, message)
            return
        }
        if at == error.path, error.problem.hasPrefix("unknown "), let key = place.key {
            report(key, message)
        } else {
            report(place.value, message)
        }
    }

    /// `tree` with the node `error` is about replaced by one that is right (or, for what the rule
    /// lacks, given one), so that checking it again finds the next problem; nil when there is
    /// nothing to replace.
    static func ruleTree(_ tree: RuleValue, without error: RuleDefinitionError) -> RuleValue? {
        let test = RuleValue.map([("key", .text("event.type")), ("op", .text("ex"))])
        let action = RuleValue.map([("log", .map([]))])
        let path = error.path
        guard let first = path.first else {
            guard case .map(let entries, _) = tree else { return nil }
            if entries["when"] == nil { return tree.replacing(["when"], with: test) }
            if entries["do"] == nil { return tree.replacing(["do"], with: .list([action])) }
            return nil
        }
        switch first {
        case "on":
            // A trigger that is not one: another that is; else no `on`, every trigger.
            return path.count >= 2 ? tree.replacing(Array(path.prefix(2)), with: .text(RuleTrigger.profile.rawValue))
                : tree.replacing(["on"], with: nil)
        case "when":
            // The test or group the problem is in: the deepest one the path goes through.
            var condition = ["when"]
            var i = 1
            while i + 1 < path.count, ["all", "any"].contains(path[i]), path[i + 1].first == "[" {
                condition += [path[i], path[i + 1]]
                i += 2
            }
            return tree.replacing(condition, with: test)
        case "do":
            return path.count >= 2 && path[1].first == "[" ? tree.replacing(Array(path.prefix(2)), with: action)
                : tree.replacing(["do"], with: .list([action]))
        case "frequency", "cooldown":
            // Checked together: a problem of one leaves both out, lest the other be reported for it.
            return tree.replacing(["frequency"], with: nil)?.replacing(["cooldown"], with: nil)
        default:
            return nil
        }
    }
}
