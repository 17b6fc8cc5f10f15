import DBusKit

/// Who may call the objects a node exports for BlueZ (`LEAdvertisement1.Release`, the GATT
/// application's `ReadValue` and `WriteValue`): only the current owner of `org.bluez`, as BlueZ
/// itself only takes an agent's or an advertisement's calls from the process that registered it.
/// Anyone else on the bus gets `org.bluez.Error.NotPermitted` and changes nothing.
///
/// The owner is asked of the bus at each call (`GetNameOwner`), so a restarted bluetoothd is
/// recognised at once. These calls are rare: a release, an identification.
public struct BlueZCallers: Sendable {
    public static let notPermitted: ErrorName = "org.bluez.Error.NotPermitted"

    let connection: DBusConnection
    let service: BusName

    public init(connection: DBusConnection, service: BusName = BlueZService.name) {
        self.connection = connection
        self.service = service
    }

    /// Throws `NotPermitted` unless `call` comes from the owner of `org.bluez`.
    public func require(_ call: DBusMethodCall) async throws(DBusError) {
        let owner = try? await connection.nameOwner(of: service)
        guard let sender = call.sender, let owner, owner.rawValue == sender.rawValue else {
            throw DBusError(Self.notPermitted, "only bluetoothd (the owner of \(service)) may call \(call.member)")
        }
    }
}
