import Foundation
import ProximityAPI
import ProximityCore
import Synchronization

/// The ranging report the node publishes once a second: every peer in the table, nearest first.
public struct NodeReport: Sendable, Hashable {
    public var time: Timestamp
    /// Seconds since the Unix epoch at ``time``.
    public var epoch: Double
    /// Nearest first.
    public var peers: [PeerSnapshot]
    /// Peers reported unknown for the first time because they fell silent.
    public var silenced: [PeerID]
    /// Peers that left the table in this report.
    public var removed: [PeerID]

    public init(time: Timestamp, epoch: Double, peers: [PeerSnapshot], silenced: [PeerID], removed: [PeerID]) {
        self.time = time
        self.epoch = epoch
        self.peers = peers
        self.silenced = silenced
        self.removed = removed
    }

    /// Seconds since the Unix epoch of `t`, a time of the report's clock.
    public func epoch(_ t: Timestamp) -> Double { epoch - (time - t) }

    /// Identifier → zone: the seed's `foundDevices`.
    public var zones: [PeerID: Proximity] {
        Dictionary(uniqueKeysWithValues: peers.map { ($0.identifier, $0.proximity) })
    }
}

/// What the engine publishes. Subscribers (the bus exporter; later the region monitor's, the
/// alert engine's and MQTT's publishers) each get every event in order, through a bounded buffer.
public enum NodeEvent: Sendable, Hashable {
    /// The once-a-second ranging report.
    case report(NodeReport)
    /// A peer node's identity was learnt at `address` (read over GATT, or from its hello).
    case peerIdentified(PeerID, address: String, introduced: Bool)
    /// The adapter link changed what the node shows as `Advertising` and `Discovering`.
    case link(advertising: Bool, discovering: Bool)
    /// The link's health changed (`Node1.Health`, `HealthDetail`): `ok`, `recovering` or
    /// `failed`, and why.
    case health(state: String, detail: String)
    /// `ClearInterval` changed (set over the bus, or by a reload).
    case clearInterval(Double)
    /// `RSSIOffset` changed (by a reload).
    case rssiOffset(Double)
    /// `ZoneDistances` changed (by a reload).
    case zoneDistances(ZoneThresholds)
    /// `PeerNames` changed (`SetPeerName`, or a reload): every display name now, numbered in the
    /// change series so the call waits until the bus shows it.
    case peerNames([PeerID: String], sequence: UInt64)
    /// `IRKs` changed (`AddIRK`, `RemoveIRK`, or a reload): each IRK's name and source, numbered
    /// in the change series.
    case irks([String: String], sequence: UInt64)
    /// Region monitoring changed: regions defined or removed, states determined, entered and
    /// exited, and with each report the ranging per region. One event per step of the engine, so
    /// thousands of regions changing at once are one event in a subscriber's buffer.
    case regions(RegionChanges)
    /// The alert engine after a step: every alert target as it is now, the offers and removals it
    /// made, the alert offered or in progress, and the strategy keys. One event per step.
    case alerts(AlertChanges)
    /// Tracking, the profile, the rules and the event log after a step: the whole profile when it
    /// changed, and the signals in order (each `Logged` once its entry is on disk).
    case profile(ProfileChanges)
    /// With each report while clients record (`Node1.StartRecording`): the samples of the recorded
    /// peers since the report before, what the report said of them, and who gets which.
    case recording(RecordingBatch)
}

/// What the recording clients get with one report: each its own peers' samples and reports, as a
/// `Node1.Samples` signal sent to it alone.
public struct RecordingBatch: Sendable, Hashable {
    /// A client recording, and the peers it asked for (nil: every peer).
    public struct Recorder: Sendable, Hashable {
        /// Its unique bus name.
        public var client: String
        public var peers: Set<PeerID>?
        /// When it started, seconds since the Unix epoch: it gets no sample from before.
        public var since: Double

        public init(client: String, peers: Set<PeerID>?, since: Double = 0) {
            self.client = client
            self.peers = peers
            self.since = since
        }

        public func wants(_ peer: String) -> Bool { peers?.contains(PeerID(peer)) ?? true }
    }

    /// The report's time, seconds since the Unix epoch.
    public var time: Double
    /// Every recorded peer's samples since the report before, in the order the table took them.
    public var samples: [RecordedSample]
    /// Every recorded peer the report holds or removed.
    public var reports: [RecordedReport]
    public var recorders: [Recorder]

    public init(time: Double, samples: [RecordedSample], reports: [RecordedReport], recorders: [Recorder]) {
        self.time = time
        self.samples = samples
        self.reports = reports
        self.recorders = recorders
    }

    /// What `recorder` gets.
    public func batch(for recorder: Recorder) -> RecordedBatch {
        RecordedBatch(time: time, samples: samples.filter { $0.time >= recorder.since && recorder.wants($0.peer) },
                      reports: reports.filter { recorder.wants($0.peer) })
    }
}

/// What one step did to the profile: its attributes when they changed, and the step's signals.
public struct ProfileChanges: Sendable, Hashable {
    /// In the same series as ``RegionChanges/sequence``.
    public var sequence: UInt64
    public var attributes: [String: String]?
    /// `Tracked`, `Cleared`, `RuleFired` and `Logged`, in order.
    public var signals: [ProfileSignal]

    public init(sequence: UInt64 = 0, attributes: [String: String]? = nil, signals: [ProfileSignal] = []) {
        self.sequence = sequence
        self.attributes = attributes
        self.signals = signals
    }
}

/// What one step of the alert engine left: the whole picture of the targets (few: alerts ×
/// matching peers), so a subscriber shows exactly this, and the offers and removals of the step
/// in order.
public struct AlertChanges: Sendable, Hashable {
    /// An offer (`AlertReady`, with the target's distance in metres) or a removal.
    public enum Notice: Sendable, Hashable {
        case ready(AlertTargetKey, distance: Double)
        case removed(AlertTargetKey, reason: String)
    }

    /// In the same series as ``RegionChanges/sequence``.
    public var sequence: UInt64
    /// Every alert target.
    public var targets: [AlertTargetKey: AlertProperties]
    public var notices: [Notice]
    /// The alert offered or in progress.
    public var current: AlertTargetKey?
    /// The strategy keys alerts may name now.
    public var strategies: [String]

    public init(sequence: UInt64 = 0, targets: [AlertTargetKey: AlertProperties], notices: [Notice] = [], current: AlertTargetKey?,
                strategies: [String]) {
        self.sequence = sequence
        self.targets = targets
        self.notices = notices
        self.current = current
        self.strategies = strategies
    }
}

/// What one step of the engine did to the monitored regions, in order: `removed`, then `defined`,
/// then `events`, then `ranging`.
public struct RegionChanges: Sendable, Hashable {
    /// Increases with every `RegionChanges` the engine publishes; a command's caller waits for
    /// the bus exporter to have applied its sequence before it answers.
    public var sequence: UInt64
    /// Regions stopped.
    public var removed: [String] = []
    /// Regions started or redefined, with their state.
    public var defined: [RegionStatus] = []
    /// States determined, enters and exits.
    public var events: [RegionEvent] = []
    /// With a report: every region that has present peers (the others have none). Nil otherwise.
    public var ranging: [RegionRanging]?

    public init(sequence: UInt64, removed: [String] = [], defined: [RegionStatus] = [], events: [RegionEvent] = [],
                ranging: [RegionRanging]? = nil) {
        self.sequence = sequence
        self.removed = removed
        self.defined = defined
        self.events = events
        self.ranging = ranging
    }
}

/// Fans events out to subscribers, each with its own bounded buffer, without ever holding the
/// engine. A slow subscriber loses what the next event puts right, and nothing else:
///
/// - whole-state events (reports, the link, the clear interval and RSSI offset, alerts, the
///   profile, recording batches, identifications, and region events that only carry ranging) are
///   dropped when its buffer is full, first those that a newer event of the same kind replaces;
/// - region events that carry a delta (regions removed or defined, states determined, enters and
///   exits) are never dropped: when room is needed and no whole event is replaced, the two oldest
///   are merged into one with the same outcome (``RegionChanges/merged(with:)``).
///
/// (The profile's `Logged` entries are whole too, for the MQTT outbox: it reads a gap back from
/// the event log.)
public final class NodeEvents: Sendable {
    private struct State {
        var subscribers: [Int: NodeEventStream.Queue] = [:]
        var next = 0
        var finished = false
    }
    private let state = Mutex(State())

    public init() {}

    /// A new subscription; events published from now on. `buffer`: the most events held for it.
    public func subscribe(buffer: Int = 64) -> NodeEventStream {
        let queue = NodeEventStream.Queue(capacity: max(2, buffer))
        let registered: Bool = state.withLock { s in
            guard !s.finished else { return false }
            s.next += 1
            let id = s.next
            s.subscribers[id] = queue
            queue.onTermination { [weak self] in self?.state.withLock { _ = $0.subscribers.removeValue(forKey: id) } }
            return true
        }
        if !registered { queue.finish() }
        return NodeEventStream(queue: queue)
    }

    public func publish(_ event: NodeEvent) {
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for subscriber in subscribers { subscriber.push(event) }
    }

    /// Ends every subscription.
    public func finish() {
        let subscribers = state.withLock { s in
            s.finished = true
            defer { s.subscribers = [:] }
            return Array(s.subscribers.values)
        }
        for subscriber in subscribers { subscriber.finish() }
    }
}

extension NodeEvent {
    /// What a whole event is the whole of: a newer event of the same kind replaces an older one.
    enum Kind: Hashable {
        case report, peerIdentified, link, health, clearInterval, rssiOffset, zoneDistances, peerNames, irks, regionRanging, alerts, profile, recording
    }

    var kind: Kind {
        switch self {
        case .report: .report
        case .peerIdentified: .peerIdentified
        case .link: .link
        case .health: .health
        case .clearInterval: .clearInterval
        case .rssiOffset: .rssiOffset
        case .zoneDistances: .zoneDistances
        case .peerNames: .peerNames
        case .irks: .irks
        case .regions: .regionRanging
        case .alerts: .alerts
        case .profile: .profile
        case .recording: .recording
        }
    }

    /// Whether a later event puts right what dropping this one leaves wrong.
    var isWhole: Bool {
        guard case .regions(let changes) = self else { return true }
        return changes.removed.isEmpty && changes.defined.isEmpty && changes.events.isEmpty
    }
}

extension RegionChanges {
    /// The most region events one merged change keeps; past that the oldest enters and exits go
    /// (each region's last determined state stays).
    static let maxMergedEvents = 4096

    /// `self` then `next`, as one change with the same outcome for a subscriber that applies
    /// removals, then definitions, then events: a region defined here and removed in `next` is
    /// only removed; one removed here and defined in `next` is removed, then defined as `next`
    /// says.
    func merged(with next: RegionChanges) -> RegionChanges {
        let removedNext = Set(next.removed)
        let definedNext = Set(next.defined.map(\.region.identifier))
        var removed = removed
        for id in next.removed where !removed.contains(id) { removed.append(id) }
        let defined = defined.filter { !removedNext.contains($0.region.identifier) && !definedNext.contains($0.region.identifier) }
            + next.defined
        var events = events + next.events
        if events.count > Self.maxMergedEvents {
            // Keep every region's last determined state, then the newest of the rest.
            var lastDetermined: [String: Int] = [:]
            for (i, event) in events.enumerated() { if case .determined = event { lastDetermined[event.region] = i } }
            let keep = Set(lastDetermined.values)
            var budget = Self.maxMergedEvents - keep.count
            var kept: [RegionEvent] = []
            for (i, event) in events.enumerated().reversed() {
                if keep.contains(i) { kept.append(event) } else if budget > 0 { kept.append(event); budget -= 1 }
            }
            events = kept.reversed()
        }
        return RegionChanges(sequence: max(sequence, next.sequence), removed: removed, defined: defined, events: events,
                             ranging: next.ranging ?? ranging)
    }
}

/// One subscription to ``NodeEvents``: its events in order, ending when the events finish.
/// Iterate it once.
public struct NodeEventStream: AsyncSequence, Sendable {
    public typealias Element = NodeEvent

    final class Queue: Sendable {
        private struct State {
            var events: [NodeEvent] = []
            var head = 0
            var waiter: CheckedContinuation<NodeEvent?, Never>?
            var finished = false
            /// Called once, when the subscription ends (finished, or its iterator gone).
            var onTermination: (@Sendable () -> Void)?
        }
        private let state = Mutex(State())
        let capacity: Int

        init(capacity: Int) { self.capacity = capacity }

        /// The events it references, read or not (for the tests: read ones must not pile up).
        var held: Int { state.withLock { $0.events.count } }

        func onTermination(_ action: @escaping @Sendable () -> Void) {
            state.withLock { $0.onTermination = action }
        }

        func push(_ event: NodeEvent) {
            let waiter: CheckedContinuation<NodeEvent?, Never>? = state.withLock { s in
                guard !s.finished else { return nil }
                if let waiter = s.waiter {
                    s.waiter = nil
                    return waiter
                }
                s.events.append(event)
                Self.bound(&s, capacity: capacity)
                return nil
            }
            waiter?.resume(returning: event)
        }

        /// Makes room, losing as little as can be: first the oldest whole event that a newer one
        /// of its kind replaces; else the two oldest region deltas merge; else (no delta to merge)
        /// the oldest whole event goes.
        private static func bound(_ s: inout State, capacity: Int) {
            while s.events.count - s.head > capacity {
                var newest: [NodeEvent.Kind: Int] = [:]
                for i in s.head ..< s.events.count where s.events[i].isWhole { newest[s.events[i].kind] = i }
                if let i = (s.head ..< s.events.count).first(where: { s.events[$0].isWhole && newest[s.events[$0].kind] != $0 }) {
                    s.events.remove(at: i)
                    continue
                }
                let deltas = (s.head ..< s.events.count).filter { !s.events[$0].isWhole }.prefix(2)
                if deltas.count == 2, case .regions(let a) = s.events[deltas.first!], case .regions(let b) = s.events[deltas.last!] {
                    s.events[deltas.last!] = .regions(a.merged(with: b))
                    s.events.remove(at: deltas.first!)
                    continue
                }
                guard let i = (s.head ..< s.events.count).first(where: { s.events[$0].isWhole }) else { break }
                s.events.remove(at: i)
            }
            compact(&s)
        }

        /// Lets go of the events already read: all of them once the queue is drained, else
        /// (amortised) once they are half of it. An event read stays referenced until then, and
        /// one holds a whole report (200 peers: tens of kilobytes): compacting only past 1,024
        /// of them, as this did before, kept about 5 MB more for every minute of a busy node's
        /// first quarter of an hour (scripts/soak.sh, docs/reliability.md).
        private static func compact(_ s: inout State) {
            if s.head == s.events.count {
                s.events.removeAll(keepingCapacity: s.events.count <= 64)
                s.head = 0
            } else if s.head >= 32, s.head * 2 >= s.events.count {
                s.events.removeFirst(s.head)
                s.head = 0
            }
        }

        func next() async -> NodeEvent? {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<NodeEvent?, Never>) in
                    let ready: NodeEvent?? = state.withLock { s in
                        if s.head < s.events.count {
                            let event = s.events[s.head]
                            s.head += 1
                            Self.compact(&s)
                            return .some(event)
                        }
                        if s.finished || Task.isCancelled { return .some(nil) }
                        s.waiter = continuation
                        return nil
                    }
                    if let ready { continuation.resume(returning: ready) }
                }
            } onCancel: {
                let waiter = state.withLock { s in
                    defer { s.waiter = nil }
                    return s.waiter
                }
                waiter?.resume(returning: nil)
            }
        }

        func finish() {
            let (waiter, terminate): (CheckedContinuation<NodeEvent?, Never>?, (@Sendable () -> Void)?) = state.withLock { s in
                guard !s.finished else { return (nil, nil) }
                s.finished = true
                defer { s.waiter = nil }
                defer { s.onTermination = nil }
                return (s.waiter, s.onTermination)
            }
            waiter?.resume(returning: nil)
            terminate?()
        }

    }

    /// Ends the subscription when the last iterator (or the stream, if never iterated) goes.
    final class Lifetime: Sendable {
        let queue: Queue
        init(queue: Queue) { self.queue = queue }
        deinit { queue.finish() }
    }

    let queue: Queue
    let lifetime: Lifetime

    init(queue: Queue) {
        self.queue = queue
        lifetime = Lifetime(queue: queue)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let queue: Queue
        let lifetime: Lifetime
        public mutating func next() async -> NodeEvent? { await queue.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(queue: queue, lifetime: lifetime) }
}
