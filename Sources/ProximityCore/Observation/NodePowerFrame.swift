/// The manufacturer-specific data a node advertises besides the general service UUID: its measured
/// power (its RSSI at 1 m, `--measured-power`), so that peers range it with its own calibration
/// rather than assuming theirs (`docs/ranging.md`, "Advertised measured power and the receiver
/// offset").
///
/// Under company identifier 0xFFFF (the Bluetooth SIG's value for tests and devices without a
/// company identifier), version 1 is four bytes after the company identifier:
///
/// | byte | value | meaning |
/// | --- | --- | --- |
/// | 0, 1 | `50 58` | "PX", the marker |
/// | 2 | `01` | the version |
/// | 3 | int8 | the measured power, dBm, −127…20 |
///
/// On the air that is one AD structure of 8 bytes, `07 FF FF FF 50 58 01 pp`, which with the
/// flags (3) and the 128-bit general service UUID (18) makes 29 of the 31 legacy bytes.
///
/// A node of a trusted fleet adds two bytes, its member tag (``MemberTagging``):
///
/// | byte | value | meaning |
/// | --- | --- | --- |
/// | 4, 5 | tag | from the fleet key and the address the node advertises from |
///
/// which makes the AD structure 10 bytes and the advertisement 31, all of the legacy budget.
///
/// Reading is strict, since anyone may send data under 0xFFFF: the marker, version 1 and a power
/// in −127…20, and it is read only from peer nodes (devices that advertise the general service).
/// Bytes after the sixth are ignored, and readers older than the tag ignore it, so version 1
/// grows without breaking them; an incompatible change takes a new version byte, which they
/// ignore.
public enum NodePowerFrame {
    /// The company identifier the frame is sent under.
    public static let companyID: UInt16 = 0xFFFF
    /// "PX".
    public static let marker: [UInt8] = [0x50, 0x58]
    public static let version: UInt8 = 1
    /// The measured powers a frame may carry (and the node's `--measured-power` takes).
    public static let powerRange: ClosedRange<Int16> = -127...20

    /// The length of a member tag.
    public static let memberTagLength = 2

    /// The bytes after the company identifier for `measuredPower` (clamped to ``powerRange``), and
    /// a trusted fleet member's tag.
    public static func encode(measuredPower: Int16, memberTag: [UInt8]? = nil) -> [UInt8] {
        let power = Int8(min(max(measuredPower, powerRange.lowerBound), powerRange.upperBound))
        return marker + [version, UInt8(bitPattern: power)] + (memberTag.map { Array($0.prefix(memberTagLength)) } ?? [])
    }

    /// `encode` as `ManufacturerData` (company → bytes).
    public static func manufacturerData(measuredPower: Int16, memberTag: [UInt8]? = nil) -> [UInt16: [UInt8]] {
        [companyID: encode(measuredPower: measuredPower, memberTag: memberTag)]
    }

    /// The member tag of a version 1 frame that carries one, else nil.
    public static func memberTag(in manufacturerData: [UInt16: [UInt8]]) -> [UInt8]? {
        guard let bytes = manufacturerData[companyID], measuredPower(in: bytes) != nil,
              bytes.count >= 4 + memberTagLength else { return nil }
        return Array(bytes[4..<(4 + memberTagLength)])
    }

    /// The measured power in the bytes after the company identifier, or nil when they are not a
    /// version 1 frame with a power in range.
    public static func measuredPower(in bytes: [UInt8]) -> Int16? {
        guard bytes.count >= 4, bytes[0] == marker[0], bytes[1] == marker[1], bytes[2] == version else { return nil }
        let power = Int16(Int8(bitPattern: bytes[3]))
        return powerRange.contains(power) ? power : nil
    }

    /// The measured power a device's `ManufacturerData` carries, or nil.
    public static func measuredPower(in manufacturerData: [UInt16: [UInt8]]) -> Int16? {
        manufacturerData[companyID].flatMap { measuredPower(in: $0) }
    }
}
