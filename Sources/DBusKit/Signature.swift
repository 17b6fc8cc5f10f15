/// The D-Bus type system: one ``DBusType`` is one complete type, a ``Signature`` a list of them.

/// One complete D-Bus type.
public indirect enum DBusType: Hashable, Sendable, CustomStringConvertible {
    case byte, boolean, int16, uint16, int32, uint32, int64, uint64, double
    case string, objectPath, signature, unixFD
    case variant
    case array(DBusType)
    /// `a{kv}`: an array of dict entries. The key is a basic type.
    case dictionary(key: DBusType, value: DBusType)
    case structure([DBusType])

    /// The type code as written in a signature.
    public var description: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .unixFD: "h"
        case .variant: "v"
        case .array(let element): "a" + element.description
        case .dictionary(let key, let value): "a{" + key.description + value.description + "}"
        case .structure(let fields): "(" + fields.map(\.description).joined() + ")"
        }
    }

    /// Whether this is a basic type (usable as a dict key).
    public var isBasic: Bool {
        switch self {
        case .variant, .array, .dictionary, .structure: false
        default: true
        }
    }

    /// Parses exactly one complete type.
    public init(_ text: String) throws(DBusNameError) {
        let sig = try Signature(text)
        guard sig.types.count == 1 else {
            throw DBusNameError(kind: .signature, value: text, reason: "expected exactly one complete type")
        }
        self = sig.types[0]
    }
}

/// A D-Bus signature: zero or more complete types, at most 255 bytes, containers nested at most
/// 32 arrays and 32 structs deep (the specification's limits, which libdbus enforces too).
public struct Signature: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let types: [DBusType]
    public let rawValue: String

    public init(_ types: [DBusType]) {
        self.types = types
        self.rawValue = types.map(\.description).joined()
    }

    public init(_ text: String) throws(DBusNameError) {
        var parser = SignatureParser(text: text)
        self.types = try parser.parseAll()
        self.rawValue = text
    }

    public init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure("\(error)") }
    }

    public static let empty = Signature([])
    public var description: String { rawValue }
    public var isEmpty: Bool { types.isEmpty }
}

struct SignatureParser {
    let bytes: [UInt8]
    let text: String
    var index = 0
    var arrayDepth = 0
    var structDepth = 0

    init(text: String) {
        self.text = text
        self.bytes = Array(text.utf8)
    }

    func fail(_ reason: String) -> DBusNameError {
        DBusNameError(kind: .signature, value: text, reason: reason)
    }

    mutating func parseAll() throws(DBusNameError) -> [DBusType] {
        if bytes.count > 255 { throw fail("longer than 255 bytes") }
        var out: [DBusType] = []
        while index < bytes.count { out.append(try parseOne()) }
        return out
    }

    mutating func parseOne() throws(DBusNameError) -> DBusType {
        guard index < bytes.count else { throw fail("incomplete type") }
        let c = bytes[index]
        index += 1
        switch c {
        case UInt8(ascii: "y"): return .byte
        case UInt8(ascii: "b"): return .boolean
        case UInt8(ascii: "n"): return .int16
        case UInt8(ascii: "q"): return .uint16
        case UInt8(ascii: "i"): return .int32
        case UInt8(ascii: "u"): return .uint32
        case UInt8(ascii: "x"): return .int64
        case UInt8(ascii: "t"): return .uint64
        case UInt8(ascii: "d"): return .double
        case UInt8(ascii: "s"): return .string
        case UInt8(ascii: "o"): return .objectPath
        case UInt8(ascii: "g"): return .signature
        case UInt8(ascii: "h"): return .unixFD
        case UInt8(ascii: "v"): return .variant
        case UInt8(ascii: "a"):
            arrayDepth += 1
            defer { arrayDepth -= 1 }
            if arrayDepth > 32 { throw fail("arrays nested deeper than 32") }
            if index < bytes.count, bytes[index] == UInt8(ascii: "{") {
                index += 1
                let key = try parseOne()
                guard key.isBasic else { throw fail("dict key must be a basic type") }
                let value = try parseOne()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "}") else {
                    throw fail("dict entry must have exactly two types and end with '}'")
                }
                index += 1
                return .dictionary(key: key, value: value)
            }
            return .array(try parseOne())
        case UInt8(ascii: "("):
            structDepth += 1
            defer { structDepth -= 1 }
            if structDepth > 32 { throw fail("structs nested deeper than 32") }
            var fields: [DBusType] = []
            while true {
                guard index < bytes.count else { throw fail("unterminated struct") }
                if bytes[index] == UInt8(ascii: ")") { index += 1; break }
                fields.append(try parseOne())
            }
            if fields.isEmpty { throw fail("empty struct") }
            return .structure(fields)
        case UInt8(ascii: "{"):
            throw fail("dict entry outside an array")
        default:
            throw fail("unknown type code '\(Character(Unicode.Scalar(c)))'")
        }
    }
}
