import Foundation

/// A point on a floor plan, metres.
public struct PlanPoint: Sendable, Hashable, Codable {
    public var x: Double
    public var y: Double
    public var z: Double

    public init(x: Double, y: Double, z: Double = 0) {
        self.x = x
        self.y = y
        self.z = z
    }

    public func distance(to other: PlanPoint) -> Double {
        let dx = x - other.x, dy = y - other.y, dz = z - other.z
        return (dx * dx + dy * dy + dz * dz).squareRoot()
    }

    public func distance2D(to other: PlanPoint) -> Double {
        let dx = x - other.x, dy = y - other.y
        return (dx * dx + dy * dy).squareRoot()
    }
}

/// Where the fleet's nodes are and what the rooms are (`--plan FILE`, `docs/positioning.md`):
/// floors by height, nodes at known positions, rooms as polygons on a floor. Pure and checked
/// (``problems``); the file's reader (in ProximityFleet) builds it with positions for its errors.
public struct FloorPlan: Sendable, Hashable {
    public struct Floor: Sendable, Hashable {
        public var name: String
        /// The heights it spans, metres: a point is on the first floor whose range holds its z.
        public var z: ClosedRange<Double>

        public init(name: String, z: ClosedRange<Double>) {
            self.name = name
            self.z = z
        }
    }

    public struct Node: Sendable, Hashable {
        /// The node's name, as it publishes (`proximityd/<name>`).
        public var name: String
        public var position: PlanPoint
        /// Fitted calibration (`calibration:` keys): dB added to what this node receives, and
        /// this node's own RSSI at 1 m as others hear it. Nil: not calibrated.
        public var rxOffset: Double?
        public var txPower: Double?

        public init(name: String, position: PlanPoint, rxOffset: Double? = nil, txPower: Double? = nil) {
            self.name = name
            self.position = position
            self.rxOffset = rxOffset
            self.txPower = txPower
        }
    }

    public struct Room: Sendable, Hashable {
        public var name: String
        /// The index of its floor in ``FloorPlan/floors``.
        public var floor: Int
        /// Its outline, in order, not closed (the last point joins the first).
        public var polygon: [PlanPoint]

        public init(name: String, floor: Int, polygon: [PlanPoint]) {
            self.name = name
            self.floor = floor
            self.polygon = polygon
        }

        /// Whether (x, y) is inside the outline (even–odd rule; a point on an edge may go either way).
        public func contains(x: Double, y: Double) -> Bool {
            var inside = false
            var j = polygon.count - 1
            for i in polygon.indices {
                let a = polygon[i], b = polygon[j]
                if (a.y > y) != (b.y > y), x < (b.x - a.x) * (y - a.y) / (b.y - a.y) + a.x { inside.toggle() }
                j = i
            }
            return inside
        }

        public var area: Double {
            var sum = 0.0
            var j = polygon.count - 1
            for i in polygon.indices {
                sum += (polygon[j].x + polygon[i].x) * (polygon[j].y - polygon[i].y)
                j = i
            }
            return abs(sum) / 2
        }
    }

    /// At least one; one unnamed floor spanning every height when the file has none.
    public var floors: [Floor]
    public var nodes: [Node]
    public var rooms: [Room]
    /// The path-loss exponent of the fleet's model (`calibration: {path-loss-exponent: …}`).
    public var pathLossExponent: Double
    /// A picture of the floor plan drawn under it on the map (`background:`), if any.
    public var background: Background?

    /// A picture of the floor plan: its file (beside the plan), where its bottom-left corner is
    /// on the plan, how many metres its width spans, and the floor it shows.
    public struct Background: Sendable, Hashable {
        public var image: String
        public var corner: PlanPoint
        public var width: Double
        public var floor: Int

        public init(image: String, corner: PlanPoint, width: Double, floor: Int = 0) {
            self.image = image
            self.corner = corner
            self.width = width
            self.floor = floor
        }
    }

    public static let defaultFloor = Floor(name: "", z: -1_000 ... 1_000)
    public static let defaultPathLossExponent = 2.5

    public init(floors: [Floor] = [defaultFloor], nodes: [Node], rooms: [Room], pathLossExponent: Double = defaultPathLossExponent) {
        self.floors = floors.isEmpty ? [Self.defaultFloor] : floors
        self.nodes = nodes
        self.rooms = rooms
        self.pathLossExponent = pathLossExponent
    }

    /// The floor a height is on: the first whose range holds it, else the nearest.
    public func floor(atHeight z: Double) -> Int {
        if let i = floors.firstIndex(where: { $0.z.contains(z) }) { return i }
        return floors.indices.min { dist(z, floors[$0].z) < dist(z, floors[$1].z) } ?? 0
    }

    private func dist(_ z: Double, _ r: ClosedRange<Double>) -> Double { z < r.lowerBound ? r.lowerBound - z : max(0, z - r.upperBound) }

    /// The room holding (x, y) on `floor`: the smallest that does (rooms may nest).
    public func room(x: Double, y: Double, floor: Int) -> Int? {
        rooms.indices.filter { rooms[$0].floor == floor && rooms[$0].contains(x: x, y: y) }.min { rooms[$0].area < rooms[$1].area }
    }

    public func node(named name: String) -> Node? { nodes.first { $0.name == name } }

    /// The rectangle the plan covers on `floor` (its rooms and nodes), with `margin` metres around.
    public func bounds(floor: Int, margin: Double) -> (minX: Double, minY: Double, maxX: Double, maxY: Double) {
        var xs: [Double] = [], ys: [Double] = []
        for room in rooms where room.floor == floor {
            xs += room.polygon.map(\.x)
            ys += room.polygon.map(\.y)
        }
        for node in nodes where self.floor(atHeight: node.position.z) == floor || floors.count == 1 {
            xs.append(node.position.x)
            ys.append(node.position.y)
        }
        if xs.isEmpty { return (-margin, -margin, margin, margin) }
        return (xs.min()! - margin, ys.min()! - margin, xs.max()! + margin, ys.max()! + margin)
    }

    /// What is wrong with the plan as a whole (each item's own checks are the reader's): names
    /// given twice, a room with fewer than 3 corners or no area, floors that overlap.
    public var problems: [String] {
        var out: [String] = []
        func twice(_ names: [String], _ what: String) {
            var seen = Set<String>()
            for name in names where !seen.insert(name).inserted { out.append("\(what) \(name.debugDescription) is given twice") }
        }
        twice(floors.map(\.name), "floor")
        twice(nodes.map(\.name), "node")
        twice(rooms.map(\.name), "room")
        for room in rooms {
            if room.polygon.count < 3 { out.append("room \(room.name.debugDescription) has \(room.polygon.count) corners; at least 3") }
            else if room.area < 0.01 { out.append("room \(room.name.debugDescription) has no area") }
        }
        for (i, a) in floors.enumerated() {
            for b in floors[(i + 1)...] where a.z.upperBound > b.z.lowerBound && b.z.upperBound > a.z.lowerBound {
                out.append("floors \(a.name.debugDescription) and \(b.name.debugDescription) overlap in height")
            }
        }
        if !(pathLossExponent.isFinite && (1...6).contains(pathLossExponent)) {
            out.append("the path-loss exponent must be in 1...6, not \(pathLossExponent)")
        }
        return out
    }
}
