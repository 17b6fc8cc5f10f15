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
    private var exported: [PeerID: (object: DBusObject, properties: PeerProperties)] = [:]
    private let publishedState = Mutex(Published())
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
            nodeObject?.set([NodeProperties.Key.advertising.rawValue: .boolean(advertising),
                             NodeProperties.Key.discovering.rawValue: .boolean(discovering)], interface: ProximityBus.Node1.interface)
        case .clearInterval(let seconds):
            nodeObject?.set(NodeProperties.Key.clearInterval.rawValue, .double(seconds), interface: ProximityBus.Node1.interface)
        case .rssiOffset(let dB):
            nodeObject?.set(NodeProperties.Key.rssiOffset.rawValue, .double(dB), interface: ProximityBus.Node1.interface)
        case .peerIdentified:
            break
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

    /// `Node1.Samples` to each recording client, its own peers only, sent to it alone.
    private func send(_ batch: RecordingBatch) {
        for recorder in batch.recorders {
            do {
                try connection.emitSignal(path: ProximityBus.rootPath, interface: ProximityBus.Node1.interface,
                                          member: ProximityBus.Node1.samples, batch.batch(for: recorder).arguments,
                                          destination: try BusName(recorder.client))
            } catch {
                logger.error("cannot send Samples", metadata: ["dbus.destination": "\(recorder.client)", "error": "\(error)"])
            }
        }
    }

    private func show(_ report: NodeReport) async {
        let peers = report.peers.map { $0.properties(in: report) }
        let plan = ExportPlan(from: exported.mapValues(\.properties), to: peers)
        for id in plan.unexport {
            if let gone = exported.removeValue(forKey: id) { await gone.object.unexport() }
        }
        for (id, changes) in plan.update {
            exported[id]?.object.set(changes, interface: ProximityBus.Peer1.interface)
        }
        for peer in peers {
            let id = PeerID(peer.identifier)
            if exported[id] != nil { exported[id]!.properties = peer }
        }
        for properties in plan.export {
            do {
                let object = try await connection.export([properties.interface], at: properties.path)
                exported[PeerID(properties.identifier)] = (object, properties)
            } catch {
                logger.error("cannot export a peer", metadata: ["peer.id": "\(properties.identifier)", "error": "\(error)"])
            }
        }
        let zones = Dictionary(uniqueKeysWithValues: report.peers.map { ($0.identifier.rawValue, $0.proximity.rawValue) })
        let paths = exported.values.map(\.object.path).sorted { $0.rawValue < $1.rawValue }
        publishedState.withLock { $0 = Published(zones: zones, paths: paths) }
        do {
            try nodeObject?.emit(ProximityBus.Node1.foundDevices, interface: ProximityBus.Node1.interface, [.stringMap(zones)])
        } catch {
            logger.error("cannot emit FoundDevices", metadata: ["error": "\(error)"])
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
