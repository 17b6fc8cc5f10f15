/// What the strict readers (the config file's, the floor plan's, the scenario's) say of a mapping's keys, in one
/// style: duplicate keys, and unknown ones with the nearest known key when it is close enough to be
/// a typo.
public enum YAMLKeys {
    /// The entries whose keys are among `keys` (nil: any key), each key's first occurrence, and the
    /// problems of the others: each message starts with the mapping's `path` (none at the top), and
    /// the problem's ``YAMLProblem/path`` is the key's own.
    public static func check(_ entries: [YAMLEntry], keys: [String]?, path: String) -> (known: [YAMLEntry], problems: [YAMLProblem]) {
        let prefix = path.isEmpty ? "" : "\(path): "
        func problem(_ entry: YAMLEntry, _ detail: String) -> YAMLProblem {
            var problem = YAMLProblem(position: entry.keyPosition, path: YAMLProblem.join(path, entry.key), detail: detail)
            problem.message = prefix + detail
            return problem
        }
        var seen: [String: YAMLPosition] = [:]
        var known: [YAMLEntry] = []
        var problems: [YAMLProblem] = []
        for entry in entries {
            if let first = seen[entry.key] {
                problems.append(problem(entry, "duplicate key '\(entry.key)' (first at \(first))"))
                continue
            }
            seen[entry.key] = entry.keyPosition
            if let keys, !keys.contains(entry.key) {
                var detail = "unknown key '\(entry.key)'"
                if let near = nearest(to: entry.key, in: keys) {
                    detail += " (did you mean '\(near)'?)"
                } else if keys.count <= 3 {
                    detail += " (expected \(alternatives(keys)))"
                }
                problems.append(problem(entry, detail))
                continue
            }
            known.append(entry)
        }
        return (known, problems)
    }

    /// `'a'`, `'a' or 'b'`, `'a', 'b' or 'c'`.
    public static func alternatives(_ keys: [String]) -> String {
        let quoted = keys.map { "'\($0)'" }
        guard quoted.count > 1 else { return quoted.first ?? "" }
        return quoted.dropLast().joined(separator: ", ") + " or " + quoted.last!
    }

    /// The key of `keys` nearest to `key` if it is close enough to be a typo: at most one edit for
    /// short keys, two for longer ones (a swap of neighbours counts as one).
    public static func nearest(to key: String, in keys: [String]) -> String? {
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
    public static func editDistance(_ a: String, _ b: String) -> Int {
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
