/// A D-Bus error: a name such as `org.freedesktop.DBus.Error.UnknownMethod` and a message.
///
/// Errors that come back from a remote call, errors that libdbus reports locally (a bad address, a
/// closed connection), and errors that an exported method handler throws all take this form, so a
/// caller can always switch on ``name``.
public struct DBusError: Error, Sendable, Hashable, CustomStringConvertible {
    public let name: ErrorName
    public let message: String

    public init(_ name: ErrorName, _ message: String) {
        self.name = name
        self.message = message
    }

    public var description: String { message.isEmpty ? name.rawValue : "\(name.rawValue): \(message)" }

    static func disconnected(_ detail: String = "the connection is closed") -> DBusError {
        DBusError(.disconnected, detail)
    }
}

/// An error that knows which D-Bus error it is. Exported method handlers throw these so the caller
/// gets a precise error name; any other thrown error becomes `org.freedesktop.DBus.Error.Failed`.
public protocol DBusErrorConvertible: Error {
    var dbusError: DBusError { get }
}

extension DBusError: DBusErrorConvertible {
    public var dbusError: DBusError { self }
}

extension DBusNameError: DBusErrorConvertible {
    public var dbusError: DBusError { DBusError(.invalidArgs, description) }
}
