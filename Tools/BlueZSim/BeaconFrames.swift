import Foundation
import LibCrypto

/// A third-party beacon's advertisement, and the bytes BlueZ would show for it.
///
/// Frames built from a scenario file are valid. A frame built in code from untrusted input (the
/// control interface) must pass ``validate()`` first: the byte properties trap on an invalid
/// frame (a namespace that is not 10 bytes, a URL Eddystone cannot encode), which is a
/// programmer error, not a radio condition.
public enum BeaconFrame: Sendable, Hashable {
    /// Apple iBeacon: company 0x004C, type 0x02, length 0x15, proximity UUID, major, minor
    /// (big-endian) and the measured power at 1 m.
    case iBeacon(uuid: UUID, major: UInt16, minor: UInt16, measuredPower: Int8)
    /// AltBeacon (AltBeacon spec, Radius Networks): beacon code 0xBEAC, 20-byte beacon id
    /// (id1 16 bytes, id2 and id3 2 bytes big-endian), reference RSSI at 1 m, one reserved byte
    /// (0x00).
    case altBeacon(manufacturer: UInt16, id1: UUID, id2: UInt16, id3: UInt16, referenceRSSI: Int8)
    /// Eddystone-UID: frame type 0x00, TX power at 0 m, 10-byte namespace, 6-byte instance, two
    /// reserved bytes (0x00).
    case eddystoneUID(namespace: [UInt8], instance: [UInt8], txPowerAt0m: Int8)
    /// Eddystone-URL: frame type 0x10, TX power at 0 m, scheme prefix code, then the URL with the
    /// spec's expansion codes (at most 17 bytes).
    case eddystoneURL(url: String, txPowerAt0m: Int8)
    /// A decoy: a connectable advertisement of one service UUID (lowercase, 128-bit form) and
    /// nothing else, from a device that never answers a connection: every link to it stalls until
    /// the central's connect timeout. What an outsider floods a fleet's general UUID with.
    case decoy(serviceUUID: String, measuredPower: Int8)

    /// Apple's Bluetooth SIG company identifier.
    public static let appleCompanyID: UInt16 = 0x004C
    /// Radius Networks' company identifier, the AltBeacon spec's example manufacturer.
    public static let radiusNetworksCompanyID: UInt16 = 0x0118
    /// The Eddystone service, 0xFEAA, as BlueZ writes a 16-bit UUID in full.
    public static let eddystoneServiceUUID = "0000feaa-0000-1000-8000-00805f9b34fb"

    /// Throws when the frame cannot be put on the air.
    public func validate() throws(BeaconFrameError) {
        switch self {
        case .iBeacon, .altBeacon:
            return
        case .decoy(let uuid, _):
            guard UUID(uuidString: uuid) != nil else { throw BeaconFrameError("\"\(uuid)\" is not a 128-bit UUID") }
        case .eddystoneUID(let namespace, let instance, _):
            guard namespace.count == 10 else {
                throw BeaconFrameError("an Eddystone namespace is 10 bytes, not \(namespace.count)")
            }
            guard instance.count == 6 else {
                throw BeaconFrameError("an Eddystone instance is 6 bytes, not \(instance.count)")
            }
        case .eddystoneURL(let url, _):
            _ = try Self.encodeEddystoneURL(url)
        }
    }

    /// As BlueZ's `Device1.ManufacturerData` (`a{qv}`): company id → the bytes after the 2-byte
    /// company id. iBeacon and AltBeacon have one entry; Eddystone none.
    public var manufacturerData: [UInt16: [UInt8]] {
        switch self {
        case .iBeacon(let uuid, let major, let minor, let power):
            return [Self.appleCompanyID: [0x02, 0x15] + uuid.beaconFrameBytes + major.beaconBigEndianBytes + minor.beaconBigEndianBytes
                + [UInt8(bitPattern: power)]]
        case .altBeacon(let manufacturer, let id1, let id2, let id3, let referenceRSSI):
            return [manufacturer: [0xBE, 0xAC] + id1.beaconFrameBytes + id2.beaconBigEndianBytes + id3.beaconBigEndianBytes
                + [UInt8(bitPattern: referenceRSSI), 0x00]]
        case .eddystoneUID, .eddystoneURL, .decoy:
            return [:]
        }
    }

    /// As BlueZ's `Device1.ServiceData` (`a{sv}`): full lowercase 128-bit UUID → the bytes after
    /// the 16-bit service UUID. Eddystone only.
    public var serviceData: [String: [UInt8]] {
        guard let frame = eddystoneFrame else { return [:] }
        return [Self.eddystoneServiceUUID: frame]
    }

    /// As BlueZ's `Device1.UUIDs`: Eddystone lists its service; the others list none.
    public var serviceUUIDs: [String] {
        switch self {
        case .iBeacon, .altBeacon: []
        case .eddystoneUID, .eddystoneURL: [Self.eddystoneServiceUUID]
        case .decoy(let uuid, _): [uuid.lowercased()]
        }
    }

    /// The frame's calibration as RSSI at 1 m: the power byte of iBeacon and AltBeacon;
    /// Eddystone's TX power at 0 m less 41 dB (the spec's loss over the first metre).
    public var measuredPowerAt1m: Double {
        switch self {
        case .iBeacon(_, _, _, let power): Double(power)
        case .altBeacon(_, _, _, _, let referenceRSSI): Double(referenceRSSI)
        case .eddystoneUID(_, _, let tx), .eddystoneURL(_, let tx): Double(tx) - 41
        case .decoy(_, let power): Double(power)
        }
    }

    /// The whole legacy advertising payload (at most 31 bytes) as a beacon sends it: the Flags AD
    /// (0x06: LE General Discoverable, BR/EDR not supported), then the frame's AD structures. Not
    /// needed by BlueZ's D-Bus API; it is what the specs publish as examples.
    public var advertisingData: [UInt8] {
        var data: [UInt8] = [0x02, 0x01, 0x06]
        for (company, bytes) in manufacturerData {
            let body = company.beaconLittleEndianBytes + bytes
            data += [UInt8(body.count + 1), 0xFF] + body
        }
        if case .decoy(let uuid, _) = self, let id = UUID(uuidString: uuid) {
            data += [0x11, 0x07] + id.beaconFrameBytes.reversed()  // Complete List of 128-bit Service UUIDs
        }
        if let frame = eddystoneFrame {
            data += [0x03, 0x03, 0xAA, 0xFE]  // Complete List of 16-bit Service UUIDs: FEAA
            data += [UInt8(frame.count + 3), 0x16, 0xAA, 0xFE] + frame  // Service Data - 16-bit UUID
        }
        return data
    }

    /// The Eddystone frame (the service data after 0xFEAA), nil for the other kinds.
    private var eddystoneFrame: [UInt8]? {
        switch self {
        case .iBeacon, .altBeacon, .decoy:
            return nil
        case .eddystoneUID(let namespace, let instance, let tx):
            precondition(namespace.count == 10 && instance.count == 6,
                         "invalid Eddystone-UID frame: call validate() before using it")
            return [0x00, UInt8(bitPattern: tx)] + namespace + instance + [0x00, 0x00]
        case .eddystoneURL(let url, let tx):
            guard let encoded = try? Self.encodeEddystoneURL(url) else {
                preconditionFailure("invalid Eddystone-URL frame: call validate() before using it")
            }
            return [0x10, UInt8(bitPattern: tx)] + encoded
        }
    }

    // MARK: Eddystone-URL encoding

    /// The URL scheme prefixes, by code.
    public static let eddystoneURLSchemes = ["http://www.", "https://www.", "http://", "https://"]
    /// The expansion codes 0x00...0x0D, by code.
    public static let eddystoneURLExpansions = [
        ".com/", ".org/", ".edu/", ".net/", ".info/", ".biz/", ".gov/",
        ".com", ".org", ".edu", ".net", ".info", ".biz", ".gov",
    ]

    /// Encodes a URL as Eddystone-URL does: one scheme prefix byte, then the rest with the longest
    /// expansion code matching at each position, other characters as themselves. Throws when the
    /// URL has no supported scheme, contains a character that is not printable ASCII (0x21–0x7E),
    /// or needs more than 17 bytes.
    public static func encodeEddystoneURL(_ url: String) throws(BeaconFrameError) -> [UInt8] {
        // The longest matching scheme: "https://www." before "https://".
        guard let (code, scheme) = eddystoneURLSchemes.enumerated()
            .filter({ url.hasPrefix($0.element) })
            .max(by: { $0.element.count < $1.element.count })
        else {
            throw BeaconFrameError("an Eddystone URL must start with http:// or https://")
        }
        var encoded: [UInt8] = [UInt8(code)]
        var rest = Substring(url.dropFirst(scheme.count))
        let expansions = eddystoneURLExpansions.enumerated().sorted { $0.element.count > $1.element.count }
        while let first = rest.unicodeScalars.first {
            if let (code, expansion) = expansions.first(where: { rest.hasPrefix($0.element) }) {
                encoded.append(UInt8(code))
                rest = rest.dropFirst(expansion.count)
                continue
            }
            guard first.value >= 0x21 && first.value <= 0x7E else {
                throw BeaconFrameError("an Eddystone URL holds printable ASCII only, not \(first.escaped(asASCII: true))")
            }
            encoded.append(UInt8(first.value))
            rest = Substring(rest.unicodeScalars.dropFirst())
        }
        guard encoded.count <= 18 else {
            throw BeaconFrameError("\(url) encodes to \(encoded.count - 1) bytes after the scheme; Eddystone-URL allows 17")
        }
        return encoded
    }

    /// Decodes an encoded Eddystone URL (scheme byte and the rest), nil when it is not valid.
    public static func decodeEddystoneURL(_ bytes: [UInt8]) -> String? {
        guard let first = bytes.first, Int(first) < eddystoneURLSchemes.count, bytes.count <= 18 else { return nil }
        var url = eddystoneURLSchemes[Int(first)]
        for byte in bytes.dropFirst() {
            if Int(byte) < eddystoneURLExpansions.count {
                url += eddystoneURLExpansions[Int(byte)]
            } else if (0x21...0x7E).contains(byte) {
                url.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                return nil
            }
        }
        return url
    }

    /// Parses hexadecimal bytes ("0102ab", case-insensitive, no separators); nil if malformed
    /// (LibCrypto's `Hex`, as the node reads keys).
    public static func bytes(fromHex text: String) -> [UInt8]? {
        Hex.bytes(text)
    }
}

/// Why a ``BeaconFrame`` cannot be sent.
public struct BeaconFrameError: Error, CustomStringConvertible, Sendable, Hashable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

extension UUID {
    /// The 16 bytes in network order, as beacon frames carry them.
    fileprivate var beaconFrameBytes: [UInt8] {
        withUnsafeBytes(of: uuid) { Array($0) }
    }
}

extension UInt16 {
    fileprivate var beaconBigEndianBytes: [UInt8] { [UInt8(self >> 8), UInt8(self & 0xFF)] }
    fileprivate var beaconLittleEndianBytes: [UInt8] { [UInt8(self & 0xFF), UInt8(self >> 8)] }
}
