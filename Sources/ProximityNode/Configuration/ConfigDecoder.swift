import Foundation
import ProximityCore

/// Reads a config file's ``ConfigNode`` tree strictly into its values, collecting every problem
/// rather than stopping at the first: unknown keys (with the nearest known one when it is close),
/// duplicate keys, wrong types, out-of-range values, bad regions, alerts and rules. Each problem
/// carries the position of the key (unknown, duplicate) or value (type, range) it is about.
///
/// Messages start with the path of the value (`clear-interval`, `region-monitor.exit-period`,
/// `regions[1].match.uuid`, `alerts[0].range`, `rules[0].when.all[1].op`) and say what was
/// expected and what was found.
struct ConfigDecoder {
    private(set) var problems: [ConfigProblem] = []
    private(set) var options = RunOptions()
    private(set) var regionMonitor = RegionMonitor.Configuration()
    private(set) var regions: [Region] = []
    private(set) var alerts: [Alert] = []
    private(set) var tracking = Tracker.Configuration()
    private(set) var rules: [Rule] = []
    private(set) var mqtt: MQTTSettings?

    /// Decodes the document's root; nil (an empty document) is an empty config.
    mutating func decode(_ root: ConfigNode?) {
        guard let root, !isNull(root) else { return }
        guard let entries = mapping(root, path: "", keys: ConfigFile.keys, expected: "a mapping of keys such as bus: and regions:")
        else { return }
        var regionsEntry: ConfigEntry?
        for entry in entries {
            switch entry.key {
            case "bus": options.bus = text(entry, RunOptions.checked(bus:))
            case "bus-name": options.busName = text(entry, RunOptions.checked(busName:))
            case "state-dir": options.stateDirectory = text(entry, Self.absolutePath)
            case "name": options.name = text(entry, RunOptions.checked(name:))
            case "service-uuid": options.serviceUUID = text(entry, RunOptions.checked(serviceUUID:))
            case "adapter": options.adapter = text(entry, RunOptions.checked(adapter:))
            case "power-on": options.powerOn = boolean(entry)
            case "clear-interval": options.clearInterval = number(entry, "a number of seconds", RunOptions.checked(clearInterval:))
            case "measured-power": options.measuredPower = integer(entry, "an integer (dBm)", RunOptions.checked(measuredPower:))
            case "path-loss-exponent": options.pathLossExponent = number(entry, "a number", RunOptions.checked(pathLossExponent:))
            case "rssi-offset": options.rssiOffset = number(entry, "a number (dB)", RunOptions.checked(rssiOffset:))
            case "max-peers": options.maxPeers = integer(entry, "an integer", RunOptions.checked(maxPeers:))
            case "beacons": options.beacons = boolean(entry)
            case "log-level": options.logLevel = text(entry, RunOptions.checked(logLevel:))
            case "region-monitor": decodeRegionMonitor(entry.value)
            case "regions":
                regionsEntry = entry
                decodeRegions(entry.value)
            case "alerts":
                if let count = decodeAlerts(entry.value), count > ConfigFile.maxAlerts {
                    report(entry.keyPosition, "alerts: \(count) alerts are more than a config file may define (\(ConfigFile.maxAlerts))")
                }
            case "tracking": decodeTracking(entry.value)
            case "mqtt": decodeMQTT(entry)
            case "rules":
                if let count = decodeRules(entry.value), count > ConfigFile.maxRules {
                    report(entry.keyPosition, "rules: \(count) rules are more than a config file may define (\(ConfigFile.maxRules))")
                }
            default: break
            }
        }
        if let regionsEntry, regions.count > regionMonitor.maxRegions {
            report(regionsEntry.keyPosition, "regions: \(regions.count) regions are more than max-regions (\(regionMonitor.maxRegions))")
        }
    }

    // MARK: - Sections

    private mutating func decodeRegionMonitor(_ node: ConfigNode) {
        let path = "region-monitor"
        guard !isNull(node) else { return }
        guard let entries = mapping(node, path: path, keys: ConfigFile.regionMonitorKeys,
                                    expected: "a mapping of exit-period, max-regions and restore-limit") else { return }
        for entry in entries {
            let key = "\(path).\(entry.key)"
            switch entry.key {
            case "exit-period":
                if let v = seconds(entry, key, in: RegionMatcher.exitPeriodRange) { regionMonitor.defaultExitPeriod = v }
            case "max-regions":
                let range = RegionMonitor.Configuration.maxRegionsRange
                if let v = integer(entry, "an integer in \(range.lowerBound)...\(range.upperBound)", path: key, { n throws(OptionProblem) in
                    guard range.contains(n) else { throw OptionProblem("must be an integer in \(range.lowerBound)...\(range.upperBound), not \(n)") }
                    return n
                }) { regionMonitor.maxRegions = v }
            case "restore-limit":
                if let v = seconds(entry, key, in: RegionMonitor.Configuration.restoreLimitRange) { regionMonitor.restoreLimit = v }
            default: break
            }
        }
    }

    private mutating func decodeRegions(_ node: ConfigNode) {
        guard !isNull(node) else { return }
        guard case .sequence(let items) = node.kind else {
            report(at: node, "regions: must be a list of regions, not \(node.summary)")
            return
        }
        var defined: [String: ConfigPosition] = [:]
        for (i, item) in items.enumerated() {
            let path = "regions[\(i)]"
            guard let entries = mapping(item, path: path, keys: ConfigFile.regionKeys,
                                        expected: "a mapping with identifier: and match:") else { continue }
            var identifier: (String, ConfigPosition)?
            var matcher: RegionMatcher? = RegionMatcher()
            for entry in entries {
                switch entry.key {
                case "identifier":
                    if let id = text(entry, path: "\(path).identifier", { s throws(OptionProblem) in
                        if let problem = Region.problem(identifier: s) { throw OptionProblem(problem) }
                        return s
                    }) {
                        identifier = (id, entry.value.position)
                    }
                case "match":
                    matcher = decodeMatcher(entry, path: "\(path).match")
                default: break
                }
            }
            guard let (id, position) = identifier else {
                if !entries.contains(where: { $0.key == "identifier" }) {
                    report(item.position, "\(path): a region needs an identifier")
                }
                continue
            }
            if let first = defined[id] {
                report(position, "\(path).identifier: region '\(id)' is already defined at \(first)")
                continue
            }
            defined[id] = position
            if let matcher {
                regions.append(Region(identifier: id, matcher: matcher, source: .config))
            }
        }
    }

    /// A region's or an alert's matcher, or nil if any part is wrong (each reported). The parts
    /// in `refused` are known keys but not taken here: each is reported at its key, with `refusal`.
    private mutating func decodeMatcher(_ entry: ConfigEntry, path: String, refusing refused: Set<RegionMatcher.Key> = [],
                                        refusal: String = "", expected: String = "a mapping of matcher keys such as uuid: and within:")
        -> RegionMatcher? {
        let node = entry.value
        guard !isNull(node) else { return RegionMatcher() }
        let names = RegionMatcher.Key.allCases.map(\.configName)
        guard let entries = mapping(node, path: path, keys: names, expected: expected) else { return nil }
        var matcher = RegionMatcher()
        var valid = true
        var keyPositions: [RegionMatcher.Key: ConfigPosition] = [:]
        for entry in entries {
            guard let key = RegionMatcher.Key(configName: entry.key) else { continue }
            keyPositions[key] = entry.keyPosition
            let at = "\(path).\(entry.key)"
            if refused.contains(key) {
                report(entry.keyPosition, "\(at): \(refusal)")
                valid = false
                continue
            }
            guard let value = matcherValue(entry, key, path: at) else {
                valid = false
                continue
            }
            do {
                try matcher.set(key, value)
            } catch {
                report(at: entry.value, fallback: entry.keyPosition, "\(at): \(error.problem)")
                valid = false
            }
        }
        guard valid else { return nil }
        do {
            try matcher.validate()
        } catch {
            let position = keyPositions[error.key] ?? node.position
            report(position, "\(path).\(error.key.configName): \(Self.configNames(in: error.problem))")
            return nil
        }
        return matcher
    }

    /// A matcher part's value as the matcher takes it, or nil if its type is wrong (reported).
    private mutating func matcherValue(_ entry: ConfigEntry, _ key: RegionMatcher.Key, path: String) -> RegionMatcher.Value? {
        let node = entry.value
        switch (key.valueType, node.kind) {
        case (.unsigned16, .integer(let n?)):
            return .integer(n)
        case (.unsigned16, .integer(nil)):
            report(at: node, "\(path): must be an integer in 0...65535, not \(node.text)")
            return nil
        case (.seconds, _):
            // Checked here, in the words of region-monitor's exit-period, rather than by the matcher.
            return seconds(entry, path, in: RegionMatcher.exitPeriodRange).map(RegionMatcher.Value.number)
        case (.text, _):
            if let s = string(node) { return .text(s) }
        default:
            break
        }
        report(at: node, fallback: entry.keyPosition, "\(path): must be \(key.valueType.description), not \(node.summary)")
        return nil
    }

    /// `alerts:`: each item's parts read into ``Alert/Value``s and built by ``Alert/parse(identifier:_:)``.
    /// Returns the number of items, or nil when `alerts:` is not a list (reported).
    private mutating func decodeAlerts(_ node: ConfigNode) -> Int? {
        guard !isNull(node) else { return 0 }
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
    private mutating func decodeAlert(_ item: ConfigNode, path: String) -> (identifier: (String, ConfigPosition)?, alert: Alert?) {
        guard let entries = mapping(item, path: path, keys: ConfigFile.alertKeys,
                                    expected: "a mapping with identifier:, match: and the alert's keys such as title:") else { return (nil, nil) }
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
    private static let alertKeyGroups: [Set<Alert.Key>] = [[.capCount, .capWindow], [.start, .end]]

    /// Reports a problem of ``Alert/parse(identifier:_:)`` in the file's words: at the part's
    /// value, or, for a part that is missing, at the key of the part that needs it (else the item).
    private mutating func reportAlertProblem(_ error: AlertDefinitionError, path: String, item: ConfigNode,
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
    private mutating func alertValue(_ entry: ConfigEntry, _ key: Alert.Key, path: String) -> Alert.Value? {
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
            if let s = string(node) { return .text(s) }
        }
        report(at: node, fallback: entry.keyPosition, "\(path): must be \(key.expected), not \(node.summary)")
        return nil
    }

    /// `extra:`: any names, each with a string (an unquoted scalar as its text); empty, no fields.
    private mutating func extraFields(_ entry: ConfigEntry, path: String) -> Alert.Value? {
        guard !isNull(entry.value) else { return .map([:]) }
        guard let entries = mapping(entry.value, path: path, keys: nil, expected: Alert.Key.extra.expected) else { return nil }
        var fields: [String: String] = [:]
        var valid = true
        for field in entries {
            if let s = string(field.value) {
                fields[field.key] = s
            } else {
                report(at: field.value, fallback: field.keyPosition, "\(path).\(field.key): must be a string, not \(field.value.summary)")
                valid = false
            }
        }
        return valid ? .map(fields) : nil
    }

    // MARK: - Tracking

    /// `tracking:`: the tracker's matcher, heartbeat and context data; absent or empty, the defaults.
    private mutating func decodeTracking(_ node: ConfigNode) {
        let path = "tracking"
        guard !isNull(node) else { return }
        guard let entries = mapping(node, path: path, keys: ConfigFile.trackingKeys,
                                    expected: "a mapping of match, heartbeat and context-data") else { return }
        for entry in entries {
            let key = "\(path).\(entry.key)"
            switch entry.key {
            case "match":
                if let matcher = decodeMatcher(entry, path: key, refusing: [.within, .exitPeriod],
                                               refusal: "cannot be in tracking's match (the tracker takes the nearest peer it matches)",
                                               expected: "a mapping of matcher keys such as kind: and uuid:") {
                    tracking.matcher = matcher
                }
            case "heartbeat":
                if let v = seconds(entry, key, in: Tracker.Configuration.heartbeatRange) { tracking.heartbeat = v }
            case "context-data":
                if let data = contextData(entry, path: key) { tracking.contextData = data }
            default: break
            }
        }
    }

    /// `mqtt:`: the broker and how to publish to it (`docs/mqtt.md`). `broker` is required; null
    /// or an absent section: no publishing.
    private mutating func decodeMQTT(_ section: ConfigEntry) {
        let path = "mqtt"
        let node = section.value
        guard !isNull(node) else { return }
        guard let entries = mapping(node, path: path, keys: ConfigFile.mqttKeys,
                                    expected: "a mapping of broker:, username: and the other mqtt keys") else { return }
        guard let brokerEntry = entries.first(where: { $0.key == "broker" }) else {
            report(section.keyPosition, "mqtt: broker is required (for example broker: mqtt://localhost)")
            return
        }
        guard let broker = text(brokerEntry, path: "mqtt.broker", MQTTSettings.checked(broker:)) else { return }
        var settings = MQTTSettings(broker: broker)
        var valid = true
        func file(_ entry: ConfigEntry, _ key: String) -> String? {
            text(entry, path: key) { (t: String) throws(OptionProblem) -> String in
                guard t.hasPrefix("/") else { throw OptionProblem("must be an absolute path, not '\(t)'") }
                return t
            }
        }
        for entry in entries {
            let key = "\(path).\(entry.key)"
            let before = problems.count
            switch entry.key {
            case "ca-file": settings.caFile = file(entry, key)
            case "cert-file": settings.certificateFile = file(entry, key)
            case "key-file": settings.keyFile = file(entry, key)
            case "username": settings.username = text(entry, path: key) { (t: String) throws(OptionProblem) -> String in
                    guard !t.isEmpty, t.utf8.count <= 65535 else { throw OptionProblem("must be 1 to 65535 bytes") }
                    return t
                }
            case "password-file": settings.passwordFile = file(entry, key)
            case "client-id": settings.clientID = text(entry, path: key, MQTTSettings.checked(clientID:))
            case "prefix": settings.prefix = text(entry, path: key, MQTTSettings.checked(prefix:))
            case "keepalive":
                let range = MQTTSettings.keepaliveRange
                if let v = integer(entry, "an integer number of seconds in \(range.lowerBound)...\(range.upperBound)", path: key, { n throws(OptionProblem) in
                    guard range.contains(n) else { throw OptionProblem("must be in \(range.lowerBound)...\(range.upperBound), not \(n)") }
                    return n
                }) { settings.keepalive = v }
            case "report-interval":
                if let v = seconds(entry, key, in: MQTTSettings.reportIntervalRange) { settings.reportInterval = v }
            case "report-moved":
                let range = MQTTSettings.reportMovedRange
                let shown = entry.value.text
                if let v = number(entry, named: key, "a number of metres in 0...100", { (d: Double) throws(OptionProblem) -> Double in
                    guard d.isFinite, range.contains(d) else { throw OptionProblem("must be a number of metres in 0...100, not \(shown)") }
                    return d
                }) { settings.reportMoved = v }
            case "compat":
                if let modes = compatibility(entry, path: key) { settings.compatibility = modes }
            case "room": settings.room = text(entry, path: key, MQTTSettings.checked(level:))
            case "discovery": if let b = boolean(entry, path: key) { settings.discovery = b }
            case "discovery-prefix": if let v = text(entry, path: key, MQTTSettings.checked(prefix:)) { settings.discoveryPrefix = v }
            case "outbox-size":
                let range = MQTTSettings.outboxSizeRange
                if let v = integer(entry, "an integer in \(range.lowerBound)...\(range.upperBound)", path: key, { n throws(OptionProblem) in
                    guard range.contains(n) else { throw OptionProblem("must be an integer in \(range.lowerBound)...\(range.upperBound), not \(n)") }
                    return n
                }) { settings.outboxSize = v }
            case "reconnect-max":
                let range = MQTTSettings.reconnectRange
                if let v = integer(entry, "an integer number of seconds in \(range.lowerBound)...\(range.upperBound)", path: key, { n throws(OptionProblem) in
                    guard range.contains(n) else { throw OptionProblem("must be in \(range.lowerBound)...\(range.upperBound), not \(n)") }
                    return n
                }) { settings.reconnectMax = v }
            default: break
            }
            if problems.count != before { valid = false }
        }
        if settings.certificateFile != nil, settings.keyFile == nil {
            report(section.keyPosition, "mqtt: cert-file needs key-file"); valid = false
        }
        if settings.keyFile != nil, settings.certificateFile == nil {
            report(section.keyPosition, "mqtt: key-file needs cert-file"); valid = false
        }
        if !settings.broker.tls, settings.caFile != nil || settings.certificateFile != nil {
            report(brokerEntry.value.position, "mqtt.broker: ca-file and cert-file need an mqtts:// broker"); valid = false
        }
        if valid { mqtt = settings }
    }

    /// `compat:`: a list of compatibility modes, or one.
    private mutating func compatibility(_ entry: ConfigEntry, path: String) -> [MQTTSettings.Compatibility]? {
        let names = MQTTSettings.Compatibility.allCases.map(\.rawValue)
        let items: [ConfigNode]
        switch entry.value.kind {
        case .null: return []
        case .sequence(let list): items = list
        default: items = [entry.value]
        }
        var modes: [MQTTSettings.Compatibility] = []
        var valid = true
        for (i, item) in items.enumerated() {
            guard let name = string(item), let mode = MQTTSettings.Compatibility(rawValue: name) else {
                report(at: item, fallback: entry.keyPosition, "\(path)[\(i)]: must be one of \(Self.alternatives(names)), not \(item.summary)")
                valid = false
                continue
            }
            if !modes.contains(mode) { modes.append(mode) }
        }
        return valid ? modes : nil
    }

    /// `context-data:`: any names, each with a string (an unquoted scalar as its text); empty, none.
    /// A name is an identifier (1 to 255 bytes without control characters), a value at most
    /// ``Profile/maxValueLength`` bytes, as an attribute's.
    private mutating func contextData(_ entry: ConfigEntry, path: String) -> [String: String]? {
        guard !isNull(entry.value) else { return [:] }
        guard let entries = mapping(entry.value, path: path, keys: nil, expected: "a mapping of names to strings") else { return nil }
        var fields: [String: String] = [:]
        var valid = true
        for field in entries {
            let at = "\(path).\(field.key)"
            if let problem = identifierProblem(field.key, called: "a name") {
                report(field.keyPosition, "\(path): \(problem)")
                valid = false
            } else if let s = string(field.value) {
                if let problem = Profile.problem(value: s) {
                    report(at: field.value, "\(at): \(problem)")
                    valid = false
                } else {
                    fields[field.key] = s
                }
            } else {
                report(at: field.value, fallback: field.keyPosition, "\(at): must be a string, not \(field.value.summary)")
                valid = false
            }
        }
        return valid ? fields : nil
    }

    // MARK: - Rules

    /// `rules:`: each item's identifier, and the rest of it as a ``RuleValue`` tree built by
    /// ``Rule/parse(identifier:_:)``. Returns the number of items, or nil when `rules:` is not a
    /// list (reported).
    private mutating func decodeRules(_ node: ConfigNode) -> Int? {
        guard !isNull(node) else { return 0 }
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
    private typealias RulePlaces = [[String]: (key: ConfigPosition?, value: ConfigPosition)]

    /// One item of `rules:`: its identifier and where it is (nil when it has none that may be used),
    /// and the rule (nil when anything of it is wrong). Every problem is reported.
    private mutating func decodeRule(_ item: ConfigNode, path: String) -> (identifier: (String, ConfigPosition)?, rule: Rule?) {
        guard let entries = mapping(item, path: path, keys: ConfigFile.ruleKeys,
                                    expected: "a mapping with identifier:, when:, do: and the rule's other keys such as on:")
        else { return (nil, nil) }
        var identifier: (String, ConfigPosition)?
        var valid = true
        // False when a value could not be read: the tree is then incomplete, and what the
        // definition would say of it is not reported.
        var complete = true
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
            guard !isNull(entry.value) else { continue }
            if let value = ruleValue(entry.value, path: [entry.key], rule: path, places: &places) {
                tree.append((entry.key, value))
            } else {
                complete = false
            }
        }
        if !entries.contains(where: { $0.key == "identifier" }) {
            report(item.position, "\(path): a rule needs an identifier")
            valid = false
        }
        guard complete else { return (identifier, nil) }
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
                reportRuleProblem(error, path: path, item: item, places: places)
                guard let next = Self.ruleTree(value, without: error), next != value else { break }
                value = next
            }
        }
        return (identifier, valid ? rule : nil)
    }

    /// A node of a rule as a ``RuleValue``, or nil when it cannot be one (reported): a mapping
    /// with its keys in order (an empty value left out, as if absent), a list, and scalars as they
    /// look: a plain scalar YAML reads as a number is a number, a plain `true` or `false` a boolean,
    /// anything else (quoted, or `yes`, `on`, …) text. Records where every node is in `places`.
    private mutating func ruleValue(_ node: ConfigNode, path: [String], rule: String, places: inout RulePlaces) -> RuleValue? {
        let at = Self.rulePath(rule, path)
        switch node.kind {
        case .null:
            report(node.position, "\(at): must be a value, not \(node.summary)")
            return nil
        case .bool(let b):
            return node.isPlain && ["true", "false"].contains(node.text.lowercased()) ? .bool(b) : .text(node.text)
        case .integer(let n?):
            return node.isPlain ? .number(Double(n)) : .text(node.text)
        case .integer(nil):
            guard node.isPlain else { return .text(node.text) }
            report(at: node, "\(at): \(node.text) is out of range")
            return nil
        case .float(let d):
            return node.isPlain ? .number(d) : .text(node.text)
        case .string(let s):
            return .text(s)
        case .sequence(let items):
            var values: [RuleValue] = []
            var valid = true
            for (i, item) in items.enumerated() {
                let itemPath = path + ["[\(i)]"]
                places[itemPath] = (nil, item.position)
                if let value = ruleValue(item, path: itemPath, rule: rule, places: &places) { values.append(value) } else { valid = false }
            }
            return valid ? .list(values) : nil
        case .mapping:
            guard let entries = mapping(node, path: at, keys: nil, expected: "a mapping") else { return nil }
            var values: [(String, RuleValue)] = []
            var valid = true
            for entry in entries {
                let entryPath = path + [entry.key]
                places[entryPath] = (entry.keyPosition, entry.value.isEmpty ? entry.keyPosition : entry.value.position)
                guard !isNull(entry.value) else { continue }
                if let value = ruleValue(entry.value, path: entryPath, rule: rule, places: &places) {
                    values.append((entry.key, value))
                } else {
                    valid = false
                }
            }
            return valid ? .map(values) : nil
        }
    }

    /// `rules[0]`, `rules[0].when.all[1].op`: the path of a node of the rule at `rule`.
    private static func rulePath(_ rule: String, _ path: [String]) -> String {
        let location = RuleDefinitionError(path, "").location
        return location.isEmpty ? rule : location.first == "[" ? rule + location : "\(rule).\(location)"
    }

    /// Reports a problem of ``Rule/parse(identifier:_:)`` at the node its path names, or the
    /// nearest one there is (the item itself for a problem of the whole rule): at the key for an
    /// unknown key or action, else at the value.
    private mutating func reportRuleProblem(_ error: RuleDefinitionError, path: String, item: ConfigNode, places: RulePlaces) {
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

    // MARK: - Shapes

    /// The entries of a mapping whose keys are among `keys` (nil: any key), each key's first
    /// occurrence; unknown and duplicate keys are reported. Nil (reported) when `node` is not a
    /// mapping.
    private mutating func mapping(_ node: ConfigNode, path: String, keys: [String]?, expected: String) -> [ConfigEntry]? {
        guard case .mapping(let entries) = node.kind else {
            report(at: node, "\(path.isEmpty ? "the top level" : path + ":") must be \(expected), not \(node.summary)")
            return nil
        }
        let prefix = path.isEmpty ? "" : "\(path): "
        var seen: [String: ConfigPosition] = [:]
        var known: [ConfigEntry] = []
        for entry in entries {
            if let first = seen[entry.key] {
                report(entry.keyPosition, "\(prefix)duplicate key '\(entry.key)' (first at \(first))")
                continue
            }
            seen[entry.key] = entry.keyPosition
            if let keys, !keys.contains(entry.key) {
                var message = "\(prefix)unknown key '\(entry.key)'"
                if let near = Self.nearest(to: entry.key, in: keys) {
                    message += " (did you mean '\(near)'?)"
                } else if keys.count <= 3 {
                    message += " (expected \(Self.alternatives(keys)))"
                }
                report(entry.keyPosition, message)
                continue
            }
            known.append(entry)
        }
        return known
    }

    private func isNull(_ node: ConfigNode) -> Bool {
        if case .null = node.kind { return true }
        return false
    }

    // MARK: - Scalars

    /// A string: quoted, or any unquoted scalar but null taken as its text (`name: 1`).
    private func string(_ node: ConfigNode) -> String? {
        switch node.kind {
        case .string(let s): s
        case .bool, .integer, .float: node.isPlain ? node.text : nil
        default: nil
        }
    }

    /// A string option, checked by `check`.
    private mutating func text<T>(_ entry: ConfigEntry, path: String? = nil, _ check: (String) throws(OptionProblem) -> T) -> T? {
        let path = path ?? entry.key
        guard let s = string(entry.value) else {
            report(at: entry.value, fallback: entry.keyPosition, "\(path): must be a string, not \(entry.value.summary)")
            return nil
        }
        do {
            return try check(s)
        } catch {
            report(at: entry.value, "\(path): \(error.message)")
            return nil
        }
    }

    private mutating func boolean(_ entry: ConfigEntry, path: String? = nil) -> Bool? {
        guard case .bool(let b) = entry.value.kind else {
            report(at: entry.value, fallback: entry.keyPosition, "\(path ?? entry.key): must be true or false, not \(entry.value.summary)")
            return nil
        }
        return b
    }

    /// An integer option, checked by `check`; `expected` names the type in the message.
    private mutating func integer<T>(_ entry: ConfigEntry, _ expected: String, path: String? = nil,
                                     _ check: (Int) throws(OptionProblem) -> T) -> T? {
        let path = path ?? entry.key
        let node = entry.value
        switch node.kind {
        case .integer(let n?):
            do {
                return try check(Int(n))
            } catch {
                report(at: node, "\(path): \(error.message)")
            }
        case .integer(nil):
            report(at: node, "\(path): \(node.text) is out of range")
        default:
            report(at: node, fallback: entry.keyPosition, "\(path): must be \(expected), not \(node.summary)")
        }
        return nil
    }

    /// A number option (integers are taken too), checked by `check`.
    private mutating func number<T>(_ entry: ConfigEntry, _ expected: String, _ check: (Double) throws(OptionProblem) -> T) -> T? {
        number(entry, named: entry.key, expected, check)
    }

    /// A number (integers are taken too) called `name` in the messages, checked by `check`.
    private mutating func number<T>(_ entry: ConfigEntry, named name: String, _ expected: String,
                                    _ check: (Double) throws(OptionProblem) -> T) -> T? {
        let node = entry.value
        let value: Double
        switch node.kind {
        case .integer(let n?): value = Double(n)
        case .integer(nil): value = Double(node.text) ?? .infinity
        case .float(let d): value = d
        default:
            report(at: node, fallback: entry.keyPosition, "\(name): must be \(expected), not \(node.summary)")
            return nil
        }
        do {
            return try check(value)
        } catch {
            report(at: node, "\(name): \(error.message)")
            return nil
        }
    }

    /// Seconds within `range`, in the matcher's words (`exit-period` is a matcher part too).
    private mutating func seconds(_ entry: ConfigEntry, _ path: String, in range: ClosedRange<Double>) -> Double? {
        let expected = "a number of seconds in \(RunOptions.show(range.lowerBound))...\(RunOptions.show(range.upperBound))"
        let text = entry.value.text
        return number(entry, named: path, expected) { (value: Double) throws(OptionProblem) -> Double in
            guard value.isFinite, range.contains(value) else { throw OptionProblem("must be \(expected), not \(text)") }
            return value
        }
    }

    /// `state-dir` in the file: the daemon's working directory is no place to resolve it against.
    private static func absolutePath(_ text: String) throws(OptionProblem) -> String {
        let path = try RunOptions.checked(stateDirectory: text)
        guard path.hasPrefix("/") else { throw OptionProblem("must be an absolute path such as /var/lib/proximityd, not '\(text)'") }
        return path
    }

    // MARK: - Reporting

    private mutating func report(_ position: ConfigPosition?, _ message: String) {
        problems.append(ConfigProblem(position: position, message: message))
    }

    /// Reports at the value, or at `fallback` (its key) when the value is empty: an empty value's
    /// position is wherever YAML found the next token.
    private mutating func report(at node: ConfigNode, fallback: ConfigPosition? = nil, _ message: String) {
        report(node.isEmpty ? fallback ?? node.position : node.position, message)
    }

    // MARK: - Words

    /// `problem` (from ``RegionMatcher/validate()``, which names the parts as on the bus: `needs
    /// UUID`) with the parts named as in the file (`needs uuid`).
    static func configNames(in problem: String) -> String {
        configNames(in: problem, Self.matcherBusNames)
    }

    /// `problem` (from ``Alert/parse(identifier:_:)``: `a cap needs both CapCount and
    /// CapWindow`) with the parts named as in the file (`cap-count`, `cap-window`).
    static func alertConfigNames(in problem: String) -> String {
        configNames(in: problem, Self.alertBusNames)
    }

    /// Bus name → config name: the matcher's parts, and those and the alert's parts.
    private static let matcherBusNames = Dictionary(uniqueKeysWithValues: RegionMatcher.Key.allCases.map { ($0.busName, $0.configName) })
    private static let alertBusNames = matcherBusNames.merging(Alert.Key.allCases.map { ($0.busName, $0.configName) }) { $1 }

    /// Each word of `problem` that is a bus name in `names` replaced by its config name; a quoted
    /// value (`"UUID"`, as a message shows what was given) is left as it is.
    private static func configNames(in problem: String, _ names: [String: String]) -> String {
        var out = ""
        var word = ""
        var quoted = false, escaped = false
        func flush() {
            out += names[word] ?? word
            word = ""
        }
        for c in problem {
            if quoted {
                out.append(c)
                if escaped { escaped = false } else if c == "\\" { escaped = true } else if c == "\"" { quoted = false }
            } else if c.isLetter || c.isNumber || c == "-" {
                word.append(c)
            } else {
                flush()
                out.append(c)
                quoted = c == "\""
            }
        }
        flush()
        return out
    }

    /// `'a'`, `'a' or 'b'`, `'a', 'b' or 'c'`.
    static func alternatives(_ keys: [String]) -> String {
        let quoted = keys.map { "'\($0)'" }
        guard quoted.count > 1 else { return quoted.first ?? "" }
        return quoted.dropLast().joined(separator: ", ") + " or " + quoted.last!
    }

    /// The key of `keys` nearest to `key` if it is close enough to be a typo: at most one edit for
    /// short keys, two for longer ones (a swap of neighbours counts as one).
    static func nearest(to key: String, in keys: [String]) -> String? {
        let limit = key.count <= 4 ? 1 : 2
        var best: (key: String, distance: Int)?
        for candidate in keys {
            let d = editDistance(key.lowercased(), candidate)
            if d <= limit, d < (best?.distance ?? .max) { best = (candidate, d) }
        }
        return best?.key
    }

    /// Optimal-string-alignment distance: insertions, deletions, substitutions and swaps of
    /// neighbours.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[a.count][b.count]
    }
}

extension RuleValue {
    /// The tree with the node at `path` (keys and `[i]`, as ``RuleDefinitionError/path``) replaced
    /// by `value`, or given it when a mapping lacks the last key; `value` nil removes the key from
    /// its mapping. Nil when the path goes through anything else or past a list's end.
    func replacing(_ path: [String], with value: RuleValue?) -> RuleValue? {
        guard let first = path.first else { return value }
        let rest = Array(path.dropFirst())
        switch self {
        case .map(var entries, var order):
            if let child = entries[first] {
                if !rest.isEmpty {
                    guard let next = child.replacing(rest, with: value) else { return nil }
                    entries[first] = next
                } else if let value {
                    entries[first] = value
                } else {
                    entries[first] = nil
                    order.removeAll { $0 == first }
                }
            } else {
                guard rest.isEmpty else { return nil }
                guard let value else { return self }
                entries[first] = value
                order.append(first)
            }
            return .map(entries, order: order)
        case .list(var items):
            guard first.first == "[", first.last == "]", let i = Int(first.dropFirst().dropLast()), items.indices.contains(i) else {
                return nil
            }
            if rest.isEmpty {
                guard let value else { return nil }
                items[i] = value
            } else {
                guard let item = items[i].replacing(rest, with: value) else { return nil }
                items[i] = item
            }
            return .list(items)
        default:
            return nil
        }
    }
}
