import Foundation
import ProximityCore
import ProximityMQTT
import Synchronization

/// The floor plan as the map page draws it (`GET /api/plan`): floors, rooms by floor name, the
/// nodes' positions, and a version that goes up at each reload (SIGHUP), so a page sees from the
/// live state (``FleetMapState/planVersion``) when to read the plan again.
public struct FleetMapPlan: Codable, Hashable, Sendable {
    public struct Floor: Codable, Hashable, Sendable {
        /// Empty for a plan without `floors:` (its one floor).
        public var name: String
        /// The floor's height range, metres: [low, high].
        public var z: [Double]
    }

    public struct Room: Codable, Hashable, Sendable {
        public var name: String
        public var floor: String
        /// The outline, [x, y] metres.
        public var polygon: [[Double]]
    }

    public struct Node: Codable, Hashable, Sendable {
        public var name: String
        public var floor: String
        /// [x, y, z] metres.
        public var position: [Double]
        /// The plan's calibration of the node (`rx-offset`, `tx-power`), when it has one.
        public var rxOffset: Double?
        public var txPower: Double?

        enum CodingKeys: String, CodingKey {
            case name, floor, position
            case rxOffset = "rx_offset"
            case txPower = "tx_power"
        }
    }

    public var version: Int
    public var floors: [Floor]
    public var rooms: [Room]
    public var nodes: [Node]
    /// The plan's path-loss exponent (`calibration: path-loss-exponent`).
    public var pathLossExponent: Double?
    /// Whether the page may edit the plan (`proximity-fleet run --edit`).
    public var editable: Bool?
    /// The plan's picture (`GET /api/plan/background`): its file's name, its bottom-left corner
    /// [x, y] and width, metres, and its floor.
    public struct Background: Codable, Hashable, Sendable {
        public var image: String
        public var corner: [Double]
        public var width: Double
        public var floor: String
    }
    public var background: Background?

    enum CodingKeys: String, CodingKey {
        case version, floors, rooms, nodes, editable, background
        case pathLossExponent = "path_loss_exponent"
    }

    public init(_ plan: FloorPlan, version: Int, editable: Bool = false) {
        self.version = version
        pathLossExponent = plan.pathLossExponent
        self.editable = editable ? true : nil
        background = plan.background.map {
            Background(image: $0.image, corner: [$0.corner.x, $0.corner.y], width: $0.width,
                       floor: plan.floors.indices.contains($0.floor) ? plan.floors[$0.floor].name : "")
        }
        floors = plan.floors.map { Floor(name: $0.name, z: [$0.z.lowerBound, $0.z.upperBound]) }
        rooms = plan.rooms.map { room in
            Room(name: room.name, floor: plan.floors.indices.contains(room.floor) ? plan.floors[room.floor].name : "",
                 polygon: room.polygon.map { [$0.x, $0.y] })
        }
        nodes = plan.nodes.map { node in
            let floor = plan.floor(atHeight: node.position.z)
            return Node(name: node.name, floor: plan.floors.indices.contains(floor) ? plan.floors[floor].name : "",
                        position: [node.position.x, node.position.y, node.position.z], rxOffset: node.rxOffset, txPower: node.txPower)
        }
    }
}

/// A node's health as the map shows it (`GET /api/nodes`): when the fleet last heard from it, what
/// it said of itself, how many devices it reports, and its calibration.
public struct FleetNodeHealth: Codable, Hashable, Sendable {
    public var name: String
    /// Whether the floor plan places it.
    public var inPlan: Bool
    /// Its retained status (`online`, `offline`); absent before it said any.
    public var status: String?
    /// Its retained state says `role: mobile`: its reports make no room.
    public var mobile: Bool
    /// When the fleet last had a message from it, seconds since the epoch (to the millisecond).
    public var lastHeard: Double?
    /// The devices it reports, fresh (within `--stale-after`).
    public var devices: Int
    /// The calibration's fit for it, dB (with a plan, once fitted).
    public var rxOffset: Double?
    public var txPower: Double?
    public var residual: Double?
    /// Why it is reported drifting; absent when it is not.
    public var drift: String?

    enum CodingKeys: String, CodingKey {
        case name, status, mobile, devices, residual, drift
        case inPlan = "in_plan"
        case lastHeard = "last_heard"
        case rxOffset = "rx_offset"
        case txPower = "tx_power"
    }

    public init(name: String, inPlan: Bool, status: String?, mobile: Bool, lastHeard: Double?, devices: Int,
                rxOffset: Double? = nil, txPower: Double? = nil, residual: Double? = nil, drift: String? = nil) {
        self.name = name
        self.inPlan = inPlan
        self.status = status
        self.mobile = mobile
        self.lastHeard = lastHeard
        self.devices = devices
        self.rxOffset = rxOffset
        self.txPower = txPower
        self.residual = residual
        self.drift = drift
    }
}

/// Every node the fleet knows (`GET /api/nodes`), and the calibration's path-loss exponent and RMS
/// residual once fitted.
public struct FleetNodes: Codable, Hashable, Sendable {
    public var time: Double
    public var exponent: Double?
    public var rms: Double?
    public var nodes: [FleetNodeHealth]

    public init(time: Double, exponent: Double?, rms: Double?, nodes: [FleetNodeHealth]) {
        self.time = time
        self.exponent = exponent
        self.rms = rms
        self.nodes = nodes
    }
}

/// Whether what the fleet shows is live (`GET /api/status`, and the map's header): the broker
/// connection and since when, how many of the nodes it knows say they are online, and how old the
/// newest node report is. `live` is false while the broker is down, or while devices are tracked
/// and no node has reported for ``FleetStatus/staleAfter`` seconds: the page then says why, in
/// words, and greys what it shows.
public struct FleetStatus: Codable, Hashable, Sendable {
    public struct Broker: Codable, Hashable, Sendable {
        /// `connected`, `connecting` (not yet, at start) or `down`.
        public var state: String
        /// Since when, seconds since the epoch (to the millisecond).
        public var since: Double
        /// Why it is down (libmosquitto's words), when it is.
        public var reason: String?

        public init(state: String, since: Double, reason: String? = nil) {
            self.state = state
            self.since = since
            self.reason = reason
        }
    }

    public struct Nodes: Codable, Hashable, Sendable {
        public var online: Int
        public var total: Int

        public init(online: Int, total: Int) {
            self.online = online
            self.total = total
        }
    }

    public var time: Double
    public var live: Bool
    public var broker: Broker
    public var nodes: Nodes
    /// When the newest node report or hearing arrived, and how long ago, seconds; absent before any.
    public var newestReport: Double?
    public var newestReportAge: Double?

    /// With devices tracked, no report for this long makes the state stale, seconds (nodes report
    /// what they hear every second).
    public static let staleAfter = 10.0

    enum CodingKeys: String, CodingKey {
        case time, live, broker, nodes
        case newestReport = "newest_report"
        case newestReportAge = "newest_report_age"
    }

    public init(time: Double, live: Bool, broker: Broker, nodes: Nodes, newestReport: Double?, newestReportAge: Double?) {
        self.time = time
        self.live = live
        self.broker = broker
        self.nodes = nodes
        self.newestReport = newestReport
        self.newestReportAge = newestReportAge
    }
}

/// What the map page's live stream (`GET /events`, event `state`) carries once a second: the
/// devices (the table, as `<prefix>/table` holds it: `GET /api/devices`), the nodes, and the plan's
/// version. A whole state, not a change: a client that misses one loses nothing.
public struct FleetMapState: Codable, Hashable, Sendable {
    public var planVersion: Int
    public var devices: FleetTable
    public var nodes: FleetNodes
    public var status: FleetStatus

    enum CodingKeys: String, CodingKey {
        case devices, nodes, status
        case planVersion = "plan_version"
    }

    public init(planVersion: Int, devices: FleetTable, nodes: FleetNodes, status: FleetStatus) {
        self.planVersion = planVersion
        self.devices = devices
        self.nodes = nodes
        self.status = status
    }
}

/// The fleet service's views for the map (events out): the service shows its plan and, once a
/// second, its state; each live stream gets every state that follows, encoded once for all of
/// them, and the API's answers are encoded from the latest when asked. A stream keeps only the newest state it has not sent
/// (each is whole), so a slow client never holds the service up or grows its memory.
public final class FleetViews: Sendable {
    /// The most live streams at once; ``subscribe()`` refuses more.
    public static let maximumSubscribers = 64

    private struct State {
        var planVersion = 0
        var plan: String?
        var background: String?
        var latest: FleetMapState?
        /// `latest`, encoded: what a new stream starts with.
        var state: String?
        var subscribers: [UInt64: AsyncStream<String>.Continuation] = [:]
        var next: UInt64 = 0
        var finished = false
    }

    private let mutex = Mutex(State())
    /// Whether the map edits the plan (`--edit`): the plan says so to the page.
    public let editable: Bool

    public init(editable: Bool = false) {
        self.editable = editable
    }

    /// The plan (at start and at each reload), or none: its version goes up.
    public func show(plan: FloorPlan?) {
        let editable = self.editable
        mutex.withLock { state in
            state.planVersion += 1
            state.plan = plan.map { MQTTJSON.encode(FleetMapPlan($0, version: state.planVersion, editable: editable)) }
            state.background = plan?.background?.image
        }
    }

    /// The fleet's state, each second: encoded once, sent to every live stream.
    public func show(devices: FleetTable, nodes: FleetNodes, status: FleetStatus) {
        let version = mutex.withLock { $0.planVersion }
        let latest = FleetMapState(planVersion: version, devices: devices, nodes: nodes, status: status)
        let whole = MQTTJSON.encode(latest)
        let subscribers = mutex.withLock { state -> [AsyncStream<String>.Continuation] in
            state.latest = latest
            state.state = whole
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.yield(whole) }
    }

    /// `GET /api/plan`: nil without a plan.
    public var planJSON: String? { mutex.withLock { $0.plan } }
    /// The file name of the plan's background picture, if it has one.
    public var backgroundImage: String? { mutex.withLock { $0.background } }
    /// `GET /api/devices`: nil before the first state.
    public var devicesJSON: String? { mutex.withLock { $0.latest }.map { MQTTJSON.encode($0.devices) } }
    /// `GET /api/nodes`: nil before the first state.
    public var nodesJSON: String? { mutex.withLock { $0.latest }.map { MQTTJSON.encode($0.nodes) } }
    /// `GET /api/status`: nil before the first state.
    public var statusJSON: String? { mutex.withLock { $0.latest }.map { MQTTJSON.encode($0.status) } }

    /// A live stream of whole states (``FleetMapState`` as JSON), starting with the latest; nil
    /// when ``maximumSubscribers`` are live already or the views are finished.
    public func subscribe() -> AsyncStream<String>? {
        let (stream, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id: UInt64? = mutex.withLock { state in
            guard !state.finished, state.subscribers.count < Self.maximumSubscribers else { return nil }
            state.next += 1
            state.subscribers[state.next] = continuation
            if let latest = state.state { continuation.yield(latest) }
            return state.next
        }
        guard let id else { return nil }
        continuation.onTermination = { [weak self] _ in
            _ = self?.mutex.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// How many live streams there are.
    public var subscribers: Int { mutex.withLock { $0.subscribers.count } }

    /// Ends every live stream, and refuses new ones (the service is stopping).
    public func finish() {
        let subscribers = mutex.withLock { state -> [AsyncStream<String>.Continuation] in
            state.finished = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.finish() }
    }
}
