import Foundation
import LibCrypto
import StrictYAML

// MARK: - The parsed document, whatever the syntax

/// A parsed JSON or YAML document: the subset of both that a scenario uses, with the place of
/// every value for error messages. YAML comes through the strict tree the daemon's config file
/// uses (StrictYAML): positions, duplicate keys refused where they are, its limits.
struct ScenarioTree {
    struct Number {
        var value: Double
        /// As written in the source.
        var text: String
        /// Set when the source wrote an integer that fits.
        var int64: Int64?
        var uint64: UInt64?
    }

    struct Entry {
        var key: String
        var keyPlace: ScenarioPlace?
        var value: ScenarioTree
    }

    enum Kind {
        case null
        case bool(Bool)
        case number(Number)
        case string(String)
        case sequence([ScenarioTree])
        case mapping([Entry])
    }

    var kind: Kind
    var place: ScenarioPlace?
    /// The source text of an unquoted YAML scalar, whatever type YAML resolved it to.
    var plainText: String?

    var isNull: Bool {
        if case .null = kind { return true }
        return false
    }

    var kindDescription: String {
        switch kind {
        case .null: "null"
        case .bool(let value): "the boolean \(value)"
        case .number(let number): "the number \(number.text)"
        case .string(let text): "the string \"\(text)\""
        case .sequence: "a list"
        case .mapping: "a mapping"
        }
    }

    static func parse(_ bytes: [UInt8], format: ScenarioFormat) throws(ScenarioError) -> ScenarioTree {
        switch format {
        case .json:
            var reader = ScenarioJSONReader(bytes)
            return try reader.document()
        case .yaml:
            return try yaml(bytes)
        }
    }

    // MARK: YAML, through StrictYAML

    static func yaml(_ bytes: [UInt8]) throws(ScenarioError) -> ScenarioTree {
        let (root, problems) = StrictYAML.parse(bytes)
        if let problem = problems.min(by: { ($0.position ?? .init(line: 0, column: 0)) < ($1.position ?? .init(line: 0, column: 0)) }) {
            throw ScenarioError(path: "", message: problem.message).at(problem.position.map(ScenarioPlace.init))
        }
        guard let root else {
            throw ScenarioError(path: "", message: "the scenario is empty")
        }
        return try ScenarioTree(yaml: root, depth: 0)
    }

    private init(kind: Kind, place: ScenarioPlace?, plainText: String? = nil) {
        self.kind = kind
        self.place = place
        self.plainText = plainText
    }

    private init(yaml node: YAMLNode, depth: Int) throws(ScenarioError) {
        let place = ScenarioPlace(node.position)
        guard depth < ScenarioJSONReader.maximumDepth else {
            throw ScenarioError(path: "", message: "nested too deeply").at(place)
        }
        switch node.kind {
        case .null:
            self.init(kind: .null, place: place, plainText: node.isPlain ? node.text : nil)
        case .bool(let b):
            self.init(kind: .bool(b), place: place, plainText: node.isPlain ? node.text : nil)
        case .integer(let int64):
            let uint64 = node.unsignedValue
            let value = int64.map(Double.init) ?? uint64.map(Double.init) ?? Double(node.text) ?? .nan
            self.init(kind: .number(Number(value: value, text: node.text, int64: int64, uint64: uint64)), place: place,
                      plainText: node.isPlain ? node.text : nil)
        case .float(let d):
            self.init(kind: .number(Number(value: d, text: node.text)), place: place, plainText: node.isPlain ? node.text : nil)
        case .string(let text):
            self.init(kind: .string(text), place: place, plainText: node.isPlain ? node.text : nil)
        case .sequence(let sequence):
            var items: [ScenarioTree] = []
            for item in sequence {
                items.append(try ScenarioTree(yaml: item, depth: depth + 1))
            }
            self.init(kind: .sequence(items), place: place)
        case .mapping(let mapping):
            var entries: [Entry] = []
            var seen: [String: YAMLPosition] = [:]
            for entry in mapping {
                // Refused where the second one is, as the config file refuses it.
                if let first = seen[entry.key] {
                    throw ScenarioError(path: "", message: "duplicate key '\(entry.key)' (first at \(first))")
                        .at(ScenarioPlace(entry.keyPosition))
                }
                seen[entry.key] = entry.keyPosition
                entries.append(Entry(key: entry.key, keyPlace: ScenarioPlace(entry.keyPosition),
                                     value: try ScenarioTree(yaml: entry.value, depth: depth + 1)))
            }
            self.init(kind: .mapping(entries), place: place)
        }
    }

    // MARK: JSON

    static func json(_ kind: Kind, place: ScenarioPlace) -> ScenarioTree {
        ScenarioTree(kind: kind, place: place)
    }
}

extension ScenarioPlace {
    init(_ position: YAMLPosition) {
        self.init(line: position.line, column: position.column)
    }
}
