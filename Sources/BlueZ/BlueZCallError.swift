import DBusKit

/// Why a call to BlueZ failed: BlueZ's `org.bluez.Error.*` names (`src/error.c`) as Swift
/// cases, each with BlueZ's message, so callers can switch on the reason rather than compare
/// strings.
///
/// Every proxy in this module (``Adapter``, ``Device``, ``GattCharacteristic``,
/// ``LEAdvertisingManager``, ``GattManager``) throws this for an error reply. Other D-Bus errors
/// (`org.freedesktop.DBus.Error.ServiceUnknown` when bluetoothd is not running, `NoReply` on a
/// timeout, `Disconnected`, BlueZ errors without a case of their own such as `NotConnected`)
/// arrive as ``other(name:message:)`` with their full name. A cancelled call throws
/// `CancellationError`, not this.
public enum BlueZCallError: Error, Sendable, Hashable, CustomStringConvertible {
    case failed(String)
    case inProgress(String)
    case notReady(String)
    case invalidArguments(String)
    case alreadyExists(String)
    case doesNotExist(String)
    case notPermitted(String)
    case notSupported(String)
    /// Any other error, by its full D-Bus name.
    case other(name: String, message: String)
    /// The reply did not have the type BlueZ documents (a buggy or hostile service).
    case invalidReply(String)

    static let prefix = "org.bluez.Error."

    /// Sorts a D-Bus error into the cases above.
    public init(_ error: DBusError) {
        let name = error.name.rawValue
        let message = error.message
        guard name.hasPrefix(Self.prefix) else {
            self = .other(name: name, message: message)
            return
        }
        switch name.dropFirst(Self.prefix.count) {
        case "Failed": self = .failed(message)
        case "InProgress": self = .inProgress(message)
        case "NotReady": self = .notReady(message)
        case "InvalidArguments": self = .invalidArguments(message)
        case "AlreadyExists": self = .alreadyExists(message)
        case "DoesNotExist": self = .doesNotExist(message)
        case "NotPermitted": self = .notPermitted(message)
        case "NotSupported": self = .notSupported(message)
        default: self = .other(name: name, message: message)
        }
    }

    /// No reply came in time (the call's own timeout): BlueZ may still be working on it.
    public var isTimeout: Bool {
        guard case .other(let name, _) = self else { return false }
        return name == ErrorName.noReply.rawValue || name == ErrorName.timeout.rawValue
    }

    /// The D-Bus error name this stands for.
    public var name: String {
        switch self {
        case .failed: Self.prefix + "Failed"
        case .inProgress: Self.prefix + "InProgress"
        case .notReady: Self.prefix + "NotReady"
        case .invalidArguments: Self.prefix + "InvalidArguments"
        case .alreadyExists: Self.prefix + "AlreadyExists"
        case .doesNotExist: Self.prefix + "DoesNotExist"
        case .notPermitted: Self.prefix + "NotPermitted"
        case .notSupported: Self.prefix + "NotSupported"
        case .other(let name, _): name
        case .invalidReply: ErrorName.invalidSignature.rawValue
        }
    }

    public var message: String {
        switch self {
        case .failed(let m), .inProgress(let m), .notReady(let m), .invalidArguments(let m), .alreadyExists(let m),
             .doesNotExist(let m), .notPermitted(let m), .notSupported(let m), .invalidReply(let m):
            m
        case .other(_, let m): m
        }
    }

    public var description: String { message.isEmpty ? name : "\(name): \(message)" }
}

extension DBusConnection {
    /// A method call to bluetoothd whose D-Bus errors come back as ``BlueZCallError``.
    func callBlueZ(_ service: BusName, _ path: ObjectPath, _ interface: InterfaceName, _ member: MemberName,
                   _ arguments: [DBusValue] = [], timeout: Duration) async throws -> [DBusValue] {
        do {
            return try await call(destination: service, path: path, interface: interface, member: member, arguments,
                                  timeout: timeout)
        } catch let error as DBusError {
            throw BlueZCallError(error)
        }
    }
}
