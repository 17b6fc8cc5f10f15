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

    /// The street: a stretch of pavement outside, 13 to 16 m from the two or three nearest boxes,
    /// where a device stands and wanders (issue 23: "a tag 13–16 m from both boxes"). Two boxes:
    /// 14.0–15.7 m from A and B; three in a line: 13.0 m from B, 14.8–15.8 m from A and C (three
    /// nodes 13–16 m away); the triangle: 13.0–14.8 m from A and B, 19.9–20.6 m from C.
    var street: (from: Position, to: Position) {
        switch name {
        case Self.line.name: (Position(x: Self.spacing - 1, y: 13), Position(x: Self.spacing + 1, y: 13))
        case Self.triangle.name: (Position(x: 1, y: -13), Position(x: Self.spacing - 1, y: -13))
        default: (Position(x: 1, y: 14), Position(x: Self.spacing - 1, y: 14))
        }
    }

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
    /// Out in the street, 13–16 m from the nearest boxes (``Layout/street``), standing and
    /// wandering: after standing in room A (it walks out) or from the start (from nowhere).
    case street
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
    /// Street traces: when the device leaves room A (nil: it is in the street from the start) and
    /// when it reaches the street.
    var leave: Double?
    var streetStart = 0.0

    /// What each box hears of the device: received advertisements, in time order.
    var samples: [[Sample]] = []

    static let device = "device"

    /// Fills `samples` from the radio model, one link per box
    /// (``receptions(of:along:by:duration:silentFrom:radio:installation:realisticLabel:rng:)``,
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
        return Trace(kind: .walk, label: "walk", layout: layout, duration: t, trajectory: try! Trajectory(waypoints: waypoints),
                     moves: moves)
    }

    /// The street scenario: from room A (standing 10 % of the way to B for `roomTime`, then walking
    /// out at 1.4 m/s) or from nowhere (in the street from the start), then `scored` seconds in the
    /// street: standing 20–90 s at a random point of it, walking at 1 m/s to another, and so on.
    static func street(_ layout: Layout, fromRoom: Bool, scored: Double, rng: inout SeededGenerator) -> Trace {
        let (p, q) = layout.street
        func along(_ f: Double) -> Position { Position(x: p.x + (q.x - p.x) * f, y: p.y + (q.y - p.y) * f) }
        var here = along(rng.uniform(0...1))
        var waypoints: [Waypoint] = []
        var t = 0.0
        var leave: Double?
        if fromRoom {
            let room = layout.between(moveEnd)
            t = streetRoomTime + rng.uniform(0...1)
            waypoints = [Waypoint(time: 0, position: room), Waypoint(time: t, position: room)]
            leave = t
            t += room.distance(to: here) / 1.4
        }
        let start = t
        waypoints.append(Waypoint(time: t, position: here))
        let end = start + scored
        while t < end {
            t += rng.uniform(20...90)
            waypoints.append(Waypoint(time: t, position: here))
            let next = along(rng.uniform(0...1))
            t += max(0.1, here.distance(to: next) / walkSpeed)
            waypoints.append(Waypoint(time: t, position: next))
            here = next
        }
        return Trace(kind: .street, label: fromRoom ? "street from room" : "street from nowhere", layout: layout, duration: end,
                     trajectory: try! Trajectory(waypoints: waypoints), point: fromRoom ? "from room" : "from nowhere",
                     leave: leave, streetStart: start)
    }

    /// How long the device stands in room A before it goes out into the street.
    static let streetRoomTime = 120.0

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
        return Trace(kind: .teleport, label: "teleport", layout: layout, duration: moves[1].end,
                     trajectory: try! Trajectory(waypoints: waypoints), moves: moves)
    }
}
