/// How near a peer is: the seed library's `INDetectorRange`, spelt as BlueZ spells enumerations.
public enum Proximity: String, Sendable, Hashable, CaseIterable, Comparable {
    case immediate, near, far, unknown

    /// immediate < near < far < unknown.
    public static func < (a: Proximity, b: Proximity) -> Bool { a.rank < b.rank }
    var rank: Int {
        switch self {
        case .immediate: 0
        case .near: 1
        case .far: 2
        case .unknown: 3
        }
    }
}

/// Zone boundaries in metres: immediate below `immediate`, near below `near`, far beyond.
public struct ZoneThresholds: Sendable, Hashable {
    public var immediate: Double
    public var near: Double

    public init(immediate: Double = 0.5, near: Double = 3.0) {
        precondition(immediate > 0 && near > immediate, "zone thresholds must satisfy 0 < immediate < near")
        self.immediate = immediate
        self.near = near
    }

    /// Why `immediate` and `near` cannot be zone boundaries, or nil: both finite and above 0,
    /// `immediate` below `near`, at most 1 km.
    public static func problem(immediate: Double, near: Double) -> String? {
        for (name, value) in [("immediate", immediate), ("near", near)] where !(value.isFinite && value > 0 && value <= 1000) {
            return "\(name) must be a number of metres above 0 and at most 1000, not \(value)"
        }
        guard immediate < near else { return "immediate (\(immediate) m) must be below near (\(near) m)" }
        return nil
    }

    /// The zone a distance falls in, with no hysteresis.
    public func zone(forDistance d: Double) -> Proximity {
        if d < immediate { return .immediate }
        if d < near { return .near }
        return .far
    }
}

/// Zone decisions with hysteresis, so a peer standing on a boundary does not flap.
///
/// A change of zone needs two things: the distance must pass the boundary by a margin
/// (`margin`, a fraction of the boundary: with 0.125 a 3 m boundary is crossed outwards above
/// 3.375 m and inwards below 2.625 m), and the new zone must hold for `dwell` seconds (0: at once).
/// The first reading decides at once. The defaults are the node's (docs/ranging.md): with its
/// filter, a dwell only added its own length to every reaction.
public struct ZoneTracker: Sendable, Hashable {
    public var thresholds: ZoneThresholds
    public var margin: Double
    public var dwell: Double
    public private(set) var zone: Proximity = .unknown
    private var candidate: Proximity?
    private var candidateSince: Timestamp = 0

    public init(thresholds: ZoneThresholds = ZoneThresholds(), margin: Double = 0.125, dwell: Double = 0) {
        self.thresholds = thresholds
        self.margin = margin
        self.dwell = dwell
    }

    /// The zone for `distance` seen from the current one: each boundary is pushed away from the
    /// side the current zone is on, by `margin` of its value.
    func target(forDistance d: Double) -> Proximity {
        guard zone != .unknown else { return thresholds.zone(forDistance: d) }
        let immediate = thresholds.immediate * (zone == .immediate ? 1 + margin : 1 - margin)
        let near = thresholds.near * (zone <= .near ? 1 + margin : 1 - margin)
        if d < immediate { return .immediate }
        if d < near { return .near }
        return .far
    }

    /// Feeds one distance estimate; returns the (possibly new) zone.
    @discardableResult
    public mutating func update(distance: Double, at t: Timestamp) -> Proximity {
        let target = target(forDistance: distance)
        if zone == .unknown {
            zone = target
            candidate = nil
            return zone
        }
        if target == zone {
            candidate = nil
            return zone
        }
        if candidate != target {
            candidate = target
            candidateSince = t
        }
        if t - candidateSince >= dwell {
            zone = target
            candidate = nil
        }
        return zone
    }

    /// Forgets the zone (the peer went silent).
    public mutating func reset() {
        zone = .unknown
        candidate = nil
    }
}
