import ProximityCore

/// `names:`.
extension ConfigDecoder {
    /// `names:`: a mapping of peer identifier (as `GetRanging` lists them; capitals are put right)
    /// to display name (``PeerNames/problem(name:)``), at most ``PeerNames/maxGiven`` of them.
    mutating func decodeNames(_ section: ConfigEntry) {
        let path = "names"
        guard !section.value.isNull else { return }
        guard let entries = mapping(section.value, path: path, keys: nil, expected: "a mapping of peer identifier to name") else { return }
        if entries.count > PeerNames.maxGiven {
            report(section.keyPosition, "\(path): \(entries.count) names are more than a config file may give (\(PeerNames.maxGiven))")
            return
        }
        for entry in entries {
            let identifier = PeerID.canonical(entry.key)
            if let problem = PeerID.formProblem(identifier) {
                report(entry.keyPosition, "\(path): \(problem)")
                continue
            }
            if names[PeerID(identifier)] != nil {
                report(entry.keyPosition, "\(path): \(identifier) is named twice")
                continue
            }
            guard let name = text(entry, path: "\(path).\(entry.key)", { (name: String) throws(OptionProblem) -> String in
                if let problem = PeerNames.problem(name: name) { throw OptionProblem(problem) }
                return name
            }) else { continue }
            names[PeerID(identifier)] = name
        }
    }
}
