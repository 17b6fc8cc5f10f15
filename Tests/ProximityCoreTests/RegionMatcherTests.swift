import Foundation
import ProximityCore
import Testing

@Suite struct RegionMatcherTests {
    static let fleet = UUID(uuidString: "f7826da6-4fa2-4e98-8024-bc5b71e0893e")!
    static let other = UUID(uuidString: "e2c56db5-dffb-48d2-b060-d0f5a71096e0")!
    static let nodeID = "3f0e8c52-1d7a-4c1b-9a55-6b1f3c2d4e5f"

    static func peer(_ id: String, _ kind: PeerKind, beacon: BeaconIdentity? = nil, address: String = "AA:BB:CC:DD:EE:01",
                     zone: Proximity = .near) -> PeerSnapshot {
        PeerSnapshot(identifier: PeerID(id), kind: kind, address: address, beacon: beacon, proximity: zone, distance: 1,
                        rssi: -60, lastSeen: 0)
    }
    static func iBeacon(_ major: UInt16, _ minor: UInt16, uuid: UUID = fleet, zone: Proximity = .near) -> PeerSnapshot {
        let b = BeaconIdentity.iBeacon(uuid: uuid, major: major, minor: minor, measuredPower: -59)
        return peer(b.identifier, .ibeacon, beacon: b, zone: zone)
    }
    static let node = peer(nodeID, .node, address: "AA:BB:CC:DD:EE:0F")
    static let alt = { let b = BeaconIdentity.altBeacon(manufacturer: 0x0118, id1: fleet, id2: 7, id3: 8, referenceRSSI: -59)
        return peer(b.identifier, .altbeacon, beacon: b) }()
    static let uid = { let b = BeaconIdentity.eddystoneUID(namespace: Array(repeating: 0xab, count: 10), instance: [1, 2, 3, 4, 5, 6], txPowerAt0m: -18)
        return peer(b.identifier, .eddystone, beacon: b) }()
    static func url(_ u: String) -> PeerSnapshot {
        let b = BeaconIdentity.eddystoneURL(url: u, txPowerAt0m: -18)
        return peer(b.identifier, .eddystone, beacon: b)
    }

    static func m(_ parts: [(RegionMatcher.Key, RegionMatcher.Value)]) throws -> RegionMatcher {
        try RegionMatcher.parse(parts)
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var parts: [(RegionMatcher.Key, RegionMatcher.Value)]
        var peer: PeerSnapshot
        var matches: Bool
        var testDescription: String { "\(name): \(matches ? "matches" : "does not match")" }
    }

    static let ns = String(repeating: "ab", count: 10)
    static let cases: [Case] = [
        Case(name: "empty matcher (all wildcards)", parts: [], peer: node, matches: true),
        Case(name: "empty matcher, a beacon", parts: [], peer: iBeacon(1, 2), matches: true),
        Case(name: "kind node", parts: [(.kind, .text("node"))], peer: node, matches: true),
        Case(name: "kind node, an iBeacon", parts: [(.kind, .text("node"))], peer: iBeacon(1, 2), matches: false),
        Case(name: "node identifier", parts: [(.identifier, .text(nodeID))], peer: node, matches: true),
        Case(name: "node identifier in capitals", parts: [(.identifier, .text(nodeID.uppercased()))], peer: node, matches: true),
        Case(name: "another node identifier", parts: [(.identifier, .text(other.uuidString))], peer: node, matches: false),
        Case(name: "a beacon by identifier", parts: [(.identifier, .text(iBeacon(1, 2).identifier.rawValue))], peer: iBeacon(1, 2), matches: true),
        Case(name: "iBeacon UUID", parts: [(.uuid, .text(fleet.uuidString))], peer: iBeacon(1, 2), matches: true),
        Case(name: "iBeacon UUID, another UUID", parts: [(.uuid, .text(fleet.uuidString))], peer: iBeacon(1, 2, uuid: other), matches: false),
        Case(name: "iBeacon UUID, a node", parts: [(.uuid, .text(fleet.uuidString))], peer: node, matches: false),
        Case(name: "iBeacon UUID, an AltBeacon with that id1", parts: [(.uuid, .text(fleet.uuidString))], peer: alt, matches: false),
        Case(name: "UUID + major", parts: [(.uuid, .text(fleet.uuidString)), (.major, .integer(1))], peer: iBeacon(1, 9), matches: true),
        Case(name: "UUID + other major", parts: [(.uuid, .text(fleet.uuidString)), (.major, .integer(2))], peer: iBeacon(1, 9), matches: false),
        Case(name: "UUID + major + minor", parts: [(.uuid, .text(fleet.uuidString)), (.major, .integer(1)), (.minor, .integer(2))],
             peer: iBeacon(1, 2), matches: true),
        Case(name: "UUID + major + other minor", parts: [(.uuid, .text(fleet.uuidString)), (.major, .integer(1)), (.minor, .integer(3))],
             peer: iBeacon(1, 2), matches: false),
        Case(name: "AltBeacon id1", parts: [(.id1, .text(fleet.uuidString))], peer: alt, matches: true),
        Case(name: "AltBeacon id1 + id2 + id3", parts: [(.id1, .text(fleet.uuidString)), (.id2, .integer(7)), (.id3, .integer(8))],
             peer: alt, matches: true),
        Case(name: "AltBeacon id1 + other id2", parts: [(.id1, .text(fleet.uuidString)), (.id2, .integer(8))], peer: alt, matches: false),
        Case(name: "Eddystone namespace", parts: [(.namespace, .text(ns))], peer: uid, matches: true),
        Case(name: "Eddystone namespace 0x-prefixed, capitals", parts: [(.namespace, .text("0x" + ns.uppercased()))], peer: uid, matches: true),
        Case(name: "Eddystone namespace + instance", parts: [(.namespace, .text(ns)), (.instance, .text("010203040506"))], peer: uid, matches: true),
        Case(name: "Eddystone namespace + other instance", parts: [(.namespace, .text(ns)), (.instance, .text("010203040507"))],
             peer: uid, matches: false),
        Case(name: "exact URL", parts: [(.url, .text("https://example.com/a"))], peer: url("https://example.com/a"), matches: true),
        Case(name: "exact URL, another path", parts: [(.url, .text("https://example.com/a"))], peer: url("https://example.com/b"), matches: false),
        Case(name: "URL domain, the domain itself", parts: [(.urlDomain, .text("example.com"))], peer: url("https://example.com/a"), matches: true),
        Case(name: "URL domain, a subdomain", parts: [(.urlDomain, .text("example.com"))], peer: url("http://www.example.com/"), matches: true),
        Case(name: "URL domain, a deep subdomain with a port", parts: [(.urlDomain, .text("Example.COM"))],
             peer: url("https://a.b.example.com:8080/x"), matches: true),
        Case(name: "URL domain, a lookalike", parts: [(.urlDomain, .text("example.com"))], peer: url("https://badexample.com/"), matches: false),
        Case(name: "URL domain, the domain in the path", parts: [(.urlDomain, .text("example.com"))],
             peer: url("https://evil.org/example.com"), matches: false),
        Case(name: "address", parts: [(.address, .text("aa:bb:cc:dd:ee:0f"))], peer: node, matches: true),
        Case(name: "other address", parts: [(.address, .text("AA:BB:CC:DD:EE:10"))], peer: node, matches: false),
        Case(name: "kind + UUID", parts: [(.kind, .text("ibeacon")), (.uuid, .text(fleet.uuidString))], peer: iBeacon(1, 2), matches: true),
        Case(name: "within near, a near peer", parts: [(.within, .text("near"))], peer: iBeacon(1, 2, zone: .near), matches: true),
        Case(name: "within near, an immediate peer", parts: [(.within, .text("near"))], peer: iBeacon(1, 2, zone: .immediate), matches: true),
        Case(name: "within near, a far peer", parts: [(.within, .text("near"))], peer: iBeacon(1, 2, zone: .far), matches: false),
        Case(name: "within far, an unknown peer", parts: [(.within, .text("far"))], peer: iBeacon(1, 2, zone: .unknown), matches: false),
        Case(name: "no within, an unknown peer", parts: [(.uuid, .text(fleet.uuidString))], peer: iBeacon(1, 2, zone: .unknown), matches: true),
        Case(name: "within immediate + UUID, a near peer", parts: [(.uuid, .text(fleet.uuidString)), (.within, .text("immediate"))],
             peer: iBeacon(1, 2, zone: .near), matches: false),
    ]

    @Test("matcher forms, wildcards, within and URL domains", arguments: cases)
    func matching(_ c: Case) throws {
        let matcher = try Self.m(c.parts)
        #expect((matcher.matches(c.peer) && matcher.admits(c.peer.proximity)) == c.matches)
    }

    struct Bad: Sendable, CustomTestStringConvertible {
        var parts: [(RegionMatcher.Key, RegionMatcher.Value)]
        var error: String
        var testDescription: String { error }
    }

    static let bad: [Bad] = [
        Bad(parts: [(.major, .integer(1))], error: "Major needs UUID"),
        Bad(parts: [(.uuid, .text(fleet.uuidString)), (.minor, .integer(1))], error: "Minor needs Major"),
        Bad(parts: [(.id2, .integer(1))], error: "ID2 needs ID1"),
        Bad(parts: [(.id1, .text(fleet.uuidString)), (.id3, .integer(1))], error: "ID3 needs ID2"),
        Bad(parts: [(.instance, .text("010203040506"))], error: "Instance needs Namespace"),
        Bad(parts: [(.uuid, .text("nope"))], error: "UUID must be a UUID such as f7826da6-4fa2-4e98-8024-bc5b71e0893e, not \"nope\""),
        Bad(parts: [(.uuid, .integer(3))], error: "UUID must be a string, not the integer 3"),
        Bad(parts: [(.major, .integer(70000))], error: "Major must be an integer in 0...65535, not 70000"),
        Bad(parts: [(.major, .text("1"))], error: "Major must be an integer in 0...65535, not the string \"1\""),
        Bad(parts: [(.kind, .text("phone"))], error: "Kind must be one of node, ibeacon, altbeacon, eddystone, irk, not \"phone\""),
        Bad(parts: [(.verified, .text("yes"))], error: "Verified must be true or false, not the string \"yes\""),
        Bad(parts: [(.verified, .integer(1))], error: "Verified must be true or false, not the integer 1"),
        Bad(parts: [(.kind, .text("node")), (.uuid, .text(fleet.uuidString))], error: "Kind is node, but UUID is ibeacon"),
        Bad(parts: [(.uuid, .text(fleet.uuidString)), (.id1, .text(fleet.uuidString))],
            error: "ID1 cannot go with UUID: a peer is one kind of beacon"),
        Bad(parts: [(.url, .text("https://a.com/")), (.urlDomain, .text("a.com"))], error: "URLDomain cannot go with URL (give one of them)"),
        Bad(parts: [(.namespace, .text(ns)), (.urlDomain, .text("a.com"))],
            error: "URLDomain cannot go with Namespace: Eddystone-UID and Eddystone-URL are different frames"),
        Bad(parts: [(.namespace, .text("abc"))], error: "Namespace must be 10 bytes as 20 hex digits, not \"abc\""),
        Bad(parts: [(.url, .text("ftp://a.com"))], error: "URL must be an http:// or https:// URL such as https://example.com/, not \"ftp://a.com\""),
        Bad(parts: [(.urlDomain, .text("a..com"))], error: "URLDomain must be a host name such as example.com, not \"a..com\""),
        Bad(parts: [(.address, .text("AA:BB"))], error: "Address must be a Bluetooth address such as AA:BB:CC:DD:EE:FF, not \"AA:BB\""),
        Bad(parts: [(.within, .text("unknown"))], error: "Within must be immediate, near or far, not \"unknown\""),
        Bad(parts: [(.exitPeriod, .number(0.5))], error: "ExitPeriod must be a number of seconds in 1...86400, not 0.5"),
        Bad(parts: [(.exitPeriod, .number(.nan))], error: "ExitPeriod must be a number of seconds in 1...86400, not nan"),
        Bad(parts: [(.exitPeriod, .text("10"))], error: "ExitPeriod must be a number of seconds, not the string \"10\""),
        Bad(parts: [(.identifier, .text(""))], error: "Identifier must not be empty"),
        Bad(parts: [(.identifier, .text("a\u{7}b"))], error: "Identifier must not contain control characters"),
        Bad(parts: [(.identifier, .text(String(repeating: "x", count: 256)))], error: "Identifier is longer than 255 bytes"),
        Bad(parts: [(.kind, .text("node")), (.kind, .text("node"))], error: "Kind is given twice"),
    ]

    @Test("malformed matchers are refused, naming the part", arguments: bad)
    func malformed(_ b: Bad) {
        #expect(throws: MatcherError.self) { try RegionMatcher.parse(b.parts) }
        do { _ = try RegionMatcher.parse(b.parts) } catch { #expect(error.description == b.error) }
    }

    @Test("a matcher's parts parse back to the same matcher; the exit period is not part of the selection")
    func roundTrip() throws {
        let matcher = try Self.m([(.uuid, .text(Self.fleet.uuidString.uppercased())), (.major, .integer(1)), (.within, .text("near")),
                                  (.exitPeriod, .integer(20)), (.address, .text("aa:bb:cc:dd:ee:ff"))])
        #expect(try RegionMatcher.parse(matcher.parts) == matcher)
        #expect(matcher.exitPeriod == 20 && matcher.address == "AA:BB:CC:DD:EE:FF")
        var longer = matcher
        longer.exitPeriod = 30
        #expect(longer.selection == matcher.selection && longer != matcher)
    }
}
