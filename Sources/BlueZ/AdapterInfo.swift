import DBusKit

/// A typed view of one `org.bluez.Adapter1` object, decoded from its properties.
///
/// Decoding never fails: a missing or wrongly typed property reads as absent (`nil`, `false` or
/// empty), because the properties come from another process.
public struct AdapterInfo: Sendable, Hashable {
    public var path: ObjectPath
    /// `AA:BB:CC:DD:EE:FF`, or "" if BlueZ did not say.
    public var address: String
    public var addressType: String?
    public var name: String?
    public var alias: String?
    public var powered: Bool
    public var discoverable: Bool
    public var discovering: Bool
    /// Whether the adapter accepts pairings (`Pairable`).
    public var pairable: Bool
    /// Lowercase 128-bit UUIDs of the local services (including registered GATT applications).
    public var uuids: [String]
    /// `central`, `peripheral`, … (absent on old BlueZ).
    public var roles: [String]

    public init(path: ObjectPath, properties p: [String: DBusValue]) {
        typealias D = PropertyDecoding
        self.path = path
        address = D.string(p, "Address") ?? ""
        addressType = D.string(p, "AddressType")
        name = D.string(p, "Name")
        alias = D.string(p, "Alias")
        powered = D.bool(p, "Powered") ?? false
        discoverable = D.bool(p, "Discoverable") ?? false
        discovering = D.bool(p, "Discovering") ?? false
        pairable = D.bool(p, "Pairable") ?? false
        uuids = D.uuids(p, "UUIDs")
        roles = D.strings(p, "Roles")
    }
}
