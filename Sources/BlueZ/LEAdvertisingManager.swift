import DBusKit

/// A proxy for an adapter's `org.bluez.LEAdvertisingManager1`.
public struct LEAdvertisingManager: Sendable {
    public let connection: DBusConnection
    /// The adapter's path.
    public let path: ObjectPath
    public let service: BusName
    /// BlueZ reads the advertisement back from us before it answers.
    public var timeout: Duration = .seconds(10)

    public init(connection: DBusConnection, path: ObjectPath, service: BusName = BlueZService.name) {
        self.connection = connection
        self.path = path
        self.service = service
    }

    /// `RegisterAdvertisement`. BlueZ reads the `LEAdvertisement1` exported at `advertisement` on
    /// this connection; `Failed` "Failed to parse advertisement." if it does not like it (for
    /// example over 31 bytes), `AlreadyExists` if it is registered, `NotPermitted` when the
    /// controller has no instance left.
    public func register(_ advertisement: ObjectPath, options: [String: DBusValue] = [:]) async throws {
        _ = try await connection.callBlueZ(service, path, BlueZService.advertisingManagerInterface, "RegisterAdvertisement",
                                           [.objectPath(advertisement), .vardict(options)], timeout: timeout)
    }

    /// `UnregisterAdvertisement` (BlueZ does not call `Release` for it). `DoesNotExist` if unknown.
    public func unregister(_ advertisement: ObjectPath) async throws {
        _ = try await connection.callBlueZ(service, path, BlueZService.advertisingManagerInterface, "UnregisterAdvertisement",
                                           [.objectPath(advertisement)], timeout: timeout)
    }
}
