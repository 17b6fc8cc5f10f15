import DBusKit

/// A proxy for an adapter's `org.bluez.GattManager1`.
public struct GattManager: Sendable {
    /// The adapter. BlueZ reads the application with `GetManagedObjects` before it answers.
    public var object: BlueZObject

    public init(connection: DBusConnection, path: ObjectPath, service: BusName = BlueZService.name) {
        object = BlueZObject(connection: connection, path: path, service: service)
    }

    /// `RegisterApplication`: BlueZ reads the objects below `application` (which needs an object
    /// manager) and serves them. `Failed` for an application it cannot use, `AlreadyExists` if
    /// registered.
    public func registerApplication(_ application: ObjectPath, options: [String: DBusValue] = [:]) async throws {
        try await object.call(BlueZService.gattManagerInterface, "RegisterApplication", [.objectPath(application), .vardict(options)])
    }

    /// `UnregisterApplication`. `DoesNotExist` if unknown.
    public func unregisterApplication(_ application: ObjectPath) async throws {
        try await object.call(BlueZService.gattManagerInterface, "UnregisterApplication", [.objectPath(application)])
    }
}
