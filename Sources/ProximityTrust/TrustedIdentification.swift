import Foundation

/// The trusted identification's messages (docs/security.md), over the general service's GATT
/// characteristics in one link: the connecting node A and the node B it connects to.
///
/// 1. A reads B's challenge characteristic: B's fresh challenge `Nb` (16 random bytes, kept for
///    this link only, used once).
/// 2. A writes its hello: its own fresh challenge `Na`, then A's identity sealed with AES-256-GCM (libcrypto)
///    under the fleet's identification key, a random nonce, and as associated data the label
///    `proximityd hello v1`, `Nb` and `Na`. Only a member can make it, and only for this `Nb`.
/// 3. A reads B's identity characteristic: B's identity sealed the same way, with the label
///    `proximityd answer v1`, `Na` and `Nb`. B answers only after a hello that opened; A accepts
///    only an answer bound to its own fresh `Na`.
///
/// A recorded hello or answer is bound to challenges that are never used again; the labels keep a
/// hello from passing as an answer. Every message is random to a reader without the key (a fresh
/// nonce each time, the identity inside the ciphertext). All members share one key: a member can
/// make a hello with any identity (docs/security.md says why that is the choice).
public struct TrustedIdentification: Sendable {
    /// A challenge's length, bytes.
    public static let challengeLength = 16
    /// A sealed identity's length: nonce 12, identity 16, tag 16.
    public static let sealedLength = 12 + 16 + 16
    /// A hello's length: the challenge and the sealed identity.
    public static let helloLength = challengeLength + sealedLength

    static let helloLabel = Array("proximityd hello v1".utf8)
    static let answerLabel = Array("proximityd answer v1".utf8)

    let cipher: AESGCM

    public init(_ fleetKey: FleetKey) {
        cipher = try! AESGCM(key: fleetKey.derived("proximityd identification v1"))
    }

    /// A fresh challenge, from the system's cryptographically secure generator.
    public static func challenge() -> [UInt8] {
        SecureRandom.bytes(challengeLength)
    }

    /// A's hello to B: `ownChallenge` (Na, fresh), then A's `identity` sealed to B's `challenge` (Nb).
    public func hello(identity: UUID, challenge: [UInt8], ownChallenge: [UInt8]) throws -> [UInt8] {
        ownChallenge + (try seal(identity, label: Self.helloLabel, first: challenge, second: ownChallenge))
    }

    /// B opens A's hello with the challenge it gave for this link: A's identity and A's challenge,
    /// or nil when the hello was not made for this challenge with this fleet's key.
    public func openHello(_ hello: [UInt8], challenge: [UInt8]) -> (identity: UUID, challenge: [UInt8])? {
        guard hello.count == Self.helloLength, challenge.count == Self.challengeLength else { return nil }
        let theirs = Array(hello[0 ..< Self.challengeLength])
        guard let identity = open(Array(hello[Self.challengeLength...]), label: Self.helloLabel, first: challenge, second: theirs) else {
            return nil
        }
        return (identity, theirs)
    }

    /// B's answer to A: B's `identity` sealed to A's challenge (Na) and B's own (Nb).
    public func answer(identity: UUID, challenge: [UInt8], ownChallenge: [UInt8]) throws -> [UInt8] {
        try seal(identity, label: Self.answerLabel, first: challenge, second: ownChallenge)
    }

    /// A opens B's answer with its own challenge (Na) and B's (Nb): B's identity, or nil.
    public func openAnswer(_ answer: [UInt8], ownChallenge: [UInt8], challenge: [UInt8]) -> UUID? {
        open(answer, label: Self.answerLabel, first: ownChallenge, second: challenge)
    }

    /// A fresh random nonce, then the identity's 16 bytes sealed, then the tag.
    private func seal(_ identity: UUID, label: [UInt8], first: [UInt8], second: [UInt8]) throws -> [UInt8] {
        guard first.count == Self.challengeLength, second.count == Self.challengeLength else {
            throw CryptoFailure.length("a challenge is \(Self.challengeLength) bytes")
        }
        let nonce = SecureRandom.bytes(AESGCM.nonceLength)
        let box = try cipher.seal(Self.bytes(identity), nonce: nonce, aad: label + first + second)
        return nonce + box.ciphertext + box.tag
    }

    private func open(_ sealed: [UInt8], label: [UInt8], first: [UInt8], second: [UInt8]) -> UUID? {
        guard sealed.count == Self.sealedLength, first.count == Self.challengeLength, second.count == Self.challengeLength else {
            return nil
        }
        let nonce = Array(sealed[0 ..< 12]), ciphertext = Array(sealed[12 ..< 28]), tag = Array(sealed[28 ..< 44])
        guard let b = cipher.open(ciphertext, tag: tag, nonce: nonce, aad: label + first + second), b.count == 16 else { return nil }
        return UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
    }

    static func bytes(_ identity: UUID) -> [UInt8] {
        withUnsafeBytes(of: identity.uuid) { Array($0) }
    }
}
