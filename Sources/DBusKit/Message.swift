import CDBus

/// A decoded D-Bus message: header fields and body as Swift values.
public struct DBusMessage: Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable { case methodCall, methodReturn, error, signal }

    public var kind: Kind
    public var serial: UInt32
    public var replySerial: UInt32
    public var path: ObjectPath?
    public var interface: InterfaceName?
    public var member: MemberName?
    public var errorName: ErrorName?
    public var destination: BusName?
    public var sender: BusName?
    public var signature: Signature
    public var body: [DBusValue]
    /// Read with limits that its body exceeded: `body` is empty (nothing past the limits was held).
    var exceededLimits = false

    /// For an error message: the error it carries.
    public var error: DBusError? {
        guard kind == .error, let errorName else { return nil }
        return DBusError(errorName, body.first?.string ?? "")
    }

    public var description: String {
        var parts = ["\(kind)"]
        if let sender { parts.append("sender=\(sender)") }
        if let path { parts.append("path=\(path)") }
        if let interface { parts.append("interface=\(interface)") }
        if let member { parts.append("member=\(member)") }
        if let errorName { parts.append("error=\(errorName)") }
        parts.append("signature='\(signature)'")
        return parts.joined(separator: " ")
    }

    /// Decodes a libdbus message. Bus thread. With `limits`, a body over them is not read past
    /// the first value beyond them: `body` is then empty and `exceededLimits` true.
    init(_ message: OpaquePointer, marshaller: Marshaller, limits: DBusReceiveLimits? = nil) {
        switch dbus_message_get_type(message) {
        case CDBUS_MESSAGE_TYPE_METHOD_CALL: kind = .methodCall
        case CDBUS_MESSAGE_TYPE_METHOD_RETURN: kind = .methodReturn
        case CDBUS_MESSAGE_TYPE_ERROR: kind = .error
        default: kind = .signal
        }
        serial = dbus_message_get_serial(message)
        replySerial = dbus_message_get_reply_serial(message)
        // libdbus validated every header field when it parsed the message.
        path = dbus_message_get_path(message).map { ObjectPath(unchecked: String(cString: $0)) }
        interface = dbus_message_get_interface(message).map { InterfaceName(unchecked: String(cString: $0)) }
        member = dbus_message_get_member(message).map { MemberName(unchecked: String(cString: $0)) }
        errorName = dbus_message_get_error_name(message).map { ErrorName(unchecked: String(cString: $0)) }
        destination = dbus_message_get_destination(message).map { BusName(unchecked: String(cString: $0)) }
        sender = dbus_message_get_sender(message).map { BusName(unchecked: String(cString: $0)) }
        signature = dbus_message_get_signature(message).map { marshaller.signature(forRaw: $0) } ?? .empty
        if let read = marshaller.readBody(message, types: signature.types, limits: limits) {
            body = read
        } else {
            body = []
            exceededLimits = true
        }
    }

    /// Whether the body matches `expected` exactly.
    public func hasSignature(_ expected: Signature) -> Bool { signature.rawValue == expected.rawValue }
}

/// How much a method call received by an exported object may hold once decoded, checked while
/// it is read: a call over them is answered `org.freedesktop.DBus.Error.LimitsExceeded` and never
/// reaches a handler, and reading it stops at the first value past them, so that an outsider's
/// call costs at most about this much memory however large the bus lets a message be (the system
/// bus: 32 MiB, which, decoded value by value, would be hundreds of megabytes).
public struct DBusReceiveLimits: Sendable, Hashable {
    /// Values of any type, each element of a container and the container itself counted (but
    /// not the elements of a byte array: its bytes count in ``maxStringBytes``).
    public var maxValues: Int
    /// Bytes of all strings, object paths, signatures and byte arrays together.
    public var maxStringBytes: Int

    public init(maxValues: Int, maxStringBytes: Int) {
        self.maxValues = maxValues
        self.maxStringBytes = maxStringBytes
    }

    /// The limits of every method call to exported objects: 65,536 values and 1 MiB of strings
    /// and byte arrays.
    public static let methodCall = DBusReceiveLimits(maxValues: 65_536, maxStringBytes: 1 << 20)
}

/// An owned reference to a libdbus message (`dbus_message_unref` on release). Bus thread only.
final class MessageRef {
    let pointer: OpaquePointer
    /// Takes over one reference (the caller's `dbus_message_new_*` or `_ref`).
    init(taking pointer: OpaquePointer) { self.pointer = pointer }
    /// Adds a reference (`dbus_message_ref`).
    init(retaining pointer: OpaquePointer) {
        self.pointer = dbus_message_ref(pointer)
    }
    deinit { dbus_message_unref(pointer) }
}

/// A match rule (`AddMatch`), also used to filter locally: the bus delivers a signal once however
/// many rules it matches, so DBusKit routes it to every subscription whose rule it matches.
public struct MatchRule: Sendable, Hashable, CustomStringConvertible {
    public var sender: BusName?
    public var path: ObjectPath?
    public var pathNamespace: ObjectPath?
    public var interface: InterfaceName?
    public var member: MemberName?
    public var arg0: String?
    public var arg0Namespace: String?

    public init(sender: BusName? = nil, path: ObjectPath? = nil, pathNamespace: ObjectPath? = nil,
                interface: InterfaceName? = nil, member: MemberName? = nil, arg0: String? = nil,
                arg0Namespace: String? = nil) {
        self.sender = sender
        self.path = path
        self.pathNamespace = pathNamespace
        self.interface = interface
        self.member = member
        self.arg0 = arg0
        self.arg0Namespace = arg0Namespace
    }

    /// The rule in the bus's syntax, values quoted (a `'` inside a value is written `'\''`).
    public var description: String {
        func quote(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        var parts = ["type='signal'"]
        if let sender { parts.append("sender=" + quote(sender.rawValue)) }
        if let path { parts.append("path=" + quote(path.rawValue)) }
        if let pathNamespace { parts.append("path_namespace=" + quote(pathNamespace.rawValue)) }
        if let interface { parts.append("interface=" + quote(interface.rawValue)) }
        if let member { parts.append("member=" + quote(member.rawValue)) }
        if let arg0 { parts.append("arg0=" + quote(arg0)) }
        if let arg0Namespace { parts.append("arg0namespace=" + quote(arg0Namespace)) }
        return parts.joined(separator: ",")
    }

    /// Local match. `senderOwner` is the unique name that currently owns `sender` when that is a
    /// well-known name (nil when unknown: then nothing matches, as on the bus).
    func matches(_ m: DBusMessage, senderOwner: String?) -> Bool {
        if let sender {
            guard let actual = m.sender?.rawValue else { return false }
            if sender.isUnique || sender == .bus {
                if actual != sender.rawValue { return false }
            } else if actual != senderOwner {
                return false
            }
        }
        if let path, m.path != path { return false }
        if let pathNamespace {
            guard let p = m.path, p.isDescendant(of: pathNamespace) else { return false }
        }
        if let interface, m.interface != interface { return false }
        if let member, m.member != member { return false }
        if let arg0 {
            guard m.body.first?.string == arg0 else { return false }
        }
        if let arg0Namespace {
            guard let first = m.body.first?.string,
                  first == arg0Namespace || first.hasPrefix(arg0Namespace + ".") else { return false }
        }
        return true
    }
}
