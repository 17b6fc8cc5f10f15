import Synchronization

/// Where the simulator's time comes from.
///
/// The air and every delay (connection latency, timeouts) read time here, never from the system, so
/// tests can drive a whole scenario (a 30 s temporary-device timeout, say) in milliseconds with
/// ``ManualSimClock``.
public protocol SimClock: Sendable {
    /// Seconds since the scenario started.
    var now: SimTime { get }
    /// Returns once `now >= deadline`, or throws `CancellationError` when the task is cancelled.
    func sleep(until deadline: SimTime) async throws
}

extension SimClock {
    public func sleep(for seconds: Double) async throws {
        try await sleep(until: now + max(0, seconds))
    }
}

/// Real time: `ContinuousClock` from the moment the clock was made.
public struct RealSimClock: SimClock {
    private let start: ContinuousClock.Instant

    public init() { start = ContinuousClock.now }

    public var now: SimTime {
        let elapsed = ContinuousClock.now - start
        let c = elapsed.components
        return Double(c.seconds) + Double(c.attoseconds) / 1e18
    }

    public func sleep(until deadline: SimTime) async throws {
        let target = start + .nanoseconds(Int64((max(0, deadline) * 1e9).rounded(.up)))
        try await Task.sleep(until: target, clock: .continuous)
    }
}

/// Time that moves only when a test says so (``advance(to:)``). Sleepers whose deadline has come
/// are resumed by the advance, in deadline order.
public final class ManualSimClock: SimClock {
    private struct State {
        var now: SimTime = 0
        var nextID: UInt64 = 0
        var sleepers: [UInt64: (deadline: SimTime, continuation: CheckedContinuation<Void, Error>)] = [:]
    }
    private let state = Mutex(State())

    public init(start: SimTime = 0) {
        state.withLock { $0.now = start }
    }

    public var now: SimTime { state.withLock { $0.now } }

    public func sleep(until deadline: SimTime) async throws {
        let id = state.withLock { s -> UInt64 in s.nextID += 1; return s.nextID }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, Error>) in
                let resumeNow = state.withLock { s -> Bool in
                    if s.now >= deadline { return true }
                    if Task.isCancelled { return true }
                    s.sleepers[id] = (deadline, c)
                    return false
                }
                if resumeNow {
                    if Task.isCancelled { c.resume(throwing: CancellationError()) } else { c.resume() }
                }
            }
        } onCancel: {
            let c = state.withLock { $0.sleepers.removeValue(forKey: id)?.continuation }
            c?.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward to `t` (never back) and resumes the sleepers due by then.
    public func advance(to t: SimTime) {
        let due = state.withLock { s -> [CheckedContinuation<Void, Error>] in
            s.now = max(s.now, t)
            let ready = s.sleepers.filter { $0.value.deadline <= s.now }.sorted { $0.value.deadline < $1.value.deadline }
            for (id, _) in ready { s.sleepers[id] = nil }
            return ready.map(\.value.continuation)
        }
        for c in due { c.resume() }
    }

    /// The earliest deadline anyone is sleeping until.
    public var nextDeadline: SimTime? {
        state.withLock { $0.sleepers.values.map(\.deadline).min() }
    }
}
