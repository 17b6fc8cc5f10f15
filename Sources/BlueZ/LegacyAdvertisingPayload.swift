/// What BlueZ puts into a legacy (31-byte) advertisement for one `LEAdvertisement1`, sized the
/// way BlueZ 5.66 sizes it before it accepts or refuses the registration.
///
/// BlueZ's rules (`src/advertising.c`: `generate_adv_data`, `calc_max_adv_len`;
/// `src/shared/ad.c`: `bt_ad_length`), the same as bluez-sim's:
/// - each AD structure costs 2 bytes (length, type) plus its data;
/// - service UUIDs are grouped into one list per size: 2 + 2/4/16 bytes per UUID, the size
///   being the form the UUID was written in (a SIG UUID written in full costs 16);
///   solicited UUIDs likewise;
/// - manufacturer data: 2 + 2 (company) + n per entry; service data: 2 + UUID size + n per entry;
///   raw `Data`: 2 + n per entry;
/// - flags cost 3 when the advertisement sets `Discoverable`; appearance 4;
/// - the budget is 31, less 3 for TX power (`Includes` "tx-power"), less 3 when the kernel adds
///   discoverable flags itself (a peripheral without `Discoverable` on a discoverable adapter),
///   less 4 for an included appearance;
/// - the local name is not counted: it goes into the scan response (31 bytes of its own: a name
///   AD of at most 29 bytes of name, which BlueZ shortens itself when longer).
public struct LegacyAdvertisingPayload: Sendable, Hashable {
    /// The legacy advertising (and scan response) data limit.
    public static let maxLength = 31
    /// The longest local name that fits the scan response whole (31 − the AD header).
    public static let maxLocalNameLength = 29

    /// `Type` "peripheral" (connectable) rather than "broadcast".
    public var peripheral: Bool
    public var serviceUUIDs: [BluetoothUUID]
    public var solicitUUIDs: [BluetoothUUID]
    public var manufacturerData: [UInt16: [UInt8]]
    public var serviceData: [BluetoothUUID: [UInt8]]
    /// Raw `Data` entries, AD type → bytes.
    public var data: [UInt8: [UInt8]]
    /// Whether the advertisement sets `Discoverable` (then it carries flags of its own).
    public var setsFlags: Bool
    public var appearance: Bool
    /// `Includes`: "tx-power", "appearance", "local-name" (others are ignored, as BlueZ does).
    public var includes: Set<String>

    public init(peripheral: Bool = true, serviceUUIDs: [BluetoothUUID] = [], solicitUUIDs: [BluetoothUUID] = [],
                manufacturerData: [UInt16: [UInt8]] = [:], serviceData: [BluetoothUUID: [UInt8]] = [:],
                data: [UInt8: [UInt8]] = [:], setsFlags: Bool = false, appearance: Bool = false, includes: Set<String> = []) {
        self.peripheral = peripheral
        self.serviceUUIDs = serviceUUIDs
        self.solicitUUIDs = solicitUUIDs
        self.manufacturerData = manufacturerData
        self.serviceData = serviceData
        self.data = data
        self.setsFlags = setsFlags
        self.appearance = appearance
        self.includes = includes
    }

    /// Bytes of advertising data BlueZ generates.
    public var length: Int {
        func uuidLists(_ list: [BluetoothUUID]) -> Int {
            var unique: [BluetoothUUID] = []
            for u in list where !unique.contains(u) { unique.append(u) }
            var total = 0
            for size in [2, 4, 16] {
                let n = unique.filter { $0.wireSize == size }.count
                if n > 0 { total += 2 + n * size }
            }
            return total
        }
        var total = uuidLists(serviceUUIDs) + uuidLists(solicitUUIDs)
        for (_, d) in manufacturerData { total += 2 + 2 + d.count }
        for (u, d) in serviceData { total += 2 + u.wireSize + d.count }
        for (_, d) in data { total += 2 + d.count }
        if setsFlags { total += 3 }
        if appearance || includes.contains("appearance") { total += 4 }
        return total
    }

    /// The budget BlueZ allows, given whether the adapter is discoverable.
    public func maxLength(adapterDiscoverable: Bool) -> Int {
        var max = Self.maxLength
        if includes.contains("tx-power") { max -= 3 }
        if peripheral && adapterDiscoverable && !setsFlags { max -= 3 }
        if includes.contains("appearance") { max -= 4 }
        return max
    }

    /// Whether BlueZ accepts it (size only).
    public func fits(adapterDiscoverable: Bool) -> Bool {
        length <= maxLength(adapterDiscoverable: adapterDiscoverable)
    }

    /// `name` cut to what the scan response carries whole: at most 29 bytes of UTF-8, cut between
    /// characters (BlueZ would cut between bytes, possibly inside a character). Nil for an empty
    /// name.
    public static func truncatedLocalName(_ name: String, maxBytes: Int = maxLocalNameLength) -> String? {
        var out = ""
        var bytes = 0
        for c in name {
            let n = c.utf8.count
            if bytes + n > maxBytes { break }
            out.append(c)
            bytes += n
        }
        return out.isEmpty ? nil : out
    }
}
