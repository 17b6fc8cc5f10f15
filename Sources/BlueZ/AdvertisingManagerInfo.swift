import DBusKit

/// A typed view of an adapter's `org.bluez.LEAdvertisingManager1`, decoded from its properties.
///
/// Decoding never fails: a missing or wrongly typed property reads as 0 or empty.
public struct AdvertisingManagerInfo: Sendable, Hashable {
    public var path: ObjectPath
    /// Advertisements registered (by any client).
    public var activeInstances: Int
    /// How many more the controller can take.
    public var supportedInstances: Int
    /// What an advertisement may ask BlueZ to include (`tx-power`, `appearance`, `local-name`, …).
    public var supportedIncludes: [String]

    public init(path: ObjectPath, properties p: [String: DBusValue]) {
        typealias D = PropertyDecoding
        self.path = path
        activeInstances = D.integer(p, "ActiveInstances") ?? 0
        supportedInstances = D.integer(p, "SupportedInstances") ?? 0
        supportedIncludes = D.strings(p, "SupportedIncludes")
    }
}
