/// What people call the peers: display names by identifier, from the config file's `names:`
/// (they win, and are reloaded) and given over D-Bus (`Node1.SetPeerName`, kept in the state
/// directory). A peer with neither shows the name it advertises (a node's own `--name`), if any.
///
/// The name is what `Peer1.Name`, `proximityctl`, the MQTT payloads, the fleet table and Home
/// Assistant show; the identifier stays what every event and matcher uses.
public struct PeerNames: Sendable, Hashable {
    /// From the config file.
    public var configured: [PeerID: String]
    /// Given over the bus, by identifier (as the state directory keeps them).
    public var given: [String: String]

    public init(configured: [PeerID: String] = [:], given: [String: String] = [:]) {
        self.configured = configured
        self.given = given
    }

    /// The peer's display name, if it has one; the config file's first.
    public subscript(_ peer: PeerID) -> String? { configured[peer] ?? given[peer.rawValue] }

    /// The name to show for `peer`: its display name, else `advertised`, else "".
    public func shown(_ peer: PeerID, advertised: String?) -> String { self[peer] ?? advertised ?? "" }

    /// Every display name (`Node1.PeerNames`): the given ones, the config file's over them.
    public var all: [PeerID: String] {
        var out = configured
        for (id, name) in given where out[PeerID(id)] == nil { out[PeerID(id)] = name }
        return out
    }

    /// Why a name may not be given over the bus: the config file names the peer, or there are
    /// ``maxGiven`` already.
    public enum Refusal: Error, Sendable, Hashable {
        case configured(String)
        case full
    }

    /// Gives `peer` the display `name` (an empty one removes the name it was given), as
    /// `SetPeerName` does; true when that changed something. `name` must be valid (``problem(name:)``).
    public mutating func give(_ name: String, to peer: PeerID) throws(Refusal) -> Bool {
        if let file = configured[peer] { throw .configured(file) }
        if name.isEmpty { return given.removeValue(forKey: peer.rawValue) != nil }
        guard given[peer.rawValue] != nil || given.count < Self.maxGiven else { throw .full }
        defer { given[peer.rawValue] = name }
        return given[peer.rawValue] != name
    }

    // MARK: - What a name may be

    /// The longest name, in characters: a badge, a room, a person.
    public static let maxLength = 64
    /// The most names given over the bus.
    public static let maxGiven = 4096

    /// Why `name` cannot be a display name, or nil: it must have 1 to ``maxLength`` characters,
    /// no control characters, and no space at either end.
    public static func problem(name: String) -> String? {
        if name.isEmpty { return "the name is empty" }
        if name.count > maxLength { return "the name has \(name.count) characters; at most \(maxLength)" }
        if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return "the name contains control characters"
        }
        if name.first?.isWhitespace == true || name.last?.isWhitespace == true {
            return "the name starts or ends with a space"
        }
        return nil
    }
}
