import DBusKit

/// A typed view of one `org.bluez.Device1` object: a remote device BlueZ heard or connected to.
///
/// Decoding never fails: a missing or wrongly typed property reads as absent, and malformed
/// entries of `UUIDs`, `ManufacturerData` and `ServiceData` are skipped, because the values come
/// from another process and, through it, from whatever is on the air.
public struct DeviceInfo: Sendable, Hashable {
    public var path: ObjectPath
    /// The adapter that sees the device (`Adapter`, else the parent of ``path``).
    public var adapter: ObjectPath?
    /// `AA:BB:CC:DD:EE:FF`: `Address`, else decoded from the object path (`dev_AA_BB_…`).
    public var address: String
    /// `public` or `random`.
    public var addressType: String?
    /// The advertised name, once one was heard.
    public var name: String?
    public var alias: String?
    /// dBm of the last announced report; only while BlueZ is discovering.
    public var rssi: Int16?
    /// Advertised TX power, dBm.
    public var txPower: Int16?
    /// Lowercase 128-bit service UUIDs heard (accumulated by BlueZ).
    public var uuids: [String]
    /// Company identifier → the bytes after it.
    public var manufacturerData: [UInt16: [UInt8]]
    /// Lowercase 128-bit service UUID → data.
    public var serviceData: [String: [UInt8]]
    public var connected: Bool
    /// True once the device's GATT services are exported under ``path``.
    public var servicesResolved: Bool
    public var paired: Bool

    public init(path: ObjectPath, properties p: [String: DBusValue]) {
        typealias D = PropertyDecoding
        self.path = path
        adapter = D.objectPath(p, "Adapter") ?? path.parent
        address = D.string(p, "Address") ?? Self.address(fromPath: path) ?? ""
        addressType = D.string(p, "AddressType")
        name = D.string(p, "Name")
        alias = D.string(p, "Alias")
        rssi = D.integer(p, "RSSI")
        txPower = D.integer(p, "TxPower")
        uuids = D.uuids(p, "UUIDs")
        manufacturerData = D.manufacturerData(p, "ManufacturerData")
        serviceData = D.serviceData(p, "ServiceData")
        connected = D.bool(p, "Connected") ?? false
        servicesResolved = D.bool(p, "ServicesResolved") ?? false
        paired = D.bool(p, "Paired") ?? false
    }

    /// Whether the device advertises (or offers) the service `uuid`, in any of BlueZ's forms.
    public func advertises(_ uuid: String) -> Bool {
        let wanted = BluetoothUUID(uuid)?.full ?? uuid.lowercased()
        return uuids.contains(wanted) || serviceData[wanted] != nil
    }

    /// `/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF` → `AA:BB:CC:DD:EE:FF`, nil for another shape.
    public static func address(fromPath path: ObjectPath) -> String? {
        let last = path.rawValue.split(separator: "/").last ?? ""
        guard last.hasPrefix("dev_") else { return nil }
        let parts = last.dropFirst(4).split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 6, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy { $0.isASCII && $0.isHexDigit } }) else {
            return nil
        }
        return parts.joined(separator: ":").uppercased()
    }
}
