/// Validated D-Bus names.
///
/// Each type checks its string against the rules of the D-Bus specification ("Valid names",
/// "Object paths") once, at construction, so the rest of DBusKit and libdbus never see an invalid
/// name. Names from the outside (a config file, a CLI argument, a D-Bus message) are built with the
/// throwing initialiser; a string literal in our own code is a programmer's constant and traps if
/// it is wrong.

/// Why a string is not a valid D-Bus name.
public struct DBusNameError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable { case objectPath = "object path", busName = "bus name",
        interfaceName = "interface name", memberName = "member name", errorName = "error name",
        signature = "signature" }
    public let kind: Kind
    public let value: String
    public let reason: String
    public var description: String { "invalid \(kind.rawValue) '\(value)': \(reason)" }
}

@inline(__always) private func isAlpha(_ c: UInt8) -> Bool {
    (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
}
@inline(__always) private func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }

/// Checks dot-separated elements: `[A-Za-z_][A-Za-z0-9_]*` (plus `-` and leading digits when
/// allowed), at least two elements, at most 255 bytes.
private func dottedNameProblem(_ s: String, allowHyphen: Bool, allowLeadingDigit: Bool) -> String? {
    let bytes = Array(s.utf8)
    if bytes.isEmpty { return "empty" }
    if bytes.count > 255 { return "longer than 255 bytes" }
    var elements = 0
    var elementLength = 0
    for c in bytes {
        if c == UInt8(ascii: ".") {
            if elementLength == 0 { return "empty element" }
            elements += 1
            elementLength = 0
            continue
        }
        let ok = isAlpha(c) || c == UInt8(ascii: "_") || (allowHyphen && c == UInt8(ascii: "-"))
            || (isDigit(c) && (elementLength > 0 || allowLeadingDigit))
        if !ok {
            return isDigit(c) ? "element starts with a digit" : "character '\(Character(Unicode.Scalar(c)))' not allowed"
        }
        elementLength += 1
    }
    if elementLength == 0 { return "empty element" }
    elements += 1
    if elements < 2 { return "needs at least two elements separated by '.'" }
    return nil
}

/// An object path such as `/org/proximityd/peers/p0`.
public struct ObjectPath: Hashable, Sendable, Comparable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String

    public init(_ rawValue: String) throws(DBusNameError) {
        if let problem = ObjectPath.problem(rawValue) {
            throw DBusNameError(kind: .objectPath, value: rawValue, reason: problem)
        }
        self.rawValue = rawValue
    }

    /// A path written in our own code. Traps if it is not valid: that is a programmer error.
    public init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure("\(error)") }
    }

    init(unchecked rawValue: String) { self.rawValue = rawValue }

    public static let root = ObjectPath(unchecked: "/")

    public var description: String { rawValue }
    public static func < (a: ObjectPath, b: ObjectPath) -> Bool { a.rawValue < b.rawValue }

    static func problem(_ s: String) -> String? {
        let bytes = Array(s.utf8)
        guard bytes.first == UInt8(ascii: "/") else { return "must start with '/'" }
        if bytes.count == 1 { return nil }
        if bytes.last == UInt8(ascii: "/") { return "must not end with '/'" }
        var previousSlash = true
        for c in bytes.dropFirst() {
            if c == UInt8(ascii: "/") {
                if previousSlash { return "empty element" }
                previousSlash = true
            } else {
                guard isAlpha(c) || isDigit(c) || c == UInt8(ascii: "_") else {
                    return "character '\(Character(Unicode.Scalar(c)))' not allowed (only [A-Za-z0-9_])"
                }
                previousSlash = false
            }
        }
        return nil
    }

    /// The path with one more element. `element` is escaped into `[A-Za-z0-9_]` first, the way
    /// systemd's `sd_bus_path_encode` does (`_` followed by two hex digits), so any string can
    /// become a path element and be decoded back with ``decodedLastElement``.
    public func appending(escaped element: String) -> ObjectPath {
        let escaped = ObjectPath.escape(element)
        return ObjectPath(unchecked: rawValue == "/" ? "/" + escaped : rawValue + "/" + escaped)
    }

    /// The last element, unescaped (see ``appending(escaped:)``).
    public var decodedLastElement: String {
        ObjectPath.unescape(String(rawValue.split(separator: "/").last ?? ""))
    }

    /// Whether `self` is `other` or lies below it.
    public func isDescendant(of other: ObjectPath, orEqual: Bool = true) -> Bool {
        if rawValue == other.rawValue { return orEqual }
        if other.rawValue == "/" { return true }
        return rawValue.hasPrefix(other.rawValue + "/")
    }

    /// The parent path, or nil for `/`.
    public var parent: ObjectPath? {
        guard rawValue != "/" else { return nil }
        guard let slash = rawValue.lastIndex(of: "/") else { return nil }
        let head = String(rawValue[..<slash])
        return ObjectPath(unchecked: head.isEmpty ? "/" : head)
    }

    static func escape(_ s: String) -> String {
        if s.isEmpty { return "_" }
        var out = ""
        for (i, c) in s.utf8.enumerated() {
            if isAlpha(c) || (isDigit(c) && i > 0) {
                out.unicodeScalars.append(Unicode.Scalar(c))
            } else {
                out += "_" + String(c, radix: 16, uppercase: false).leftPadded(to: 2)
            }
        }
        return out
    }

    static func unescape(_ s: String) -> String {
        if s == "_" { return "" }
        var bytes: [UInt8] = []
        var it = Array(s.utf8)[...]
        while let c = it.popFirst() {
            if c == UInt8(ascii: "_"), it.count >= 2,
               let v = UInt8(String(decoding: it.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(v)
                it = it.dropFirst(2)
            } else {
                bytes.append(c)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension String {
    func leftPadded(to width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}

/// A bus name: unique (`:1.42`) or well-known (`org.proximityd`).
public struct BusName: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String
    public init(_ rawValue: String) throws(DBusNameError) {
        let problem: String?
        if rawValue.hasPrefix(":") {
            problem = dottedNameProblem(String(rawValue.dropFirst()), allowHyphen: true, allowLeadingDigit: true)
        } else {
            problem = dottedNameProblem(rawValue, allowHyphen: true, allowLeadingDigit: false)
        }
        if let problem { throw DBusNameError(kind: .busName, value: rawValue, reason: problem) }
        self.rawValue = rawValue
    }
    public init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure("\(error)") }
    }
    init(unchecked rawValue: String) { self.rawValue = rawValue }
    public var isUnique: Bool { rawValue.hasPrefix(":") }
    public var description: String { rawValue }

    /// The message bus itself.
    public static let bus = BusName(unchecked: "org.freedesktop.DBus")
}

/// An interface name such as `org.proximityd.Node1`.
public struct InterfaceName: Hashable, Sendable, Comparable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String
    public init(_ rawValue: String) throws(DBusNameError) {
        if let problem = dottedNameProblem(rawValue, allowHyphen: false, allowLeadingDigit: false) {
            throw DBusNameError(kind: .interfaceName, value: rawValue, reason: problem)
        }
        self.rawValue = rawValue
    }
    public init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure("\(error)") }
    }
    init(unchecked rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    public static func < (a: InterfaceName, b: InterfaceName) -> Bool { a.rawValue < b.rawValue }

    public static let properties = InterfaceName(unchecked: "org.freedesktop.DBus.Properties")
    public static let introspectable = InterfaceName(unchecked: "org.freedesktop.DBus.Introspectable")
    public static let objectManager = InterfaceName(unchecked: "org.freedesktop.DBus.ObjectManager")
    public static let peer = InterfaceName(unchecked: "org.freedesktop.DBus.Peer")
    public static let bus = InterfaceName(unchecked: "org.freedesktop.DBus")
}

/// A method or signal name such as `GetPeers`.
public struct MemberName: Hashable, Sendable, Comparable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String
    public init(_ rawValue: String) throws(DBusNameError) {
        let bytes = Array(rawValue.utf8)
        let problem: String?
        if bytes.isEmpty { problem = "empty" }
        else if bytes.count > 255 { problem = "longer than 255 bytes" }
        else if isDigit(bytes[0]) { problem = "starts with a digit" }
        else if let bad = bytes.first(where: { !(isAlpha($0) || isDigit($0) || $0 == UInt8(ascii: "_")) }) {
            problem = "character '\(Character(Unicode.Scalar(bad)))' not allowed"
        } else { problem = nil }
        if let problem { throw DBusNameError(kind: .memberName, value: rawValue, reason: problem) }
        self.rawValue = rawValue
    }
    public init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure("\(error)") }
    }
    init(unchecked rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    public static func < (a: MemberName, b: MemberName) -> Bool { a.rawValue < b.rawValue }
}

/// An error name such as `org.proximityd.Error.InvalidArguments`.
public struct ErrorName: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String
    public init(_ rawValue: String) throws(DBusNameError) {
        if let problem = dottedNameProblem(rawValue, allowHyphen: false, allowLeadingDigit: false) {
            throw DBusNameError(kind: .errorName, value: rawValue, reason: problem)
        }
        self.rawValue = rawValue
    }
    public init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure("\(error)") }
    }
    init(unchecked rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    // The standard names (dbus-protocol.h) that DBusKit itself answers with.
    public static let failed: ErrorName = "org.freedesktop.DBus.Error.Failed"
    public static let noMemory: ErrorName = "org.freedesktop.DBus.Error.NoMemory"
    public static let serviceUnknown: ErrorName = "org.freedesktop.DBus.Error.ServiceUnknown"
    public static let nameHasNoOwner: ErrorName = "org.freedesktop.DBus.Error.NameHasNoOwner"
    public static let noReply: ErrorName = "org.freedesktop.DBus.Error.NoReply"
    public static let timeout: ErrorName = "org.freedesktop.DBus.Error.Timeout"
    public static let disconnected: ErrorName = "org.freedesktop.DBus.Error.Disconnected"
    public static let invalidArgs: ErrorName = "org.freedesktop.DBus.Error.InvalidArgs"
    public static let invalidSignature: ErrorName = "org.freedesktop.DBus.Error.InvalidSignature"
    public static let unknownMethod: ErrorName = "org.freedesktop.DBus.Error.UnknownMethod"
    public static let unknownObject: ErrorName = "org.freedesktop.DBus.Error.UnknownObject"
    public static let unknownInterface: ErrorName = "org.freedesktop.DBus.Error.UnknownInterface"
    public static let unknownProperty: ErrorName = "org.freedesktop.DBus.Error.UnknownProperty"
    public static let propertyReadOnly: ErrorName = "org.freedesktop.DBus.Error.PropertyReadOnly"
    public static let limitsExceeded: ErrorName = "org.freedesktop.DBus.Error.LimitsExceeded"
    public static let accessDenied: ErrorName = "org.freedesktop.DBus.Error.AccessDenied"
    public static let notSupported: ErrorName = "org.freedesktop.DBus.Error.NotSupported"
    public static let badAddress: ErrorName = "org.freedesktop.DBus.Error.BadAddress"
}
