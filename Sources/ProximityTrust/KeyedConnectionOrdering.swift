import ProximityCore

/// A trusted fleet's ordering (``ConnectionOrdering``): which of two members connects is a coin
/// per pair of addresses, HMAC-SHA256 under a key derived from the fleet key, flipped by which
/// address is lower. Both members compute the same coin; an outsider, without the key, learns
/// nothing of how a member's address compares with the ones it probes with (docs/security.md).
public struct KeyedConnectionOrdering: ConnectionOrdering {
    let key: [UInt8]

    public init(_ fleetKey: FleetKey) {
        key = fleetKey.derived("proximityd who connects v1")
    }

    public func connectsFirst(own: String, peer: String) -> Bool {
        let lower = own < peer
        let pair = lower ? own + "|" + peer : peer + "|" + own
        let coin = HMACSHA256.authenticationCode(key: key, data: Array(pair.utf8))[0] & 1 == 1
        return lower != coin
    }
}
