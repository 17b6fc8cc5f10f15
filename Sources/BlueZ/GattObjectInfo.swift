import DBusKit

/// A typed view of a remote `org.bluez.GattService1`, as BlueZ exports it under a connected
/// device once its services are resolved (`dev_XX/service000e`).
public struct GattServiceInfo: Sendable, Hashable {
    public var path: ObjectPath
    /// Lowercase 128-bit UUID ("" if missing).
    public var uuid: String
    public var device: ObjectPath?
    public var primary: Bool

    public init(path: ObjectPath, properties p: [String: DBusValue]) {
        self.path = path
        uuid = PropertyDecoding.string(p, "UUID").map { BluetoothUUID($0)?.full ?? $0.lowercased() } ?? ""
        device = PropertyDecoding.objectPath(p, "Device")
        primary = PropertyDecoding.bool(p, "Primary") ?? false
    }
}

/// A typed view of a remote `org.bluez.GattCharacteristic1` (`dev_XX/service000e/char000f`).
public struct GattCharacteristicInfo: Sendable, Hashable {
    public var path: ObjectPath
    /// Lowercase 128-bit UUID ("" if missing).
    public var uuid: String
    public var service: ObjectPath?
    /// `read`, `write`, `notify`, …
    public var flags: [String]
    /// The ATT MTU of the link (BlueZ ≥ 5.62), nil if BlueZ does not say.
    public var mtu: UInt16?
    /// The value BlueZ cached from the last read or notification.
    public var value: [UInt8]?

    public init(path: ObjectPath, properties p: [String: DBusValue]) {
        self.path = path
        uuid = PropertyDecoding.string(p, "UUID").map { BluetoothUUID($0)?.full ?? $0.lowercased() } ?? ""
        service = PropertyDecoding.objectPath(p, "Service")
        flags = PropertyDecoding.strings(p, "Flags")
        mtu = PropertyDecoding.integer(p, "MTU")
        value = p["Value"].flatMap(PropertyDecoding.bytes)
    }
}
