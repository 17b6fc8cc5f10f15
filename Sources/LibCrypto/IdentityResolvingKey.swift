import Foundation

/// A device's identity resolving key (IRK, 16 bytes): the key with which it makes its resolvable
/// private addresses, and with which anyone who has it recognises them (Bluetooth Core, Vol 6
/// Part B 1.3.2.2, and Vol 3 Part H 2.2.2, the `ah` function). Written as 32 hexadecimal digits,
/// most significant byte first, as the Core specification's sample data, Home Assistant's Private
/// BLE Device and ESPresense take it (colons, spaces and dashes between pairs are allowed).
public struct IdentityResolvingKey: Sendable, Hashable {
    public let bytes: [UInt8]
    let cipher: AES128Block

    public init(bytes: [UInt8]) throws(IRKError) {
        guard bytes.count == 16 else { throw IRKError("an IRK is 16 bytes (32 hexadecimal digits), not \(bytes.count)") }
        self.bytes = bytes
        cipher = try! AES128Block(key: bytes)
    }

    public init(hex text: String) throws(IRKError) {
        guard let bytes = Hex.bytes(text.filter { !":- ".contains($0) }), bytes.count == 16 else {
            throw IRKError("an IRK is 32 hexadecimal digits (16 bytes), e.g. ec0234a357c8ad05341010a60a397d9b")
        }
        try self.init(bytes: bytes)
    }

    /// A key as users find it: 32 hexadecimal digits, most significant byte first (``init(hex:)``;
    /// ESPresense's `irk:` prefix allowed), or 16 bytes in base64 as Apple's Keychain shows a
    /// phone's key (`Remote IRK`), least significant byte first, which Home Assistant's Private
    /// BLE Device reverses too.
    public init(parsing text: String) throws(IRKError) {
        var text = text.trimmingCharacters(in: .whitespaces)
        if text.hasPrefix("irk:") { text.removeFirst(4) }
        if text.count == 24, text.hasSuffix("=="), let data = Data(base64Encoded: text), data.count == 16 {
            try self.init(bytes: Array(data.reversed()))
            return
        }
        do { try self.init(hex: text) } catch {
            throw IRKError("an IRK is 32 hexadecimal digits (16 bytes, most significant first), e.g. ec0234a357c8ad05341010a60a397d9b, "
                           + "or its 16 bytes in base64 as the Keychain shows them, e.g. m305CqYQEDQFrchXozQC7A==")
        }
    }

    public static func == (a: Self, b: Self) -> Bool { a.bytes == b.bytes }
    public func hash(into hasher: inout Hasher) { hasher.combine(bytes) }

    /// `ah(k, r)`: the 24-bit hash of `prand` (3 bytes, most significant first): AES-128 of
    /// `prand` padded with 13 zero bytes in front, its last 3 bytes.
    public func ah(_ prand: [UInt8]) -> [UInt8] {
        precondition(prand.count == 3)
        // The key is 16 bytes and the block 16: the encryption cannot fail.
        let block = try! cipher.encrypt([UInt8](repeating: 0, count: 13) + prand)
        return Array(block[13...])
    }

    /// Whether `address` (6 bytes, most significant first, as written AA:BB:…) is a resolvable
    /// private address made with this key: its top two bits 01, and its low half the hash of its
    /// high half.
    public func resolves(_ address: [UInt8]) -> Bool {
        guard address.count == 6, Self.isResolvable(address) else { return false }
        let hash = ah(Array(address[0 ..< 3]))
        // Not secret: anyone sees the address, and the hash is in it.
        return hash == Array(address[3 ..< 6])
    }

    /// A resolvable private address made with this key from `prand`'s low 22 bits (the top two
    /// set to 01), as bluez-sim's rotating devices and the tests make them.
    public func address(prand: UInt32) -> [UInt8] {
        let r = [UInt8(0x40 | (prand >> 16) & 0x3F), UInt8((prand >> 8) & 0xFF), UInt8(prand & 0xFF)]
        return r + ah(r)
    }

    /// Whether `address` has the form of a resolvable private address (its top two bits 01).
    public static func isResolvable(_ address: [UInt8]) -> Bool {
        address.count == 6 && address[0] & 0xC0 == 0x40
    }

    /// `AA:BB:CC:DD:EE:FF` → its 6 bytes, most significant first; nil for anything else.
    public static func addressBytes(_ text: String) -> [UInt8]? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 6 else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            guard part.count == 2, let byte = UInt8(part, radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }

    /// 6 bytes as `AA:BB:CC:DD:EE:FF`.
    public static func addressText(_ bytes: [UInt8]) -> String {
        bytes.map { Hex.text([$0]).uppercased() }.joined(separator: ":")
    }
}

public struct IRKError: Error, CustomStringConvertible, Sendable, Hashable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
