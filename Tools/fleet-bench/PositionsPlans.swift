import BlueZSim
import Foundation
import ProximityBenchmarking
import ProximityCore

/// A floor plan of the positions benchmark (`fleet-bench --positions`): the plan the fleet is
/// given, and the doors people walk through between its rooms (the benchmark's paths go from
/// door to door, so a walk stays inside the rooms and crosses walls only at doors).
struct PositionsPlan: Sendable {
    var name: String
    var plan: FloorPlan
    /// Room index pairs and the door's point between them.
    var doors: [(a: Int, b: Int, at: PlanPoint)]

    /// The height a device is carried at (a phone in a pocket, a tag on a lanyard), metres: the
    /// grid's own assumption (``PositioningGrid/deviceHeight``) on a plan without floors.
    static let deviceHeight = 1.0

    static func rect(_ name: String, _ x0: Double, _ y0: Double, _ x1: Double, _ y1: Double) -> FloorPlan.Room {
        .init(name: name, floor: 0,
              polygon: [PlanPoint(x: x0, y: y0), PlanPoint(x: x1, y: y0), PlanPoint(x: x1, y: y1), PlanPoint(x: x0, y: y1)])
    }

    static func node(_ name: String, _ x: Double, _ y: Double, _ z: Double) -> FloorPlan.Node {
        .init(name: name, position: PlanPoint(x: x, y: y, z: z))
    }

    func room(named name: String) -> Int { plan.rooms.firstIndex { $0.name == name }! }

    /// A five-room house, 12 × 9 m, with four nodes: living room and kitchen along the front, a
    /// bedroom, a hall and a study behind; no node in the hall, the nodes on shelves (1.2–1.8 m)
    /// off the rooms' centres, as people put them.
    static func house(exponent: Double) -> PositionsPlan {
        let plan = FloorPlan(
            nodes: [node("living", 1.0, 3.5, 1.2), node("kitchen", 11.2, 0.8, 1.5), node("bedroom", 1.5, 8.4, 1.8),
                    node("study", 10.5, 7.0, 1.2)],
            rooms: [rect("living", 0, 0, 6, 5), rect("kitchen", 6, 0, 12, 5), rect("bedroom", 0, 5, 5, 9), rect("hall", 5, 5, 7, 9),
                    rect("study", 7, 5, 12, 9)],
            pathLossExponent: exponent)
        var p = PositionsPlan(name: "house", plan: plan, doors: [])
        p.doors = [(p.room(named: "living"), p.room(named: "kitchen"), PlanPoint(x: 6, y: 2.5)),
                   (p.room(named: "living"), p.room(named: "hall"), PlanPoint(x: 5.5, y: 5)),
                   (p.room(named: "kitchen"), p.room(named: "hall"), PlanPoint(x: 6.5, y: 5)),
                   (p.room(named: "hall"), p.room(named: "bedroom"), PlanPoint(x: 5, y: 7.5)),
                   (p.room(named: "hall"), p.room(named: "study"), PlanPoint(x: 7, y: 7.5))]
        return p
    }

    /// A 20 × 18 m office with twelve nodes: an open-plan area (four nodes), two meeting rooms, a
    /// corridor (two nodes), a kitchen and three offices along the back.
    static func office(exponent: Double) -> PositionsPlan {
        let plan = FloorPlan(
            nodes: [node("open-1", 3.5, 3, 2.2), node("open-2", 10.5, 3, 2.2), node("open-3", 3.5, 9, 2.2), node("open-4", 10.5, 9, 2.2),
                    node("meeting-1", 18.5, 1.5, 1.5), node("meeting-2", 17, 10.5, 1.5), node("corridor-w", 6, 13, 2.4),
                    node("corridor-e", 16, 13, 2.4), node("kitchen", 1, 17, 1.5), node("office-a", 8, 17.2, 1.2),
                    node("office-b", 12.5, 15.5, 1.2), node("office-c", 19, 16, 1.8)],
            rooms: [rect("open-plan", 0, 0, 14, 12), rect("meeting-1", 14, 0, 20, 6), rect("meeting-2", 14, 6, 20, 12),
                    rect("corridor", 0, 12, 20, 14), rect("kitchen", 0, 14, 6, 18), rect("office-a", 6, 14, 10, 18),
                    rect("office-b", 10, 14, 14, 18), rect("office-c", 14, 14, 20, 18)],
            pathLossExponent: exponent)
        var p = PositionsPlan(name: "office", plan: plan, doors: [])
        let open = p.room(named: "open-plan"), corridor = p.room(named: "corridor")
        p.doors = [(open, p.room(named: "meeting-1"), PlanPoint(x: 14, y: 3)), (open, p.room(named: "meeting-2"), PlanPoint(x: 14, y: 9)),
                   (open, corridor, PlanPoint(x: 4, y: 12)), (open, corridor, PlanPoint(x: 11, y: 12)),
                   (corridor, p.room(named: "kitchen"), PlanPoint(x: 3, y: 14)),
                   (corridor, p.room(named: "office-a"), PlanPoint(x: 8, y: 14)),
                   (corridor, p.room(named: "office-b"), PlanPoint(x: 12, y: 14)),
                   (corridor, p.room(named: "office-c"), PlanPoint(x: 17, y: 14))]
        return p
    }

    /// A hospital corridor, 48 × 2.4 m, in six 8 m sections (rooms, for the room figures), with
    /// five nodes along it every 10 m, on alternate walls at 2.2 m: long and thin, so positions
    /// across it say little and along it everything.
    static func corridor(exponent: Double) -> PositionsPlan {
        let sections = (0 ..< 6).map { rect("section-\($0 + 1)", Double($0) * 8, 0, Double($0 + 1) * 8, 2.4) }
        let nodes = (0 ..< 5).map { node("corridor-\($0 + 1)", 4 + Double($0) * 10, $0 % 2 == 0 ? 0.2 : 2.2, 2.2) }
        let plan = FloorPlan(nodes: nodes, rooms: sections, pathLossExponent: exponent)
        var p = PositionsPlan(name: "corridor", plan: plan, doors: [])
        p.doors = (0 ..< 5).map { ($0, $0 + 1, PlanPoint(x: Double($0 + 1) * 8, y: 1.2)) }
        return p
    }

    /// The rooms' path from `a` to `b` (breadth first over the doors), as the doors' points.
    func route(from a: Int, to b: Int) -> [PlanPoint] {
        guard a != b else { return [] }
        var previous: [Int: (room: Int, door: PlanPoint)] = [a: (a, PlanPoint(x: 0, y: 0))]
        var queue = [a]
        while !queue.isEmpty {
            let r = queue.removeFirst()
            if r == b { break }
            for d in doors {
                for (from, to) in [(d.a, d.b), (d.b, d.a)] where from == r && previous[to] == nil {
                    previous[to] = (r, d.at)
                    queue.append(to)
                }
            }
        }
        var points: [PlanPoint] = []
        var r = b
        while r != a, let p = previous[r] {
            points.insert(p.door, at: 0)
            r = p.room
        }
        return points
    }

    /// A random point in room `room`, at least `margin` metres inside its bounding rectangle
    /// (the benchmark's rooms are rectangles).
    func spot(in room: Int, margin: Double = 0.4, rng: inout SeededGenerator) -> PlanPoint {
        let p = plan.rooms[room].polygon
        let xs = p.map(\.x), ys = p.map(\.y)
        let mx = min(margin, (xs.max()! - xs.min()!) / 3), my = min(margin, (ys.max()! - ys.min()!) / 3)
        return PlanPoint(x: rng.uniform((xs.min()! + mx) ... (xs.max()! - mx)), y: rng.uniform((ys.min()! + my) ... (ys.max()! - my)),
                         z: Self.deviceHeight)
    }
}

/// How a benchmark device spends its time.
enum PositionsDeviceKind: String, CaseIterable, Sendable {
    /// Stands 10–60 s, walks to a spot in another room (or, one time in four, across the same one),
    /// and so on: a person moving about.
    case walker
    /// Stands 2–6 minutes at a time (a desk, a sofa, a tag left on a trolley), then moves.
    case sitter

    var stand: ClosedRange<Double> {
        switch self {
        case .walker: 10 ... 60
        case .sitter: 120 ... 360
        }
    }
}

extension PositionsPlan {
    /// A device's path for `duration` seconds: standing and walking (0.7–1.3 m/s) between rooms
    /// through the doors, from a random spot.
    func path(kind: PositionsDeviceKind, duration: Double, rng: inout SeededGenerator) -> Trajectory {
        var room = Int(rng.next() % UInt64(plan.rooms.count))
        var here = spot(in: room, rng: &rng)
        var t = 0.0
        var waypoints = [Waypoint(time: 0, position: Position(here))]
        while t < duration {
            t += rng.uniform(kind.stand)
            waypoints.append(Waypoint(time: t, position: Position(here)))
            let target = rng.chance(0.25) ? room : Int(rng.next() % UInt64(plan.rooms.count))
            let next = spot(in: target, rng: &rng)
            let speed = rng.uniform(0.7 ... 1.3)
            for p in route(from: room, to: target) + [next] {
                let point = PlanPoint(x: p.x, y: p.y, z: Self.deviceHeight)
                t += max(0.05, here.distance2D(to: point) / speed)
                waypoints.append(Waypoint(time: t, position: Position(point)))
                here = point
            }
            room = target
        }
        return try! Trajectory(waypoints: waypoints)
    }
}

extension Position {
    init(_ p: PlanPoint) { self.init(x: p.x, y: p.y, z: p.z) }
}

extension PlanPoint {
    init(_ p: Position) { self.init(x: p.x, y: p.y, z: p.z) }
}
