/// What a strategy sees of a target at a report.
public struct AlertObservation: Sendable, Hashable {
    public var peer: PeerID
    public var proximity: Proximity
    public var distance: Double
    /// When the target was last heard.
    public var lastSeen: Timestamp

    public init(peer: PeerID, proximity: Proximity, distance: Double, lastSeen: Timestamp) {
        self.peer = peer
        self.proximity = proximity
        self.distance = distance
        self.lastSeen = lastSeen
    }
}

/// A strategy decides when an alert's condition holds for a target (seed `003_…`): it has a key,
/// a parameter type of its own (kept per target), an `update` with the latest observation, and
/// `isConditionValid`. `isReadyForAction` is the engine's: condition valid and waiting.
public protocol AlertStrategy: Sendable {
    associatedtype Parameter: Sendable
    /// The key an alert names it by.
    var key: String { get }
    /// A target's parameter when it is first seen.
    func makeParameter() -> Parameter
    /// Called at every report, before ``isConditionValid(_:alert:at:)``; `observation` is nil
    /// when the target is not in the report.
    func update(_ parameter: inout Parameter, with observation: AlertObservation?, alert: AlertParameters, at t: Timestamp)
    func isConditionValid(_ parameter: Parameter, alert: AlertParameters, at t: Timestamp) -> Bool
}

/// The default strategies: the target's zone against the alert's range, by its comparison.
public struct RangeStrategy: AlertStrategy {
    public struct Parameter: Sendable, Hashable { public var proximity: Proximity = .unknown }
    public init() {}
    public var key: String { "range" }
    public func makeParameter() -> Parameter { Parameter() }
    public func update(_ p: inout Parameter, with observation: AlertObservation?, alert: AlertParameters, at t: Timestamp) {
        p.proximity = observation?.proximity ?? .unknown
    }
    public func isConditionValid(_ p: Parameter, alert: AlertParameters, at t: Timestamp) -> Bool {
        alert.comparison.holds(p.proximity, range: alert.range)
    }
}

/// The seed's time strategy (`003_…`): valid once the target has been seen continuously for
/// `dwell` seconds; a gap of more than `gap` seconds between detections starts a new detection.
/// Detection is the alert's range condition, so it combines with `=`, `<=` and `>=`.
public struct TimeStrategy: AlertStrategy {
    public struct Parameter: Sendable, Hashable {
        /// When the current detection may show the alert.
        public var timeToShowAlert: Timestamp = .infinity
        /// When the target was last detected (in range).
        public var lastDetectionTime: Timestamp = -.infinity
    }
    public var dwell: Double
    public var gap: Double
    public static let defaultKey = "time"

    public init(dwell: Double = 60, gap: Double = 3) {
        self.dwell = dwell
        self.gap = gap
    }
    public var key: String { Self.defaultKey }
    public func makeParameter() -> Parameter { Parameter() }
    public func update(_ p: inout Parameter, with observation: AlertObservation?, alert: AlertParameters, at t: Timestamp) {
        guard let observation, alert.comparison.holds(observation.proximity, range: alert.range) else { return }
        if p.lastDetectionTime + gap < t { p.timeToShowAlert = t + dwell }
        p.lastDetectionTime = t
    }
    public func isConditionValid(_ p: Parameter, alert: AlertParameters, at t: Timestamp) -> Bool {
        // Valid while the current detection goes on (no gap yet) and has lasted the dwell.
        p.timeToShowAlert <= t && t - p.lastDetectionTime <= gap
    }
}

/// A strategy of any type, with its parameters type-erased, as the engine keeps them.
public struct AnyAlertStrategy: Sendable {
    public let key: String
    let make: @Sendable () -> any Sendable
    let updateBox: @Sendable (inout any Sendable, AlertObservation?, AlertParameters, Timestamp) -> Void
    let valid: @Sendable (any Sendable, AlertParameters, Timestamp) -> Bool
    /// Whether the strategy has no opinion yet on a target (an outside strategy before its first
    /// answer): the target keeps the condition it had.
    let undecided: @Sendable (any Sendable) -> Bool

    public init<S: AlertStrategy>(_ strategy: S) {
        key = strategy.key
        make = { strategy.makeParameter() }
        updateBox = { box, observation, alert, t in
            guard var p = box as? S.Parameter else { box = strategy.makeParameter(); return }
            strategy.update(&p, with: observation, alert: alert, at: t)
            box = p
        }
        valid = { box, alert, t in
            guard let p = box as? S.Parameter else { return false }
            return strategy.isConditionValid(p, alert: alert, at: t)
        }
        undecided = { box in (box as? Bool?) == .some(nil) }
    }
}
