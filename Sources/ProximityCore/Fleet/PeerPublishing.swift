/// Which of its peers a node publishes at each report (docs/mqtt.md, peer reports): a peer it
/// ranges, when the rate control lets it (``ReportThrottle``: once per heartbeat, or at once when
/// it moved), and a peer it reported but no longer hears (silent, or gone from the table), once,
/// as gone. The node's MQTT publisher and `proximity-fleet replay` decide here, so a replayed
/// node publishes what the live one would have.
///
/// With compatibility forms (`compat:`), a ranged peer is also published in those forms at least
/// every ``compatibilityHeartbeat`` seconds: Home Assistant's `mqtt_room` lets any other room
/// take a device whose room's last report is 5 s old (its default `timeout`), so a heartbeat of 5 s
/// hands a device standing still to a farther room now and then.
public struct PeerPublishing: Sendable {
    public enum Publication: Sendable, Hashable {
        /// The native report, and the compatibility forms.
        case report(PeerSnapshot)
        /// The compatibility forms only (their heartbeat).
        case compatibility(PeerSnapshot)
        case gone(PeerID)
    }

    /// The compatibility forms' heartbeat, seconds: under `mqtt_room`'s default `timeout` (5 s)
    /// with room for a lost message. Per node, each present device costs 0.5 messages a second in
    /// each form.
    public static let compatibilityHeartbeat = 2.0

    private var throttle: ReportThrottle
    private var compatibility: ReportThrottle?
    /// Peers whose last publication said where they are (a `gone` follows when they go).
    private var reported: Set<PeerID> = []

    /// `compatibility`: the node publishes compatibility forms (their heartbeat applies).
    public init(throttle: ReportThrottle.Configuration = .init(), compatibility: Bool = false) {
        self.throttle = ReportThrottle(configuration: throttle)
        if compatibility {
            self.compatibility = ReportThrottle(configuration: .init(heartbeat: min(throttle.heartbeat, Self.compatibilityHeartbeat),
                                                                     skipDistance: throttle.skipDistance))
        }
    }

    /// Everything again, as after a new connection to the broker.
    public mutating func restart() {
        throttle = ReportThrottle(configuration: throttle.configuration)
        compatibility = compatibility.map { ReportThrottle(configuration: $0.configuration) }
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
                    compatibility?.forget(device: id.rawValue)
                    out.append(.gone(id))
                }
                continue
            }
            if throttle.offer(device: id.rawValue, distance: peer.distance, at: t) {
                reported.insert(id)
                compatibility?.record(device: id.rawValue, distance: peer.distance, at: t)
                out.append(.report(peer))
            } else if compatibility?.offer(device: id.rawValue, distance: peer.distance, at: t) == true {
                out.append(.compatibility(peer))
            }
        }
        for id in removed where reported.remove(id) != nil {
            throttle.forget(device: id.rawValue)
            compatibility?.forget(device: id.rawValue)
            out.append(.gone(id))
        }
        return out
    }
}
