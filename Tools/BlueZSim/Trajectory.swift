/// One timed point of a trajectory.
public struct Waypoint: Sendable, Hashable {
    /// Seconds since the scenario started.
    public var time: SimTime
    public var position: Position

    public init(time: SimTime, position: Position) {
        self.time = time
        self.position = position
    }
}

/// Where a box or beacon is over time: a fixed point, or timed waypoints joined by straight lines
/// walked at constant speed. Before the first waypoint it waits at the first; after the last it
/// stays at the last.
public struct Trajectory: Sendable, Hashable {
    /// At least one; times strictly increasing. A fixed trajectory is one waypoint at t = 0.
    public let waypoints: [Waypoint]

    public init(fixed: Position) {
        waypoints = [Waypoint(time: 0, position: fixed)]
    }

    /// Throws when there is no waypoint, a time or coordinate is not finite, or the times do not
    /// strictly increase. Error paths are relative (`waypoints[2].t`); the scenario parser
    /// prefixes the box's path.
    public init(waypoints: [Waypoint]) throws(ScenarioError) {
        guard !waypoints.isEmpty else {
            throw ScenarioError(path: "waypoints", message: "needs at least one waypoint")
        }
        for (i, waypoint) in waypoints.enumerated() {
            guard waypoint.time.isFinite else {
                throw ScenarioError(path: "waypoints[\(i)].t", message: "must be a finite number of seconds")
            }
            let p = waypoint.position
            guard p.x.isFinite, p.y.isFinite, p.z.isFinite else {
                throw ScenarioError(path: "waypoints[\(i)].at", message: "coordinates must be finite")
            }
            if i > 0, waypoint.time <= waypoints[i - 1].time {
                throw ScenarioError(
                    path: "waypoints[\(i)].t",
                    message: "times must strictly increase: \(ScenarioError.show(waypoint.time)) s is not after " +
                        "waypoints[\(i - 1)].t = \(ScenarioError.show(waypoints[i - 1].time)) s")
            }
        }
        self.waypoints = waypoints
    }

    /// True for a single point.
    public var isFixed: Bool { waypoints.count == 1 }

    /// The time of the last waypoint: the trajectory does not change after it.
    public var endTime: SimTime { waypoints[waypoints.count - 1].time }

    /// The position at `t`, interpolated linearly between the waypoints around it; clamped to the
    /// first before the first waypoint and to the last after the last.
    public func position(at t: SimTime) -> Position {
        let first = waypoints[0], last = waypoints[waypoints.count - 1]
        guard t > first.time else { return first.position }  // also catches NaN
        guard t < last.time else { return last.position }
        // The segment [a, b] with waypoints[a].time <= t < waypoints[b].time, by binary search.
        var lo = 0, hi = waypoints.count - 1
        while hi - lo > 1 {
            let mid = (lo + hi) / 2
            if waypoints[mid].time <= t { lo = mid } else { hi = mid }
        }
        let a = waypoints[lo], b = waypoints[hi]
        let f = (t - a.time) / (b.time - a.time)
        return Position(
            x: a.position.x + (b.position.x - a.position.x) * f,
            y: a.position.y + (b.position.y - a.position.y) * f,
            z: a.position.z + (b.position.z - a.position.z) * f)
    }
}
