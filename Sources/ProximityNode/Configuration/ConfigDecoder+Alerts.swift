import Foundation
import ProximityCore

/// `alerts:`.
extension ConfigDecoder {
    /// `alerts:`: each item's parts read into ``Alert/Value``s and built by ``Alert/parse(identifier:_:)``.
    /// Returns the number of items, or nil when `alerts:` is not a list (reported).
    mutating func decodeAlerts(_ node: ConfigNode) -> Int? {
        guard !node.isNull else { return 0 }
        guard case .sequence(let items) = node.kind else {
            report(at: node, "alerts: must be a list of alerts, not \(node.summary)")
            return nil
        }
        var defined: [String: ConfigPosition] = [:]
        for (i, item) in items.enumerated() {
            let path = "alerts[\(i)]"
            let (identifier, alert) = decodeAlert(item, path: path)
            guard let (id, position) = identifier else { continue }
            if let first = defined[id] {
                report(position, "\(path).identifier: alert '\(id)' is already defined at \(first)")
                continue
            }
            defined[id] = position
            if let alert { alerts.append(alert) }
        }
        return items.count
    }

    /// One item of `alerts:`: its identifier and where it is (nil when it has none that may be
    /// used), and the alert (nil when anything of it is wrong). Every problem is reported.
    mutating func decodeAlert(_ item: ConfigNode, path: String) -> (identifier: (String, ConfigPosition)?, alert: Alert?) {
        guard let entries = mapping(item, path: path, keys: ConfigFile.alertKeys,
                                    expected: "a mapping with identifier:, match: and the alert's keys such as title:") else {
            return (nil, nil)
        }
        var identifier: (String, ConfigPosition)?
        var valid = true
        var parts: [(Alert.Key, Alert.Value)] = []
        var entryOf: [Alert.Key: ConfigEntry] = [:]
        // Parts left out (their value could not be read, or the definition refused it): what the
        // parts checked with them then say is not reported.
        var dropped = Set<Alert.Key>()
        for entry in entries {
            if entry.key == "identifier" {
                if let id = text(entry, path: "\(path).identifier", { s throws(OptionProblem) in
                    if let problem = Alert.problem(identifier: s) { throw OptionProblem(problem) }
                    return s
                }) {
                    identifier = (id, entry.value.position)
                } else {
                    valid = false
                }
                continue
            }
            guard let key = Alert.Key(configName: entry.key) else { continue }
            entryOf[key] = entry
            let at = "\(path).\(entry.key)"
            let value: Alert.Value?
            if key == .match {
                value = decodeMatcher(entry, path: at, refusing: [.within, .exitPeriod],
                                      refusal: "cannot be in an alert's match (an alert's range and strategy say when it is ready)",
                                      expected: "a mapping of matcher keys such as uuid: and major:")
                    .map { .matcher(Dictionary(uniqueKeysWithValues: $0.parts.map { ($0.0.busName, $0.1) })) }
            } else {
                value = alertValue(entry, key, path: at)
            }
            if let value {
                parts.append((key, value))
            } else {
                dropped.insert(key)
                valid = false
            }
        }
        if !entries.contains(where: { $0.key == "identifier" }) {
            report(item.position, "\(path): an alert needs an identifier")
        }
        if entryOf[.match] == nil {
            report(item.position, "\(path): an alert needs a match (match: {} for every peer)")
            valid = false
        }
        // The parts are checked together; each problem found drops its part and the check runs
        // again, so every part that is wrong is reported, not just the first.
        if !parts.contains(where: { $0.0 == .match }) { parts.append((.match, .matcher([:]))) }
        var alert: Alert?
        for _ in 0 ... parts.count {
            do {
                alert = try Alert.parse(identifier: identifier?.0 ?? "alert", parts)
                break
            } catch {
                valid = false
                let group = Self.alertKeyGroups.first { $0.contains(error.key) } ?? [error.key]
                if dropped.isDisjoint(with: group) {
                    reportAlertProblem(error, path: path, item: item, entryOf: entryOf, group: group)
                }
                guard parts.contains(where: { $0.0 == error.key }) else { break }
                parts.removeAll { $0.0 == error.key }
                dropped.insert(error.key)
            }
        }
        return (identifier, valid ? alert : nil)
    }

    /// Parts checked together by ``Alert/parse(identifier:_:)``: when one is wrong, what the
    /// others then say about it is not reported.
    static let alertKeyGroups: [Set<Alert.Key>] = [[.capCount, .capWindow], [.start, .end]]

    /// Reports a problem of ``Alert/parse(identifier:_:)`` in the file's words: at the part's
    /// value, or, for a part that is missing, at the key of the part that needs it (else the item).
    mutating func reportAlertProblem(_ error: AlertDefinitionError, path: String, item: ConfigNode,
                                             entryOf: [Alert.Key: ConfigEntry], group: Set<Alert.Key>) {
        let message = "\(path).\(error.key.configName): \(Self.alertConfigNames(in: error.problem))"
        if let entry = entryOf[error.key] {
            report(at: entry.value, fallback: entry.keyPosition, message)
        } else if let partner = entryOf.filter({ group.contains($0.key) }).map(\.value.keyPosition).min() {
            report(partner, message)
        } else {
            report(item.position, message)
        }
    }

    /// An alert part's value as ``Alert/parse(identifier:_:)`` takes it, or nil if its type is
    /// wrong (reported): text where text is expected (any unquoted scalar as its text), YAML
    /// integers and floats as they are where a number is, a mapping of strings for `extra`.
    mutating func alertValue(_ entry: ConfigEntry, _ key: Alert.Key, path: String) -> Alert.Value? {
        let node = entry.value
        switch key {
        case .extra:
            return extraFields(entry, path: path)
        case .maxTimeBeforeReset, .cooldown, .capWindow, .capCount:
            switch node.kind {
            case .integer(let n?): return .integer(n)
            case .integer(nil):
                report(at: node, "\(path): \(node.text) is out of range")
                return nil
            case .float(let d): return .number(d)
            default: break
            }
        default:
            if let s = node.stringValue { return .text(s) }
        }
        report(at: node, fallback: entry.keyPosition, "\(path): must be \(key.expected), not \(node.summary)")
        return nil
    }

    /// `extra:`: any names, each with a string (an unquoted scalar as its text); empty, no fields.
    mutating func extraFields(_ entry: ConfigEntry, path: String) -> Alert.Value? {
        guard !entry.value.isNull else { return .map([:]) }
        guard let entries = mapping(entry.value, path: path, keys: nil, expected: Alert.Key.extra.expected) else { return nil }
        var fields: [String: String] = [:]
        var valid = true
        for field in entries {
            if let s = field.value.stringValue {
                fields[field.key] = s
            } else {
                report(at: field.value, fallback: field.keyPosition, "\(path).\(field.key): must be a string, not \(field.value.summary)")
                valid = false
            }
        }
        return valid ? .map(fields) : nil
    }
}
