import Foundation
import ProximityCore

/// Reads a config file's ``ConfigNode`` tree strictly into its values, collecting every problem
/// rather than stopping at the first: unknown keys (with the nearest known one when it is close),
/// duplicate keys, wrong types, out-of-range values, bad regions. Each problem carries the position
/// of the key (unknown, duplicate) or value (type, range) it is about.
///
/// Messages start with the path of the value (`clear-interval`, `region-monitor.exit-period`,
/// `regions[1].match.uuid`) and say what was expected and what was found.
struct ConfigDecoder {
    private(set) var problems: [ConfigProblem] = []
    private(set) var options = RunOptions()
    private(set) var regionMonitor = RegionMonitor.Configuration()
    private(set) var regions: [Region] = []

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
            case "max-peers": options.maxPeers = integer(entry, "an integer", RunOptions.checked(maxPeers:))
            case "beacons": options.beacons = boolean(entry)
            case "log-level": options.logLevel = text(entry, RunOptions.checked(logLevel:))
            case "region-monitor": decodeRegionMonitor(entry.value)
            case "regions":
                regionsEntry = entry
                decodeRegions(entry.value)
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

    /// The region's matcher, or nil if any part is wrong (each reported).
    private mutating func decodeMatcher(_ entry: ConfigEntry, path: String) -> RegionMatcher? {
        let node = entry.value
        guard !isNull(node) else { return RegionMatcher() }
        let names = RegionMatcher.Key.allCases.map(\.configName)
        guard let entries = mapping(node, path: path, keys: names, expected: "a mapping of matcher keys such as uuid: and within:")
        else { return nil }
        var matcher = RegionMatcher()
        var valid = true
        var keyPositions: [RegionMatcher.Key: ConfigPosition] = [:]
        for entry in entries {
            guard let key = RegionMatcher.Key(configName: entry.key) else { continue }
            keyPositions[key] = entry.keyPosition
            let at = "\(path).\(entry.key)"
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

    // MARK: - Shapes

    /// The entries of a mapping whose keys are among `keys`, each key's first occurrence; unknown
    /// and duplicate keys are reported. Nil (reported) when `node` is not a mapping.
    private mutating func mapping(_ node: ConfigNode, path: String, keys: [String], expected: String) -> [ConfigEntry]? {
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
            guard keys.contains(entry.key) else {
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

    private mutating func boolean(_ entry: ConfigEntry) -> Bool? {
        guard case .bool(let b) = entry.value.kind else {
            report(at: entry.value, fallback: entry.keyPosition, "\(entry.key): must be true or false, not \(entry.value.summary)")
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
        var out = ""
        var word = ""
        func flush() {
            out += RegionMatcher.Key.allCases.first { $0.busName == word }?.configName ?? word
            word = ""
        }
        for c in problem {
            if c.isLetter || c.isNumber || c == "-" {
                word.append(c)
            } else {
                flush()
                out.append(c)
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
