import ProximityCore

/// A trusted fleet's member tag (``MemberTagging``): the first two bytes of HMAC-SHA256, under a
/// key derived from the fleet key, of the address the node advertises from. Only members compute
/// it; bound to the address, a tag copied to another address does not match (docs/security.md,
/// "Outsiders' work is bounded").
public struct KeyedMemberTag: MemberTagging {
    let key: [UInt8]

    public init(_ fleetKey: FleetKey) {
        key = fleetKey.derived("proximityd member tag v1")
    }

    public func tag(for address: String) -> [UInt8] {
        Array(HMACSHA256.authenticationCode(key: key, data: Array(address.uppercased().utf8)).prefix(NodePowerFrame.memberTagLength))
    }
}
