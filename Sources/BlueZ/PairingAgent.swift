import DBusKit
import Logging
import Synchronization

/// A proxy for BlueZ's `org.bluez.AgentManager1` at `/org/bluez`.
public struct AgentManager: Sendable {
    public static let interface: InterfaceName = "org.bluez.AgentManager1"
    public var object: BlueZObject

    public init(connection: DBusConnection, service: BusName = BlueZService.name) {
        object = BlueZObject(connection: connection, path: BlueZService.rootPath, service: service)
    }

    /// `RegisterAgent`: `AlreadyExists` when this connection has an agent already.
    public func register(_ agent: ObjectPath, capability: PairingAgent.Capability) async throws {
        try await object.call(Self.interface, "RegisterAgent", [.objectPath(agent), .string(capability.rawValue)])
    }

    /// `RequestDefaultAgent`: bluetoothd asks this agent for pairings nobody started.
    public func requestDefault(_ agent: ObjectPath) async throws {
        try await object.call(Self.interface, "RequestDefaultAgent", [.objectPath(agent)])
    }

    /// `UnregisterAgent`.
    public func unregister(_ agent: ObjectPath) async throws {
        try await object.call(Self.interface, "UnregisterAgent", [.objectPath(agent)])
    }
}

/// An `org.bluez.Agent1` that lets **one** device pair and shows what the user must see.
///
/// bluetoothd asks the default agent about a pairing a remote device starts. This agent:
/// - takes calls from the owner of `org.bluez` only (``BlueZCallers``): anyone else on the bus
///   gets `org.bluez.Error.NotPermitted` and changes nothing;
/// - accepts the first device that asks (Just Works: `RequestAuthorization`; numeric comparison:
///   `RequestConfirmation`), then refuses every other device with `org.bluez.Error.Rejected`
///   while it is registered;
/// - shows the passkey it is given (`DisplayPasskey`). bluetoothd sends that call without
///   waiting for a reply, so it cannot be refused: with a passkey, what keeps a second device out
///   is that only who reads this box's terminal knows the passkey, and the caller's closing of
///   the window after the first bond;
/// - refuses what an enrollment never needs: PIN codes, typed passkeys, service authorisations
///   (`RequestPinCode`, `RequestPasskey`, `AuthorizeService`);
/// - reports everything on ``events``, in order.
///
/// The window in which it is registered is the caller's to bound.
public final class PairingAgent: Sendable {
    public static let interface: InterfaceName = "org.bluez.Agent1"
    public static let rejected: ErrorName = "org.bluez.Error.Rejected"
    public static let defaultPath: ObjectPath = BlueZExports.agent

    /// The IO capability it registers with, which decides the association model.
    public enum Capability: String, Sendable, CaseIterable {
        /// Just Works: the phone asks its user to confirm; nothing to compare (no protection
        /// against a man in the middle).
        case noInputNoOutput = "NoInputNoOutput"
        /// Passkey entry: the box shows six digits, the user types them on the phone.
        case displayOnly = "DisplayOnly"
    }

    public enum Event: Sendable, Hashable {
        /// A device asked to pair and was let through (its object path).
        case accepted(ObjectPath)
        /// The passkey to type on the device.
        case passkey(ObjectPath, String)
        /// A device that was not the first, or asked for what is never given, was refused.
        case refused(ObjectPath?, String)
        /// bluetoothd cancelled the request in progress (the phone gave up, or timed out).
        case cancelled
        /// bluetoothd released the agent (it is stopping, or the agent was unregistered).
        case released
    }

    public let path: ObjectPath
    public let capability: Capability
    public let events: AsyncStream<Event>
    private let object: DBusObject
    private let chosen: Chosen

    /// The device let through, shared by the method handlers.
    private final class Chosen: Sendable {
        let device = Mutex<ObjectPath?>(nil)
    }

    private init(path: ObjectPath, capability: Capability, events: AsyncStream<Event>, object: DBusObject, chosen: Chosen) {
        self.path = path
        self.capability = capability
        self.events = events
        self.object = object
        self.chosen = chosen
    }

    /// The device it let through, if any.
    public var acceptedDevice: ObjectPath? { chosen.device.withLock { $0 } }

    /// The passkey as a phone shows it: six digits, leading zeros kept.
    public static func passkeyText(_ passkey: UInt32) -> String {
        let digits = String(passkey % 1_000_000)
        return String(repeating: "0", count: 6 - digits.count) + digits
    }

    /// Exports the agent at `path` on `connection`; register it with ``AgentManager``.
    public static func export(on connection: DBusConnection, at path: ObjectPath = defaultPath, capability: Capability,
                              callers: BlueZCallers? = nil,
                              logger: Logger = Logger(label: "proximityd.bluez")) async throws -> PairingAgent {
        let callers = callers ?? BlueZCallers(connection: connection)
        let (events, sink) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
        let chosen = Chosen()

        @Sendable func fromBlueZ(_ call: DBusMethodCall) async throws(DBusError) {
            do { try await callers.require(call) } catch {
                logger.warning("refused an agent call not from bluetoothd",
                               metadata: ["dbus.sender": "\(call.sender?.rawValue ?? "")", "dbus.member": "\(call.member)"])
                throw error
            }
        }
        /// The first device is chosen; only it is let through.
        @Sendable func admit(_ call: DBusMethodCall) throws(DBusError) -> ObjectPath {
            guard let device = call.arguments.first?.objectPath else { throw DBusError(.invalidArgs, "a device object path is expected") }
            let admitted = chosen.device.withLock { current -> Bool in
                if current == nil { current = device }
                return current == device
            }
            guard admitted else {
                sink.yield(.refused(device, "another device is pairing"))
                throw DBusError(rejected, "this enrollment takes one device, and another one is pairing")
            }
            return device
        }
        @Sendable func refuse(_ call: DBusMethodCall, _ why: String) -> DBusError {
            sink.yield(.refused(call.arguments.first?.objectPath, why))
            return DBusError(rejected, why)
        }

        let interface = DBusInterface(Self.interface, methods: [
            DBusMethod("Release") { call in
                try await fromBlueZ(call)
                sink.yield(.released)
                return []
            },
            DBusMethod("RequestAuthorization", inputs: [DBusArgument("device", .objectPath)]) { call in
                try await fromBlueZ(call)
                let device = try admit(call)
                sink.yield(.accepted(device))
                return []
            },
            DBusMethod("RequestConfirmation", inputs: [DBusArgument("device", .objectPath), DBusArgument("passkey", .uint32)]) { call in
                try await fromBlueZ(call)
                let device = try admit(call)
                if case .uint32(let p) = call.arguments[1] { sink.yield(.passkey(device, passkeyText(p))) }
                sink.yield(.accepted(device))
                return []
            },
            DBusMethod("DisplayPasskey", inputs: [DBusArgument("device", .objectPath), DBusArgument("passkey", .uint32),
                                                  DBusArgument("entered", .uint16)]) { call in
                try await fromBlueZ(call)
                let device = try admit(call)
                if case .uint32(let p) = call.arguments[1] { sink.yield(.passkey(device, passkeyText(p))) }
                sink.yield(.accepted(device))
                return []
            },
            DBusMethod("RequestPinCode", inputs: [DBusArgument("device", .objectPath)],
                       outputs: [DBusArgument("pincode", .string)]) { call in
                try await fromBlueZ(call)
                throw refuse(call, "a PIN code is for classic Bluetooth; this enrollment pairs over LE only")
            },
            DBusMethod("DisplayPinCode", inputs: [DBusArgument("device", .objectPath), DBusArgument("pincode", .string)]) { call in
                try await fromBlueZ(call)
                throw refuse(call, "a PIN code is for classic Bluetooth; this enrollment pairs over LE only")
            },
            DBusMethod("RequestPasskey", inputs: [DBusArgument("device", .objectPath)],
                       outputs: [DBusArgument("passkey", .uint32)]) { call in
                try await fromBlueZ(call)
                throw refuse(call, "this box shows the passkey; it types none")
            },
            DBusMethod("AuthorizeService", inputs: [DBusArgument("device", .objectPath), DBusArgument("uuid", .string)]) { call in
                try await fromBlueZ(call)
                throw refuse(call, "the enrollment authorises no service")
            },
            DBusMethod("Cancel") { call in
                try await fromBlueZ(call)
                sink.yield(.cancelled)
                return []
            },
        ])
        let object = try await connection.export([interface], at: path)
        return PairingAgent(path: path, capability: capability, events: events, object: object, chosen: chosen)
    }

    /// Removes the object from the bus.
    public func unexport() async {
        await object.unexport()
    }
}
