import Foundation
import ProximityTrust
import Testing

@Suite("identity resolving keys: ah, resolvable private addresses, the resolver")
struct IdentityResolvingKeyTests {
    /// Bluetooth Core specification, Vol 3 Part H, Appendix D.7 (ah random address hash function).
    static let sample = try! IdentityResolvingKey(hex: "ec0234a357c8ad05341010a60a397d9b")

    @Test("ah on the Core specification's sample data: prand 708194 hashes to 0dfbaa")
    func specificationSample() throws {
        #expect(Self.sample.ah([0x70, 0x81, 0x94]) == [0x0D, 0xFB, 0xAA])
        #expect(Self.sample.resolves(IdentityResolvingKey.addressBytes("70:81:94:0D:FB:AA")!))
        // One bit off in the hash, or in prand: not this key's.
        #expect(!Self.sample.resolves(IdentityResolvingKey.addressBytes("70:81:94:0D:FB:AB")!))
        #expect(!Self.sample.resolves(IdentityResolvingKey.addressBytes("70:81:95:0D:FB:AA")!))
        // A static random address (top bits 11) is never resolvable, whatever its halves.
        #expect(!IdentityResolvingKey.isResolvable(IdentityResolvingKey.addressBytes("F0:81:94:0D:FB:AA")!))
    }

    @Test("the key's written forms: 32 hex digits with or without separators; anything else is refused with the form")
    func forms() throws {
        #expect(try IdentityResolvingKey(hex: "EC:02:34:A3:57:C8:AD:05:34:10:10:A6:0A:39:7D:9B") == Self.sample)
        #expect(try IdentityResolvingKey(hex: "ec0234a3-57c8-ad05-3410-10a60a397d9b") == Self.sample)
        for bad in ["", "ec0234", "zz0234a357c8ad05341010a60a397d9b", "ec0234a357c8ad05341010a60a397d9b00"] {
            #expect(throws: IRKError.self) { try IdentityResolvingKey(hex: bad) }
        }
        #expect(IdentityResolvingKey.addressBytes("70:81:94:0D:FB") == nil && IdentityResolvingKey.addressBytes("70:81:94:0D:FB:GG") == nil)
        #expect(IdentityResolvingKey.addressText([0x70, 0x81, 0x94, 0x0D, 0xFB, 0xAA]) == "70:81:94:0D:FB:AA")
    }

    @Test("addresses a key makes resolve to it and to no other of 100 keys; the resolver names the key, and remembers a bounded number of addresses")
    func resolver() throws {
        var generator = SystemRandomNumberGenerator()
        var keys: [String: IdentityResolvingKey] = [:]
        for i in 0 ..< 100 { keys["phone-\(i)"] = try IdentityResolvingKey(bytes: (0 ..< 16).map { _ in UInt8.random(in: 0 ... 255, using: &generator) }) }
        var resolver = AddressResolver(keys: keys)
        for i in [0, 42, 99] {
            let key = keys["phone-\(i)"]!
            for _ in 0 ..< 20 {
                let address = key.address(prand: UInt32.random(in: 0 ... 0x3F_FFFF))
                #expect(IdentityResolvingKey.isResolvable(address) && key.resolves(address))
                // Another of the 100 keys makes the same 24-bit hash for one address in 2^24:
                // then either is a right answer (the address does not say which).
                let resolved = resolver.resolve(IdentityResolvingKey.addressText(address))
                #expect(resolved == "phone-\(i)" || resolved.flatMap { keys[$0]?.resolves(address) } == true, "\(String(describing: resolved))")
            }
        }
        // As users find a key: ESPresense's irk: prefix, and the Keychain's base64 (least significant byte first).
        let sample = try IdentityResolvingKey(hex: "ec0234a357c8ad05341010a60a397d9b")
        #expect(try IdentityResolvingKey(parsing: "irk:ec0234a357c8ad05341010a60a397d9b") == sample)
        #expect(try IdentityResolvingKey(parsing: "m305CqYQEDQFrchXozQC7A==") == sample)
        #expect(throws: IRKError.self) { try IdentityResolvingKey(parsing: "m305CqYQEDQFrchXozQC7A") }
        #expect(throws: IRKError.self) { try IdentityResolvingKey(parsing: "ec0234a357c8ad05341010a60a397d9") }
        // A public address, and a resolvable one of no known key (one chance in 2^24 per key of a
        // false match, so a fixed one is checked against the keys first).
        #expect(resolver.resolve("00:1A:7D:DA:71:13") == nil)
        let stranger = try IdentityResolvingKey(bytes: Array(repeating: 7, count: 16)).address(prand: 0x12345)
        let strangerText = IdentityResolvingKey.addressText(stranger)
        if !keys.values.contains(where: { $0.resolves(stranger) }) { #expect(resolver.resolve(strangerText) == nil) }
        // Bounded: more addresses than the cache holds still resolve right.
        let key = keys["phone-7"]!
        for prand in 0 ..< UInt32(AddressResolver.cacheLimit + 100) {
            // 4,196 addresses against 99 other keys: a shared hash about one run in 40 (the keys are
            // random), and then the other key is as right an answer.
            let address = key.address(prand: prand)
            let resolved = resolver.resolve(IdentityResolvingKey.addressText(address))
            #expect(resolved == "phone-7" || resolved.flatMap { keys[$0]?.resolves(address) } == true, "prand \(prand): \(String(describing: resolved))")
        }
    }
}

@Suite("the fleet key and the trusted identification's messages")
struct TrustedIdentificationTests {
    @Test("a key file: 64 hex digits, comments and blank lines aside; a new key's file reads back; problems at LINE:COLUMN")
    func keyFile() throws {
        let key = FleetKey.generate()
        #expect(try FleetKey(parsing: key.fileText) == key)
        #expect(FleetKey.generate() != key && FleetKey.generate().fingerprint != key.fingerprint && key.fingerprint.count == 8)
        let hex = String(repeating: "ab", count: 32)
        #expect(try FleetKey(parsing: "# mine\n\n  \(hex)  \n") == FleetKey(bytes: Array(repeating: 0xAB, count: 32)))
        for (text, line, column, says) in [("", 1, 1, "no key"), ("# only a comment\n", 1, 1, "no key"),
                                           ("\(hex)\n\(hex)\n", 2, 1, "a second key"), ("# x\n  abcd\n", 2, 3, "64 hexadecimal digits"),
                                           (String(repeating: "ab", count: 31) + "zz", 1, 63, "not a pair of hexadecimal digits")] {
            do {
                _ = try FleetKey(parsing: text)
                Issue.record("accepted \(text)")
            } catch {
                #expect(error.line == line && error.column == column && error.message.contains(says), "\(text): \(error)")
                // Never a character of the key in the message.
                #expect(!error.message.contains("zz") && !error.message.contains("abcd"), "\(error.message)")
            }
        }
    }

    static let a = UUID(uuidString: "0a0a0a0a-0000-4000-8000-000000000001")!
    static let b = UUID(uuidString: "0b0b0b0b-0000-4000-8000-000000000002")!

    @Test("two members identify each other in one exchange; each message is fresh, holds no identity, and opens only for its own challenges and direction")
    func exchange() throws {
        let key = FleetKey.generate()
        let alice = TrustedIdentification(key), bob = TrustedIdentification(key)
        // B's challenge (read), A's hello (written), B's answer (read).
        let nb = TrustedIdentification.challenge(), na = TrustedIdentification.challenge()
        #expect(nb != na && nb.count == 16)
        let hello = try alice.hello(identity: Self.a, challenge: nb, ownChallenge: na)
        #expect(hello.count == TrustedIdentification.helloLength)
        let opened = try #require(bob.openHello(hello, challenge: nb))
        #expect(opened.identity == Self.a && opened.challenge == na)
        let answer = try bob.answer(identity: Self.b, challenge: opened.challenge, ownChallenge: nb)
        #expect(alice.openAnswer(answer, ownChallenge: na, challenge: nb) == Self.b)

        // Nothing stays the same between two exchanges, and no identity is in the clear.
        let again = try alice.hello(identity: Self.a, challenge: nb, ownChallenge: na)
        #expect(Array(again[16...]) != Array(hello[16...]))
        for message in [hello, again, answer] {
            for id in [Self.a, Self.b] {
                let raw = withUnsafeBytes(of: id.uuid) { Array($0) }
                #expect(!message.indices.contains { i in i + 16 <= message.count && Array(message[i ..< i + 16]) == raw })
                #expect(!String(decoding: message, as: UTF8.self).contains(id.uuidString.lowercased()))
            }
        }

        // Replayed to a later link (another challenge), or relayed to another member: refused.
        #expect(bob.openHello(hello, challenge: TrustedIdentification.challenge()) == nil)
        // An answer recorded for one hello does not answer another.
        #expect(alice.openAnswer(answer, ownChallenge: TrustedIdentification.challenge(), challenge: nb) == nil)
        // A hello's sealed part is not an answer, nor an answer a hello.
        #expect(alice.openAnswer(Array(hello[16...]), ownChallenge: nb, challenge: na) == nil)
        #expect(bob.openHello(na + answer, challenge: nb) == nil)
        // Another fleet's key, or one byte changed: refused.
        #expect(TrustedIdentification(FleetKey.generate()).openHello(hello, challenge: nb) == nil)
        for i in [0, 16, 30, hello.count - 1] {
            var tampered = hello
            tampered[i] ^= 0x01
            #expect(bob.openHello(tampered, challenge: nb) == nil, "byte \(i)")
        }
        #expect(bob.openHello(Array(hello.dropLast()), challenge: nb) == nil)
        #expect(bob.openHello(hello, challenge: Array(nb.dropLast())) == nil)
    }
}

/// The served side of the trusted identification as a pure state machine, on an injected clock.
@Suite("the trusted responder")
struct TrustedResponderTests {
    static let me = UUID(uuidString: "0a0a0a0a-0000-4000-8000-000000000001")!
    static let peer = UUID(uuidString: "0b0b0b0b-0000-4000-8000-000000000002")!

    /// A member's hello to `responder` for reader `id`: the challenge read, the hello sealed to it.
    static func hello(_ responder: inout TrustedResponder, _ id: String, key: FleetKey, identity: UUID = peer, at t: Double)
        throws -> (hello: [UInt8], ours: [UInt8], theirs: [UInt8]) {
        let challenge = responder.challenge(for: id, fresh: true, at: t)
        let own = TrustedIdentification.challenge()
        return (try TrustedIdentification(key).hello(identity: identity, challenge: challenge, ownChallenge: own), own, challenge)
    }

    @Test("a challenge is used once: a hello opens once and the answer is read once; a replayed hello on the same challenge is refused; the answer proves this node to the member")
    func usedOnce() throws {
        let key = FleetKey.generate()
        var responder = TrustedResponder(identity: Self.me, key: key)
        let (hello, own, challenge) = try Self.hello(&responder, "dev_1", key: key, at: 0)
        #expect(responder.hello(hello, from: "dev_1", at: 0.1) == .member(Self.peer, previousKey: false))
        let answer = responder.identity(for: "dev_1", fresh: true, at: 0.2)
        #expect(TrustedIdentification(key).openAnswer(answer, ownChallenge: own, challenge: challenge) == Self.me)
        let again = responder.identity(for: "dev_1", fresh: true, at: 0.3)
        #expect(TrustedIdentification(key).openAnswer(again, ownChallenge: own, challenge: challenge) == nil, "one answer per hello")
        #expect(responder.hello(hello, from: "dev_1", at: 0.4) == .refused(firstTime: true), "the challenge was used")
        #expect(TrustedIdentification(key).openAnswer(responder.identity(for: "dev_1", fresh: true, at: 0.5), ownChallenge: own, challenge: challenge) == nil)
    }

    @Test("this node's own hello relayed back to it is refused; another fleet's is refused and logged once per reader")
    func reflectedAndForeign() throws {
        let key = FleetKey.generate()
        var responder = TrustedResponder(identity: Self.me, key: key)
        let own = try Self.hello(&responder, "dev_1", key: key, identity: Self.me, at: 0)
        #expect(responder.hello(own.hello, from: "dev_1", at: 0) == .reflected)
        let foreign = try Self.hello(&responder, "dev_2", key: FleetKey.generate(), at: 1)
        #expect(responder.hello(foreign.hello, from: "dev_2", at: 1) == .refused(firstTime: true))
        let second = try Self.hello(&responder, "dev_2", key: FleetKey.generate(), at: 2)
        #expect(responder.hello(second.hello, from: "dev_2", at: 2) == .refused(firstTime: false))
    }

    @Test("outsiders' work is bounded: hellos per reader and overall are limited; readers and remembered refusals never pass their bound, however many devices write")
    func bounded() throws {
        let key = FleetKey.generate(), other = FleetKey.generate()
        var responder = TrustedResponder(identity: Self.me, key: key)
        // One reader: three hellos a minute, then limited, even a member's.
        for i in 0 ..< 3 {
            let h = try Self.hello(&responder, "dev_1", key: other, at: Double(i))
            #expect(responder.hello(h.hello, from: "dev_1", at: Double(i)) != .limited)
        }
        let member = try Self.hello(&responder, "dev_1", key: key, at: 3)
        #expect(responder.hello(member.hello, from: "dev_1", at: 3) == .limited)
        // 2,000 devices, each one hello, all within 10 s: the bucket lets about 20 + 10/s through.
        var passed = 0
        for i in 0 ..< 2000 {
            let t = 100 + Double(i) / 200
            let h = try Self.hello(&responder, "flood_\(i)", key: other, at: t)
            if responder.hello(h.hello, from: "flood_\(i)", at: t) != .limited { passed += 1 }
        }
        #expect(passed >= 100 && passed <= 125, "\(passed) hellos passed the bucket in 10 s")
        #expect(responder.readerCount <= 256 && responder.refusedCount <= 256, "\(responder.readerCount) readers, \(responder.refusedCount) refusals")
        // A minute later a member gets through again.
        let later = try Self.hello(&responder, "dev_9", key: key, at: 200)
        #expect(responder.hello(later.hello, from: "dev_9", at: 200) == .member(Self.peer, previousKey: false))
    }

    @Test("a rotation: the previous key's hellos are taken until its grace ends, then refused; the answer is sealed with the key the hello came with")
    func previousKey() throws {
        let old = FleetKey.generate(), new = FleetKey.generate()
        var responder = TrustedResponder(identity: Self.me, key: new, previous: old, graceUntil: 100)
        let early = try Self.hello(&responder, "dev_1", key: old, at: 10)
        #expect(responder.hello(early.hello, from: "dev_1", at: 10) == .member(Self.peer, previousKey: true))
        let answer = responder.identity(for: "dev_1", fresh: true, at: 10)
        #expect(TrustedIdentification(old).openAnswer(answer, ownChallenge: early.ours, challenge: early.theirs) == Self.me)
        let late = try Self.hello(&responder, "dev_2", key: old, at: 101)
        #expect(responder.hello(late.hello, from: "dev_2", at: 101) == .refused(firstTime: true))
        let current = try Self.hello(&responder, "dev_3", key: new, at: 101)
        #expect(responder.hello(current.hello, from: "dev_3", at: 101) == .member(Self.peer, previousKey: false))
    }
}
