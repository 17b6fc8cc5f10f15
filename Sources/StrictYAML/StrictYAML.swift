import Foundation
import Yams

/// A place in a YAML document: 1-based line and column, the column counted in characters (as
/// libyaml counts them).
public struct YAMLPosition: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var line: Int
    public var column: Int

    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    init(_ mark: Mark?) {
        self.init(line: mark?.line ?? 1, column: mark?.column ?? 1)
    }

    public static func < (a: YAMLPosition, b: YAMLPosition) -> Bool {
        (a.line, a.column) < (b.line, b.column)
    }

    /// `12:5`
    public var description: String { "\(line):\(column)" }
}

/// One thing wrong with a document, where it is (nil: the document as a whole).
public struct YAMLProblem: Sendable, Hashable {
    public var position: YAMLPosition?
    /// The whole message, as a file's reader prints it: `regions[1].match.uuid: must be a string, not a list`.
    public var message: String
    /// The path of the value it is about (`regions[1].match.uuid`; a key's own path for an unknown
    /// or duplicate key; "" for the document), when a ``YAMLReading`` reported it.
    public var path: String?
    /// The message without its path: `must be a string, not a list`.
    public var detail: String

    public init(position: YAMLPosition?, message: String) {
        self.position = position
        self.message = message
        detail = message
    }

    /// A problem of the value at `path`: its message is `PATH: DETAIL` (`DETAIL` at the top).
    public init(position: YAMLPosition?, path: String, detail: String) {
        self.position = position
        self.path = path
        self.detail = detail
        message = path.isEmpty ? detail : "\(path): \(detail)"
    }

    /// `a.b`, `a[0]`: `key` (or an index, `[0]`) under `path` ("" at the top).
    public static func join(_ path: String, _ key: String) -> String {
        if path.isEmpty { return key }
        if key.isEmpty { return path }
        return key.hasPrefix("[") ? path + key : path + "." + key
    }

    /// `FILE:LINE:COLUMN: message`, or `FILE: message`.
    public func line(file: String) -> String {
        if let position { "\(file):\(position): \(message)" } else { "\(file): \(message)" }
    }
}

/// A value of a document as YAML gave it, with its position: what a strict reader (the config
/// file's `ConfigDecoder`, the simulator's scenario reader) reads.
public struct YAMLNode: Sendable {
    /// What YAML resolved the value to (YAML 1.1's rules, as Yams applies them).
    public enum Kind: Sendable {
        case null
        case bool(Bool)
        /// nil: an integer too large for 64 bits (``YAMLNode/unsignedValue`` may still hold it).
        case integer(Int64?)
        case float(Double)
        case string(String)
        case sequence([YAMLNode])
        /// The entries in the order of the document, a duplicate key's every occurrence among
        /// them: the reader reports the duplicate, with the path it knows.
        case mapping([YAMLEntry])
    }

    public var kind: Kind
    public var position: YAMLPosition
    /// A scalar's text as YAML read it (without quotes), whatever type it resolved to.
    public var text: String
    /// An unquoted scalar: its text may be taken as a string even if YAML resolved it to a number.
    public var isPlain: Bool

    public init(kind: Kind, position: YAMLPosition, text: String, isPlain: Bool) {
        self.kind = kind
        self.position = position
        self.text = text
        self.isPlain = isPlain
    }

    /// `key:` with nothing after it.
    public var isEmpty: Bool {
        if case .null = kind { return isPlain && text.isEmpty }
        return false
    }

    public var isNull: Bool {
        if case .null = kind { return true }
        return false
    }

    /// An integer's value as an unsigned 64-bit number, read from its text as YAML reads integers
    /// (`0x10`, `1_000`); nil for anything else, or a negative or larger integer.
    public var unsignedValue: UInt64? {
        guard case .integer = kind else { return nil }
        return UInt64.construct(from: Node.Scalar(text))
    }

    /// What it is, for "must be …, not <this>" messages.
    public var summary: String {
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

/// A key and its value in a mapping, in the order of the document.
public struct YAMLEntry: Sendable {
    public var key: String
    public var keyPosition: YAMLPosition
    public var value: YAMLNode

    public init(key: String, keyPosition: YAMLPosition, value: YAMLNode) {
        self.key = key
        self.keyPosition = keyPosition
        self.value = value
    }
}

/// Turns a YAML document's bytes into ``YAMLNode``s through `Yams.compose`, keeping every
/// position, within ``YAMLLimits``.
///
/// Yams refuses a mapping with a duplicate key outright, with the place of the key's *first*
/// occurrence and no tree, which would leave one problem to report. So the first occurrence is
/// renamed in the text (to as many characters of Unicode's private use area, so no column moves)
/// and the text is composed again; the reader then sees both occurrences under their own name and
/// reports the duplicate where it is, among the document's other problems.
public enum StrictYAML {
    /// At most this many duplicate keys are renamed; past that the next is reported alone.
    public static let maxRenamedKeys = 1_000

    /// The document's root (nil for an empty document or one with only comments), or the
    /// problems that stop it being read at all (bytes that are not UTF-8, a YAML syntax error)
    /// and those found on the way (keys that are not scalars).
    public static func parse(_ bytes: [UInt8]) -> (root: YAMLNode?, problems: [YAMLProblem]) {
        // A byte-order mark: dropped, as an editor hides it (Yams cannot compose a text that has one).
        let bytes = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(bytes.dropFirst(3)) : bytes
        if let bad = firstInvalidUTF8(bytes) {
            return (nil, [YAMLProblem(position: bad, message: "the file is not UTF-8 text")])
        }
        var scalars = Array(String(decoding: bytes, as: UTF8.self).unicodeScalars)
        if let deep = YAMLLimits.firstTooDeep(scalars) {
            return (nil, [YAMLProblem(position: deep, message: "collections nested more than \(YAMLLimits.maxDepth) deep")])
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
                return (nil, [YAMLProblem(position: YAMLPosition(context.mark), message: "duplicate key '\(key)'")])
            } catch let error as YamlError {
                // Positions from the text as composed: a placeholder has as many characters as the key it replaced.
                return (nil, [problem(error, bytes: Array(text.utf8))])
            } catch {
                return (nil, [YAMLProblem(position: nil, message: "invalid YAML: \(error)")])
            }
            guard let root else { return (nil, []) }
            var converter = Converter(originals: originals)
            let node = converter.node(root)
            return (converter.tooMany ? nil : node, converter.problems)
        }
    }

    // MARK: Syntax errors

    private static func problem(_ error: YamlError, bytes: [UInt8]) -> YAMLProblem {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
             .composer(let context, let problem, let mark, _):
            var message = "invalid YAML: \(problem)"
            if let context, !context.text.isEmpty {
                message += " (\(context.text) at \(YAMLPosition(context.mark)))"
            }
            return YAMLProblem(position: YAMLPosition(mark), message: message)
        case .reader(let problem, let offset, _, _):
            return YAMLProblem(position: offset.map { position(ofByte: $0, in: bytes) }, message: "invalid YAML: \(problem)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            return YAMLProblem(position: YAMLPosition(context.mark),
                                 message: "duplicate key \(duplicates.map { "'\($0)'" }.joined(separator: ", "))")
        default:
            return YAMLProblem(position: nil, message: "invalid YAML: \(error)")
        }
    }

    /// The position of the byte at `offset`, counting characters as libyaml does.
    public static func position(ofByte offset: Int, in bytes: [UInt8]) -> YAMLPosition {
        let scalars = String(decoding: bytes.prefix(max(0, offset)), as: UTF8.self).unicodeScalars
        var position = YAMLPosition(line: 1, column: 1)
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
    public static func firstInvalidUTF8(_ bytes: [UInt8]) -> YAMLPosition? {
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

    // MARK: Yams nodes to YAMLNodes

    /// Converts Yams' nodes, naming renamed keys by their original name again.
    private struct Converter {
        let originals: [String: String]
        var problems: [YAMLProblem] = []
        /// Values converted so far, each alias counted as the whole value it names.
        var values = 0
        /// More than ``YAMLLimits/maxValues``: the conversion stopped, and the tree is not used.
        var tooMany = false

        mutating func node(_ node: Node) -> YAMLNode {
            let position = YAMLPosition(node.mark)
            values += 1
            guard values <= YAMLLimits.maxValues else {
                if !tooMany {
                    tooMany = true
                    problems.append(YAMLProblem(position: position, message: """
                        more than \(YAMLLimits.maxValues) values, with YAML aliases expanded (each alias stands for \
                        the whole value of its anchor)
                        """))
                }
                return YAMLNode(kind: .null, position: position, text: "", isPlain: false)
            }
            switch node {
            case .scalar(let scalar):
                let kind: YAMLNode.Kind
                switch Tag.Name(rawValue: node.tag.rawValue) {
                case .null:
                    kind = .null
                case .bool:
                    kind = Bool.construct(from: scalar).map(YAMLNode.Kind.bool) ?? .string(scalar.string)
                case .int:
                    kind = .integer(Int64.construct(from: scalar))
                case .float:
                    kind = .float(Double.construct(from: scalar) ?? .nan)
                default:
                    kind = .string(scalar.string)
                }
                return YAMLNode(kind: kind, position: position, text: scalar.string, isPlain: scalar.style == .plain)
            case .sequence(let sequence):
                return YAMLNode(kind: .sequence(sequence.map { self.node($0) }), position: position, text: "", isPlain: false)
            case .mapping(let mapping):
                var entries: [YAMLEntry] = []
                for (key, value) in mapping {
                    guard case .scalar(let keyScalar) = key else {
                        let what = if case .sequence = key { "a list" } else { "a mapping" }
                        problems.append(YAMLProblem(position: YAMLPosition(key.mark), message: "a key must be a name, not \(what)"))
                        continue
                    }
                    entries.append(YAMLEntry(key: originals[keyScalar.string] ?? keyScalar.string,
                                               keyPosition: YAMLPosition(key.mark), value: self.node(value)))
                }
                return YAMLNode(kind: .mapping(entries), position: position, text: "", isPlain: false)
            case .alias(let alias):
                // Yams resolves aliases while composing; one left here would be a change in Yams.
                problems.append(YAMLProblem(position: YAMLPosition(alias.mark), message: "unresolved YAML alias"))
                return YAMLNode(kind: .null, position: position, text: "", isPlain: false)
            }
        }
    }
}
