import DBusKit

/// One of bluetoothd's objects, reached on one connection: where a typed proxy's calls go.
///
/// The adapter-level proxies (``Adapter``, ``LEAdvertisingManager``, ``GattManager``) are views of
/// the same object through different interfaces, so they share this instead of each keeping its
/// own connection, path, service and timeout.
public struct BlueZObject: Sendable {
    public let connection: DBusConnection
    public let path: ObjectPath
    public let service: BusName
    /// Per call.
    public var timeout: Duration

    public init(connection: DBusConnection, path: ObjectPath, service: BusName = BlueZService.name,
                timeout: Duration = .seconds(10)) {
        self.connection = connection
        self.path = path
        self.service = service
        self.timeout = timeout
    }

    /// Calls `member` on `interface`; BlueZ's D-Bus errors come back as ``BlueZCallError``.
    @discardableResult
    func call(_ interface: InterfaceName, _ member: MemberName, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await connection.callBlueZ(service, path, interface, member, arguments, timeout: timeout)
    }
}
