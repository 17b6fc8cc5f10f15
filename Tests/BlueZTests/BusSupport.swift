import BlueZ
import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import Synchronization
import Testing

// Note: BlueZSim has a type named `BlueZ`, which hides this module's name here; the tests use
// BlueZ's declarations unqualified (`BlueZService`, `Adapter`, …).

/// The RSSI every report carries at `distance` with no shadowing.
func expectedRSSI(_ scenario: Scenario, distance: Double) -> Int16 {
    Int16(scenario.radioModel.meanRSSI(distance: distance).rounded())
}

let adapterPath: ObjectPath = "/org/bluez/hci0"
let alphaDevice: ObjectPath = "/org/bluez/hci0/dev_AA_00_00_00_00_01"
let betaDevice: ObjectPath = "/org/bluez/hci0/dev_AA_00_00_00_00_02"
let generalUUID = ProximityUUIDs.defaultService

/// Every event of a mirror, kept in order, with waits on them (no sleeps: each wait resumes when
/// a matching event arrives, or fails after its timeout).
final class EventLog: Sendable {
    private struct Waiter {
        var from: Int
        var predicate: @Sendable (BlueZEvent) -> Bool
        var continuation: CheckedContinuation<BlueZEvent?, Never>
    }
    private struct State {
        var events: [BlueZEvent] = []
        var waiters: [UInt64: Waiter] = [:]
        var next: UInt64 = 0
        var finished = false
    }
    private final class Shared: Sendable {
        let state = Mutex(State())

        func append(_ event: BlueZEvent) {
            let ready = state.withLock { s -> [CheckedContinuation<BlueZEvent?, Never>] in
                s.events.append(event)
                let index = s.events.count - 1
                var ready: [CheckedContinuation<BlueZEvent?, Never>] = []
                for (id, w) in s.waiters where index >= w.from && w.predicate(event) {
                    ready.append(w.continuation)
                    s.waiters[id] = nil
                }
                return ready
            }
            for c in ready { c.resume(returning: event) }
        }

        func finish() {
            let waiting = state.withLock { s -> [CheckedContinuation<BlueZEvent?, Never>] in
                s.finished = true
                defer { s.waiters = [:] }
                return s.waiters.values.map(\.continuation)
            }
            for c in waiting { c.resume(returning: nil) }
        }
    }
    private let shared = Shared()
    private let task: Task<Void, Never>

    init(_ stream: AsyncStream<BlueZEvent>) {
        let shared = self.shared
        task = Task {
            for await event in stream { shared.append(event) }
            shared.finish()
        }
    }

    var events: [BlueZEvent] { shared.state.withLock { $0.events } }
    var count: Int { shared.state.withLock { $0.events.count } }

    /// The first event from index `from` on that matches, waiting up to `timeout`.
    @discardableResult
    func wait(from: Int = 0, timeout: Duration = .seconds(10), _ what: String,
              _ predicate: @escaping @Sendable (BlueZEvent) -> Bool) async throws -> BlueZEvent {
        let shared = self.shared
        let id = shared.state.withLock { s -> UInt64 in s.next += 1; return s.next }
        let found: BlueZEvent? = await withTaskGroup(of: BlueZEvent?.self) { group in
            group.addTask {
                await withCheckedContinuation { (c: CheckedContinuation<BlueZEvent?, Never>) in
                    let now = shared.state.withLock { s -> (hit: BlueZEvent?, done: Bool) in
                        if let hit = s.events.dropFirst(from).first(where: predicate) { return (hit, true) }
                        if s.finished { return (nil, true) }
                        s.waiters[id] = Waiter(from: from, predicate: predicate, continuation: c)
                        return (nil, false)
                    }
                    if now.done { c.resume(returning: now.hit) }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            let left = shared.state.withLock { $0.waiters.removeValue(forKey: id)?.continuation }
            left?.resume(returning: nil)
            group.cancelAll()
            return first
        }
        guard let found else {
            throw TestKitError("no \(what) within \(timeout); events: \(events.map(\.summary))")
        }
        return found
    }
}

extension BlueZEvent {
    var summary: String {
        switch self {
        case .adapterAdded(let a): "adapterAdded(\(a.path))"
        case .adapterChanged(let a, let c): "adapterChanged(\(a.path), \(c.sorted()))"
        case .adapterRemoved(let p): "adapterRemoved(\(p))"
        case .deviceAdded(let d): "deviceAdded(\(d.path), rssi \(d.rssi.map(String.init) ?? "-"))"
        case .deviceChanged(let d, let c): "deviceChanged(\(d.path), \(c.sorted()), rssi \(d.rssi.map(String.init) ?? "-"))"
        case .deviceRemoved(let p): "deviceRemoved(\(p))"
        case .bluezGone: "bluezGone"
        case .bluezRestarted: "bluezRestarted"
        }
    }

    var addedDevice: DeviceInfo? { if case .deviceAdded(let d) = self { d } else { nil } }
    var changedDevice: (DeviceInfo, Set<String>)? { if case .deviceChanged(let d, let c) = self { (d, c) } else { nil } }
    var addedAdapter: AdapterInfo? { if case .adapterAdded(let a) = self { a } else { nil } }
}

/// A mirror running on its own connection, with its events logged.
struct RunningMirror: Sendable {
    let connection: DBusConnection
    let mirror: BlueZObjectMirror
    let log: EventLog
    let task: Task<Void, Error>

    static func start(on connection: DBusConnection, service: BusName = BlueZService.name) -> RunningMirror {
        let mirror = BlueZObjectMirror(connection: connection, service: service)
        let log = EventLog(mirror.events)
        let task = Task { try await mirror.run() }
        return RunningMirror(connection: connection, mirror: mirror, log: log, task: task)
    }

    func stop() async {
        task.cancel()
        _ = try? await task.value
    }
}

/// Expects `body` to throw `expected`.
func expectThrows<E: Error & Equatable>(_ expected: E, sourceLocation: SourceLocation = #_sourceLocation,
                                        _ body: () async throws -> Void) async {
    do {
        try await body()
        Issue.record("expected \(expected), got success", sourceLocation: sourceLocation)
    } catch let error as E {
        #expect(error == expected, sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(expected), got \(error)", sourceLocation: sourceLocation)
    }
}

/// The tests that run buses, one at a time (they share two cores with the simulator's air).
@Suite(.serialized) struct BlueZBusTests {}

/// Waits for the next element of `stream`, up to `timeout`; nil if none came.
func nextElement<T: Sendable>(of stream: AsyncStream<T>, timeout: Duration = .seconds(10)) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask {
            var iterator = stream.makeAsyncIterator()
            return await iterator.next()
        }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
