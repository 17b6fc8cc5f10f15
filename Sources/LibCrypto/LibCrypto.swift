import COpenSSL
import Foundation

/// The primitives the trusted fleet is built from, each a thin owner of the libcrypto (OpenSSL 3,
/// Debian's `libssl3`) function or handle it names. Nothing here is a cipher or a mode of this
/// project's own: AES-256-GCM, AES-128 on one block (the Bluetooth `ah` function's `e`),
/// HKDF-SHA256 (RFC 5869), HMAC-SHA256 and the system's random generator, as libcrypto gives
/// them. Debian's security updates of libssl3 reach them without a new proximityd.
public enum CryptoFailure: Error, CustomStringConvertible, Sendable {
    /// A libcrypto call failed: which one.
    case call(String)
    /// A key, nonce or tag of the wrong length.
    case length(String)

    public var description: String {
        switch self {
        case .call(let name): "libcrypto: \(name) failed"
        case .length(let what): "wrong length: \(what)"
        }
    }
}

/// `RAND_bytes`: bytes from OpenSSL's CSPRNG, seeded by the kernel's.
public enum SecureRandom {
    public static func bytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        // RAND_bytes fails only when the generator cannot be seeded: nothing to go on without it.
        precondition(RAND_bytes(&bytes, Int32(count)) == 1, "RAND_bytes failed: the system's random generator is not available")
        return bytes
    }
}

/// An `EVP_CIPHER_CTX` (`EVP_CIPHER_CTX_new`, freed with `EVP_CIPHER_CTX_free`), for one
/// operation at a time.
final class CipherContext {
    let pointer: OpaquePointer

    init() throws(CryptoFailure) {
        guard let pointer = EVP_CIPHER_CTX_new() else { throw .call("EVP_CIPHER_CTX_new") }
        self.pointer = pointer
    }

    deinit { EVP_CIPHER_CTX_free(pointer) }
}

/// AES-128 in the encryption direction on one 16-byte block (`EVP_aes_128_ecb`, no padding): the
/// Bluetooth Core specification's security function `e`, of which `ah` is made. The context is
/// set up with the key once (`EVP_EncryptInit_ex`), not at every block: an IRK is tried on every
/// new address the node hears. A lock keeps one block at a time in it.
public struct AES128Block: Sendable {
    let key: [UInt8]
    private let context: KeyedContext

    /// An `EVP_CIPHER_CTX` initialised for AES-128-ECB with one key, behind a lock.
    final class KeyedContext: @unchecked Sendable {
        let context: CipherContext
        let lock = NSLock()

        init(key: [UInt8]) throws(CryptoFailure) {
            context = try CipherContext()
            guard EVP_EncryptInit_ex(context.pointer, EVP_aes_128_ecb(), nil, key, nil) == 1 else { throw .call("EVP_EncryptInit_ex") }
            EVP_CIPHER_CTX_set_padding(context.pointer, 0)
        }
    }

    public init(key: [UInt8]) throws(CryptoFailure) {
        guard key.count == 16 else { throw .length("an AES-128 key is 16 bytes, not \(key.count)") }
        self.key = key
        context = try KeyedContext(key: key)
    }

    public func encrypt(_ block: [UInt8]) throws(CryptoFailure) -> [UInt8] {
        guard block.count == 16 else { throw .length("a block is 16 bytes, not \(block.count)") }
        var out = [UInt8](repeating: 0, count: 32)
        var length: Int32 = 0
        context.lock.lock()
        let ok = EVP_EncryptUpdate(context.context.pointer, &out, &length, block, 16) == 1
        context.lock.unlock()
        guard ok, length == 16 else { throw .call("EVP_EncryptUpdate") }
        return Array(out[0 ..< 16])
    }
}

/// AES-256-GCM (`EVP_aes_256_gcm`): a 32-byte key, a 12-byte nonce, a 16-byte tag.
public struct AESGCM: Sendable {
    public static let nonceLength = 12, tagLength = 16
    let key: [UInt8]

    public init(key: [UInt8]) throws(CryptoFailure) {
        guard key.count == 32 else { throw .length("an AES-256 key is 32 bytes, not \(key.count)") }
        self.key = key
    }

    /// The ciphertext and the tag of `plaintext`, authenticating `aad` too.
    public func seal(_ plaintext: [UInt8], nonce: [UInt8], aad: [UInt8]) throws(CryptoFailure) -> (ciphertext: [UInt8], tag: [UInt8]) {
        guard nonce.count == Self.nonceLength else { throw .length("a GCM nonce is 12 bytes, not \(nonce.count)") }
        let context = try CipherContext()
        var length: Int32 = 0
        guard EVP_EncryptInit_ex(context.pointer, EVP_aes_256_gcm(), nil, nil, nil) == 1,
              EVP_CIPHER_CTX_ctrl(context.pointer, COPENSSL_GCM_SET_IVLEN, Int32(nonce.count), nil) == 1,
              EVP_EncryptInit_ex(context.pointer, nil, nil, key, nonce) == 1 else { throw .call("EVP_EncryptInit_ex") }
        if !aad.isEmpty {
            guard EVP_EncryptUpdate(context.pointer, nil, &length, aad, Int32(aad.count)) == 1 else {
                throw .call("EVP_EncryptUpdate (aad)")
            }
        }
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count + 16)
        guard EVP_EncryptUpdate(context.pointer, &ciphertext, &length, plaintext, Int32(plaintext.count)) == 1 else {
            throw .call("EVP_EncryptUpdate")
        }
        var total = Int(length)
        guard ciphertext.withUnsafeMutableBufferPointer({
            EVP_EncryptFinal_ex(context.pointer, $0.baseAddress! + total, &length)
        }) == 1 else {
            throw .call("EVP_EncryptFinal_ex")
        }
        total += Int(length)
        var tag = [UInt8](repeating: 0, count: Self.tagLength)
        guard EVP_CIPHER_CTX_ctrl(context.pointer, COPENSSL_GCM_GET_TAG, Int32(Self.tagLength), &tag) == 1 else {
            throw .call("EVP_CIPHER_CTX_ctrl (tag)")
        }
        return (Array(ciphertext[0 ..< total]), tag)
    }

    /// The plaintext, or nil when the tag does not match (another key, nonce, aad, or a changed byte).
    public func open(_ ciphertext: [UInt8], tag: [UInt8], nonce: [UInt8], aad: [UInt8]) -> [UInt8]? {
        guard nonce.count == Self.nonceLength, tag.count == Self.tagLength, let context = try? CipherContext() else { return nil }
        var length: Int32 = 0
        guard EVP_DecryptInit_ex(context.pointer, EVP_aes_256_gcm(), nil, nil, nil) == 1,
              EVP_CIPHER_CTX_ctrl(context.pointer, COPENSSL_GCM_SET_IVLEN, Int32(nonce.count), nil) == 1,
              EVP_DecryptInit_ex(context.pointer, nil, nil, key, nonce) == 1 else { return nil }
        if !aad.isEmpty {
            guard EVP_DecryptUpdate(context.pointer, nil, &length, aad, Int32(aad.count)) == 1 else { return nil }
        }
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count + 16)
        guard EVP_DecryptUpdate(context.pointer, &plaintext, &length, ciphertext, Int32(ciphertext.count)) == 1 else { return nil }
        var total = Int(length)
        var expected = tag
        guard EVP_CIPHER_CTX_ctrl(context.pointer, COPENSSL_GCM_SET_TAG, Int32(Self.tagLength), &expected) == 1 else { return nil }
        // EVP_DecryptFinal_ex checks the tag.
        guard plaintext.withUnsafeMutableBufferPointer({
            EVP_DecryptFinal_ex(context.pointer, $0.baseAddress! + total, &length)
        }) == 1 else {
            return nil
        }
        total += Int(length)
        return Array(plaintext[0 ..< total])
    }
}

/// HKDF-SHA256 (RFC 5869) through an `EVP_PKEY_CTX` of type `EVP_PKEY_HKDF`
/// (`EVP_PKEY_CTX_new_id`, freed with `EVP_PKEY_CTX_free`).
public enum HKDFSHA256 {
    public static func derive(key: [UInt8], salt: [UInt8], info: [UInt8], length: Int) throws(CryptoFailure) -> [UInt8] {
        guard let context = EVP_PKEY_CTX_new_id(COPENSSL_PKEY_HKDF, nil) else { throw .call("EVP_PKEY_CTX_new_id") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_derive_init(context) == 1,
              EVP_PKEY_CTX_set_hkdf_md(context, EVP_sha256()) == 1,
              EVP_PKEY_CTX_set1_hkdf_salt(context, salt, Int32(salt.count)) == 1,
              EVP_PKEY_CTX_set1_hkdf_key(context, key, Int32(key.count)) == 1,
              EVP_PKEY_CTX_add1_hkdf_info(context, info, Int32(info.count)) == 1 else { throw .call("EVP_PKEY_CTX_set_hkdf_*") }
        var out = [UInt8](repeating: 0, count: length)
        var outLength = length
        guard EVP_PKEY_derive(context, &out, &outLength) == 1, outLength == length else { throw .call("EVP_PKEY_derive") }
        return out
    }
}

/// HMAC-SHA256 (`HMAC` with `EVP_sha256`).
public enum HMACSHA256 {
    public static func authenticationCode(key: [UInt8], data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let result = HMAC(EVP_sha256(), key, Int32(key.count), data, data.count, &out, &length)
        precondition(result != nil && length == 32, "HMAC-SHA256 failed")
        return out
    }
}
