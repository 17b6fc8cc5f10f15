import DBusKit

/// A proxy for one `org.bluez.Adapter1` (`/org/bluez/hciN`).
///
/// Each method is one D-Bus call; BlueZ's errors come back as ``BlueZCallError``
/// (`NotReady` while the adapter is off, `InProgress` for a second `StartDiscovery` of the same
/// client, …). BlueZ keeps discovery and its filter per client connection: they end when this
/// connection leaves the bus.
public struct Adapter: Sendable {
    public var object: BlueZObject
    public var connection: DBusConnection { object.connection }
    public var path: ObjectPath { object.path }

    public init(connection: DBusConnection, path: ObjectPath, service: BusName = BlueZService.name) {
        object = BlueZObject(connection: connection, path: path, service: service)
    }

    private func call(_ member: MemberName, _ arguments: [DBusValue] = []) async throws {
        try await object.call(BlueZService.adapterInterface, member, arguments)
    }

    /// `SetDiscoveryFilter`: kept for this client's next `StartDiscovery` and after `StopDiscovery`.
    /// `InvalidArguments` for values BlueZ refuses (a bad UUID, `RSSI` with `Pathloss`, …).
    public func setDiscoveryFilter(_ filter: DiscoveryFilter) async throws {
        try await call("SetDiscoveryFilter", [.vardict(filter.dictionary)])
    }

    /// `SetDiscoveryFilter({})`: this client's filter is cleared.
    public func clearDiscoveryFilter() async throws {
        try await call("SetDiscoveryFilter", [.vardict([:])])
    }

    public func startDiscovery() async throws { try await call("StartDiscovery") }

    /// `Failed` "No discovery started" if this client was not discovering.
    public func stopDiscovery() async throws { try await call("StopDiscovery") }

    /// Forgets a device (disconnecting it first). `DoesNotExist` for an unknown one.
    public func removeDevice(_ device: ObjectPath) async throws {
        try await call("RemoveDevice", [.objectPath(device)])
    }

    /// Sets `Powered`.
    /// `Pairable` on for `seconds` (`PairableTimeout`, after which bluetoothd turns it off
    /// itself, even if this process is gone), or off.
    public func setPairable(_ pairable: Bool, timeout seconds: UInt32 = 0) async throws {
        do {
            if pairable {
                try await object.connection.setProperty(destination: object.service, path: object.path,
                                                        interface: BlueZService.adapterInterface, name: "PairableTimeout",
                                                        value: .uint32(seconds), timeout: object.timeout)
            }
            try await object.connection.setProperty(destination: object.service, path: object.path,
                                                    interface: BlueZService.adapterInterface, name: "Pairable",
                                                    value: .boolean(pairable), timeout: object.timeout)
        } catch let error as DBusError {
            throw BlueZCallError(error)
        }
    }

    public func setPowered(_ powered: Bool) async throws {
        do {
            try await object.connection.setProperty(destination: object.service, path: object.path,
                                                    interface: BlueZService.adapterInterface, name: "Powered",
                                                    value: .boolean(powered), timeout: object.timeout)
        } catch let error as DBusError {
            throw BlueZCallError(error)
        }
    }

    /// The advertising manager of this adapter (same object, `LEAdvertisingManager1`).
    public var advertisingManager: LEAdvertisingManager {
        LEAdvertisingManager(connection: object.connection, path: object.path, service: object.service)
    }

    /// The GATT manager of this adapter (same object, `GattManager1`).
    public var gattManager: GattManager {
        GattManager(connection: object.connection, path: object.path, service: object.service)
    }
}
