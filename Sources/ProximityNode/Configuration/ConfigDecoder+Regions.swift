import Foundation
import ProximityCore

/// `region-monitor:` and `regions:`, and the matchers regions and alerts share.
extension ConfigDecoder {
    // MARK: - Sections

    mutating func decodeRegionMonitor(_ node: ConfigNode) {
        let path = "region-monitor"
        guard !node.isNull else { return }
        guard let entries = mapping(node, path: path, keys: ConfigFile.regionMonitorKeys,
                                    expected: "a mapping of exit-period, max-regions and restore-limit") else { return }
        for entry in entries {
            let key = "\(path).\(entry.key)"
            switch entry.key {
            case "exit-period":
                if let v = seconds(entry, key, in: RegionMatcher.exitPeriodRange) { regionMonitor.defaultExitPeriod = v }
            case "max-regions":
                if let v = integer(entry, path: key, in: RegionMonitor.Configuration.maxRegionsRange) { regionMonitor.maxRegions = v }
            case "restore-limit":
                if let v = seconds(entry, key, in: RegionMonitor.Configuration.restoreLimitRange) { regionMonitor.restoreLimit = v }
            default: break
            }
        }
    }

    mutating func decodeRegions(_ node: ConfigNode) {
        guard !node.isNull else { return }
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
    mutating func decodeMatcher(_ entry: ConfigEntry, path: String, refusing refused: Set<RegionMatcher.Key> = [],
                                        refusal: String = "", expected: String = "a mapping of matcher keys such as uuid: and within:")
        -> RegionMatcher? {
        let node = entry.value
        guard !node.isNull else { return RegionMatcher() }
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
    mutating func matcherValue(_ entry: ConfigEntry, _ key: RegionMatcher.Key, path: String) -> RegionMatcher.Value? {
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
            if let s = node.stringValue { return .text(s) }
        case (.boolean, _):
            return boolean(entry, path: path).map(RegionMatcher.Value.boolean)
        default:
            break
        }
        report(at: node, fallback: entry.keyPosition, "\(path): must be \(key.valueType.description), not \(node.summary)")
        return nil
    }
}
