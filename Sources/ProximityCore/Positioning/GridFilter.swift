import Foundation

/// The plan cut into cells, with what every device's filter reads and never changes: each cell's
/// centre, floor, room and prior weight, and each node's 10·log10(distance) to every cell. Built
/// once per plan and shared by all devices.
public final class PositioningGrid: Sendable {
    public let plan: FloorPlan
    /// Cell size, metres.
    public let cell: Double
    /// Per floor: the first cell's index, its columns and rows, its origin.
    public struct FloorGrid: Sendable {
        public let first: Int
        public let columns: Int
        public let rows: Int
        public let minX: Double
        public let minY: Double
    }
    public let floors: [FloorGrid]
    public let count: Int
    public let x: [Float]
    public let y: [Float]
    public let z: [Float]
    public let floorOf: [Int16]
    /// The room index of each cell, -1 for none.
    public let roomOf: [Int16]
    /// The prior weight of each cell (inside a room 1, outside ``Configuration/outsideWeight``).
    public let prior: [Float]
    /// Node name → its row in ``logDistance``.
    public let nodeIndex: [String: Int]
    /// 10·log10(max(d, 0.3)) from each node to each cell, node-major.
    public let logDistance: [Float]

    /// The height a device is assumed to be at above its floor's lower bound, metres.
    public static let deviceHeight = 1.0

    public init(plan: FloorPlan, outsideWeight: Double, maxCells: Int = 20_000, margin: Double = 2) {
        self.plan = plan
        var area = 0.0
        for f in plan.floors.indices {
            let b = plan.bounds(floor: f, margin: margin)
            area += (b.maxX - b.minX) * (b.maxY - b.minY)
        }
        let cell = max(0.5, (area / Double(maxCells)).squareRoot())
        self.cell = cell
        var floors: [FloorGrid] = []
        var x: [Float] = [], y: [Float] = [], z: [Float] = [], floorOf: [Int16] = [], roomOf: [Int16] = [], prior: [Float] = []
        for f in plan.floors.indices {
            let b = plan.bounds(floor: f, margin: margin)
            let columns = max(1, Int(((b.maxX - b.minX) / cell).rounded(.up)))
            let rows = max(1, Int(((b.maxY - b.minY) / cell).rounded(.up)))
            floors.append(FloorGrid(first: x.count, columns: columns, rows: rows, minX: b.minX, minY: b.minY))
            let range = plan.floors[f].z
            let height = range.lowerBound > -999 ? min(range.upperBound, range.lowerBound + Self.deviceHeight) : Self.deviceHeight
            for row in 0 ..< rows {
                for column in 0 ..< columns {
                    let cx = b.minX + (Double(column) + 0.5) * cell, cy = b.minY + (Double(row) + 0.5) * cell
                    x.append(Float(cx))
                    y.append(Float(cy))
                    z.append(Float(height))
                    floorOf.append(Int16(f))
                    let room = plan.room(x: cx, y: cy, floor: f)
                    roomOf.append(Int16(room ?? -1))
                    prior.append(room == nil ? Float(outsideWeight) : 1)
                }
            }
        }
        self.floors = floors
        count = x.count
        self.x = x
        self.y = y
        self.z = z
        self.floorOf = floorOf
        self.roomOf = roomOf
        let total = prior.reduce(0, +)
        self.prior = prior.map { $0 / total }
        var nodeIndex: [String: Int] = [:]
        var logDistance: [Float] = []
        logDistance.reserveCapacity(plan.nodes.count * x.count)
        for (i, node) in plan.nodes.enumerated() {
            nodeIndex[node.name] = i
            let p = node.position
            for c in 0 ..< x.count {
                let dx = Double(x[c]) - p.x, dy = Double(y[c]) - p.y, dz = Double(z[c]) - p.z
                let d = max(PathLossModel.minimumDistance, (dx * dx + dy * dy + dz * dz).squareRoot())
                logDistance.append(Float(10 * Foundation.log10(d)))
            }
        }
        self.nodeIndex = nodeIndex
        self.logDistance = logDistance
    }
}

/// The fleet's estimator: a grid Bayes filter (a discrete hidden Markov model) in the dB domain.
///
/// Each second the device may have moved: the belief over the cells is blurred by a Gaussian of
/// the walking speed times the time since the last step, and a little of the prior is mixed in
/// so a lost track recovers. Then each node's smoothed RSSI weighs every cell by how well the
/// path-loss model explains it there, with the device's own transmit offset (unknown, about 6 dB
/// across devices) integrated out in closed form: the likelihood depends on how the residuals of
/// the nodes *differ* at a cell, not on their common level, so an uncalibrated device does not
/// pull its position towards or away from every node at once. The position is the belief's mean
/// on its most likely floor, the uncertainty its spread, the room the one holding most belief,
/// with hysteresis (``RoomHysteresis``).
public struct GridPositioner: Positioner {
    public struct Configuration: Sendable, Hashable {
        /// The RSSI noise a hearing has on top of its samples' spread, dB (the static shadowing
        /// that averaging does not remove).
        public var sigma: Double = 5.5
        /// The spread of devices' transmit offsets, dB.
        public var deviceSigma: Double = 6
        /// How much one second's hearings count (hearings a second apart are far from
        /// independent: the shadowing stays).
        public var temper: Double = 0.35
        /// Walking speed for the motion blur, metres per second.
        public var speed: Double = 0.9
        /// The share of the prior mixed in per second.
        public var recovery: Double = 0.01
        /// The prior weight of a cell outside every room, against 1 inside.
        public var outsideWeight: Double = 0.2
        public var room = RoomHysteresis.Configuration()

        public init() {}
    }

    public let name = "fleet"
    public let grid: PositioningGrid
    public var configuration: Configuration
    public var model: PathLossModel
    private var belief: [Float]
    private var last: Double?
    private var rooms = RoomHysteresis()

    public init(grid: PositioningGrid, model: PathLossModel, configuration: Configuration = .init()) {
        self.grid = grid
        self.model = model
        self.configuration = configuration
        belief = grid.prior
    }

    public mutating func estimate(_ hearings: [NodeHearing], at t: Double) -> PositionEstimate? {
        let usable = hearings.filter { grid.nodeIndex[$0.node] != nil && $0.rssi.isFinite }
        guard !usable.isEmpty else { return nil }
        predict(to: t)
        update(usable)
        return summary(at: t)
    }

    // MARK: - Motion

    private mutating func predict(to t: Double) {
        defer { last = t }
        guard let last, t > last else { return }
        let dt = min(t - last, 30)
        let sigma = configuration.speed * dt / grid.cell
        if sigma > 0.3 { blur(sigma: sigma) }
        let mix = Float(min(1, configuration.recovery * dt))
        for c in 0 ..< grid.count { belief[c] = (1 - mix) * belief[c] + mix * grid.prior[c] }
    }

    /// A separable Gaussian blur of `sigma` cells on each floor (edges keep their mass).
    private mutating func blur(sigma: Double) {
        let radius = min(Int((2.5 * sigma).rounded(.up)), 40)
        var kernel = (-radius ... radius).map { Float(Foundation.exp(-Double($0 * $0) / (2 * sigma * sigma))) }
        let total = kernel.reduce(0, +)
        kernel = kernel.map { $0 / total }
        var scratch = [Float](repeating: 0, count: grid.count)
        for f in grid.floors {
            // Rows.
            for row in 0 ..< f.rows {
                let base = f.first + row * f.columns
                for column in 0 ..< f.columns {
                    var sum: Float = 0
                    for k in -radius ... radius {
                        let cc = min(max(column + k, 0), f.columns - 1)
                        sum += kernel[k + radius] * belief[base + cc]
                    }
                    scratch[base + column] = sum
                }
            }
            // Columns.
            for column in 0 ..< f.columns {
                for row in 0 ..< f.rows {
                    var sum: Float = 0
                    for k in -radius ... radius {
                        let rr = min(max(row + k, 0), f.rows - 1)
                        sum += kernel[k + radius] * scratch[f.first + rr * f.columns + column]
                    }
                    belief[f.first + row * f.columns + column] = sum
                }
            }
        }
    }

    // MARK: - Measurement

    private mutating func update(_ hearings: [NodeHearing]) {
        let n = Float(model.exponent)
        var sw: Float = 0
        var rows: [(offset: Int, level: Float, weight: Float)] = []
        for h in hearings {
            let variance = configuration.sigma * configuration.sigma + h.spread * h.spread / Double(max(1, h.samples))
            let w = Float(1 / variance)
            // e(cell) = corrected RSSI − (P₁ₘ − n·10·log10 d) = level + n·L(cell)
            let level = Float(h.rssi + (model.rxOffsets[h.node] ?? 0) - h.measuredPower)
            rows.append((grid.nodeIndex[h.node]! * grid.count, level, w))
            sw += w
        }
        let shrink = sw + Float(1 / (configuration.deviceSigma * configuration.deviceSigma))
        let temper = Float(configuration.temper)
        var logLikelihood = [Float](repeating: 0, count: grid.count)
        var best = -Float.infinity
        grid.logDistance.withUnsafeBufferPointer { table in
            for c in 0 ..< grid.count {
                var swe: Float = 0, swee: Float = 0
                for r in rows {
                    let e = r.level + n * table[r.offset + c]
                    swe += r.weight * e
                    swee += r.weight * e * e
                }
                let ll = -0.5 * temper * (swee - swe * swe / shrink)
                logLikelihood[c] = ll
                if ll > best { best = ll }
            }
        }
        var total: Float = 0
        for c in 0 ..< grid.count {
            let p = belief[c] * Foundation.exp(logLikelihood[c] - best)
            belief[c] = p
            total += p
        }
        if total > 0, total.isFinite {
            for c in 0 ..< grid.count { belief[c] /= total }
        } else {
            belief = grid.prior
        }
    }

    // MARK: - Summary

    private mutating func summary(at t: Double) -> PositionEstimate {
        var floorMass = [Double](repeating: 0, count: grid.floors.count)
        var roomMass = [Double](repeating: 0, count: grid.plan.rooms.count)
        for c in 0 ..< grid.count {
            floorMass[Int(grid.floorOf[c])] += Double(belief[c])
            let room = Int(grid.roomOf[c])
            if room >= 0 { roomMass[room] += Double(belief[c]) }
        }
        let floor = floorMass.indices.max { floorMass[$0] < floorMass[$1] } ?? 0
        let f = grid.floors[floor]
        var mx = 0.0, my = 0.0, mz = 0.0, mass = 0.0
        for c in f.first ..< f.first + f.columns * f.rows {
            let p = Double(belief[c])
            mx += p * Double(grid.x[c]); my += p * Double(grid.y[c]); mz += p * Double(grid.z[c]); mass += p
        }
        mx /= mass; my /= mass; mz /= mass
        var variance = 0.0
        for c in f.first ..< f.first + f.columns * f.rows {
            let dx = Double(grid.x[c]) - mx, dy = Double(grid.y[c]) - my
            variance += Double(belief[c]) * (dx * dx + dy * dy)
        }
        let room = rooms.update(mass: roomMass, at: t, configuration: configuration.room)
        return PositionEstimate(position: PlanPoint(x: mx, y: my, z: mz), floor: floor,
                                uncertainty: (variance / mass).squareRoot(), room: room)
    }
}

/// Which room a device is in, from how much belief each room holds: it moves to another room only
/// once that room holds clearly more (``Configuration/margin``) for ``Configuration/hold``
/// seconds, so a device standing by a wall does not flicker between the rooms either side.
public struct RoomHysteresis: Sendable, Hashable {
    public struct Configuration: Sendable, Hashable {
        /// How much more belief the challenger must hold than the current room.
        public var margin: Double = 0.2
        /// For how long, seconds.
        public var hold: Double = 2
        /// With less than this in every room, the device is in none.
        public var minimum: Double = 0.25

        public init() {}
    }

    public private(set) var current: Int?
    /// The room (nil: none) that leads by the margin, and since when.
    private var challenger: Int??
    private var since = 0.0

    public init() {}

    public mutating func update(mass: [Double], at t: Double, configuration: Configuration) -> Int? {
        let best = mass.indices.max { mass[$0] < mass[$1] }
        let leader: Int? = best.flatMap { mass[$0] >= configuration.minimum ? $0 : nil }
        guard leader != current else {
            challenger = nil
            return current
        }
        let held = current.map { mass[$0] } ?? max(0, 1 - mass.reduce(0, +))
        let lead = leader.map { mass[$0] } ?? max(0, 1 - mass.reduce(0, +))
        guard current == nil || lead - held >= configuration.margin else {
            challenger = nil
            return current
        }
        if challenger != .some(leader) {
            challenger = .some(leader)
            since = t
        }
        if current == nil || t - since >= configuration.hold {
            current = leader
            challenger = nil
        }
        return current
    }
}
