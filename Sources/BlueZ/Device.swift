import DBusKit

/// A proxy for one remote `org.bluez.Device1` (`/org/bluez/hciN/dev_XX_XX_XX_XX_XX_XX`).
public struct Device: Sendable {
    public let connection: DBusConnection
    public let path: ObjectPath
    public let service: BusName
    /// For `Connect`, which lasts as long as the link takes to come up (BlueZ gives up after
    /// its own connection timeout, about 20 s).
    public var connectTimeout: Duration = .seconds(30)
    /// For the other calls.
    public var timeout: Duration = .seconds(10)

    public init(connection: DBusConnection, path: ObjectPath, service: BusName = BlueZService.name) {
        self.connection = connection
        self.path = path
        self.service = service
    }

    /// `Connect`: returns once connected; the GATT services appear afterwards, and
    /// `ServicesResolved` goes true when they are all there. A failed attempt is `Failed` with
    /// BlueZ's reason ("le-connection-abort-by-local", …), a second concurrent one `InProgress`.
    public func connect() async throws {
        _ = try await connection.callBlueZ(service, path, BlueZService.deviceInterface, "Connect", timeout: connectTimeout)
    }

    /// `Disconnect`. Succeeds on a device that is not connected.
    public func disconnect() async throws {
        _ = try await connection.callBlueZ(service, path, BlueZService.deviceInterface, "Disconnect", timeout: timeout)
    }
}
