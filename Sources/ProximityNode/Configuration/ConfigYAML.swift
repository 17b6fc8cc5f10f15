import Foundation
import Yams

/// A place in the config file: 1-based line and column, the column counted in characters (as
/// libyaml counts them).
struct ConfigPosition: Sendable, Hashable, Comparable, CustomStringConvertible {
    var line: Int
    var column: Int

    init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    init(_ mark: Mark?) {
        self.init(line: mark?.line ?? 1, column: mark?.column ?? 1)
    }

    static func < (a: ConfigPosition, b: ConfigPosition) -> Bool {
        (a.line, a.column) < (b.line, b.column)
    }

    /// `12:5`
    var description: String { "\(line):\(column)" }
}

/// One thing wrong with the config file, where it is (nil: the file as a whole).
struct ConfigProblem: Sendable, Hashable {
    var position: ConfigPosition?
    var message: String

    /// `FILE:LINE:COLUMN: message`, or `FILE: message`.
    func line(file: String) -> String {
        if let position { "\(file):\(position): \(message)" } else { "\(file): \(message)" }
    }
}

/// A value of the config file as YAML gave it, with its position: what ``ConfigDecoder`` reads.
struct ConfigNode: Sendable {
    /// What YAML resolved the value to (YAML 1.1's rules, as Yams applies them).
    enum Kind: Sendable {
        case null
        case bool(Bool)
        /// nil: an integer too large for 64 bits.
        case integer(Int64?)
        case float(Double)
        case string(String)
        case sequence([ConfigNode])
        case mapping([ConfigEntry])
    }

    var kind: Kind
    var position: ConfigPosition
    /// A scalar's text as YAML read it (without quotes), whatever type it resolved to.
    var text: String
    /// An unquoted scalar: its text may be taken as a string even if YAML resolved it to a number.
    var isPlain: Bool

    /// `key:` with nothing after it.
    var isEmpty: Bool {
        if case .null = kind { return isPlain && text.isEmpty }
        return false
    }

    /// What it is, for "must be …, not <this>" messages.
    var summary: String {
        switch kind {
        case .null: isEmpty ? "an empty value" : "null"
        case .bool: "the boolean \(text)"
        case .integer, .float: "the number \(text)"
        case .string(let s): "the string \(s.debugDescription)"
        case .sequence: "a list"
        case .mapping: "a mapping"
        }
    }
}

/// A key and its value in a mapping, in the order of the file.
struct ConfigEntry: Sendable {
    var key: String
    var keyPosition: ConfigPosition
    var value: ConfigNode
}

/// Turns the config file's bytes into ``ConfigNode``s through `Yams.compose`, keeping every
/// position.
///
/// Yams refuses a mapping with a duplicate key outright, with the place of the key's *first*
/// occurrence and no tree, which would leave one problem to report. So the first occurrence is
/// renamed in the text (to as many characters of Unicode's private use area, so no column moves)
/// and the text is composed again; the decoder then sees both occurrences under their own name and
/// reports the duplicate where it is, among the file's other problems.
enum ConfigYAML {
    /// At most this many duplicate keys are renamed; past that the next is reported alone.
    static let maxRenamedKeys = 1_000

    /// The document's root (nil for an empty document or one with only comments), or the
    /// problems that stop it being read at all (bytes that are not UTF-8, a YAML syntax error)
    /// and those found on the way (keys that are not scalars).
    static func parse(_ bytes: [UInt8]) -> (root: ConfigNode?, problems: [ConfigProblem]) {
        // A byte-order mark: dropped, as an editor hides it (Yams cannot compose a text that has one).
        let bytes = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(bytes.dropFirst(3)) : bytes
        if let bad = firstInvalidUTF8(bytes) {
            return (nil, [ConfigProblem(position: bad, message: "the file is not UTF-8 text")])
        }
        var scalars = Array(String(decoding: bytes, as: UTF8.self).unicodeScalars)
        if let deep = ConfigLimits.firstTooDeep(scalars) {
            return (nil, [ConfigProblem(position: deep, message: "collections nested more than \(ConfigLimits.maxDepth) deep")])
        }
        var originals: [String: String] = [:]
        var renamed = 0
        while true {
            let root: Node?
            var view = String.UnicodeScalarView()
            view.append(contentsOf: scalars)
            let text = String(view)
            do {
                root = try Yams.compose(yaml: text, .default, .default, .utf8)
            } catch YamlError.duplicatedKeysInMapping(let duplicates, let context) {
                let key = duplicates.first ?? ""
                if renamed < maxRenamedKeys, let placeholder = rename(key, at: context.mark, in: &scalars, number: renamed) {
                    originals[placeholder] = key
                    renamed += 1
                    continue
                }
                return (nil, [ConfigProblem(position: ConfigPosition(context.mark), message: "duplicate key '\(key)'")])
            } catch let error as YamlError {
                // Positions from the text as composed: a placeholder has as many characters as the key it replaced.
                return (nil, [problem(error, bytes: Array(text.utf8))])
            } catch {
                return (nil, [ConfigProblem(position: nil, message: "invalid YAML: \(error)")])
            }
            guard let root else { return (nil, []) }
            var converter = Converter(originals: originals)
            let node = converter.node(root)
            return (converter.tooMany ? nil : node, converter.problems)
        }
    }

    // MARK: Syntax errors

    private static func problem(_ error: YamlError, bytes: [UInt8]) -> ConfigProblem {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
             .composer(let context, let problem, let mark, _):
            var message = "invalid YAML: \(problem)"
            if let context, !context.text.isEmpty {
                message += " (\(context.text) at \(ConfigPosition(context.mark)))"
            }
            return ConfigProblem(position: ConfigPosition(mark), message: message)
        case .reader(let problem, let offset, _, _):
            return ConfigProblem(position: offset.map { position(ofByte: $0, in: bytes) }, message: "invalid YAML: \(problem)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            return ConfigProblem(position: ConfigPosition(context.mark),
                                 message: "duplicate key \(duplicates.map { "'\($0)'" }.joined(separator: ", "))")
        default:
            return ConfigProblem(position: nil, message: "invalid YAML: \(error)")
        }
    }

    /// The position of the byte at `offset`, counting characters as libyaml does.
    static func position(ofByte offset: Int, in bytes: [UInt8]) -> ConfigPosition {
        let scalars = String(decoding: bytes.prefix(max(0, offset)), as: UTF8.self).unicodeScalars
        var position = ConfigPosition(line: 1, column: 1)
        var previous: Unicode.Scalar?
        for scalar in scalars {
            if isBreak(scalar) {
                if !(scalar == "\n" && previous == "\r") {
                    position.line += 1
                }
                position.column = 1
            } else {
                position.column += 1
            }
            previous = scalar
        }
        return position
    }

    /// Where the first byte that is not part of valid UTF-8 is, or nil.
    static func firstInvalidUTF8(_ bytes: [UInt8]) -> ConfigPosition? {
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        var consumed: [Unicode.Scalar] = []
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar):
                consumed.append(scalar)
            case .emptyInput:
                return nil
            case .error:
                var text = String.UnicodeScalarView()
                text.append(contentsOf: consumed)
                return position(ofByte: String(text).utf8.count, in: bytes)
            }
        }
    }

    private static func isBreak(_ scalar: Unicode.Scalar) -> Bool {
        scalar == "\n" || scalar == "\r" || scalar == "\u{85}" || scalar == "\u{2028}" || scalar == "\u{2029}"
    }

    // MARK: Renaming a duplicate key

    /// Replaces the key `key` that starts at `mark` (plain, or quoted without escapes) with a
    /// placeholder of the same length; returns the placeholder, or nil if the text there is not
    /// the key as written.
    private static func rename(_ key: String, at mark: Mark, in scalars: inout [Unicode.Scalar], number: Int) -> String? {
        let keyScalars = Array(key.unicodeScalars)
        guard !keyScalars.isEmpty, let start = index(of: mark, in: scalars),
              let filler = Unicode.Scalar(0xE000 + UInt32(number)) else { return nil }
        func matches(at i: Int) -> Bool {
            i + keyScalars.count <= scalars.count && Array(scalars[i ..< i + keyScalars.count]) == keyScalars
        }
        let first: Int
        if matches(at: start) {
            first = start
        } else if scalars[start] == "\"" || scalars[start] == "'", matches(at: start + 1),
                  start + 1 + keyScalars.count < scalars.count, scalars[start + 1 + keyScalars.count] == scalars[start] {
            first = start + 1
        } else {
            return nil
        }
        let placeholder = Array(repeating: filler, count: keyScalars.count)
        scalars.replaceSubrange(first ..< first + keyScalars.count, with: placeholder)
        var text = String.UnicodeScalarView()
        text.append(contentsOf: placeholder)
        return String(text)
    }

    /// The index in `scalars` of the character at `mark`, counting lines as libyaml does.
    private static func index(of mark: Mark, in scalars: [Unicode.Scalar]) -> Int? {
        var line = 1
        var i = 0
        while line < mark.line {
            guard i < scalars.count else { return nil }
            let scalar = scalars[i]
            i += 1
            if isBreak(scalar) {
                if scalar == "\r", i < scalars.count, scalars[i] == "\n" { i += 1 }
                line += 1
            }
        }
        let index = i + mark.column - 1
        return index < scalars.count ? index : nil
    }

    // MARK: Yams nodes to ConfigNodes

    /// Converts Yams' nodes, naming renamed keys by their original name again.
    private struct Converter {
        let originals: [String: String]
        var problems: [ConfigProblem] = []
        /// Values converted so far, each alias counted as the whole value it names.
        var values = 0
        /// More than ``ConfigLimits/maxValues``: the conversion stopped, and the tree is not used.
        var tooMany = false

        mutating func node(_ node: Node) -> ConfigNode {
            let position = ConfigPosition(node.mark)
            values += 1
            guard values <= ConfigLimits.maxValues else {
                if !tooMany {
                    tooMany = true
                    problems.append(ConfigProblem(position: position, message: """
                        more than \(ConfigLimits.maxValues) values, with YAML aliases expanded (each alias stands for \
                        the whole value of its anchor)
                        """))
                }
                return ConfigNode(kind: .null, position: position, text: "", isPlain: false)
            }
            switch node {
            case .scalar(let scalar):
                let kind: ConfigNode.Kind
                switch Tag.Name(rawValue: node.tag.rawValue) {
                case .null:
                    kind = .null
                case .bool:
                    kind = Bool.construct(from: scalar).map(ConfigNode.Kind.bool) ?? .string(scalar.string)
                case .int:
                    kind = .integer(Int64.construct(from: scalar))
                case .float:
                    kind = .float(Double.construct(from: scalar) ?? .nan)
                default:
                    kind = .string(scalar.string)
                }
                return ConfigNode(kind: kind, position: position, text: scalar.string, isPlain: scalar.style == .plain)
            case .sequence(let sequence):
                return ConfigNode(kind: .sequence(sequence.map { self.node($0) }), position: position, text: "", isPlain: false)
            case .mapping(let mapping):
                var entries: [ConfigEntry] = []
                for (key, value) in mapping {
                    guard case .scalar(let keyScalar) = key else {
                        let what = if case .sequence = key { "a list" } else { "a mapping" }
                        problems.append(ConfigProblem(position: ConfigPosition(key.mark), message: "a key must be a name, not \(what)"))
                        continue
                    }
                    entries.append(ConfigEntry(key: originals[keyScalar.string] ?? keyScalar.string,
                                               keyPosition: ConfigPosition(key.mark), value: self.node(value)))
                }
                return ConfigNode(kind: .mapping(entries), position: position, text: "", isPlain: false)
            case .alias(let alias):
                // Yams resolves aliases while composing; one left here would be a change in Yams.
                problems.append(ConfigProblem(position: ConfigPosition(alias.mark), message: "unresolved YAML alias"))
                return ConfigNode(kind: .null, position: position, text: "", isPlain: false)
            }
        }
    }
}
