import Foundation

/// A third-party beacon recognised in an advertisement. Its identity comes from the frame; no
/// connection is needed.
public enum BeaconIdentity: Sendable, Hashable {
    case iBeacon(uuid: UUID, major: UInt16, minor: UInt16, measuredPower: Int8)
    case altBeacon(manufacturer: UInt16, id1: UUID, id2: UInt16, id3: UInt16, referenceRSSI: Int8)
    case eddystoneUID(namespace: [UInt8], instance: [UInt8], txPowerAt0m: Int8)
    case eddystoneURL(url: String, txPowerAt0m: Int8)

    /// `ibeacon`, `altbeacon` or `eddystone`: the `Kind` a peer shows on the bus.
    public var kind: String {
        switch self {
        case .iBeacon: "ibeacon"
        case .altBeacon: "altbeacon"
        case .eddystoneUID, .eddystoneURL: "eddystone"
        }
    }

    /// A stable identifier for the table and the bus, e.g.
    /// `ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:2`.
    public var identifier: String {
        switch self {
        case .iBeacon(let uuid, let major, let minor, _):
            "ibeacon:\(uuid.uuidString.lowercased()):\(major):\(minor)"
        case .altBeacon(let manufacturer, let id1, let id2, let id3, _):
            "altbeacon:\(String(manufacturer, radix: 16).leftPadded(4)):\(id1.uuidString.lowercased()):\(id2):\(id3)"
        case .eddystoneUID(let namespace, let instance, _):
            "eddystone:\(hex(namespace)):\(hex(instance))"
        case .eddystoneURL(let url, _):
            "eddystone-url:\(url)"
        }
    }

    /// iBeacon major and minor, AltBeacon id2 and id3.
    public var majorMinor: (major: UInt16, minor: UInt16)? {
        switch self {
        case .iBeacon(_, let major, let minor, _), .altBeacon(_, _, let major, let minor, _): (major, minor)
        default: nil
        }
    }

    /// Eddystone-UID namespace and instance, lowercase hex.
    public var namespaceAndInstance: (namespace: String, instance: String)? {
        if case .eddystoneUID(let namespace, let instance, _) = self { (hex(namespace), hex(instance)) } else { nil }
    }

    /// Eddystone-URL's decoded URL.
    public var url: String? {
        if case .eddystoneURL(let url, _) = self { url } else { nil }
    }

    /// RSSI at 1 m as the frame states it.
    public var measuredPower: Double {
        switch self {
        case .iBeacon(_, _, _, let p): Double(p)
        case .altBeacon(_, _, _, _, let p): Double(p)
        case .eddystoneUID(_, _, let tx), .eddystoneURL(_, let tx): Double(tx) - 41
        }
    }
}

/// The Eddystone service UUID (0xFEAA) as BlueZ writes it in `ServiceData` keys.
public let eddystoneServiceUUID = "0000feaa-0000-1000-8000-00805f9b34fb"

/// Recognises beacon frames in BlueZ's `ManufacturerData` (company id → bytes after it) and
/// `ServiceData` (UUID → bytes). Anything malformed is not a beacon; nothing here traps.
public enum BeaconParser {
    public static func parse(manufacturerData: [UInt16: [UInt8]], serviceData: [String: [UInt8]]) -> BeaconIdentity? {
        for (company, bytes) in manufacturerData.sorted(by: { $0.key < $1.key }) {
            if company == 0x004C, let beacon = iBeacon(bytes) { return beacon }
            if let beacon = altBeacon(company: company, bytes) { return beacon }
        }
        if let bytes = serviceData[eddystoneServiceUUID] { return eddystone(bytes) }
        return nil
    }

    /// 02 15, 16-byte UUID, major and minor big-endian, measured power.
    static func iBeacon(_ b: [UInt8]) -> BeaconIdentity? {
        guard b.count >= 23, b[0] == 0x02, b[1] == 0x15 else { return nil }
        return .iBeacon(uuid: uuid(b[2..<18]), major: be16(b[18], b[19]), minor: be16(b[20], b[21]),
                        measuredPower: Int8(bitPattern: b[22]))
    }

    /// BE AC, 20-byte beacon id (16 + 2 + 2), reference RSSI, manufacturer reserved.
    static func altBeacon(company: UInt16, _ b: [UInt8]) -> BeaconIdentity? {
        guard b.count >= 24, b[0] == 0xBE, b[1] == 0xAC else { return nil }
        return .altBeacon(manufacturer: company, id1: uuid(b[2..<18]), id2: be16(b[18], b[19]), id3: be16(b[20], b[21]),
                          referenceRSSI: Int8(bitPattern: b[22]))
    }

    static func eddystone(_ b: [UInt8]) -> BeaconIdentity? {
        guard b.count >= 2 else { return nil }
        let tx = Int8(bitPattern: b[1])
        switch b[0] {
        case 0x00:
            guard b.count >= 18 else { return nil }
            return .eddystoneUID(namespace: Array(b[2..<12]), instance: Array(b[12..<18]), txPowerAt0m: tx)
        case 0x10:
            guard b.count >= 3, let url = decodeURL(Array(b[2...])) else { return nil }
            return .eddystoneURL(url: url, txPowerAt0m: tx)
        default:
            return nil
        }
    }

    static let urlSchemes = ["http://www.", "https://www.", "http://", "https://"]
    static let urlExpansions = [".com/", ".org/", ".edu/", ".net/", ".info/", ".biz/", ".gov/",
                                ".com", ".org", ".edu", ".net", ".info", ".biz", ".gov"]

    static func decodeURL(_ b: [UInt8]) -> String? {
        guard let first = b.first, Int(first) < urlSchemes.count, b.count <= 18 else { return nil }
        var url = urlSchemes[Int(first)]
        for byte in b.dropFirst() {
            if Int(byte) < urlExpansions.count {
                url += urlExpansions[Int(byte)]
            } else if byte > 0x20 && byte < 0x7F {
                url.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                return nil
            }
        }
        return url
    }

    private static func be16(_ hi: UInt8, _ lo: UInt8) -> UInt16 { UInt16(hi) << 8 | UInt16(lo) }

    private static func uuid(_ s: ArraySlice<UInt8>) -> UUID {
        let b = Array(s)
        return UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
    }
}

func hex(_ bytes: [UInt8]) -> String { bytes.map { String($0, radix: 16).leftPadded(2) }.joined() }

extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
