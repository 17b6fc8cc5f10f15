/// A Bluetooth UUID as BlueZ parses one from a string (`bt_string_to_uuid`).
///
/// The form given decides the size on the air, as in BlueZ: 4 hex digits are a 16-bit SIG UUID
/// (2 bytes), 8 hex digits a 32-bit one (4 bytes), the 36-character form a 128-bit one
/// (16 bytes), even when it is a SIG UUID written in full. A `0x` prefix is allowed on the
/// short forms. The advertising budget (``LegacyAdvertisingPayload``) depends on this.
public struct BluetoothUUID: Hashable, Sendable, CustomStringConvertible {
    /// The 128-bit form, lowercase: what BlueZ puts in `UUIDs` and `ServiceData` keys.
    public let full: String
    /// Bytes on the air: 2, 4 or 16.
    public let wireSize: Int

    /// The Bluetooth base UUID's tail, which turns a 16- or 32-bit UUID into its 128-bit form.
    public static let baseSuffix = "-0000-1000-8000-00805f9b34fb"

    /// Nil when `text` is not a UUID in one of the three forms.
    public init?(_ text: String) {
        var t = text.lowercased()
        if t.hasPrefix("0x") { t = String(t.dropFirst(2)) }
        func isHex(_ s: Substring) -> Bool { s.allSatisfy { $0.isASCII && $0.isHexDigit } }
        switch t.count {
        case 4 where isHex(t[...]):
            full = "0000" + t + Self.baseSuffix
            wireSize = 2
        case 8 where isHex(t[...]):
            full = t + Self.baseSuffix
            wireSize = 4
        case 36:
            let parts = t.split(separator: "-", omittingEmptySubsequences: false)
            guard parts.map(\.count) == [8, 4, 4, 4, 12], parts.allSatisfy(isHex) else { return nil }
            full = t
            wireSize = 16
        default:
            return nil
        }
    }

    public var description: String { full }
}
