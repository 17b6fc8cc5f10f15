import Foundation
import StrictYAML
import ProximityCore

/// Reads a config file's ``ConfigNode`` tree strictly into its values, collecting every problem
/// rather than stopping at the first: unknown keys (with the nearest known one when it is close),
/// duplicate keys, wrong types, out-of-range values, bad regions, alerts and rules. Each problem
/// carries the position of the key (unknown, duplicate) or value (type, range) it is about.
///
/// Messages start with the path of the value (`clear-interval`, `region-monitor.exit-period`,
/// `regions[1].match.uuid`, `alerts[0].range`, `rules[0].when.all[1].op`) and say what was
/// expected and what was found.
/// The sections are read in extensions of their own: ConfigDecoder+Regions, +Alerts, +Tracking,
/// +Rules and +MQTT.
struct ConfigDecoder: YAMLReading {
    var problems: [ConfigProblem] = []
    var options = RunOptions()
    var zones = ZoneThresholds()
    var names: [PeerID: String] = [:]
    var regionMonitor = RegionMonitor.Configuration()
    var regions: [Region] = []
    var alerts: [Alert] = []
    var tracking = Tracker.Configuration()
    var rules: [Rule] = []
    var mqtt: MQTTSettings?
    var trust = TrustSettings()
    /// `fleet-key:`'s file and where its value is: read after the tree (``ConfigFile/parse(_:path:)``).
    var fleetKeyFile: String?
    var fleetKeyPosition: ConfigPosition?
    /// `previous-fleet-key:`'s file, how long it is accepted, and where the section is.
    var previousKeyFile: (file: String, until: Date, position: ConfigPosition?)?
    /// `irks:`'s file and where its value is, when it names one: read after the tree.
    var irkFile: String?
    var irkFilePosition: ConfigPosition?
    /// Where inline `irks:` are, when they are.
    var inlineIRKsPosition: ConfigPosition?
    /// `accept-unverified:` as written; absent, it follows the key (``checkSecrets(file:mode:)``).
    var acceptUnverified: Bool?
    /// Where `mqtt.broker:`'s and `mqtt.password-file:`'s values are.
    var mqttBrokerPosition: ConfigPosition?
    var passwordFilePosition: ConfigPosition?

    /// Decodes the document's root; nil (an empty document) is an empty config.
    mutating func decode(_ root: ConfigNode?) {
        guard let root, !root.isNull else { return }
        guard let entries = mapping(root, path: "", keys: ConfigFile.keys, expected: "a mapping of keys such as bus: and regions:")
        else { return }
        var regionsEntry: ConfigEntry?
        for entry in entries {
            // The run options, as their declarations (RunOption) read them; then the sections.
            if let option = RunOption.byKey[entry.key] {
                option.decode(&self, entry)
                continue
            }
            switch entry.key {
            case "zones": decodeZones(entry)
            case "names": decodeNames(entry)
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
            case "fleet-key": decodeFleetKey(entry)
            case "previous-fleet-key": decodePreviousFleetKey(entry)
            case "accept-unverified": decodeAcceptUnverified(entry)
            case "irks": decodeIRKs(entry)
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

    // MARK: - Scalars (the shapes are YAMLReading's)

    /// A string option, checked by `check`.
    mutating func text<T>(_ entry: ConfigEntry, path: String? = nil, _ check: (String) throws(OptionProblem) -> T) -> T? {
        let path = path ?? entry.key
        guard let s = string(entry.value, path: path, fallback: entry.keyPosition) else { return nil }
        do {
            return try check(s)
        } catch {
            report(at: entry.value, "\(path): \(error.message)")
            return nil
        }
    }

    mutating func boolean(_ entry: ConfigEntry, path: String? = nil) -> Bool? {
        boolean(entry.value, path: path ?? entry.key, fallback: entry.keyPosition)
    }

    /// An integer option, checked by `check`; `expected` names the type in the message.
    /// An integer in `range` (`seconds`: a number of seconds, as the messages say).
    mutating func integer(_ entry: ConfigEntry, path: String, in range: ClosedRange<Int>, seconds: Bool = false) -> Int? {
        let bounds = "\(range.lowerBound)...\(range.upperBound)"
        return integer(entry, seconds ? "an integer number of seconds in \(bounds)" : "an integer in \(bounds)",
                       path: path) { n throws(OptionProblem) in
            guard range.contains(n) else {
                throw OptionProblem(seconds ? "must be in \(bounds), not \(n)" : "must be an integer in \(bounds), not \(n)")
            }
            return n
        }
    }

    mutating func integer<T>(_ entry: ConfigEntry, _ expected: String, path: String? = nil,
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
    mutating func number<T>(_ entry: ConfigEntry, _ expected: String, _ check: (Double) throws(OptionProblem) -> T) -> T? {
        number(entry, named: entry.key, expected, check)
    }

    /// A number (integers are taken too) called `name` in the messages, checked by `check`.
    mutating func number<T>(_ entry: ConfigEntry, named name: String, _ expected: String,
                                    _ check: (Double) throws(OptionProblem) -> T) -> T? {
        let node = entry.value
        guard let value = node.numberValue else {
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
    mutating func seconds(_ entry: ConfigEntry, _ path: String, in range: ClosedRange<Double>) -> Double? {
        let expected = "a number of seconds in \(RunOptions.show(range.lowerBound))...\(RunOptions.show(range.upperBound))"
        let text = entry.value.text
        return number(entry, named: path, expected) { (value: Double) throws(OptionProblem) -> Double in
            guard value.isFinite, range.contains(value) else { throw OptionProblem("must be \(expected), not \(text)") }
            return value
        }
    }

    /// `state-dir` in the file: the daemon's working directory is no place to resolve it against.
    static func absolutePath(_ text: String) throws(OptionProblem) -> String {
        let path = try RunOptions.checked(stateDirectory: text)
        guard path.hasPrefix("/") else { throw OptionProblem("must be an absolute path such as /var/lib/proximityd, not '\(text)'") }
        return path
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
    static let matcherBusNames = Dictionary(uniqueKeysWithValues: RegionMatcher.Key.allCases.map { ($0.busName, $0.configName) })
    static let alertBusNames = matcherBusNames.merging(Alert.Key.allCases.map { ($0.busName, $0.configName) }) { $1 }

    /// Each word of `problem` that is a bus name in `names` replaced by its config name; a quoted
    /// value (`"UUID"`, as a message shows what was given) is left as it is.
    static func configNames(in problem: String, _ names: [String: String]) -> String {
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
