import ProximityCore

/// `zones:`.
extension ConfigDecoder {
    /// `zones:`: `immediate:` and `near:`, metres, where those zones end (far beyond); each
    /// defaults to its default, and together they must satisfy 0 < immediate < near.
    mutating func decodeZones(_ section: ConfigEntry) {
        let path = "zones"
        guard !section.value.isNull else { return }
        guard let entries = mapping(section.value, path: path, keys: ConfigFile.zonesKeys,
                                    expected: "a mapping of immediate and near") else {
            return
        }
        var next = zones
        var valid = true
        for entry in entries {
            let key = "\(path).\(entry.key)"
            let text = entry.value.text
            let metres = number(entry, named: key, "a number of metres") { (value: Double) throws(OptionProblem) -> Double in
                guard value.isFinite, value > 0, value <= 1000 else {
                    throw OptionProblem("must be a number of metres above 0 and at most 1000, not \(text)")
                }
                return value
            }
            guard let metres else {
                valid = false
                continue
            }
            if entry.key == "immediate" { next.immediate = metres } else { next.near = metres }
        }
        guard valid else { return }
        if let problem = ZoneThresholds.problem(immediate: next.immediate, near: next.near) {
            report(section.keyPosition, "\(path): \(problem)")
            return
        }
        zones = next
    }
}
