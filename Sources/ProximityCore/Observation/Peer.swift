import Foundation

/// What a peer is: another proximityd node, or a third-party beacon of one of the frames the node
/// parses. Its raw value is the `Kind` a peer shows on the bus.
public enum PeerKind: String, Sendable, Hashable, CaseIterable, Codable {
    case node, ibeacon, altbeacon, eddystone
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
