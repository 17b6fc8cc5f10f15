import Foundation
import ProximityCore
import ProximityMQTT

/// A fleet played from its nodes' samples (`proximity-fleet replay`), through the code that runs
/// live: each node's ranging (its found-devices table, the node's defaults) takes its samples and
/// reports once a second, publishing what it heard in that second (``HearingBatch``) and what the
/// node's MQTT rate control lets through (``PeerPublishing``, the reports as ``PeerReport``
/// makes them), on the node's topics; the fleet's own ``FleetStep`` takes those messages, parsed
/// as the service parses them (``FleetMessage``), and ticks, on the recording's clock. What it publishes, the
/// position and the room of each device, is what the replay gives: the same as the service would
/// have published live. Each second rests only on samples up to it. Pure: samples in, rows out.
public struct FleetReplay: Sendable {
    /// One second of one device, as the service published it by then.
    public struct Row: Sendable, Hashable {
        public var time: Double
        public var device: String
        /// The position last published (nil: none, or deleted).
        public var position: FleetPosition?
        /// The room last published: a room's name, `home` (placed in no room) or `not_home`.
        public var room: String
    }

    /// The RSSI at 1 m a node ranges a device with when nothing says otherwise, dBm.
    public static let measuredPower = -59.0

    private var step: FleetStep
    private let ranging: RangingConfiguration
    private let throttle: ReportThrottle.Configuration
    private var nodes: [String: NodeReporter] = [:]
    /// Every device seen so far, in order of first appearance.
    public private(set) var devices: [String] = []
    private var rooms: [String: String] = [:]
    private var positions: [String: FleetPosition] = [:]
    /// Each device's room and position topics, to read the step's publications by.
    private var known: Set<String> = []
    private var roomTopics: [String: String] = [:]
    private var positionTopics: [String: String] = [:]

    /// `configuration` is the service's (with its plan); `ranging` and `throttle` the nodes'.
    public init(_ configuration: FleetConfiguration, ranging: RangingConfiguration = .init(),
                throttle: ReportThrottle.Configuration = .init()) {
        step = FleetStep(configuration)
        self.ranging = ranging
        self.throttle = throttle
        // As live: connected before anything is heard.
        _ = step.connection(.connected, at: 0)
    }

    /// A sample, in time order (a node's samples after those before them; nodes may interleave).
    public mutating func add(_ sample: TraceSample) {
        if !known.contains(sample.device) {
            known.insert(sample.device)
            devices.append(sample.device)
            let topics = FleetTopics(prefix: step.configuration.prefix)
            roomTopics[topics.room(sample.device)] = sample.device
            positionTopics[topics.position(sample.device)] = sample.device
        }
        var node = nodes.removeValue(forKey: sample.node)
            ?? NodeReporter(name: sample.node, ranging: ranging, throttle: throttle, hearings: true)
        node.hear(sample.device, rssi: sample.rssi, at: sample.time, measuredPower: Self.measuredPower)
        nodes[sample.node] = node
    }

    /// The nodes' messages at `t` (a whole second, after every sample up to it), the fleet's
    /// tick, then a row per device seen so far.
    public mutating func step(at t: Double) -> [Row] {
        let c = step.configuration
        for m in nodeMessages(at: t) {
            guard let message = FleetMessage.parse(topic: m.topic, payload: Array(m.payload.utf8), root: c.root, prefix: c.prefix,
                                                   discoveryPrefix: c.discoveryPrefix) else { continue }
            take(step.receive(message, at: t))
        }
        take(step.tick(at: t))
        return devices.map { Row(time: t, device: $0, position: positions[$0], room: rooms[$0] ?? "not_home") }
    }

    /// What each node publishes at its report at `t` (nodes by name, each as the node sends
    /// them: its hearings of the second, then its peer reports), on the topics a node named so
    /// publishes them under the service's root: the messages a live fleet service would receive.
    public mutating func nodeMessages(at t: Double) -> [(topic: String, payload: String)] {
        var out: [(String, String)] = []
        for name in nodes.keys.sorted() {
            var node = nodes.removeValue(forKey: name)!
            let topics = NodeTopics(prefix: "\(step.configuration.root)/\(MQTTTopic.segment(name))")
            let (peers, publications) = node.report(at: t)
            for batch in HearingBatch.batches(peers, at: t) { out.append((topics.hearings, MQTTJSON.encode(batch))) }
            for publication in publications {
                switch publication {
                case .report(let peer): out.append((topics.peer(peer.identifier.rawValue), MQTTJSON.encode(PeerReport(peer, at: t))))
                case .gone(let id):
                    out.append((topics.peer(id.rawValue), MQTTJSON.encode(PeerReport.gone(id.rawValue, at: MQTTRounding.milliseconds(t)))))
                case .compatibility: break
                }
            }
            nodes[name] = node
        }
        return out
    }

    /// Every room and position the service published, in order, as `(topic, payload)` (kept only
    /// with `keepingPublications`).
    public private(set) var publications: [(topic: String, payload: String)] = []
    private var keepingPublications = false

    /// Keeps every room and position publication in ``publications`` from now on.
    public mutating func keepPublications() { keepingPublications = true }

    /// What the service published: each device's room and position.
    private mutating func take(_ effects: [FleetEffect]) {
        for case .publish(let topic, let payload, _) in effects {
            if keepingPublications, roomTopics[topic] != nil || positionTopics[topic] != nil { publications.append((topic, payload)) }
            if let device = roomTopics[topic] {
                rooms[device] = payload
            } else if let device = positionTopics[topic] {
                positions[device] = payload.isEmpty ? nil : MQTTJSON.decode(FleetPosition.self, from: Array(payload.utf8))
            }
        }
    }


    /// Plays `samples` (sorted here by time, stably), handing each whole second's rows, from the
    /// first sample's to the last's, to `each` as they come (a long trace's rows need not all be
    /// held).
    public static func play(_ samples: [TraceSample], configuration: FleetConfiguration, each: ([Row]) -> Void) {
        var replay = FleetReplay(configuration)
        TraceSample.play(samples, add: { replay.add($0) }, second: { each(replay.step(at: $0)) })
    }
}
