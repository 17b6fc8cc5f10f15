import Foundation

/// Topic levels made from names that may hold anything (region and peer identifiers, node names).
public enum MQTTTopic {
    /// `text` as one topic level: letters, digits and `-._:~@` as they are, every other byte
    /// percent-encoded (`/` → `%2F`, `+` → `%2B`, `#` → `%23`, `%` → `%25`, space → `%20`), so that
    /// it is never a wildcard or two levels, and distinct names stay distinct.
    public static func segment(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "~"), UInt8(ascii: "@"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out.isEmpty ? "%00" : out
    }

    /// The name a level made by ``segment(_:)`` stands for.
    public static func name(_ level: String) -> String {
        level == "%00" ? "" : level.removingPercentEncoding ?? level
    }

    /// `text` as a Home Assistant object id (`[a-zA-Z0-9_-]`): other characters become `_`, and
    /// when any did, a hash of the whole name follows, so distinct names stay distinct.
    public static func objectID(_ text: String) -> String {
        var changed = false
        let mapped = String(text.unicodeScalars.map { s -> Character in
            if s.isASCII, s.properties.isAlphabetic || ("0"..."9").contains(s) || s == "_" || s == "-" { return Character(s) }
            changed = true
            return "_"
        })
        guard changed else { return mapped }
        var hash: UInt32 = 2_166_136_261
        for byte in text.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return mapped + "_" + String(format: "%08x", hash)
    }

    /// Why `text` cannot be a topic prefix (levels separated by `/`, none empty, no wildcard, no
    /// control character, at most 1024 bytes), or nil.
    public static func prefixProblem(_ text: String) -> String? {
        if text.isEmpty { return "is empty" }
        if text.contains("+") || text.contains("#") { return "'\(text)' contains a wildcard (+ or #)" }
        if text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) { return "contains control characters" }
        if text.split(separator: "/", omittingEmptySubsequences: false).contains(where: \.isEmpty) {
            return "'\(text)' has an empty level (a leading, trailing or double /)"
        }
        if text.utf8.count > 1024 { return "is longer than 1024 bytes" }
        return nil
    }

    /// Why `text` cannot be one topic level (not empty, no `/`, no wildcard, no control character,
    /// at most 255 bytes), or nil.
    public static func levelProblem(_ text: String) -> String? {
        if text.isEmpty { return "is empty" }
        if text.contains("/") || text.contains("+") || text.contains("#") {
            return "'\(text)' contains /, + or #, which a topic level cannot"
        }
        if text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) { return "contains control characters" }
        if text.utf8.count > 255 { return "is longer than 255 bytes" }
        return nil
    }
}
