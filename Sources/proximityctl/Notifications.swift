import DBusKit
import Foundation

/// A client of the desktop's notification server (`org.freedesktop.Notifications`, the Desktop
/// Notifications Specification 1.2): what `proximityctl alerts consume` shows alerts with.
///
/// The server is found on its own bus, the user's session bus by default, which is usually not
/// the node's (the node lives on the system bus).
struct DesktopNotifications: Sendable {
    static let name: BusName = "org.freedesktop.Notifications"
    static let path: ObjectPath = "/org/freedesktop/Notifications"
    static let interface: InterfaceName = "org.freedesktop.Notifications"

    let connection: DBusConnection
    let bus: BusAddress
    /// The unique name that owned ``name`` when the client connected.
    let owner: BusName

    /// Why the server cannot be used. The descriptions are the lines `proximityctl` prints.
    enum Failure: Error, CustomStringConvertible {
        case cannotConnect(bus: BusAddress, DBusError)
        case noServer(bus: BusAddress)
        case cannotAsk(bus: BusAddress, any Error)

        var description: String {
            switch self {
            case .cannotConnect(let bus, let error):
                "cannot connect to the \(bus) bus for notifications: \(error.message) " +
                    "(give another with --notifications-bus, or use --exec)"
            case .noServer(let bus):
                "no notification server on the \(bus) bus (\(DesktopNotifications.name) has no owner): " +
                    "start one (dunst, a desktop's own), give its bus with --notifications-bus, or use --exec"
            case .cannotAsk(let bus, let error):
                "cannot ask the \(bus) bus for its notification server: \(error)"
            }
        }
    }

    /// Connects to `bus` and checks that a server owns ``name``.
    static func connect(to bus: BusAddress) async throws(Failure) -> DesktopNotifications {
        let connection: DBusConnection
        do {
            connection = try await DBusConnection.connect(to: bus)
        } catch {
            throw .cannotConnect(bus: bus, error)
        }
        let owner: BusName?
        do {
            owner = try await connection.nameOwner(of: name)
        } catch {
            await connection.close()
            throw .cannotAsk(bus: bus, error)
        }
        guard let owner else {
            await connection.close()
            throw .noServer(bus: bus)
        }
        return DesktopNotifications(connection: connection, bus: bus, owner: owner)
    }

    private func call(_ member: MemberName, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await connection.call(destination: Self.name, path: Self.path, interface: Self.interface, member: member, arguments,
                                  timeout: .seconds(10))
    }

    /// `GetServerInformation`: "dunst 1.9.0 (2022-06-27)".
    func serverDescription() async throws -> String {
        let reply = try await call("GetServerInformation")
        let name = reply.first?.string ?? "?"
        let version = reply.count > 2 ? reply[2].string ?? "" : ""
        return version.isEmpty ? name : "\(name) \(version)"
    }

    /// One notification, as `Notify` takes it.
    struct Notification: Sendable, Hashable {
        var appName = "proximityctl"
        var replacesID: UInt32 = 0
        var appIcon = ""
        var summary = ""
        var body = ""
        /// Pairs of action key and label, flattened as the specification wants them.
        var actions: [String] = []
        var hints: [String: DBusValue] = [:]
        /// Milliseconds; 0 never expires, -1 the server's default.
        var expireTimeout: Int32 = 0

        var arguments: [DBusValue] {
            [.string(appName), .uint32(replacesID), .string(appIcon), .string(summary), .string(body), .strings(actions),
             .variantMap(hints), .int32(expireTimeout)]
        }
    }

    /// `Notify`: the server's id of the notification.
    func notify(_ notification: Notification) async throws -> UInt32 {
        let reply = try await call("Notify", notification.arguments)
        guard case .uint32(let id)? = reply.first?.unwrapped else {
            throw DBusError(.failed, "Notify answered \(reply) instead of a notification id")
        }
        return id
    }

    /// `CloseNotification`: the server closes it and announces `NotificationClosed` (reason 3).
    func close(_ id: UInt32) async throws {
        _ = try await call("CloseNotification", [.uint32(id)])
    }

    /// What the server announces about the notifications of this connection.
    enum Signal: Sendable, Hashable {
        /// `NotificationClosed(u id, u reason)`.
        case closed(UInt32, reason: UInt32)
        /// `ActionInvoked(u id, s action_key)`.
        case actionInvoked(UInt32, key: String)

        init?(_ message: DBusMessage) {
            guard message.interface == DesktopNotifications.interface, let member = message.member?.rawValue,
                  case .uint32(let id)? = message.body.first?.unwrapped, message.body.count >= 2 else { return nil }
            switch (member, message.body[1].unwrapped) {
            case ("NotificationClosed", .uint32(let reason)): self = .closed(id, reason: reason)
            case ("ActionInvoked", .string(let key)): self = .actionInvoked(id, key: key)
            default: return nil
            }
        }
    }

    /// The server's signals from now on (it may send them to this connection only), and the end
    /// of the server: the stream finishes when ``name`` loses the owner found at connection, or
    /// the connection closes. `left` says which.
    func signals() async throws -> (signals: AsyncStream<Signal>, left: AsyncStream<Void>) {
        let owners = try await connection.subscribe(MatchRule(sender: .bus, path: "/org/freedesktop/DBus", interface: .bus,
                                                              member: "NameOwnerChanged", arg0: Self.name.rawValue))
        let raw = try await connection.subscribe(MatchRule(sender: Self.name, path: Self.path, interface: Self.interface))
        let signals = AsyncStream<Signal> { continuation in
            let task = Task {
                for await message in raw {
                    if let signal = Signal(message) { continuation.yield(signal) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
        let owner = owner
        let left = AsyncStream<Void> { continuation in
            let task = Task {
                for await change in owners where change.body.count == 3 && change.body[1].string == owner.rawValue {
                    continuation.yield()
                    break
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
        return (signals, left)
    }

    /// The specification's reasons for `NotificationClosed`.
    static func reason(_ code: UInt32) -> String {
        switch code {
        case 1: "expired"
        case 2: "dismissed by the user"
        case 3: "closed by a CloseNotification call"
        default: "reason \(code)"
        }
    }
}
