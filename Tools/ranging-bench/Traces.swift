import BlueZSim
import ProximityBenchmarking
import ProximityCore

enum TraceKind: String, Codable, Sendable {
    /// (a) walk in from 15 m to 0.3 m and out again at 1 m/s, dwelling in each zone.
    case walk
    /// (b) standing still on a zone boundary.
    case boundary
    /// (c) teleport-like moves between zone centres.
    case steps
    /// (d) the walker's adapter goes silent.
    case departure
}

/// One simulated trace: what the listener at the origin hears from the walker, and the truth.
struct Trace: Sendable {
    var kind: TraceKind
    var label: String
    var duration: Double
    var trajectory: Trajectory
    /// The walker stops advertising here (departure traces).
    var silentFrom: Double?
    /// Teleport times (step traces).
    var changeTimes: [Double] = []
    var samples: [Sample] = []

    static let listener = Position(x: 0, y: 0)

    /// The true distance at `t`.
    func distance(at t: Double) -> Double {
        trajectory.position(at: t).distance(to: Self.listener)
    }

    /// Fills `samples` from the simulator's radio model
    /// (``receptions(of:along:by:duration:silentFrom:radio:installation:realisticLabel:rng:)``,
    /// the air's sampling): what the listener at the origin hears of the walker until it falls
    /// silent. Virtual time only. On the realistic preset the walker's and the listener's device
    /// offsets and the link's field come from `rng`'s seed too.
    mutating func simulate(_ radio: RadioModel, rng: SeededGenerator) {
        samples = receptions(of: "walker", along: trajectory, by: [("listener", Self.listener)], duration: duration,
                             silentFrom: silentFrom, radio: radio, installation: rng.seed, rng: rng)[0]
    }
}

/// The scenario set. Every random choice (start phases, change times) comes from the seed, so a
/// seed gives the same traces for every σ and pipeline: the comparison is paired.
enum TraceSet {
    static let walkSpeed = 1.0
    static let zoneDwell = 20.0
    static let boundaryDuration = 200.0
    static let boundaryWarmup = 20.0
    static let stepHold = 30.0
    /// Zone centres for the step scenario (immediate, near, far).
    static let immediateCentre = 0.25, nearCentre = 1.5, farCentre = 6.0
    static let stepSequence = [farCentre, nearCentre, farCentre, immediateCentre, nearCentre, immediateCentre, farCentre]
    static let departurePresence = 40.0
    static let departureAfter = 25.0
    static let departureDistances = [immediateCentre, nearCentre, farCentre]

    static func point(_ d: Double) -> Position { Position(x: d, y: 0) }

    /// (a) 15 m → 1.5 m → 0.3 m → 15 m at 1 m/s, dwelling `zoneDwell` at 15, 1.5 and 0.3 m and at
    /// the end.
    static func walk(rng: inout SeededGenerator) -> Trace {
        var t = rng.uniform(0...1)
        var waypoints = [Waypoint(time: 0, position: point(15))]
        func go(to d: Double, from: Double) {
            t += abs(from - d) / walkSpeed
            waypoints.append(Waypoint(time: t, position: point(d)))
        }
        func dwell() {
            t += zoneDwell
            waypoints.append(Waypoint(time: t, position: waypoints.last!.position))
        }
        t += zoneDwell
        waypoints.append(Waypoint(time: t, position: point(15)))
        go(to: 1.5, from: 15)
        dwell()
        go(to: 0.3, from: 1.5)
        dwell()
        go(to: 15, from: 0.3)
        dwell()
        return Trace(kind: .walk, label: "walk", duration: t, trajectory: try! Trajectory(waypoints: waypoints))
    }

    /// (b) standing still at `distance` (a boundary) for `boundaryDuration`.
    static func boundary(_ distance: Double) -> Trace {
        Trace(kind: .boundary, label: "stand \(format(distance, 3)) m", duration: boundaryDuration,
              trajectory: Trajectory(fixed: point(distance)))
    }

    /// (c) teleports between zone centres every `stepHold` seconds, each at a random phase against
    /// the 1 s ranging tick.
    static func steps(rng: inout SeededGenerator) -> Trace {
        var waypoints: [Waypoint] = [Waypoint(time: 0, position: point(stepSequence[0]))]
        var changes: [Double] = []
        for (i, d) in stepSequence.enumerated().dropFirst() {
            let change = Double(i) * stepHold + rng.uniform(0...1)
            waypoints.append(Waypoint(time: change, position: point(stepSequence[i - 1])))
            waypoints.append(Waypoint(time: change + 0.001, position: point(d)))
            changes.append(change)
        }
        return Trace(kind: .steps, label: "steps", duration: Double(stepSequence.count) * stepHold + 1,
                     trajectory: try! Trajectory(waypoints: waypoints), changeTimes: changes)
    }

    /// (d) present at `distance` for about `departurePresence` seconds, then silent.
    static func departure(_ distance: Double, rng: inout SeededGenerator) -> Trace {
        let off = departurePresence + rng.uniform(0...1)
        return Trace(kind: .departure, label: "depart from \(format(distance, 2)) m", duration: off + departureAfter,
                     trajectory: Trajectory(fixed: point(distance)), silentFrom: off)
    }
}
