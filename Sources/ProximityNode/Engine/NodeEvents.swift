import Foundation
import ProximityCore
import Synchronization

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
        case report, peerIdentified, link, health, clearInterval, rssiOffset, zoneDistances, peerNames, irks, regionRanging, alerts,
             profile, recording
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
