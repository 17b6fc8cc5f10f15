import Foundation
import LibCrypto
import StrictYAML

/// A strict RFC 8259 JSON reader that keeps what a scenario's errors need and Foundation's
/// `JSONSerialization` drops: the line and column of every value, duplicate keys, integers versus
/// numbers versus booleans. It gives the same tree as a YAML scenario (``YAMLNode``, none of its
/// scalars plain: a JSON number is never a string), for the one reader of both.
struct ScenarioJSONReader {
    static let maximumDepth = 64

    private let bytes: [UInt8]
    private var index = 0
    private var line = 1
    private var lineStart = 0

    init(_ bytes: [UInt8]) {
        var bytes = bytes
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }  // a byte-order mark
        self.bytes = bytes
    }

    mutating func document() throws(ScenarioError) -> YAMLNode {
        skipWhitespace()
        guard index < bytes.count else {
            throw ScenarioError(path: "", message: "the scenario is empty")
        }
        let value = try value(depth: 0)
        skipWhitespace()
        guard index == bytes.count else {
            throw failure("unexpected \(current) after the document")
        }
        return value
    }

    /// Where the reader is: the line, and the column in characters.
    private var place: YAMLPosition {
        YAMLPosition(line: line, column: 1 + bytes[lineStart ..< index].count { $0 & 0xC0 != 0x80 })
    }

    private static func node(_ kind: YAMLNode.Kind, _ position: YAMLPosition, text: String = "") -> YAMLNode {
        YAMLNode(kind: kind, position: position, text: text, isPlain: false)
    }

    private var current: String {
        guard index < bytes.count else { return "end of input" }
        let byte = bytes[index]
        guard (0x21...0x7E).contains(byte) else { return String(format: "byte 0x%02X", byte) }
        return byte == UInt8(ascii: "'") ? "\"'\"" : "'\(Character(Unicode.Scalar(byte)))'"
    }

    private func failure(_ message: String) -> ScenarioError {
        ScenarioError(path: "", message: "invalid JSON at column \(index - lineStart + 1): \(message)", line: line)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0D:
                index += 1
            case 0x0A:
                index += 1
                line += 1
                lineStart = index
            default:
                return
            }
        }
    }

    private mutating func expect(_ byte: UInt8, _ what: String) throws(ScenarioError) {
        guard index < bytes.count, bytes[index] == byte else {
            throw failure("expected \(what), found \(current)")
        }
        index += 1
    }

    private mutating func value(depth: Int) throws(ScenarioError) -> YAMLNode {
        guard depth < Self.maximumDepth else { throw failure("nested too deeply") }
        guard index < bytes.count else { throw failure("expected a value, found end of input") }
        let start = place
        switch bytes[index] {
        case UInt8(ascii: "{"):
            index += 1
            var entries: [YAMLEntry] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return Self.node(.mapping(entries), start)
            }
            while true {
                skipWhitespace()
                let keyPlace = place
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                    throw failure("expected a key in double quotes, found \(current)")
                }
                let key = try string()
                skipWhitespace()
                try expect(UInt8(ascii: ":"), "':'")
                skipWhitespace()
                entries.append(YAMLEntry(key: key, keyPosition: keyPlace, value: try value(depth: depth + 1)))
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                try expect(UInt8(ascii: "}"), "',' or '}'")
                return Self.node(.mapping(entries), start)
            }
        case UInt8(ascii: "["):
            index += 1
            var items: [YAMLNode] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return Self.node(.sequence(items), start)
            }
            while true {
                skipWhitespace()
                items.append(try value(depth: depth + 1))
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                try expect(UInt8(ascii: "]"), "',' or ']'")
                return Self.node(.sequence(items), start)
            }
        case UInt8(ascii: "\""):
            let text = try string()
            return Self.node(.string(text), start, text: text)
        case UInt8(ascii: "t"):
            try literal("true")
            return Self.node(.bool(true), start, text: "true")
        case UInt8(ascii: "f"):
            try literal("false")
            return Self.node(.bool(false), start, text: "false")
        case UInt8(ascii: "n"):
            try literal("null")
            return Self.node(.null, start, text: "null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try number(at: start)
        default:
            throw failure("expected a value, found \(current)")
        }
    }

    private mutating func literal(_ word: String) throws(ScenarioError) {
        let expected = Array(word.utf8)
        guard bytes[index...].starts(with: expected) else { throw failure("expected a value, found \(current)") }
        index += expected.count
    }

    private mutating func string() throws(ScenarioError) -> String {
        index += 1  // the opening quote
        var out: [UInt8] = []
        while true {
            guard index < bytes.count else { throw failure("unterminated string") }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw failure("unterminated string") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try hex4()
                    if (0xD800...0xDBFF).contains(code) {
                        guard bytes[index...].starts(with: Array("\\u".utf8)) else { throw failure("unpaired surrogate in \\u escape") }
                        index += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw failure("unpaired surrogate in \\u escape") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw failure("unpaired surrogate in \\u escape") }
                    out.append(contentsOf: Array(String(Character(scalar)).utf8))
                default:
                    index -= 2
                    throw failure("invalid escape sequence in a string")
                }
            case 0x00..<0x20:
                throw failure("control character in a string (escape it)")
            default:
                out.append(byte)
                index += 1
            }
        }
    }

    private mutating func hex4() throws(ScenarioError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw failure("\\u needs four hex digits") }
        var code: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let digit: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw failure("\\u needs four hex digits")
            }
            code = code << 4 | digit
            index += 1
        }
        return code
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    private mutating func number(at start: YAMLPosition) throws(ScenarioError) -> YAMLNode {
        let first = index
        func digits() -> Int {
            let from = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            return index - from
        }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        let integerStart = index
        guard digits() > 0 else { throw failure("expected digits, found \(current)") }
        if bytes[integerStart] == UInt8(ascii: "0"), index - integerStart > 1 {
            index = integerStart + 1
            throw failure("leading zeros are not allowed")
        }
        var isInteger = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            isInteger = false
            guard digits() > 0 else { throw failure("expected digits after '.', found \(current)") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            isInteger = false
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw failure("expected exponent digits, found \(current)") }
        }
        let text = String(decoding: bytes[first..<index], as: UTF8.self)
        // An integer too large for 64 bits is one still (YAMLNode.unsignedValue reads its text).
        return Self.node(isInteger ? .integer(Int64(text)) : .float(Double(text) ?? .nan), start, text: text)
    }
}
