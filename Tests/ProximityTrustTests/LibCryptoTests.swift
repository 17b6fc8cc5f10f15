import ProximityTrust
import Testing

/// The libcrypto wrappers against the standards' published test vectors.
@Suite("libcrypto's primitives, on their standards' test vectors")
struct LibCryptoTests {
    static func hex(_ text: String) -> [UInt8] { Hex.bytes(text)! }

    @Test("AES-128 on one block: FIPS-197 appendix C.1")
    func aes128() throws {
        let cipher = try AES128Block(key: Self.hex("000102030405060708090a0b0c0d0e0f"))
        #expect(try cipher.encrypt(Self.hex("00112233445566778899aabbccddeeff")) == Self.hex("69c4e0d86a7b0430d8cdb78070b4c55a"))
        #expect(throws: CryptoFailure.self) { try cipher.encrypt([1, 2, 3]) }
        #expect(throws: CryptoFailure.self) { try AES128Block(key: [0]) }
    }

    @Test("AES-256-GCM: the GCM specification's test cases 13 and 14; a changed byte, tag, nonce or aad does not open")
    func gcm() throws {
        let cipher = try AESGCM(key: [UInt8](repeating: 0, count: 32))
        let nonce = [UInt8](repeating: 0, count: 12)
        let empty = try cipher.seal([], nonce: nonce, aad: [])
        #expect(empty.ciphertext.isEmpty && empty.tag == Self.hex("530f8afbc74536b9a963b4f1c4cb738b"))
        let block = try cipher.seal([UInt8](repeating: 0, count: 16), nonce: nonce, aad: [])
        #expect(block.ciphertext == Self.hex("cea7403d4d606b6e074ec5d3baf39d18") && block.tag == Self.hex("d0d1c8a799996bf0265b98b5d48ab919"))
        #expect(cipher.open(block.ciphertext, tag: block.tag, nonce: nonce, aad: []) == [UInt8](repeating: 0, count: 16))
        var changed = block.ciphertext
        changed[3] ^= 1
        #expect(cipher.open(changed, tag: block.tag, nonce: nonce, aad: []) == nil)
        #expect(cipher.open(block.ciphertext, tag: Array(block.tag.reversed()), nonce: nonce, aad: []) == nil)
        #expect(cipher.open(block.ciphertext, tag: block.tag, nonce: [UInt8](repeating: 1, count: 12), aad: []) == nil)
        #expect(cipher.open(block.ciphertext, tag: block.tag, nonce: nonce, aad: [1]) == nil)
        let bound = try cipher.seal([7, 7], nonce: nonce, aad: [9, 9, 9])
        #expect(cipher.open(bound.ciphertext, tag: bound.tag, nonce: nonce, aad: [9, 9, 9]) == [7, 7])
        #expect(cipher.open(bound.ciphertext, tag: bound.tag, nonce: nonce, aad: []) == nil)
    }

    @Test("HKDF-SHA256: RFC 5869 test case 1")
    func hkdf() throws {
        let okm = try HKDFSHA256.derive(key: [UInt8](repeating: 0x0b, count: 22), salt: Self.hex("000102030405060708090a0b0c"),
                                        info: Self.hex("f0f1f2f3f4f5f6f7f8f9"), length: 42)
        #expect(okm == Self.hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"))
    }

    @Test("HMAC-SHA256: RFC 4231 test case 2")
    func hmac() {
        #expect(HMACSHA256.authenticationCode(key: Array("Jefe".utf8), data: Array("what do ya want for nothing?".utf8))
            == Self.hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
    }

    @Test("the random generator: the length asked for, never twice the same 32 bytes")
    func random() {
        let a = SecureRandom.bytes(32), b = SecureRandom.bytes(32)
        #expect(a.count == 32 && a != b && SecureRandom.bytes(0).isEmpty)
    }
}
