import Foundation

/// Which peers a region is about. Every part is optional: an absent part is a wildcard, and a
/// peer matches when it satisfies every part present. `within` narrows the match to peers at that
/// zone or nearer; `exitPeriod` overrides the monitor's default for this region.
///
/// The parts, with their names on the bus (`a{sv}` keys) and in the config file:
///
/// | part | bus key | config key | matches |
/// |---|---|---|---|
/// | kind | `Kind` | `kind` | `node`, `ibeacon`, `altbeacon`, `eddystone` |
/// | identifier | `Identifier` | `identifier` | a peer's identifier as `Peer1.Identifier` shows it |
/// | uuid [major [minor]] | `UUID`, `Major`, `Minor` | `uuid`, `major`, `minor` | iBeacon |
/// | id1 [id2 [id3]] | `ID1`, `ID2`, `ID3` | `id1`, `id2`, `id3` | AltBeacon |
/// | namespace [instance] | `Namespace`, `Instance` | `namespace`, `instance` | Eddystone-UID |
/// | url | `URL` | `url` | Eddystone-URL, exactly |
/// | url domain | `URLDomain` | `url-domain` | Eddystone-URL whose host is the domain or under it |
/// | address | `Address` | `address` | the address the peer was last heard with |
/// | verified | `Verified` | `verified` | true: nodes that proved their identity with the fleet's key; false: every other peer |
/// | within | `Within` | `within` | peers at this zone or nearer (`immediate`, `near`, `far`) |
/// | exit period | `ExitPeriod` | `exit-period` | seconds without a matching peer before an exit |
public struct RegionMatcher: Sendable, Hashable {
    public var kind: PeerKind?
    /// A peer identifier: a node's UUID (lowercase), or a beacon's identifier.
    public var identifier: String?
    public var uuid: UUID?
    public var major: UInt16?
    public var minor: UInt16?
    public var id1: UUID?
    public var id2: UInt16?
    public var id3: UInt16?
    /// Eddystone-UID namespace: 10 bytes as 20 lowercase hex digits.
    public var namespace: String?
    /// Eddystone-UID instance: 6 bytes as 12 lowercase hex digits.
    public var instance: String?
    public var url: String?
    /// A host name, lowercase, without a trailing dot.
    public var urlDomain: String?
    /// `AA:BB:CC:DD:EE:FF`, uppercase.
    public var address: String?
    /// True: only nodes that proved their identity with the fleet's key (`Peer1.Verified`); false:
    /// only peers that did not (open nodes, beacons, devices known by their IRK).
    public var verified: Bool?
    /// `immediate`, `near` or `far` (never `unknown`).
    public var within: Proximity?
    /// Seconds; nil for the monitor's default.
    public var exitPeriod: Double?

    public init() {}

    /// The parts, by the name a client writes.
    public enum Key: String, Sendable, CaseIterable, Hashable {
        case kind = "Kind", identifier = "Identifier", uuid = "UUID", major = "Major", minor = "Minor"
        case id1 = "ID1", id2 = "ID2", id3 = "ID3", namespace = "Namespace", instance = "Instance"
        case url = "URL", urlDomain = "URLDomain", address = "Address", verified = "Verified", within = "Within"
        case exitPeriod = "ExitPeriod"

        /// The name on the bus (`URLDomain`).
        public var busName: String { rawValue }
        /// The name in the config file (`url-domain`).
        public var configName: String {
            switch self {
            case .urlDomain: "url-domain"
            case .exitPeriod: "exit-period"
            default: rawValue.lowercased()
            }
        }
        public init?(configName: String) {
            guard let key = Key.allCases.first(where: { $0.configName == configName }) else { return nil }
            self = key
        }

        /// What the part's value is.
        public var valueType: ValueType {
            switch self {
            case .major, .minor, .id2, .id3: .unsigned16
            case .exitPeriod: .seconds
            case .verified: .boolean
            default: .text
            }
        }
    }

    /// The type of a part's value: text (`s` on the bus), a 16-bit unsigned integer (`q`; any
    /// integer type that holds the value is taken), seconds (`d`; integers are taken too), or a
    /// boolean (`b`).
    public enum ValueType: Sendable {
        case text, unsigned16, seconds, boolean

        public var description: String {
            switch self {
            case .text: "a string"
            case .unsigned16: "an integer in 0...65535"
            case .seconds: "a number of seconds"
            case .boolean: "true or false"
            }
        }
    }

    /// A part's value as a client gave it, before it is checked. In JSON (the state directory's
    /// `regions.json`) it is the bare string or number.
    public enum Value: Sendable, Hashable, Codable {
        case text(String)
        case integer(Int64)
        case number(Double)
        case boolean(Bool)

        public init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let b = try? c.decode(Bool.self) { self = .boolean(b) }
            else if let n = try? c.decode(Int64.self) { self = .integer(n) }
            else if let d = try? c.decode(Double.self) { self = .number(d) }
            else { self = .text(try c.decode(String.self)) }
        }

        /// How a message names it: `the string "1"`, `the integer 3`, `the number 0.5`.
        public var summary: String {
            switch self {
            case .text(let s): "the string \(s.debugDescription)"
            case .integer(let n): "the integer \(n)"
            case .number(let d): "the number \(d)"
            case .boolean(let b): "the boolean \(b)"
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            switch self {
            case .text(let s): try c.encode(s)
            case .integer(let n): try c.encode(n)
            case .number(let d): try c.encode(d)
            case .boolean(let b): try c.encode(b)
            }
        }
    }

    /// Exit periods a region may have, seconds: from one report to a day.
    public static let exitPeriodRange: ClosedRange<Double> = 1...86_400
    /// The longest text a part may hold, bytes.
    public static let maxTextLength = 255

    /// Builds a matcher from its parts, checking each and then how they go together. Throws the
    /// first problem, naming the part.
    public static func parse(_ parts: [(Key, Value)]) throws(MatcherError) -> RegionMatcher {
        var matcher = RegionMatcher()
        var seen = Set<Key>()
        for (key, value) in parts {
            guard seen.insert(key).inserted else { throw MatcherError(key, "is given twice") }
            try matcher.set(key, value)
        }
        try matcher.validate()
        return matcher
    }

    /// Sets one part from a client's value, checking and normalising it.
    public mutating func set(_ key: Key, _ value: Value) throws(MatcherError) {
        switch (key.valueType, value) {
        case (.text, .text(let text)):
            guard !text.isEmpty else { throw MatcherError(key, "must not be empty") }
            guard text.utf8.count <= Self.maxTextLength else { throw MatcherError(key, "is longer than \(Self.maxTextLength) bytes") }
            try setText(key, text)
        case (.unsigned16, .integer(let n)):
            guard let v = UInt16(exactly: n) else { throw MatcherError(key, "must be an integer in 0...65535, not \(n)") }
            switch key {
            case .major: major = v
            case .minor: minor = v
            case .id2: id2 = v
            default: id3 = v
            }
        case (.seconds, .integer(let n)):
            try set(key, .number(Double(n)))
        case (.seconds, .number(let seconds)):
            guard seconds.isFinite, Self.exitPeriodRange.contains(seconds) else {
                throw MatcherError(key, "must be a number of seconds in " +
                    "\(Int(Self.exitPeriodRange.lowerBound))...\(Int(Self.exitPeriodRange.upperBound)), not \(seconds)")
            }
            exitPeriod = seconds
        case (.boolean, .boolean(let b)):
            verified = b
        default:
            throw MatcherError(key, "must be \(key.valueType.description), not \(value.summary)")
        }
    }

    private mutating func setText(_ key: Key, _ text: String) throws(MatcherError) {
        switch key {
        case .kind:
            guard let k = PeerKind(rawValue: text) else {
                throw MatcherError(key,
                    "must be one of \(PeerKind.allCases.map(\.rawValue).joined(separator: ", ")), not \(text.debugDescription)")
            }
            kind = k
        case .identifier:
            if text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
                throw MatcherError(key, "must not contain control characters")
            }
            // A node's identity is written lowercase on the bus; accept it in any case.
            identifier = UUID(uuidString: text).map { $0.uuidString.lowercased() } ?? text
        case .uuid, .id1:
            guard let u = UUID(uuidString: text) else {
                throw MatcherError(key, "must be a UUID such as f7826da6-4fa2-4e98-8024-bc5b71e0893e, not \(text.debugDescription)")
            }
            if key == .uuid { uuid = u } else { id1 = u }
        case .namespace:
            namespace = try Self.hexDigits(text, bytes: 10, key)
        case .instance:
            instance = try Self.hexDigits(text, bytes: 6, key)
        case .url:
            guard text.hasPrefix("http://") || text.hasPrefix("https://"), Self.host(ofURL: text).map({ !$0.isEmpty }) == true,
                  text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
                throw MatcherError(key, "must be an http:// or https:// URL such as https://example.com/, not \(text.debugDescription)")
            }
            url = text
        case .urlDomain:
            var domain = text.lowercased()
            if domain.hasSuffix(".") { domain.removeLast() }
            let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
            guard !domain.isEmpty, labels.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 63 && $0.utf8.allSatisfy(Self.isHostByte) }) else {
                throw MatcherError(key, "must be a host name such as example.com, not \(text.debugDescription)")
            }
            urlDomain = domain
        case .address:
            let upper = text.uppercased()
            let parts = upper.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 6, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isHexDigit) }) else {
                throw MatcherError(key, "must be a Bluetooth address such as AA:BB:CC:DD:EE:FF, not \(text.debugDescription)")
            }
            address = upper
        case .within:
            guard let zone = Proximity(rawValue: text), zone != .unknown else {
                throw MatcherError(key, "must be immediate, near or far, not \(text.debugDescription)")
            }
            within = zone
        default:
            throw MatcherError(key, "must be \(key.valueType.description)")
        }
    }

    /// Checks how the parts go together: one beacon family at most, its parts given from the first
    /// (`Major` needs `UUID` …), and a `Kind` that agrees with them.
    public func validate() throws(MatcherError) {
        if major != nil, uuid == nil { throw MatcherError(.major, "needs UUID") }
        if minor != nil, major == nil { throw MatcherError(.minor, "needs Major") }
        if id2 != nil, id1 == nil { throw MatcherError(.id2, "needs ID1") }
        if id3 != nil, id2 == nil { throw MatcherError(.id3, "needs ID2") }
        if instance != nil, namespace == nil { throw MatcherError(.instance, "needs Namespace") }
        if url != nil, urlDomain != nil { throw MatcherError(.urlDomain, "cannot go with URL (give one of them)") }
        let families: [(PeerKind, Key?)] = [
            (.ibeacon, uuid != nil ? .uuid : nil),
            (.altbeacon, id1 != nil ? .id1 : nil),
            (.eddystone, namespace != nil ? .namespace : url != nil ? .url : urlDomain != nil ? .urlDomain : nil),
        ].filter { $0.1 != nil }
        if families.count > 1 {
            throw MatcherError(families[1].1!, "cannot go with \(families[0].1!.rawValue): a peer is one kind of beacon")
        }
        if namespace != nil, url != nil || urlDomain != nil {
            throw MatcherError(url != nil ? .url : .urlDomain,
                               "cannot go with Namespace: Eddystone-UID and Eddystone-URL are different frames")
        }
        if let kind, let family = families.first, family.0 != kind {
            throw MatcherError(.kind, "is \(kind.rawValue), but \(family.1!.rawValue) is \(family.0.rawValue)")
        }
    }

    /// The parts present, in the order of ``Key``, as a client would write them.
    public var parts: [(Key, Value)] {
        var out: [(Key, Value)] = []
        if let kind { out.append((.kind, .text(kind.rawValue))) }
        if let identifier { out.append((.identifier, .text(identifier))) }
        if let uuid { out.append((.uuid, .text(uuid.uuidString.lowercased()))) }
        if let major { out.append((.major, .integer(Int64(major)))) }
        if let minor { out.append((.minor, .integer(Int64(minor)))) }
        if let id1 { out.append((.id1, .text(id1.uuidString.lowercased()))) }
        if let id2 { out.append((.id2, .integer(Int64(id2)))) }
        if let id3 { out.append((.id3, .integer(Int64(id3)))) }
        if let namespace { out.append((.namespace, .text(namespace))) }
        if let instance { out.append((.instance, .text(instance))) }
        if let url { out.append((.url, .text(url))) }
        if let urlDomain { out.append((.urlDomain, .text(urlDomain))) }
        if let address { out.append((.address, .text(address))) }
        if let verified { out.append((.verified, .boolean(verified))) }
        if let within { out.append((.within, .text(within.rawValue))) }
        if let exitPeriod { out.append((.exitPeriod, .number(exitPeriod))) }
        return out
    }

    /// The matcher without its exit period: what decides which peers it matches. Changing it
    /// clears a region's state; changing only the exit period does not.
    public var selection: RegionMatcher {
        var s = self
        s.exitPeriod = nil
        return s
    }

    // MARK: - Matching

    /// Whether `peer` is one this matcher is about (everything but `within`).
    public func matches(_ peer: PeerSnapshot) -> Bool {
        // The peer's hex and host only when this matcher compares them.
        matches(peer, namespace != nil || urlDomain != nil ? PeerKeys(peer) : PeerKeys())
    }

    /// A peer's parts computed once per report (hex of an Eddystone-UID, host of an Eddystone-URL).
    struct PeerKeys {
        var namespace: String?
        var instance: String?
        var host: String?

        init() {}

        init(_ peer: PeerSnapshot) {
            switch peer.beacon {
            case .eddystoneUID(let ns, let inst, _)?: (namespace, instance) = (hex(ns), hex(inst))
            case .eddystoneURL(let url, _)?: host = RegionMatcher.host(ofURL: url)
            default: break
            }
        }
    }

    /// ``matches(_:)`` with the peer's keys computed already.
    func matches(_ peer: PeerSnapshot, _ keys: PeerKeys) -> Bool {
        if let kind, peer.kind != kind { return false }
        if let identifier, peer.identifier.rawValue != identifier { return false }
        if let address, peer.address != address { return false }
        if let verified, peer.verified != verified { return false }
        if uuid != nil || id1 != nil || namespace != nil || url != nil || urlDomain != nil {
            guard let beacon = peer.beacon else { return false }
            switch beacon {
            case .iBeacon(let u, let ma, let mi, _):
                guard let uuid, u == uuid, major.map({ $0 == ma }) ?? true, minor.map({ $0 == mi }) ?? true else { return false }
            case .altBeacon(_, let u, let a, let b, _):
                guard let id1, u == id1, id2.map({ $0 == a }) ?? true, id3.map({ $0 == b }) ?? true else { return false }
            case .eddystoneUID:
                guard let namespace, keys.namespace == namespace, instance.map({ $0 == keys.instance }) ?? true else { return false }
            case .eddystoneURL(let u, _):
                if let url { return u == url }
                guard let urlDomain, let host = keys.host, Self.host(host, isUnder: urlDomain) else { return false }
            }
        }
        return true
    }

    /// Whether a peer at `zone` counts for `within` (unknown never does, when `within` is set).
    public func admits(_ zone: Proximity) -> Bool {
        guard let within else { return true }
        return zone != .unknown && zone <= within
    }

    /// The host of an http(s) URL, lowercase: between `://` and the first `/`, `:`, `?` or `#`.
    public static func host(ofURL url: String) -> String? {
        guard let scheme = url.range(of: "://") else { return nil }
        let rest = url[scheme.upperBound...]
        let end = rest.firstIndex(where: { "/:?#".contains($0) }) ?? rest.endIndex
        return rest[..<end].lowercased()
    }

    /// `host` is `domain` or a subdomain of it (`www.example.com` is under `example.com`;
    /// `badexample.com` is not).
    public static func host(_ host: String, isUnder domain: String) -> Bool {
        var host = Substring(host)
        if host.hasSuffix(".") { host = host.dropLast() }
        return host == domain || host.hasSuffix("." + domain)
    }

    private static func isHostByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x61 && b <= 0x7A) || b == 0x2D || b == 0x5F
    }

    private static func hexDigits(_ text: String, bytes: Int, _ key: Key) throws(MatcherError) -> String {
        var digits = text.lowercased()
        if digits.hasPrefix("0x") { digits.removeFirst(2) }
        guard digits.count == 2 * bytes, digits.allSatisfy(\.isHexDigit) else {
            throw MatcherError(key, "must be \(bytes) bytes as \(2 * bytes) hex digits, not \(text.debugDescription)")
        }
        return digits
    }
}

/// A matcher part that cannot be taken, and why.
public struct MatcherError: Error, Sendable, Hashable, CustomStringConvertible {
    public var key: RegionMatcher.Key
    /// The problem, to follow the part's name (`must be a UUID such as …`).
    public var problem: String

    public init(_ key: RegionMatcher.Key, _ problem: String) {
        self.key = key
        self.problem = problem
    }

    /// `UUID must be a UUID such as …`, with the bus's name of the part.
    public var description: String { "\(key.busName) \(problem)" }
}
