import DBusKit

/// A proxy for an adapter's `org.bluez.LEAdvertisingManager1`.
public struct LEAdvertisingManager: Sendable {
    /// The adapter. BlueZ reads the advertisement back from us before it answers.
    public var object: BlueZObject

    public init(connection: DBusConnection, path: ObjectPath, service: BusName = BlueZService.name) {
        object = BlueZObject(connection: connection, path: path, service: service)
    }

    /// `RegisterAdvertisement`. BlueZ reads the `LEAdvertisement1` exported at `advertisement` on
    /// this connection; `Failed` "Failed to parse advertisement." if it does not like it (for
    /// example over 31 bytes), `AlreadyExists` if it is registered, `NotPermitted` when the
    /// controller has no instance left.
    public func register(_ advertisement: ObjectPath, options: [String: DBusValue] = [:]) async throws {
        try await object.call(BlueZService.advertisingManagerInterface, "RegisterAdvertisement",
                              [.objectPath(advertisement), .vardict(options)])
    }

    /// `UnregisterAdvertisement` (BlueZ does not call `Release` for it). `DoesNotExist` if unknown.
    public func unregister(_ advertisement: ObjectPath) async throws {
        try await object.call(BlueZService.advertisingManagerInterface, "UnregisterAdvertisement", [.objectPath(advertisement)])
    }
}
