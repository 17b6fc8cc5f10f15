/// A strict reader of a ``YAMLNode`` tree into a file's values, collecting every problem rather
/// than stopping at the first: the config file's `ConfigDecoder`, the floor plan's
/// `FloorPlanFile.Reader` and the simulator's `ScenarioDecoder` are each one, and read their own
/// sections; the shapes and scalars they share are read here, with the same rules and words:
///
/// - a mapping's unknown keys (with the nearest known one when it is close) and duplicate keys
///   are reported where they are (``YAMLKeys``);
/// - a string is a quoted scalar, or any unquoted scalar but null taken as its text (`name: 1`,
///   an address YAML 1.1 would read as a sexagesimal number);
/// - a number is an integer or a float, finite;
/// - every message starts with the value's path (`regions[1].match.uuid`, `rooms[0].polygon`)
///   and says what was expected and what was found: `PATH: must be EXPECTED, not SUMMARY`.
public protocol YAMLReading {
    var problems: [YAMLProblem] { get set }
}

extension YAMLReading {
    public mutating func report(_ position: YAMLPosition?, _ message: String) {
        problems.append(YAMLProblem(position: position, message: message))
    }

    /// Reports at the value, or at `fallback` (its key) when the value is empty: an empty value's
    /// position is wherever YAML found the next token.
    public mutating func report(at node: YAMLNode, fallback: YAMLPosition? = nil, _ message: String) {
        report(node.isEmpty ? fallback ?? node.position : node.position, message)
    }

    /// Reports a problem of the value at `path` (``YAMLProblem/path``), at the value or its key.
    public mutating func report(at node: YAMLNode, fallback: YAMLPosition? = nil, path: String, _ detail: String) {
        problems.append(YAMLProblem(position: node.isEmpty ? fallback ?? node.position : node.position, path: path, detail: detail))
    }

    /// The entries of a mapping whose keys are among `keys` (nil: any key), each key's first
    /// occurrence; unknown and duplicate keys are reported. Nil (reported) when `node` is not a
    /// mapping.
    public mutating func mapping(_ node: YAMLNode, path: String, keys: [String]?, expected: String = "a mapping") -> [YAMLEntry]? {
        guard case .mapping(let entries) = node.kind else {
            var problem = YAMLProblem(position: node.position, path: path, detail: "must be \(expected), not \(node.summary)")
            if path.isEmpty { problem.message = "the top level must be \(expected), not \(node.summary)" }
            problems.append(problem)
            return nil
        }
        let (known, problems) = YAMLKeys.check(entries, keys: keys, path: path)
        self.problems += problems
        return known
    }

    /// The items of a list of at most `max` items (`holder` names what may hold no more: "a
    /// plan"). Nil (reported) otherwise.
    public mutating func sequence(_ node: YAMLNode, path: String, max: Int, holder: String) -> [YAMLNode]? {
        guard case .sequence(let items) = node.kind else {
            report(at: node, path: path, "must be a list, not \(node.summary)")
            return nil
        }
        guard items.count <= max else {
            report(at: node, path: path, "\(items.count) items are more than \(holder) may have (\(max))")
            return nil
        }
        return items
    }

    /// A string (``YAMLNode/stringValue``), or nil, reported as `PATH: must be EXPECTED, not …`.
    public mutating func string(_ node: YAMLNode, path: String, expected: String = "a string",
                                fallback: YAMLPosition? = nil) -> String? {
        guard let text = node.stringValue else {
            report(at: node, fallback: fallback, path: path, "must be \(expected), not \(node.summary)")
            return nil
        }
        return text
    }

    /// `true` or `false`.
    public mutating func boolean(_ node: YAMLNode, path: String, fallback: YAMLPosition? = nil) -> Bool? {
        guard case .bool(let value) = node.kind else {
            report(at: node, fallback: fallback, path: path, "must be true or false, not \(node.summary)")
            return nil
        }
        return value
    }

    /// A finite number in `range`: `PATH: must be a number, not …`, then `PATH: must be in A…B, not …`.
    public mutating func number(_ node: YAMLNode, path: String, in range: ClosedRange<Double>) -> Double? {
        guard let value = number(node, path: path) else { return nil }
        guard range.contains(value) else {
            let bounds = "\(YAMLNode.show(range.lowerBound))…\(YAMLNode.show(range.upperBound))"
            report(at: node, path: path, "must be in \(bounds), not \(node.text)")
            return nil
        }
        return value
    }

    /// A finite number: `PATH: must be a number, not …`, or `PATH: must be a finite number, not .inf`.
    public mutating func number(_ node: YAMLNode, path: String) -> Double? {
        guard let value = node.numberValue else {
            report(at: node, path: path, "must be a number, not \(node.summary)")
            return nil
        }
        guard value.isFinite else {
            report(at: node, path: path, "must be a finite number, not \(node.text)")
            return nil
        }
        return value
    }

    /// A whole number that fits `T` (an unsigned one up to 2⁶⁴ − 1): `PATH: must be an integer in MIN...MAX, not …`.
    public mutating func integer<T: FixedWidthInteger>(_ node: YAMLNode, path: String, as type: T.Type = T.self) -> T? {
        if case .integer(let n) = node.kind, let value = n.flatMap({ T(exactly: $0) }) ?? node.unsignedValue.flatMap({ T(exactly: $0) }) {
            return value
        }
        report(at: node, path: path, "must be an integer in \(T.min)...\(T.max), not \(node.summary)")
        return nil
    }

    /// A list of `count` finite numbers each in `range`.
    public mutating func numbers(_ node: YAMLNode, path: String, count: ClosedRange<Int>, in range: ClosedRange<Double>) -> [Double]? {
        guard case .sequence(let items) = node.kind, count.contains(items.count) else {
            let shape = count.lowerBound == count.upperBound ? "\(count.lowerBound) numbers"
                : "\(count.lowerBound) or \(count.upperBound) numbers"
            report(at: node, path: path, "must be a list of \(shape), not \(node.summary)")
            return nil
        }
        var out: [Double] = []
        for (i, item) in items.enumerated() {
            guard let value = number(item, path: "\(path)[\(i)]", in: range) else { return nil }
            out.append(value)
        }
        return out
    }
}

extension YAMLNode {
    /// A string: quoted, or any unquoted scalar but null taken as its text (`name: 1`).
    public var stringValue: String? {
        switch kind {
        case .string(let s): s
        case .bool, .integer, .float: isPlain ? text : nil
        default: nil
        }
    }

    /// An integer or a float as a number (an integer beyond 64 bits as its text reads, maybe
    /// infinite); nil for anything else.
    public var numberValue: Double? {
        switch kind {
        case .integer(let n?): Double(n)
        case .integer(nil): Double(text) ?? .infinity
        case .float(let d): d
        default: nil
        }
    }

    /// A number as a person would write it in a message: `3600`, `-1`, `0.5` (not `-1.0`).
    public static func show(_ value: Double) -> String {
        value.isFinite && value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
    }
}
