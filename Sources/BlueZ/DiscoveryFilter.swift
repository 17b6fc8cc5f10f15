import DBusKit

/// The argument of `Adapter1.SetDiscoveryFilter`, typed.
///
/// Setting any filter makes BlueZ's scan *filtered*: every report then announces `RSSI`, even
/// unchanged (without a filter BlueZ only announces a change of 8 dBm or more), and every
/// advertiser is reported, not only those with discoverable flags. A node ranging peers therefore
/// always sets one (``proximity(serviceUUID:)``).
public struct DiscoveryFilter: Sendable, Hashable {
    public enum Transport: String, Sendable { case auto, le, bredr }

    /// Report only devices advertising one of these services (empty: all).
    public var uuids: [String]
    /// Report only devices heard at this RSSI or stronger, dBm (−127…20). Not with `pathloss`.
    public var rssi: Int16?
    /// Report only devices whose path loss is at most this, dB (≤ 137). Not with `rssi`.
    public var pathloss: UInt16?
    public var transport: Transport?
    /// Announce `ManufacturerData`/`ServiceData` at every report, not only when they change.
    public var duplicateData: Bool?
    public var discoverable: Bool?
    /// Report only devices whose address or name starts with this.
    public var pattern: String?

    public init(uuids: [String] = [], rssi: Int16? = nil, pathloss: UInt16? = nil, transport: Transport? = nil,
                duplicateData: Bool? = nil, discoverable: Bool? = nil, pattern: String? = nil) {
        self.uuids = uuids
        self.rssi = rssi
        self.pathloss = pathloss
        self.transport = transport
        self.duplicateData = duplicateData
        self.discoverable = discoverable
        self.pattern = pattern
    }

    /// What a node scans with: LE only, every report; only peers advertising the general service,
    /// unless it ranges beacons too (they advertise no service UUID BlueZ could filter on).
    public static func proximity(serviceUUID: String, beacons: Bool = false) -> DiscoveryFilter {
        DiscoveryFilter(uuids: beacons ? [] : [serviceUUID], transport: .le, duplicateData: true)
    }

    /// The `a{sv}` BlueZ takes. Only the fields that are set appear.
    public var dictionary: [String: DBusValue] {
        var d: [String: DBusValue] = [:]
        if !uuids.isEmpty { d["UUIDs"] = .strings(uuids) }
        if let rssi { d["RSSI"] = .int16(rssi) }
        if let pathloss { d["Pathloss"] = .uint16(pathloss) }
        if let transport { d["Transport"] = .string(transport.rawValue) }
        if let duplicateData { d["DuplicateData"] = .boolean(duplicateData) }
        if let discoverable { d["Discoverable"] = .boolean(discoverable) }
        if let pattern { d["Pattern"] = .string(pattern) }
        return d
    }
}
