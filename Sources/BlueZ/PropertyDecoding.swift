import DBusKit

/// Lenient readers for property dictionaries that come from another process.
///
/// BlueZ (or anything owning `org.bluez`) decides what it sends: a property may be missing or of
/// another type than documented. Each reader returns nil (or an empty collection) rather than
/// trapping, and skips malformed elements of a container instead of refusing the whole value.
/// Values may arrive wrapped in variants; every reader looks through them.
enum PropertyDecoding {
    static func string(_ p: [String: DBusValue], _ key: String) -> String? {
        p[key]?.unwrapped.string
    }

    static func bool(_ p: [String: DBusValue], _ key: String) -> Bool? {
        p[key]?.unwrapped.bool
    }

    static func objectPath(_ p: [String: DBusValue], _ key: String) -> ObjectPath? {
        p[key]?.unwrapped.objectPath
    }

    /// Any integer type, if the value fits `T` (BlueZ sends `RSSI` as `n`, `MTU` as `q`).
    static func integer<T: FixedWidthInteger>(_ p: [String: DBusValue], _ key: String, as: T.Type = T.self) -> T? {
        guard let wide = p[key]?.unwrapped.integer else { return nil }
        return T(exactly: wide)
    }

    /// `as`: the string elements, others skipped.
    static func strings(_ p: [String: DBusValue], _ key: String) -> [String] {
        p[key]?.unwrapped.arrayElements?.compactMap { $0.unwrapped.string } ?? []
    }

    /// `ay`: nil unless every element is a byte.
    static func bytes(_ value: DBusValue) -> [UInt8]? {
        guard case .array(.byte, let items) = value.unwrapped else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(items.count)
        for item in items {
            guard case .byte(let b) = item else { return nil }
            out.append(b)
        }
        return out
    }

    /// `a{qv}` with `ay` values (`ManufacturerData`): company identifier → bytes.
    static func manufacturerData(_ p: [String: DBusValue], _ key: String) -> [UInt16: [UInt8]] {
        var out: [UInt16: [UInt8]] = [:]
        for entry in p[key]?.unwrapped.dictEntries ?? [] {
            guard let wide = entry.key.integer, let company = UInt16(exactly: wide),
                  let data = bytes(entry.value) else { continue }
            out[company] = data
        }
        return out
    }

    /// `a{sv}` with `ay` values (`ServiceData`): lowercase UUID → bytes.
    static func serviceData(_ p: [String: DBusValue], _ key: String) -> [String: [UInt8]] {
        var out: [String: [UInt8]] = [:]
        for entry in p[key]?.unwrapped.dictEntries ?? [] {
            guard let uuid = entry.key.string, let data = bytes(entry.value) else { continue }
            out[BluetoothUUID(uuid)?.full ?? uuid.lowercased()] = data
        }
        return out
    }

    /// Lowercase 128-bit forms of the UUID strings (strings that are no UUID kept lowercased).
    static func uuids(_ p: [String: DBusValue], _ key: String) -> [String] {
        strings(p, key).map { BluetoothUUID($0)?.full ?? $0.lowercased() }
    }
}
