import DBusKit
import Logging
import ProximityAPI
import ProximityCore
import Synchronization

/// Shows the node on the bus: subscribes to the engine's events and keeps the exported objects in
/// step with them. For each report it applies the ``ExportPlan`` (peer objects removed, updated,
/// added) and then emits `Node1.FoundDevices`; for link and settings events it updates `Node1`'s
/// properties.
///
/// It holds the one projection of the node's state on the bus: the exported objects and what
/// `GetPeers` and `GetRanging` answer (``published``), read by the method handlers without
/// waiting.
public actor BusExporter {
    /// What the last applied report showed.
    public struct Published: Sendable {
        public var zones: [String: String] = [:]
        public var paths: [ObjectPath] = []
    }

    let connection: DBusConnection
    let logger: Logger
    var nodeObject: DBusObject?
    var exported: [PeerID: (object: DBusObject, properties: PeerProperties)] = [:]
    let publishedState = Mutex(Published())
    /// The exported `Region1` objects, by region identifier.
    var regionObjects: [String: (object: DBusObject, properties: RegionProperties)] = [:]
    /// The exported `Alert1` objects, by path, and what `AlertManager1` shows.
    var alertObjects: [AlertTargetKey: (object: DBusObject, properties: AlertProperties)] = [:]
    var shownCurrent: ObjectPath = .root
    var shownStrategies: [String] = []
    typealias Manager1 = ProximityBus.AlertManager1
    /// The last change applied (regions, alerts), and the commands waiting for theirs.
    var appliedSequence: UInt64 = 0
    var changeWaiters: [(sequence: UInt64, continuation: CheckedContinuation<Void, Never>)] = []

    public init(connection: DBusConnection, logger: Logger) {
        self.connection = connection
        self.logger = logger
    }

    public nonisolated var published: Published { publishedState.withLock { $0 } }

    /// The exported `Node1` object, whose properties the exporter updates.
    public func attach(node: DBusObject) { nodeObject = node }

    /// Applies `events` until they end or the task is cancelled.
    public func run(_ events: NodeEventStream) async {
        for await event in events { await apply(event) }
        // Shutting down: a command waiting for its change to be shown answers now.
        let waiting = changeWaiters
        changeWaiters = []
        appliedSequence = .max
        for waiter in waiting { waiter.continuation.resume() }
    }

    func apply(_ event: NodeEvent) async {
        switch event {
        case .report(let report):
            await show(report)
        case .link(let advertising, let discovering):
            showLink(advertising: advertising, discovering: discovering)
        case .health(let state, let detail):
            nodeObject?.set([NodeProperties.Key.health.rawValue: .string(state), NodeProperties.Key.healthDetail.rawValue: .string(detail)],
                            interface: ProximityBus.Node1.interface)
        case .clearInterval(let seconds):
            show(.clearInterval, .double(seconds))
        case .rssiOffset(let dB):
            show(.rssiOffset, .double(dB))
        case .zoneDistances(let zones):
            show(.zoneDistances, NodeProperties.zoneDistances(immediate: zones.immediate, near: zones.near))
        case .peerNames(let names, let sequence):
            show(.peerNames, .stringMap(Dictionary(uniqueKeysWithValues: names.map { ($0.key.rawValue, $0.value) })))
            shown(sequence)
        case .irks(let sources, let sequence):
            show(.irks, .stringMap(sources))
            shown(sequence)
        case .peerIdentified(let peer, let address, let introduced):
            announce(peer, address: address, introduced: introduced)
        case .regions(let changes):
            await show(changes)
        case .alerts(let changes):
            await show(changes)
        case .profile(let changes):
            show(changes)
        case .recording(let batch):
            send(batch)
        }
    }

    /// Marks the change `sequence` (of any kind: the engine numbers them all in one series, and
    /// the exporter applies them in order) as on the bus, and answers the commands waiting for it.
    func shown(_ sequence: UInt64) {
        appliedSequence = max(appliedSequence, sequence)
        let ready = changeWaiters.filter { $0.sequence <= appliedSequence }
        changeWaiters.removeAll { $0.sequence <= appliedSequence }
        for waiter in ready { waiter.continuation.resume() }
    }

    /// Returns once the change `sequence` is on the bus (its objects exported, its signals sent):
    /// a command answers after that, so a client that got the reply finds the object.
    public func waitUntilShown(_ sequence: UInt64) async {
        guard sequence > appliedSequence else { return }
        await withCheckedContinuation { changeWaiters.append((sequence, $0)) }
    }
}
