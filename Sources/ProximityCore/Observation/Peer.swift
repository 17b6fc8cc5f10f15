import Foundation

/// What a peer is: another proximityd node, a third-party beacon of one of the frames the node
/// parses, or a device recognised by its identity resolving key (`irks:`, a phone that advertises
/// from rotating private addresses). Its raw value is the `Kind` a peer shows on the bus.
public enum PeerKind: String, Sendable, Hashable, CaseIterable, Codable {
    case node, ibeacon, altbeacon, eddystone, irk
}

/// The stable name of a peer in the table, in every event and on the bus: a node's identity (its
/// specific UUID, lowercase), or a beacon's frame identifier (`ibeacon:<uuid>:<major>:<minor>` …).
/// Addresses come and go (private addresses rotate); a `PeerID` does not.
public struct PeerID: RawRepresentable, Sendable, Hashable, Comparable, Codable, CustomStringConvertible,
                      ExpressibleByStringLiteral {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }

    /// A node's identifier: its identity in the lowercase canonical form.
    public static func node(_ identity: UUID) -> PeerID { PeerID(identity.uuidString.lowercased()) }

    /// A device recognised by the IRK named `name` (`irk:<name>`), whatever address it uses.
    public static func irk(_ name: String) -> PeerID { PeerID(irkPrefix + name) }

    /// What starts the identifier of a device recognised by its IRK.
    public static let irkPrefix = "irk:"

    /// Why `name` cannot name an IRK (`irks:`, `Node1.AddIRK`), or nil: 1 to 64 letters, digits,
    /// `-`, `_` or `.` (it becomes the peer's identifier `irk:<name>`, an MQTT topic level and a
    /// Home Assistant entity's id).
    public static func irkNameProblem(_ name: String) -> String? {
        guard !name.isEmpty, name.utf8.count <= 64 else { return "an IRK's name is 1 to 64 characters, not \(name.utf8.count)" }
        guard name.utf8.allSatisfy({ isNameByte($0) }) else {
            return "\(name.debugDescription) is not an IRK name: letters, digits, '-', '_' and '.' only"
        }
        return nil
    }

    private static func isNameByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D || b == 0x5F || b == 0x2E
    }

    public var description: String { rawValue }
    public static func < (a: PeerID, b: PeerID) -> Bool { a.rawValue < b.rawValue }
}

extension BeaconIdentity {
    /// The beacon's name in the table and on the bus.
    public var peerID: PeerID { PeerID(identifier) }
    public var peerKind: PeerKind {
        switch self {
        case .iBeacon: .ibeacon
        case .altBeacon: .altbeacon
        case .eddystoneUID, .eddystoneURL: .eddystone
        }
    }
}

extension PeerID {
    /// Why `text` is not a peer identifier in the form the node writes them, or nil: a node's
    /// identity (a UUID, lowercase), `ibeacon:UUID:MAJOR:MINOR`, `altbeacon:MFG:ID1:ID2:ID3` (the
    /// company id as 4 hex digits), `eddystone:NAMESPACE:INSTANCE` (20 and 12 hex digits) or
    /// `eddystone-url:URL`, `irk:NAME`; UUIDs and hex in lowercase, numbers in decimal without
    /// leading zeros.
    /// ``canonical(_:)`` puts one typed with capitals right.
    public static func formProblem(_ text: String) -> String? {
        if let problem = identifierProblem(text, called: "the peer identifier") { return problem }
        guard !isWellFormed(text) else { return nil }
        return "\(text.debugDescription) is not a peer identifier: a node's UUID, ibeacon:UUID:MAJOR:MINOR, "
            + "altbeacon:MFG:ID1:ID2:ID3, eddystone:NAMESPACE:INSTANCE, eddystone-url:URL or irk:NAME, in lowercase, "
            + "as GetRanging lists them"
    }

    /// `text` with its UUIDs and hex digits in lowercase (an Eddystone-URL's URL as given), so a
    /// peer typed with capitals names the node's.
    public static func canonical(_ text: String) -> String {
        text.hasPrefix("eddystone-url:") || text.hasPrefix(irkPrefix) ? text : text.lowercased()
    }

    private static func isWellFormed(_ text: String) -> Bool {
        func isUUID(_ s: Substring) -> Bool { UUID(uuidString: String(s))?.uuidString.lowercased() == String(s) }
        func isNumber(_ s: Substring) -> Bool {
            guard let n = UInt16(s), s.allSatisfy({ $0.isASCII && $0.isNumber }) else { return false }
            return String(n) == s
        }
        func isHex(_ s: Substring, _ count: Int) -> Bool {
            s.utf8.count == count && s.allSatisfy { ("0"..."9").contains($0) || ("a"..."f").contains($0) }
        }
        if isUUID(text[...]) { return true }
        if text.hasPrefix("eddystone-url:") { return text.count > "eddystone-url:".count }
        if text.hasPrefix(irkPrefix) { return irkNameProblem(String(text.dropFirst(irkPrefix.count))) == nil }
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        switch parts.first {
        case "ibeacon": return parts.count == 4 && isUUID(parts[1]) && isNumber(parts[2]) && isNumber(parts[3])
        case "altbeacon": return parts.count == 5 && isHex(parts[1], 4) && isUUID(parts[2]) && isNumber(parts[3]) && isNumber(parts[4])
        case "eddystone": return parts.count == 3 && isHex(parts[1], 20) && isHex(parts[2], 12)
        default: return false
        }
    }
}
