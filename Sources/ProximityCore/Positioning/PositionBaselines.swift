import Foundation

/// ESPresense Companion's locator, as its `NelderMeadMultilateralizer` does it: the distances the
/// nodes estimate, a point and a scale (x, y, z, s) found by Nelder–Mead minimising the mean of
/// `w_i (s·|x − p_i| − d_i)²` (weights by rank, nearest first) plus `(5(1 − s))²` and a steep
/// penalty outside the floor's bounds, s kept in 0.5…1.5, started from the last position (or the
/// centroid of the nearest nodes); fewer than three nodes give the nearest node's position. The
/// room is the polygon holding the point, with no hysteresis.
public struct MultilaterationPositioner: Positioner {
    public let name = "espresense"
    public let plan: FloorPlan
    /// The width of the Gaussian weight by rank, as a share of the node count.
    public var rankSigma: Double
    /// The distance the nodes estimate is replaced by the fleet's model's when set.
    public var model: PathLossModel?
    private var last: PlanPoint?
    private var scale = 1.0

    public init(plan: FloorPlan, rankSigma: Double = 0.5, model: PathLossModel? = nil) {
        self.plan = plan
        self.rankSigma = rankSigma
        self.model = model
    }

    public mutating func estimate(_ hearings: [NodeHearing], at t: Double) -> PositionEstimate? {
        let nodes = hearings.compactMap { h -> (p: PlanPoint, d: Double)? in
            guard let node = plan.node(named: h.node) else { return nil }
            let d = model?.distance(h) ?? h.distance
            return d.isFinite && d > 0 ? (node.position, d) : nil
        }.sorted { $0.d < $1.d }
        guard let nearest = nodes.first else { return nil }
        let floor = plan.floor(atHeight: nearest.p.z)
        var point: PlanPoint
        if nodes.count < 3 {
            point = nearest.p
        } else {
            let b = plan.bounds(floor: floor, margin: 0)
            let zRange = plan.floors[floor].z.lowerBound > -999 ? plan.floors[floor].z : 0 ... 3
            let lower = [b.minX, b.minY, zRange.lowerBound, 0.5], upper = [b.maxX, b.maxY, zRange.upperBound, 1.5]
            let n = Double(nodes.count)
            let weights = nodes.indices.map { Foundation.exp(-Foundation.pow(Double($0) / n, 2) / (2 * rankSigma * rankSigma)) }
            let objective = { (x: [Double]) -> Double in
                var outside = 0.0
                for i in 0 ..< 4 {
                    let o = max(lower[i] - x[i], x[i] - upper[i], 0)
                    outside += o * o
                }
                outside = outside.squareRoot()
                var sum = 0.0
                for (i, node) in nodes.enumerated() {
                    let dx = x[0] - node.p.x, dy = x[1] - node.p.y, dz = x[2] - node.p.z
                    let err = (dx * dx + dy * dy + dz * dz).squareRoot() * x[3] - node.d
                    sum += weights[i] * err * err
                }
                return (outside > 0 ? Foundation.pow(5, 1 + outside) : 0) + Foundation.pow(5 * (1 - x[3]), 2) + sum / n
            }
            let start = last ?? Self.centroid(nodes.prefix(3).map(\.p))
            let guess = [min(max(start.x, lower[0]), upper[0]), min(max(start.y, lower[1]), upper[1]),
                         min(max(start.z, lower[2]), upper[2]), scale]
            let centre = Self.centroid(nodes.prefix(3).map(\.p))
            var toward = [centre.x - guess[0], centre.y - guess[1], centre.z - guess[2]]
            let length = (toward.map { $0 * $0 }.reduce(0, +)).squareRoot()
            toward = length > 1e-6 ? toward.map { $0 / length } : [1, 0, 0]
            let found = NelderMead.minimize(objective, from: guess, step: toward + [0.05 * guess[3]], tolerance: 1e-7, maxIterations: 2_000)
            let clamped = (0 ..< 4).map { min(max(found[$0], lower[$0]), upper[$0]) }
            point = PlanPoint(x: clamped[0], y: clamped[1], z: clamped[2])
            scale = clamped[3]
        }
        last = point
        return PositionEstimate(position: point, floor: floor, uncertainty: .nan, room: plan.room(x: point.x, y: point.y, floor: floor))
    }

    static func centroid(_ points: [PlanPoint]) -> PlanPoint {
        let n = Double(max(1, points.count))
        return PlanPoint(x: points.map(\.x).reduce(0, +) / n, y: points.map(\.y).reduce(0, +) / n, z: points.map(\.z).reduce(0, +) / n)
    }
}

/// The nodes' positions weighted by 1/dᵖ of the distances they estimate (p = 2 by default).
public struct WeightedCentroidPositioner: Positioner {
    public let name = "centroid"
    public let plan: FloorPlan
    public var model: PathLossModel?
    /// The power of the distance in the weights.
    public var power: Double

    public init(plan: FloorPlan, model: PathLossModel? = nil, power: Double = 2) {
        self.plan = plan
        self.model = model
        self.power = power
    }

    public mutating func estimate(_ hearings: [NodeHearing], at t: Double) -> PositionEstimate? {
        var x = 0.0, y = 0.0, z = 0.0, total = 0.0
        var nearest: (PlanPoint, Double)?
        for h in hearings {
            guard let node = plan.node(named: h.node) else { continue }
            let d = max(0.5, model?.distance(h) ?? h.distance)
            guard d.isFinite else { continue }
            let w = power == 2 ? 1 / (d * d) : Foundation.pow(d, -power)
            x += w * node.position.x; y += w * node.position.y; z += w * node.position.z; total += w
            if nearest.map({ d < $0.1 }) ?? true { nearest = (node.position, d) }
        }
        guard total > 0, let nearest else { return nil }
        let floor = plan.floor(atHeight: nearest.0.z)
        let p = PlanPoint(x: x / total, y: y / total, z: z / total)
        return PositionEstimate(position: p, floor: floor, uncertainty: .nan, room: plan.room(x: p.x, y: p.y, floor: floor))
    }
}

/// The nearest node's position (the room-per-node model, as a position).
public struct NearestNodePositioner: Positioner {
    public let name = "nearest"
    public let plan: FloorPlan
    /// The distance the nodes estimate is replaced by the fleet's model's when set.
    public var model: PathLossModel?

    public init(plan: FloorPlan, model: PathLossModel? = nil) {
        self.plan = plan
        self.model = model
    }

    public mutating func estimate(_ hearings: [NodeHearing], at t: Double) -> PositionEstimate? {
        let model = model
        func distance(_ h: NodeHearing) -> Double { model?.distance(h) ?? h.distance }
        guard let h = hearings.filter({ plan.node(named: $0.node) != nil && distance($0).isFinite })
                  .min(by: { distance($0) < distance($1) }),
              let node = plan.node(named: h.node) else { return nil }
        let floor = plan.floor(atHeight: node.position.z)
        return PositionEstimate(position: node.position, floor: floor, uncertainty: .nan,
                                room: plan.room(x: node.position.x, y: node.position.y, floor: floor))
    }
}

/// The Nelder–Mead simplex method (reflection 1, expansion 2, contraction ½, shrink ½).
public enum NelderMead {
    /// The minimum of `f` found from `start`, the first simplex spanning `step` along each axis
    /// (each axis i gets start + step[i]·eᵢ; a zero step becomes 0.05).
    public static func minimize(_ f: ([Double]) -> Double, from start: [Double], step: [Double], tolerance: Double,
                                maxIterations: Int) -> [Double] {
        let n = start.count
        var simplex = [start]
        for i in 0 ..< n {
            var p = start
            p[i] += step[i] == 0 ? 0.05 : step[i]
            simplex.append(p)
        }
        var values = simplex.map(f)
        for _ in 0 ..< maxIterations {
            let order = values.indices.sorted { values[$0] < values[$1] }
            simplex = order.map { simplex[$0] }
            values = order.map { values[$0] }
            if abs(values[n] - values[0]) <= tolerance * (abs(values[0]) + tolerance) { break }
            var centroid = [Double](repeating: 0, count: n)
            for p in simplex[0 ..< n] { for i in 0 ..< n { centroid[i] += p[i] / Double(n) } }
            func along(_ t: Double) -> [Double] { (0 ..< n).map { centroid[$0] + t * (simplex[n][$0] - centroid[$0]) } }
            let reflected = along(-1), fr = f(reflected)
            if fr < values[0] {
                let expanded = along(-2), fe = f(expanded)
                (simplex[n], values[n]) = fe < fr ? (expanded, fe) : (reflected, fr)
            } else if fr < values[n - 1] {
                (simplex[n], values[n]) = (reflected, fr)
            } else {
                let contracted = fr < values[n] ? along(-0.5) : along(0.5)
                let fc = f(contracted)
                if fc < min(fr, values[n]) {
                    (simplex[n], values[n]) = (contracted, fc)
                } else {
                    for k in 1 ... n {
                        simplex[k] = (0 ..< n).map { simplex[0][$0] + 0.5 * (simplex[k][$0] - simplex[0][$0]) }
                        values[k] = f(simplex[k])
                    }
                }
            }
        }
        let best = values.indices.min { values[$0] < values[$1] }!
        return simplex[best]
    }
}
