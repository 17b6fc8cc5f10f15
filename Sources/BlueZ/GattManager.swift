import DBusKit

/// A proxy for an adapter's `org.bluez.GattManager1`.
public struct GattManager: Sendable {
    public let connection: DBusConnection
    /// The adapter's path.
    public let path: ObjectPath
    public let service: BusName
    /// BlueZ reads the application with `GetManagedObjects` before it answers.
    public var timeout: Duration = .seconds(10)

    public init(connection: DBusConnection, path: ObjectPath, service: BusName = BlueZService.name) {
        self.connection = connection
        self.path = path
        self.service = service
    }

    /// `RegisterApplication`: BlueZ reads the objects below `application` (which needs an object
    /// manager) and serves them. `Failed` for an application it cannot use, `AlreadyExists` if
    /// registered.
    public func registerApplication(_ application: ObjectPath, options: [String: DBusValue] = [:]) async throws {
        _ = try await connection.callBlueZ(service, path, BlueZService.gattManagerInterface, "RegisterApplication",
                                           [.objectPath(application), .vardict(options)], timeout: timeout)
    }

    /// `UnregisterApplication`. `DoesNotExist` if unknown.
    public func unregisterApplication(_ application: ObjectPath) async throws {
        _ = try await connection.callBlueZ(service, path, BlueZService.gattManagerInterface, "UnregisterApplication",
                                           [.objectPath(application)], timeout: timeout)
    }
}
