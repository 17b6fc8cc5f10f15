#if canImport(Glibc)
import Glibc
#endif

/// An owned Unix file descriptor carried in a message (type `h`).
///
/// DBusKit owns the descriptor: libdbus hands a received one over as a fresh `dup`, and one we send
/// is `dup`ed by libdbus again, so the original stays ours. An owned descriptor is closed when the
/// last reference goes away; ``duplicate()`` gives the caller one of its own.
public final class UnixFD: Hashable, Sendable, CustomStringConvertible {
    private let fd: Int32
    private let owned: Bool

    /// Takes ownership of `fd`: it is closed with this object (`close(2)`).
    public init(taking fd: Int32) {
        self.fd = fd
        self.owned = true
    }

    /// Wraps `fd` without owning it: the caller keeps closing it.
    public init(borrowing fd: Int32) {
        self.fd = fd
        self.owned = false
    }

    public var rawValue: Int32 { fd }

    /// A new descriptor for the same open file, owned by the caller (`dup(2)`).
    public func duplicate() -> Int32 { dup(fd) }

    deinit { if owned { close(fd) } }

    public static func == (a: UnixFD, b: UnixFD) -> Bool { a.fd == b.fd }
    public func hash(into hasher: inout Hasher) { hasher.combine(fd) }
    public var description: String { "fd \(fd)" }
}

/// One D-Bus value of any type.
///
/// Containers carry their element types, so an empty array still knows its signature and the
/// value round-trips exactly.
///
/// Only `variant` is boxed (`indirect`): the other containers hold Swift arrays, which are already
/// on the heap, so a scalar, a string or an array costs no extra allocation.
public enum DBusValue: Hashable, Sendable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(ObjectPath)
    case signature(Signature)
    case unixFD(UnixFD)
    indirect case variant(DBusValue)
    /// An array whose elements all have type `element`.
    case array(element: DBusType, [DBusValue])
    /// `a{kv}`, in wire order.
    case dictionary(key: DBusType, value: DBusType, [DictEntry])
    case structure([DBusValue])

    public struct DictEntry: Hashable, Sendable {
        public var key: DBusValue
        public var value: DBusValue
        public init(_ key: DBusValue, _ value: DBusValue) {
            self.key = key
            self.value = value
        }
    }

    /// The value's complete type.
    public var type: DBusType {
        switch self {
        case .byte: .byte
        case .boolean: .boolean
        case .int16: .int16
        case .uint16: .uint16
        case .int32: .int32
        case .uint32: .uint32
        case .int64: .int64
        case .uint64: .uint64
        case .double: .double
        case .string: .string
        case .objectPath: .objectPath
        case .signature: .signature
        case .unixFD: .unixFD
        case .variant: .variant
        case .array(let element, _): .array(element)
        case .dictionary(let key, let value, _): .dictionary(key: key, value: value)
        case .structure(let fields): .structure(fields.map(\.type))
        }
    }

    /// Whether the value is well-formed for `type`: every element of a container has the
    /// container's declared type, all the way down. The marshaller checks this before it hands
    /// anything to libdbus, which would otherwise abort on a mismatch.
    public func conforms(to type: DBusType) -> Bool {
        switch (self, type) {
        case (.byte, .byte), (.boolean, .boolean), (.int16, .int16), (.uint16, .uint16),
             (.int32, .int32), (.uint32, .uint32), (.int64, .int64), (.uint64, .uint64),
             (.double, .double), (.string, .string), (.objectPath, .objectPath),
             (.signature, .signature), (.unixFD, .unixFD):
            return true
        case (.variant(let inner), .variant):
            return inner.conforms(to: inner.type)
        case (.array(let element, let items), .array(let expected)):
            return element == expected && items.allSatisfy { $0.conforms(to: element) }
        case (.dictionary(let k, let v, let entries), .dictionary(let ek, let ev)):
            return k == ek && v == ev && k.isBasic
                && entries.allSatisfy { $0.key.conforms(to: k) && $0.value.conforms(to: v) }
        case (.structure(let fields), .structure(let types)):
            return fields.count == types.count && !fields.isEmpty
                && zip(fields, types).allSatisfy { $0.conforms(to: $1) }
        default:
            return false
        }
    }

    /// A string with no NUL inside: libdbus refuses others (the wire format cannot carry them).
    var hasValidStrings: Bool {
        switch self {
        case .string(let s): return !s.utf8.contains(0)
        case .variant(let inner): return inner.hasValidStrings
        case .array(_, let items): return items.allSatisfy(\.hasValidStrings)
        case .dictionary(_, _, let entries): return entries.allSatisfy { $0.key.hasValidStrings && $0.value.hasValidStrings }
        case .structure(let fields): return fields.allSatisfy(\.hasValidStrings)
        default: return true
        }
    }
}

// MARK: - Convenient access

extension DBusValue {
    public var string: String? { if case .string(let s) = self { s } else { nil } }
    public var bool: Bool? { if case .boolean(let b) = self { b } else { nil } }
    public var objectPath: ObjectPath? { if case .objectPath(let p) = self { p } else { nil } }
    public var double: Double? { if case .double(let d) = self { d } else { nil } }
    /// Any integer type, widened.
    public var integer: Int64? {
        switch self {
        case .byte(let v): Int64(v)
        case .int16(let v): Int64(v)
        case .uint16(let v): Int64(v)
        case .int32(let v): Int64(v)
        case .uint32(let v): Int64(v)
        case .int64(let v): v
        case .uint64(let v): v <= UInt64(Int64.max) ? Int64(v) : nil
        default: nil
        }
    }
    /// The value inside a variant (or the value itself).
    public var unwrapped: DBusValue { if case .variant(let inner) = self { inner.unwrapped } else { self } }
    public var arrayElements: [DBusValue]? { if case .array(_, let items) = self { items } else { nil } }
    public var dictEntries: [DictEntry]? { if case .dictionary(_, _, let e) = self { e } else { nil } }
    /// `a{s*}` as a Swift dictionary (last entry wins on duplicate keys).
    public var stringKeyedDictionary: [String: DBusValue]? {
        guard case .dictionary(.string, _, let entries) = self else { return nil }
        var out: [String: DBusValue] = [:]
        for entry in entries { if let k = entry.key.string { out[k] = entry.value } }
        return out
    }
    /// `ay` as bytes.
    public var bytes: [UInt8]? {
        guard case .array(.byte, let items) = self else { return nil }
        return items.map { if case .byte(let b) = $0 { b } else { 0 } }
    }

    /// `a{ss}` from a dictionary, sorted by key.
    public static func stringMap(_ map: [String: String]) -> DBusValue {
        .dictionary(key: .string, value: .string, map.sorted { $0.key < $1.key }.map { DictEntry(.string($0.key), .string($0.value)) })
    }

    /// `a{sv}` from a dictionary, sorted by key, each value in a variant.
    public static func variantMap(_ map: [String: DBusValue]) -> DBusValue {
        .dictionary(key: .string, value: .variant, map.sorted { $0.key < $1.key }.map { DictEntry(.string($0.key), .variant($0.value)) })
    }

    /// `ay` from bytes.
    public static func bytes(_ bytes: some Sequence<UInt8>) -> DBusValue {
        .array(element: .byte, bytes.map { .byte($0) })
    }
    /// `as`.
    public static func strings(_ strings: some Sequence<String>) -> DBusValue {
        .array(element: .string, strings.map { .string($0) })
    }
    /// `a{sv}` from a Swift dictionary, keys sorted so the wire order is stable.
    public static func vardict(_ dict: [String: DBusValue]) -> DBusValue {
        .dictionary(key: .string, value: .variant,
                    dict.sorted { $0.key < $1.key }.map { DictEntry(.string($0.key), .variant($0.value)) })
    }
}

// MARK: - Swift types that map to one D-Bus type

/// A Swift type with a fixed D-Bus type, convertible both ways.
public protocol DBusRepresentable: Sendable {
    static var dbusType: DBusType { get }
    var dbusValue: DBusValue { get }
    /// Nil when `value` does not have ``dbusType``.
    init?(dbusValue value: DBusValue)
}

extension UInt8: DBusRepresentable {
    public static var dbusType: DBusType { .byte }
    public var dbusValue: DBusValue { .byte(self) }
    public init?(dbusValue v: DBusValue) { guard case .byte(let x) = v else { return nil }; self = x }
}
extension Bool: DBusRepresentable {
    public static var dbusType: DBusType { .boolean }
    public var dbusValue: DBusValue { .boolean(self) }
    public init?(dbusValue v: DBusValue) { guard case .boolean(let x) = v else { return nil }; self = x }
}
extension Int16: DBusRepresentable {
    public static var dbusType: DBusType { .int16 }
    public var dbusValue: DBusValue { .int16(self) }
    public init?(dbusValue v: DBusValue) { guard case .int16(let x) = v else { return nil }; self = x }
}
extension UInt16: DBusRepresentable {
    public static var dbusType: DBusType { .uint16 }
    public var dbusValue: DBusValue { .uint16(self) }
    public init?(dbusValue v: DBusValue) { guard case .uint16(let x) = v else { return nil }; self = x }
}
extension Int32: DBusRepresentable {
    public static var dbusType: DBusType { .int32 }
    public var dbusValue: DBusValue { .int32(self) }
    public init?(dbusValue v: DBusValue) { guard case .int32(let x) = v else { return nil }; self = x }
}
extension UInt32: DBusRepresentable {
    public static var dbusType: DBusType { .uint32 }
    public var dbusValue: DBusValue { .uint32(self) }
    public init?(dbusValue v: DBusValue) { guard case .uint32(let x) = v else { return nil }; self = x }
}
extension Int64: DBusRepresentable {
    public static var dbusType: DBusType { .int64 }
    public var dbusValue: DBusValue { .int64(self) }
    public init?(dbusValue v: DBusValue) { guard case .int64(let x) = v else { return nil }; self = x }
}
extension UInt64: DBusRepresentable {
    public static var dbusType: DBusType { .uint64 }
    public var dbusValue: DBusValue { .uint64(self) }
    public init?(dbusValue v: DBusValue) { guard case .uint64(let x) = v else { return nil }; self = x }
}
extension Double: DBusRepresentable {
    public static var dbusType: DBusType { .double }
    public var dbusValue: DBusValue { .double(self) }
    public init?(dbusValue v: DBusValue) { guard case .double(let x) = v else { return nil }; self = x }
}
extension String: DBusRepresentable {
    public static var dbusType: DBusType { .string }
    public var dbusValue: DBusValue { .string(self) }
    public init?(dbusValue v: DBusValue) { guard case .string(let x) = v else { return nil }; self = x }
}
extension ObjectPath: DBusRepresentable {
    public static var dbusType: DBusType { .objectPath }
    public var dbusValue: DBusValue { .objectPath(self) }
    public init?(dbusValue v: DBusValue) { guard case .objectPath(let x) = v else { return nil }; self = x }
}
extension Signature: DBusRepresentable {
    public static var dbusType: DBusType { .signature }
    public var dbusValue: DBusValue { .signature(self) }
    public init?(dbusValue v: DBusValue) { guard case .signature(let x) = v else { return nil }; self = x }
}
/// A ``DBusValue`` used as a Swift type stands for a variant (`v`).
extension DBusValue: DBusRepresentable {
    public static var dbusType: DBusType { .variant }
    public var dbusValue: DBusValue { .variant(self) }
    public init?(dbusValue v: DBusValue) { guard case .variant(let x) = v else { return nil }; self = x }
}
extension Array: DBusRepresentable where Element: DBusRepresentable {
    public static var dbusType: DBusType { .array(Element.dbusType) }
    public var dbusValue: DBusValue { .array(element: Element.dbusType, map(\.dbusValue)) }
    public init?(dbusValue v: DBusValue) {
        guard case .array(let t, let items) = v, t == Element.dbusType else { return nil }
        var out: [Element] = []
        out.reserveCapacity(items.count)
        for item in items {
            guard let e = Element(dbusValue: item) else { return nil }
            out.append(e)
        }
        self = out
    }
}
extension Dictionary: DBusRepresentable where Key: DBusRepresentable, Value: DBusRepresentable {
    public static var dbusType: DBusType { .dictionary(key: Key.dbusType, value: Value.dbusType) }
    /// Entries in key order when the keys are comparable strings; otherwise in hash order.
    public var dbusValue: DBusValue {
        var entries = map { DBusValue.DictEntry($0.key.dbusValue, $0.value.dbusValue) }
        if Key.self == String.self {
            entries.sort { ($0.key.string ?? "") < ($1.key.string ?? "") }
        }
        return .dictionary(key: Key.dbusType, value: Value.dbusType, entries)
    }
    public init?(dbusValue v: DBusValue) {
        guard case .dictionary(let kt, let vt, let entries) = v, kt == Key.dbusType, vt == Value.dbusType else { return nil }
        var out: [Key: Value] = [:]
        for entry in entries {
            guard let k = Key(dbusValue: entry.key), let val = Value(dbusValue: entry.value) else { return nil }
            out[k] = val
        }
        self = out
    }
}

// MARK: - Description

extension DBusValue: CustomStringConvertible {
    /// A compact rendering in the style of `busctl`/`gdbus`, long strings and arrays shortened.
    public var description: String {
        switch self {
        case .byte(let v): return "byte \(v)"
        case .boolean(let v): return "\(v)"
        case .int16(let v): return "int16 \(v)"
        case .uint16(let v): return "uint16 \(v)"
        case .int32(let v): return "\(v)"
        case .uint32(let v): return "uint32 \(v)"
        case .int64(let v): return "int64 \(v)"
        case .uint64(let v): return "uint64 \(v)"
        case .double(let v): return "\(v)"
        case .string(let s):
            let shown = s.count > 64 ? String(s.prefix(64)) + "…(\(s.utf8.count) bytes)" : s
            return "\"\(shown)\""
        case .objectPath(let p): return "objectpath '\(p)'"
        case .signature(let s): return "signature '\(s)'"
        case .unixFD(let fd): return "handle \(fd.rawValue)"
        case .variant(let inner): return "<\(inner)>"
        case .array(let element, let items):
            if element == .byte, let bytes {
                let head = bytes.prefix(16).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
                return "ay[\(bytes.count)] 0x\(head)\(bytes.count > 16 ? "…" : "")"
            }
            let shown = items.prefix(8).map(\.description).joined(separator: ", ")
            return "a\(element)[\(shown)\(items.count > 8 ? ", …(\(items.count) items)" : "")]"
        case .dictionary(_, _, let entries):
            let shown = entries.prefix(8).map { "\($0.key): \($0.value)" }.joined(separator: ", ")
            return "{\(shown)\(entries.count > 8 ? ", …(\(entries.count) entries)" : "")}"
        case .structure(let fields):
            return "(" + fields.map(\.description).joined(separator: ", ") + ")"
        }
    }
}
