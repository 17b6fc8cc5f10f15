import Foundation
import ProximityCore

/// The engine's time: seconds on a monotonic clock since an origin, and the Unix time of that
/// origin (for the bus's timestamps and for files). Injected, so the engine runs on a manual
/// clock in tests, in milliseconds.
public protocol NodeClock: Sendable {
    /// Seconds since the origin; never goes back.
    var now: Timestamp { get }
    /// Seconds since the Unix epoch at the origin.
    var epochAtOrigin: Double { get }
    /// Returns at `deadline` (or later); throws `CancellationError` when cancelled.
    func sleep(until deadline: Timestamp) async throws
}

extension NodeClock {
    /// Seconds since the Unix epoch of `t`, as files keep times.
    public func epoch(_ t: Timestamp) -> Double { epochAtOrigin + t }
    /// `epoch` seconds since the Unix epoch as a time of this clock (before the origin: negative).
    public func timestamp(fromEpoch epoch: Double) -> Timestamp { epoch - epochAtOrigin }
}

/// The real clock: `ContinuousClock` from the moment it is made.
public struct SystemNodeClock: NodeClock {
    private let clock = ContinuousClock()
    private let origin: ContinuousClock.Instant
    public let epochAtOrigin: Double

    public init() {
        origin = clock.now
        epochAtOrigin = Date().timeIntervalSince1970
    }

    public var now: Timestamp {
        let d = origin.duration(to: clock.now)
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    public func sleep(until deadline: Timestamp) async throws {
        let instant = origin.advanced(by: .nanoseconds(Int64(max(0, deadline) * 1e9)))
        try await Task.sleep(until: instant, clock: clock)
    }
}
