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

    /// Above this many cells a device's filter works in a window (``GridPositioner/Configuration/window``).
    public static let windowThreshold = 4_000

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
        public var sigma: Double = 4.5
        /// The spread of devices' transmit offsets, dB.
        public var deviceSigma: Double = 6
        /// How much one second's hearings count (hearings a second apart are far from
        /// independent: the shadowing stays).
        public var temper: Double = 0.7
        /// Walking speed for the motion blur, metres per second.
        public var speed: Double = 1.2
        /// Two modes, standing and walking (an interacting-multiple-model filter on the grid): the
        /// part of the belief that stands is not blurred, so a device that stands still keeps a
        /// sharp belief and its room, while the walking part follows a walk. A standing device
        /// starts walking at this rate, per second, and a walking one stops at ``stopRate``; the
        /// hearings decide which part holds the belief. 0: one mode (every step blurs it all).
        public var startRate: Double = 0
        public var stopRate: Double = 0.3
        /// The share of the belief that moves each second (people mostly stand still): the rest
        /// stays where it is, so a device standing still keeps a sharp belief while one that
        /// walks off is followed. 1: all of it blurs.
        public var moveShare: Double = 1
        /// A node's residual beyond this many σ counts linearly, not squared (Huber's loss), so
        /// one node far off (a receiver 10 dB deaf, a body in the way) does not drag the position;
        /// 0: plain least squares.
        public var huber: Double = 0
        /// The share of the prior mixed in per second.
        public var recovery: Double = 0.01
        /// The prior weight of a cell outside every room, against 1 inside.
        public var outsideWeight: Double = 0.2
        public var room = RoomHysteresis.Configuration()
        /// On a plan of more than ``PositioningGrid/windowThreshold`` cells, the filter works in
        /// a window this many metres around the three nodes that hear the device loudest and its
        /// last position (a warehouse's far aisles cost nothing), metres.
        public var window: Double = 12
        /// The share of the device's recent velocity (its estimates' movement, averaged over
        /// ``driftTime`` seconds) by which the belief is carried forward at each step, before the
        /// blur: a walk is followed rather than trailed. 0: off (a random walk only).
        public var drift: Double = 0
        public var driftTime: Double = 2
        /// Below this speed, metres per second, the belief is not carried (a still device's
        /// estimates jitter).
        public var driftDeadband: Double = 0.2

        public init() {}
    }

    public let name = "fleet"
    public let grid: PositioningGrid
    public var configuration: Configuration
    public var model: PathLossModel
    /// The belief over the cells (both modes).
    private var belief: [Float]
    /// With two modes (``Configuration/startRate``): the part of ``belief`` that stands.
    private var still: [Float] = []
    private var last: Double?
    private var rooms = RoomHysteresis()
    /// The cells the filter works on, per floor: the whole floor on a plan of at most
    /// ``PositioningGrid/windowThreshold`` cells, else a window around the nodes that hear the
    /// device best and the last estimate (the belief outside it is zero).
    private var window: [Window] = []
    private var lastEstimate: PlanPoint?
    /// The belief's mean at the last step, its velocity (averaged), and the part of a shift
    /// smaller than a cell carried to the next step, metres.
    private var lastMean: (point: PlanPoint, t: Double)?
    private var velocity = (x: 0.0, y: 0.0)
    private var carried = (x: 0.0, y: 0.0)

    /// A rectangle of cells on one floor: columns c0..<c1, rows r0..<r1.
    struct Window: Hashable {
        var floor: Int
        var c0: Int, c1: Int, r0: Int, r1: Int
        var count: Int { (c1 - c0) * (r1 - r0) }
    }

    public init(grid: PositioningGrid, model: PathLossModel, configuration: Configuration = .init()) {
        self.grid = grid
        self.model = model
        self.configuration = configuration
        belief = grid.prior
        window = grid.floors.indices.map { Window(floor: $0, c0: 0, c1: grid.floors[$0].columns, r0: 0, r1: grid.floors[$0].rows) }
    }

    public mutating func estimate(_ hearings: [NodeHearing], at t: Double) -> PositionEstimate? {
        let usable = hearings.filter { grid.nodeIndex[$0.node] != nil && $0.rssi.isFinite }
        guard !usable.isEmpty else { return nil }
        if grid.count > PositioningGrid.windowThreshold { move(to: windowFor(usable)) }
        predict(to: t)
        update(usable)
        return summary(at: t)
    }

    /// Calls `body(start, end)` for each row of the window: the cells start..<end.
    @inline(__always)
    private func forEachRun(_ body: (Int, Int) -> Void) {
        for w in window {
            let f = grid.floors[w.floor]
            for row in w.r0 ..< w.r1 {
                let base = f.first + row * f.columns
                body(base + w.c0, base + w.c1)
            }
        }
    }

    // MARK: - Window (large plans)

    /// The rectangle, on every floor, holding the three nodes that hear the device loudest
    /// (their RSSI less their measured power, corrected) and the last estimate, with
    /// ``Configuration/window`` metres around.
    private func windowFor(_ hearings: [NodeHearing]) -> [Window] {
        let loudest = hearings.sorted {
            $0.rssi + (model.rxOffsets[$0.node] ?? 0) - $0.measuredPower > $1.rssi + (model.rxOffsets[$1.node] ?? 0) - $1.measuredPower
        }.prefix(3)
        var xs = loudest.map { grid.plan.nodes[grid.nodeIndex[$0.node]!].position.x }
        var ys = loudest.map { grid.plan.nodes[grid.nodeIndex[$0.node]!].position.y }
        if let p = lastEstimate { xs.append(p.x); ys.append(p.y) }
        let margin = configuration.window
        return grid.floors.indices.map { i in
            let f = grid.floors[i]
            func column(_ x: Double) -> Int { min(max(Int(((x - f.minX) / grid.cell).rounded(.down)), 0), f.columns) }
            func row(_ y: Double) -> Int { min(max(Int(((y - f.minY) / grid.cell).rounded(.down)), 0), f.rows) }
            return Window(floor: i, c0: column(xs.min()! - margin), c1: max(column(xs.max()! + margin) + 1, 1).clamped(f.columns),
                          r0: row(ys.min()! - margin), r1: max(row(ys.max()! + margin) + 1, 1).clamped(f.rows))
        }
    }

    /// Moves the window: the belief outside the new one is dropped, the rest renormalised (cells
    /// that come in start empty; the prior mixed in each step reaches them).
    private mutating func move(to new: [Window]) {
        guard new != window else { return }
        var kept = [Float](repeating: 0, count: grid.count)
        var total: Float = 0
        let old = window
        window = new
        forEachRun { start, end in
            for c in start ..< end {
                kept[c] = belief[c]
                total += belief[c]
            }
        }
        // The old window's cells left out are now zero in `kept`; nothing else held belief.
        _ = old
        if total > 0, total.isFinite {
            let scale = 1 / total
            forEachRun { start, end in for c in start ..< end { kept[c] *= scale } }
            if !still.isEmpty {
                var standing = [Float](repeating: 0, count: grid.count)
                forEachRun { start, end in for c in start ..< end { standing[c] = still[c] * scale } }
                still = standing
            }
            belief = kept
        } else {
            belief = kept
            resetToPrior()
        }
    }

    /// The prior, restricted to the window and normalised there.
    private mutating func resetToPrior() {
        var total: Float = 0
        forEachRun { start, end in for c in start ..< end { total += grid.prior[c] } }
        let scale = total > 0 ? 1 / total : 0
        forEachRun { start, end in for c in start ..< end { belief[c] = grid.prior[c] * scale } }
        if !still.isEmpty { still = belief.map { $0 * 0.5 } }
    }

    // MARK: - Motion

    private mutating func predict(to t: Double) {
        defer { last = t }
        guard let last, t > last else { return }
        let dt = min(t - last, 30)
        carry(dt)
        let sigma = configuration.speed * dt / grid.cell
        let modes = configuration.startRate > 0
        if modes {
            // Standing and walking: each part changes mode at its rate, then the walking part
            // is blurred and the standing part stays as it is.
            if still.count != belief.count { still = belief.map { $0 * 0.5 } }
            let a = Float(1 - Foundation.exp(-configuration.startRate * dt)), b = Float(1 - Foundation.exp(-configuration.stopRate * dt))
            var standing = still
            forEachRun { start, end in
                for c in start ..< end {
                    let s = still[c], m = Swift.max(0, belief[c] - s)
                    standing[c] = (1 - a) * s + b * m
                    belief[c] = a * s + (1 - b) * m
                }
            }
            if sigma > 0.3 { blur(sigma: sigma) }
            forEachRun { start, end in for c in start ..< end { belief[c] += standing[c] } }
            still = standing
        } else if sigma > 0.3 {
            let stay = Float(Foundation.pow(1 - min(1, max(0, configuration.moveShare)), dt))
            if stay > 0 {
                let before = belief
                blur(sigma: sigma)
                forEachRun { start, end in for c in start ..< end { belief[c] = stay * before[c] + (1 - stay) * belief[c] } }
            } else {
                blur(sigma: sigma)
            }
        }
        let mix = Float(min(1, configuration.recovery * dt))
        var priorTotal: Float = 0
        forEachRun { start, end in for c in start ..< end { priorTotal += grid.prior[c] } }
        let scale = priorTotal > 0 ? mix / priorTotal : 0
        forEachRun { start, end in
            for c in start ..< end { belief[c] = (1 - mix) * belief[c] + scale * grid.prior[c] }
        }
        if modes {
            forEachRun { start, end in
                for c in start ..< end { still[c] = (1 - mix) * still[c] + 0.5 * scale * grid.prior[c] }
            }
        }
    }

    /// Carries the belief forward by ``Configuration/drift`` × its velocity × `dt`, in whole
    /// cells (the rest carried to the next step); the mass shifted past the window's edge stays
    /// at the edge.
    private mutating func carry(_ dt: Double) {
        guard configuration.drift > 0 else { return }
        let speed = (velocity.x * velocity.x + velocity.y * velocity.y).squareRoot()
        guard speed >= configuration.driftDeadband else {
            carried = (0, 0)
            return
        }
        let dx = configuration.drift * velocity.x * dt + carried.x, dy = configuration.drift * velocity.y * dt + carried.y
        let sx = Int((dx / grid.cell).rounded()), sy = Int((dy / grid.cell).rounded())
        carried = (dx - Double(sx) * grid.cell, dy - Double(sy) * grid.cell)
        guard sx != 0 || sy != 0 else { return }
        func shift(_ values: [Float]) -> [Float] {
            var shifted = values
            for w in window {
                let f = grid.floors[w.floor]
                for row in w.r0 ..< w.r1 { for c in w.c0 ..< w.c1 { shifted[f.first + row * f.columns + c] = 0 } }
                for row in w.r0 ..< w.r1 {
                    let r = min(max(row + sy, w.r0), w.r1 - 1)
                    for c in w.c0 ..< w.c1 {
                        let cc = min(max(c + sx, w.c0), w.c1 - 1)
                        shifted[f.first + r * f.columns + cc] += values[f.first + row * f.columns + c]
                    }
                }
            }
            return shifted
        }
        belief = shift(belief)
        if !still.isEmpty { still = shift(still) }
    }

    /// The belief's mean moved: its velocity, averaged over ``Configuration/driftTime``.
    private mutating func track(_ mean: PlanPoint, at t: Double) {
        defer { lastMean = (mean, t) }
        guard configuration.drift > 0, let last = lastMean, t > last.t else { return }
        let dt = t - last.t
        guard dt < 10 else {
            velocity = (0, 0)
            return
        }
        let a = 1 - Foundation.exp(-dt / max(0.1, configuration.driftTime))
        velocity.x += a * ((mean.x - last.point.x) / dt - velocity.x)
        velocity.y += a * ((mean.y - last.point.y) / dt - velocity.y)
    }

    /// A separable Gaussian blur of `sigma` cells in the window on each floor (its edges keep
    /// their mass).
    private mutating func blur(sigma: Double) {
        let radius = min(Int((2.5 * sigma).rounded(.up)), 40)
        var kernel = (-radius ... radius).map { Float(Foundation.exp(-Double($0 * $0) / (2 * sigma * sigma))) }
        let total = kernel.reduce(0, +)
        kernel = kernel.map { $0 / total }
        var scratch = [Float](repeating: 0, count: grid.count)
        let grid = grid
        let window = window
        kernel.withUnsafeBufferPointer { k in
            scratch.withUnsafeMutableBufferPointer { s in
                belief.withUnsafeMutableBufferPointer { b in
                    for w in window {
                        let f = grid.floors[w.floor]
                        let cols = w.c1 - w.c0, rows = w.r1 - w.r0
                        // Rows, clamped at the window's edges.
                        for row in w.r0 ..< w.r1 {
                            let base = f.first + row * f.columns + w.c0
                            for j in 0 ..< cols {
                                var sum: Float = 0
                                if j >= radius && j + radius < cols {
                                    for i in 0 ... 2 * radius { sum += k[i] * b[base + j - radius + i] }
                                } else {
                                    for i in 0 ... 2 * radius { sum += k[i] * b[base + min(max(j - radius + i, 0), cols - 1)] }
                                }
                                s[base + j] = sum
                            }
                        }
                        // Columns: a whole row at a time, so the inner loop runs along memory.
                        for r in 0 ..< rows {
                            let out = f.first + (w.r0 + r) * f.columns + w.c0
                            for j in 0 ..< cols { b[out + j] = 0 }
                            for i in 0 ... 2 * radius {
                                let rr = min(max(r - radius + i, 0), rows - 1)
                                let src = f.first + (w.r0 + rr) * f.columns + w.c0
                                let weight = k[i]
                                for j in 0 ..< cols { b[out + j] += weight * s[src + j] }
                            }
                        }
                    }
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
        let prior = Float(1 / (configuration.deviceSigma * configuration.deviceSigma))
        let shrink = sw + prior
        let temper = Float(configuration.temper)
        let k = Float(configuration.huber)
        var logLikelihood = [Float](repeating: 0, count: grid.count)
        var swe = [Float](repeating: 0, count: grid.count)
        var best = -Float.infinity
        grid.logDistance.withUnsafeBufferPointer { table in
            logLikelihood.withUnsafeMutableBufferPointer { swee in
                swe.withUnsafeMutableBufferPointer { swe in
                    // Node by node over the window's runs of cells (the inner loops vectorise).
                    for r in rows {
                        let level = r.level, weight = r.weight
                        forEachRun { start, end in
                            for c in start ..< end {
                                let e = level + n * table[r.offset + c]
                                swe[c] += weight * e
                                swee[c] += weight * e * e
                            }
                        }
                    }
                    forEachRun { start, end in
                        for c in start ..< end {
                            var ll: Float
                            if k > 0 {
                                // The device's offset at its most likely value here, then each
                                // node's residual from it under Huber's loss (in units of its σ),
                                // plus the offset's prior.
                                let b = swe[c] / shrink
                                var loss: Float = prior * b * b
                                for r in rows {
                                    let z = (r.level + n * table[r.offset + c] - b) * r.weight.squareRoot()
                                    let a = abs(z)
                                    loss += a <= k ? z * z : 2 * k * a - k * k
                                }
                                ll = -0.5 * temper * loss
                            } else {
                                ll = -0.5 * temper * (swee[c] - swe[c] * swe[c] / shrink)
                            }
                            swee[c] = ll
                            best = Swift.max(best, ll)
                        }
                    }
                }
            }
        }
        var total: Float = 0
        let hasModes = still.count == belief.count
        forEachRun { start, end in
            for c in start ..< end {
                let d = logLikelihood[c] - best
                let w = d < -40 ? 0 : Foundation.exp(d)
                let p = belief[c] * w
                belief[c] = p
                total += p
                if hasModes { still[c] *= w }
            }
        }
        if total > 0, total.isFinite {
            let scale = 1 / total
            forEachRun { start, end in for c in start ..< end { belief[c] *= scale } }
            if hasModes { forEachRun { start, end in for c in start ..< end { still[c] *= scale } } }
        } else {
            resetToPrior()
        }
    }

    // MARK: - Summary

    private mutating func summary(at t: Double) -> PositionEstimate {
        var floorMass = [Double](repeating: 0, count: grid.floors.count)
        var roomMass = [Double](repeating: 0, count: grid.plan.rooms.count)
        for w in window {
            let f = grid.floors[w.floor]
            var mass: Float = 0
            for row in w.r0 ..< w.r1 {
                let base = f.first + row * f.columns
                for c in base + w.c0 ..< base + w.c1 {
                    mass += belief[c]
                    let room = Int(grid.roomOf[c])
                    if room >= 0 { roomMass[room] += Double(belief[c]) }
                }
            }
            floorMass[w.floor] = Double(mass)
        }
        let floor = floorMass.indices.max { floorMass[$0] < floorMass[$1] } ?? 0
        let w = window.first { $0.floor == floor }!
        let f = grid.floors[floor]
        var mx = 0.0, my = 0.0, mz = 0.0, mass = 0.0
        for row in w.r0 ..< w.r1 {
            let base = f.first + row * f.columns
            for c in base + w.c0 ..< base + w.c1 {
                let p = Double(belief[c])
                mx += p * Double(grid.x[c]); my += p * Double(grid.y[c]); mz += p * Double(grid.z[c]); mass += p
            }
        }
        if mass > 0 { mx /= mass; my /= mass; mz /= mass }
        var variance = 0.0
        for row in w.r0 ..< w.r1 {
            let base = f.first + row * f.columns
            for c in base + w.c0 ..< base + w.c1 {
                let dx = Double(grid.x[c]) - mx, dy = Double(grid.y[c]) - my
                variance += Double(belief[c]) * (dx * dx + dy * dy)
            }
        }
        let room = rooms.update(mass: roomMass, at: t, configuration: configuration.room, walking: walkingShare)
        var position = PlanPoint(x: mx, y: my, z: mz)
        track(position, at: t)
        if let room, grid.plan.room(x: mx, y: my, floor: floor) != room { position = inside(room, w: w, near: position) }
        lastEstimate = position
        return PositionEstimate(position: position, floor: floor, uncertainty: mass > 0 ? (variance / mass).squareRoot() : .nan, room: room)
    }

    /// The share of the belief in the walking mode (1 with one mode).
    private var walkingShare: Double {
        guard still.count == belief.count else { return 1 }
        var standing: Float = 0, total: Float = 0
        forEachRun { start, end in for c in start ..< end { standing += still[c]; total += belief[c] } }
        return total > 0 ? Double(max(0, 1 - standing / total)) : 1
    }

    /// The position published with `room` when the belief's mean lies outside it: the mean of the
    /// belief inside the room (inside it when the room is convex), else the room's cell nearest
    /// to that. A device is never published in a room whose outline does not hold its position.
    private func inside(_ room: Int, w: Window, near mean: PlanPoint) -> PlanPoint {
        let f = grid.floors[w.floor]
        var mx = 0.0, my = 0.0, mz = 0.0, mass = 0.0
        var cells: [Int] = []
        for row in w.r0 ..< w.r1 {
            let base = f.first + row * f.columns
            for c in base + w.c0 ..< base + w.c1 where Int(grid.roomOf[c]) == room {
                cells.append(c)
                let p = Double(belief[c])
                mx += p * Double(grid.x[c]); my += p * Double(grid.y[c]); mz += p * Double(grid.z[c]); mass += p
            }
        }
        guard !cells.isEmpty else { return mean }
        let target = mass > 0 ? PlanPoint(x: mx / mass, y: my / mass, z: mz / mass) : mean
        if grid.plan.room(x: target.x, y: target.y, floor: w.floor) == room { return target }
        let nearest = cells.min {
            let a = PlanPoint(x: Double(grid.x[$0]), y: Double(grid.y[$0])), b = PlanPoint(x: Double(grid.x[$1]), y: Double(grid.y[$1]))
            return a.distance2D(to: target) < b.distance2D(to: target)
        }!
        return PlanPoint(x: Double(grid.x[nearest]), y: Double(grid.y[nearest]), z: Double(grid.z[nearest]))
    }
}

private extension Int {
    func clamped(_ upper: Int) -> Int { Swift.min(self, upper) }
}

/// Which room a device is in, from how its belief inside the rooms is shared between them (the
/// part outside every outline does not vote: a belief that spills past an outer wall still picks
/// the room holding most of what is inside). A room is taken only when it holds at least
/// ``Configuration/confident`` of that. The device leaves its room for another that does and
/// leads it by more than ``Configuration/margin``, once the lead beyond the margin, summed over
/// the seconds it lasts, reaches ``Configuration/evidence`` (a clear lead moves it in a second or
/// two, a slight one takes longer, a lead that comes and goes never does: a device standing by a
/// wall does not flicker); and for none (unknown: the evidence singles out no room) once its room
/// has held less than ``Configuration/keep`` for ``Configuration/hold`` seconds and no room is
/// taken. Unknown rather than wrong: a device between two rooms, or heard too faintly to tell,
/// is in no room, not in the nearer one's neighbour.
public struct RoomHysteresis: Sendable, Hashable {
    public struct Configuration: Sendable, Hashable {
        /// The lead over the current room (shares of the belief inside rooms) a challenger must
        /// exceed before it gathers evidence.
        public var margin: Double = 0.2
        /// The evidence a challenger needs: its lead beyond the margin, summed over seconds.
        public var evidence: Double = 2
        /// How long the device's room must hold less than ``keep`` before it is given up, seconds.
        public var hold: Double = 3
        /// With less than this share of the belief inside every room, the device is in none.
        public var minimum: Double = 0.05
        /// The share of the belief inside rooms a room needs to be taken.
        public var confident: Double = 0.5
        /// Below this share for ``hold`` seconds, the device leaves its room (for unknown, unless
        /// another room is taken).
        public var keep: Double = 0.25
        /// The shares are averaged over about this many seconds (an exponential average) before
        /// they vote: a belief that wanders across a wall and back for a second or two, as a
        /// still device's does, moves no room. 0: each second's own.
        public var smoothing: Double = 0

        public init() {}
    }

    public private(set) var current: Int?
    /// Each challenger's evidence against the current room.
    private var gathered: [Int: Double] = [:]
    /// How long the current room has held less than ``Configuration/keep`` (or the belief
    /// inside rooms been below the minimum), seconds at the walking pace.
    private var weak: Double?
    private var last: Double?
    /// The averaged shares (``Configuration/smoothing``).
    private var averaged: [Double] = []

    public init() {}

    /// The room after a step that left `mass` of the belief in each room, at `t`. `walking` is the
    /// share of the belief in the walking mode (1 without modes): a device changes rooms by
    /// walking, so a challenger's evidence and a weak room's time count at that rate: a device
    /// that stands is not moved by a belief that wanders across a wall.
    public mutating func update(mass: [Double], at t: Double, configuration c: Configuration, walking: Double = 1) -> Int? {
        let dt = last.map { min(max(t - $0, 0), 5) } ?? 1
        last = t
        let pace = min(1, max(0, walking.isFinite ? walking : 1))
        let inside = mass.reduce(0, +)
        guard inside >= c.minimum, inside.isFinite else {
            gathered = [:]
            if current != nil {
                // Counted from the first step found weak.
                weak = weak.map { $0 + dt * pace } ?? 0
                if weak! >= c.hold { current = nil; weak = nil }
            }
            return current
        }
        var share = mass.map { $0 / inside }
        if c.smoothing > 0 {
            if averaged.count == share.count {
                let a = 1 - Foundation.exp(-dt / c.smoothing)
                share = share.indices.map { averaged[$0] + a * (share[$0] - averaged[$0]) }
            }
            averaged = share
        }
        let best = share.indices.max { share[$0] < share[$1] }
        let leader = best.flatMap { share[$0] >= c.confident ? $0 : nil }
        guard let room = current else {
            // From none: the first room that holds the belief, at once.
            current = leader
            gathered = [:]
            weak = nil
            return current
        }
        for r in share.indices where r != room {
            let lead = share[r] - share[room] - c.margin
            let total = max(0, (gathered[r] ?? 0) + lead * dt * (lead > 0 ? pace : 1))
            gathered[r] = total > 0 ? total : nil
        }
        if let leader, leader != room, (gathered[leader] ?? 0) >= c.evidence {
            current = leader
            gathered = [:]
            weak = nil
            return current
        }
        if share[room] < c.keep {
            weak = weak.map { $0 + dt * pace } ?? 0
            if weak! >= c.hold {
                current = leader
                gathered = [:]
                weak = nil
            }
        } else {
            weak = nil
        }
        return current
    }
}
