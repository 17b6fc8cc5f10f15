/// Bytes written as hexadecimal digits, two per byte, most significant first: keys, IRKs,
/// challenges in logs and tests.
public enum Hex {
    /// The bytes of `text`, or nil when it is not an even number of hexadecimal digits.
    public static func bytes(_ text: some StringProtocol) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let high = value(digits[i]), let low = value(digits[i + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    /// The offset of the first character of `text` that is not a hexadecimal digit, if any.
    public static func firstNonDigit(_ text: some StringProtocol) -> Int? {
        text.utf8.firstIndex { value($0) == nil }.map { text.utf8.distance(from: text.utf8.startIndex, to: $0) }
    }

    /// `bytes` in lowercase hexadecimal.
    public static func text(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func value(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0") ... UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a") ... UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A") ... UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
