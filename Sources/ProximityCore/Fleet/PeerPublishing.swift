/// Which of its peers a node publishes at each report (docs/mqtt.md, peer reports): a peer it
/// ranges, when the rate control lets it (``ReportThrottle``: once per heartbeat, or at once when
/// it moved), and a peer it reported but no longer hears (silent, or gone from the table), once,
/// as gone. The node's MQTT publisher and `proximity-fleet replay` decide here, so a replayed
/// node publishes what the live one would have.
public struct PeerPublishing: Sendable {
    public enum Publication: Sendable, Hashable {
        case report(PeerSnapshot)
        case gone(PeerID)
    }

    private var throttle: ReportThrottle
    /// Peers whose last publication said where they are (a `gone` follows when they go).
    private var reported: Set<PeerID> = []

    public init(throttle: ReportThrottle.Configuration = .init()) {
        self.throttle = ReportThrottle(configuration: throttle)
    }

    /// Everything again, as after a new connection to the broker.
    public mutating func restart() {
        throttle = ReportThrottle(configuration: throttle.configuration)
        reported = []
    }

    /// What the report at `t` publishes: its peers (as the report orders them), then those that
    /// left the table.
    public mutating func publications(peers: [PeerSnapshot], removed: [PeerID], at t: Double) -> [Publication] {
        var out: [Publication] = []
        for peer in peers {
            let id = peer.identifier
            if peer.proximity == .unknown {
                if reported.remove(id) != nil {
                    throttle.forget(device: id.rawValue)
                    out.append(.gone(id))
                }
                continue
            }
            guard throttle.offer(device: id.rawValue, distance: peer.distance, at: t) else { continue }
            reported.insert(id)
            out.append(.report(peer))
        }
        for id in removed where reported.remove(id) != nil {
            throttle.forget(device: id.rawValue)
            out.append(.gone(id))
        }
        return out
    }
}
