import BlueZSim
import Foundation
import ProximityBenchmarking
import ProximityCore

/// Where the nodes are: one box (a node, a room) per position.
struct Layout: Sendable {
    var name: String
    var boxes: [(name: String, position: Position)]

    static let spacing = 8.0

    static let two = Layout(name: "2 boxes", boxes: [("A", Position(x: 0, y: 0)), ("B", Position(x: spacing, y: 0))])
    static let line = Layout(name: "3 in a line", boxes: [
        ("A", Position(x: 0, y: 0)), ("B", Position(x: spacing, y: 0)), ("C", Position(x: 2 * spacing, y: 0)),
    ])
    static let triangle = Layout(name: "3 in a triangle", boxes: [
        ("A", Position(x: 0, y: 0)), ("B", Position(x: spacing, y: 0)),
        ("C", Position(x: spacing / 2, y: spacing * 3.0.squareRoot() / 2)),
    ])
    static let all = [two, line, triangle]

    var a: Position { boxes[0].position }
    var b: Position { boxes[1].position }

    /// The point `fraction` of the way from box A to box B.
    func between(_ fraction: Double) -> Position {
        Position(x: a.x + (b.x - a.x) * fraction, y: a.y + (b.y - a.y) * fraction)
    }

    /// The centroid of the boxes (for three, equidistant from all).
    var centre: Position {
        let n = Double(boxes.count)
        return Position(x: boxes.map(\.position.x).reduce(0, +) / n, y: boxes.map(\.position.y).reduce(0, +) / n)
    }

    /// The boxes nearest to `p` (several when equidistant within 1 cm).
    func nearest(to p: Position) -> Set<String> {
        let d = boxes.map { ($0.name, $0.position.distance(to: p)) }
        let m = d.map(\.1).min()!
        return Set(d.filter { $0.1 - m < 0.01 }.map(\.0))
    }
}

enum TraceKind: String, Codable, Sendable {
    /// Standing still at one point for the whole trace.
    case stand
    /// Walk from near A to near B at 1 m/s and back, holding at each end.
    case walk
    /// Teleport from near A to near B and back, holding at each end.
    case teleport
}

/// A move whose lag is measured: at `start` the device leaves for `target`'s room; `reference` is
/// when it crosses the midpoint (walk) or teleports.
struct Move: Sendable {
    var start: Double
    var reference: Double
    var target: String
    var origin: String
    /// The move is scored until here (the next move's start, or the end).
    var end: Double
}

/// One simulated trace of one device in one layout.
struct Trace: Sendable {
    var kind: TraceKind
    var label: String
    var layout: Layout
    var duration: Double
    var trajectory: Trajectory
    /// Stand traces: which point (a fraction of A→B, or the centre) and whether it is a midpoint.
    var point: String = ""
    var isMidpoint = false
    var moves: [Move] = []

    /// What each box hears of the device: received advertisements, in time order.
    var samples: [[Sample]] = []

    static let device = "device"

    /// Fills `samples` from the radio model, one link per box (``receptions(of:along:by:duration:silentFrom:radio:installation:realisticLabel:rng:)``,
    /// the air's sampling): advertising events on one schedule, the device's, each lost or
    /// received per link. `installation` seeds what is fixed in a home (the device's and the box's
    /// offsets, each link's field and its realistic stream, named after the trace): the same for
    /// every trace of a seed; `rng` the rest. Virtual time only.
    mutating func simulate(_ radio: RadioModel, installation: UInt64, rng: SeededGenerator) {
        samples = receptions(of: Self.device, along: trajectory, by: layout.boxes, duration: duration, radio: radio,
                             installation: installation, realisticLabel: "\(label) ", rng: rng)
    }
}

/// The scenario set. Every random choice comes from the seed, so a seed gives the same traces to
/// every rule: the comparison is paired.
enum TraceSet {
    static let walkSpeed = 1.0
    /// Where the moves start and end: this far along A→B, and as far from B.
    static let moveEnd = 0.1
    /// Holds before, between and after the moves (the first one is the warm-up).
    static let hold = 60.0
    /// Stand traces: the warm-up (not scored) and the scored time after it.
    static let warmup = 60.0
    static let standFractions = [0.1, 0.25, 0.4, 0.5]

    static func stand(_ layout: Layout, fraction: Double, scored: Double) -> Trace {
        Trace(kind: .stand, label: "stand \(format(fraction * 100, 0)) %", layout: layout, duration: warmup + scored,
              trajectory: Trajectory(fixed: layout.between(fraction)), point: "\(format(fraction * 100, 0)) %",
              isMidpoint: abs(fraction - 0.5) < 1e-9)
    }

    static func centre(_ layout: Layout, scored: Double) -> Trace {
        Trace(kind: .stand, label: "stand centre", layout: layout, duration: warmup + scored,
              trajectory: Trajectory(fixed: layout.centre), point: "centre", isMidpoint: true)
    }

    /// Hold near A, walk to near B at 1 m/s, hold, walk back, hold. The start is at a random phase.
    static func walk(_ layout: Layout, rng: inout SeededGenerator) -> Trace {
        let from = layout.between(moveEnd), to = layout.between(1 - moveEnd)
        let length = from.distance(to: to)
        var t = hold + rng.uniform(0...1)
        var waypoints = [Waypoint(time: 0, position: from), Waypoint(time: t, position: from)]
        var moves: [Move] = []
        let (a, b) = (layout.boxes[0].name, layout.boxes[1].name)
        for (target, origin, destination) in [(b, a, to), (a, b, from)] {
            let start = t
            t += length / walkSpeed
            waypoints.append(Waypoint(time: t, position: destination))
            t += hold
            waypoints.append(Waypoint(time: t, position: destination))
            moves.append(Move(start: start, reference: start + length / 2 / walkSpeed, target: target, origin: origin, end: t))
        }
        return Trace(kind: .walk, label: "walk", layout: layout, duration: t, trajectory: try! Trajectory(waypoints: waypoints), moves: moves)
    }

    /// Hold near A, teleport to near B, hold, teleport back, hold.
    static func teleport(_ layout: Layout, rng: inout SeededGenerator) -> Trace {
        let from = layout.between(moveEnd), to = layout.between(1 - moveEnd)
        var t = hold + rng.uniform(0...1)
        var waypoints = [Waypoint(time: 0, position: from)]
        var moves: [Move] = []
        let (a, b) = (layout.boxes[0].name, layout.boxes[1].name)
        var here = from
        for (target, origin, destination) in [(b, a, to), (a, b, from)] {
            waypoints.append(Waypoint(time: t, position: here))
            waypoints.append(Waypoint(time: t + 0.001, position: destination))
            moves.append(Move(start: t, reference: t, target: target, origin: origin, end: t + hold))
            here = destination
            t += hold + (target == b ? rng.uniform(0...1) : 0)
        }
        moves[0].end = moves[1].start
        return Trace(kind: .teleport, label: "teleport", layout: layout, duration: moves[1].end, trajectory: try! Trajectory(waypoints: waypoints),
                     moves: moves)
    }
}
