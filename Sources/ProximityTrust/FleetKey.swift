import Foundation

/// A fleet's shared secret (`fleet-key: FILE`): 32 random bytes, written as 64 hexadecimal
/// digits on one line (`proximityctl fleet-key new`); lines starting with `#` are comments. The
/// identification's keys are derived from it with HKDF-SHA256, one per purpose, so the secret
/// itself never keys anything.
public struct FleetKey: Sendable, Hashable {
    /// The secret's length, bytes.
    public static let length = 32

    let secret: [UInt8]

    public init(bytes: [UInt8]) throws(FleetKeyError) {
        guard bytes.count == Self.length else {
            throw FleetKeyError(line: 1, column: 1, "a fleet key is \(Self.length) bytes, not \(bytes.count)")
        }
        secret = bytes
    }

    /// A new key from the system's cryptographically secure generator (``SecureRandom``).
    public static func generate() -> FleetKey {
        try! FleetKey(bytes: SecureRandom.bytes(length))
    }

    /// The file's form: a comment saying what it is, and the key.
    public var fileText: String {
        "# proximityd fleet key: every node of the fleet has this file (mode 0600). Keep it secret.\n"
            + Hex.text(secret) + "\n"
    }

    /// Reads the file's text: one line of 64 hexadecimal digits, comments and blank lines aside.
    public init(parsing text: String) throws(FleetKeyError) {
        guard text.utf8.count <= 4096 else {
            throw FleetKeyError(line: 1, column: 1, "too long for a fleet key file (\(text.utf8.count) bytes; at most 4096)")
        }
        var found: (line: Int, bytes: [UInt8])?
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = index + 1
            let trimmed = raw.drop { $0 == " " || $0 == "\t" }
            let column = raw.count - trimmed.count + 1
            let content = trimmed.reversed().drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed()
            if content.isEmpty || content.first == "#" { continue }
            if let found {
                throw FleetKeyError(line: line, column: column, "a second key (the first is on line \(found.line)): a file holds one")
            }
            let digits = String(content)
            guard digits.count == Self.length * 2 else {
                throw FleetKeyError(line: line, column: column,
                                    "a fleet key is \(Self.length * 2) hexadecimal digits, not \(digits.count) characters")
            }
            guard let bytes = Hex.bytes(digits) else {
                let offset = (Hex.firstNonDigit(digits) ?? 0) / 2 * 2
                throw FleetKeyError(line: line, column: column + offset,
                                    "not a pair of hexadecimal digits (the key's characters are not repeated here)")
            }
            found = (line, bytes)
        }
        guard let found else {
            throw FleetKeyError(line: 1, column: 1, "no key: expected 64 hexadecimal digits (proximityctl fleet-key new writes one)")
        }
        try self.init(bytes: found.bytes)
    }

    /// The 32-byte key for `purpose`, derived with HKDF-SHA256 (salt: this project's name).
    func derived(_ purpose: String) -> [UInt8] {
        // Fixed lengths and a valid digest: libcrypto has no reason to fail here.
        try! HKDFSHA256.derive(key: secret, salt: Array("proximityd".utf8), info: Array(purpose.utf8), length: 32)
    }

    /// A short fingerprint to tell two keys apart in logs without showing either: the first 8
    /// hexadecimal digits of a derived value.
    public var fingerprint: String {
        let value = HMACSHA256.authenticationCode(key: derived("proximityd fingerprint v1"), data: Array("fingerprint".utf8))
        return Hex.text(value.prefix(4))
    }
}

/// A fleet key file's problem, where it is.
public struct FleetKeyError: Error, CustomStringConvertible, Sendable, Hashable {
    public let line: Int
    public let column: Int
    public let message: String

    public init(line: Int, column: Int, _ message: String) {
        self.line = line
        self.column = column
        self.message = message
    }

    public var description: String { "\(line):\(column): \(message)" }
}
