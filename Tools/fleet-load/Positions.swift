import Foundation
import ProximityCore

/// `fleet-load --positions`: the fleet's positioning under load, in process (the estimator's
/// cost, not the broker's): D devices walking on a warehouse floor of N nodes, each heard once a
/// second by the nodes within ``hearingRange`` metres, and one ``GridPositioner`` per device
/// stepped at the fleet's tick, as `proximity-fleet --plan` does. Reports the estimator's CPU per
/// device-second, the share of one core for all devices, and the tick's batch time (the longest a
/// report waits for its position after the tick, on top of the wait for the tick itself).
enum PositionsLoad {
    struct Row: Codable {
        var nodes: Int
        var devices: Int
        var cells: Int
        var cellSize: Double
        var window: String
        var heardBy: Double
        var microsecondsPerEstimateP50: Double
        var microsecondsPerEstimateP99: Double
        var coreShare: Double
        var batchP50: Double
        var batchMax: Double
        /// The estimates' median error against the devices' true positions, metres (a check that
        /// the window costs no accuracy; the radio here is plain: 4 dB of independent noise).
        var medianError: Double
    }

    static let hearingRange = 25.0

    /// N nodes on a square-ish lattice 10 m × 7 m apart (100: a 100 × 70 m warehouse), its zones
    /// (5 × 2 rooms) as rooms.
    static func warehouse(nodes n: Int) -> FloorPlan {
        let columns = max(1, Int(Double(n).squareRoot().rounded()))
        let rows = (n + columns - 1) / columns
        var nodes: [FloorPlan.Node] = []
        for i in 0 ..< n {
            nodes.append(.init(name: "node\(i)", position: PlanPoint(x: 5 + Double(i % columns) * 10, y: 3.5 + Double(i / columns) * 7,
                                                                     z: 3)))
        }
        let width = Double(columns) * 10, depth = Double(rows) * 7
        var rooms: [FloorPlan.Room] = []
        for zx in 0 ..< 5 {
            for zy in 0 ..< 2 {
                let x0 = width * Double(zx) / 5, x1 = width * Double(zx + 1) / 5,
                    y0 = depth * Double(zy) / 2, y1 = depth * Double(zy + 1) / 2
                rooms.append(.init(name: "zone-\(zx)\(zy)", floor: 0,
                                   polygon: [PlanPoint(x: x0, y: y0), PlanPoint(x: x1, y: y0), PlanPoint(x: x1, y: y1),
                                             PlanPoint(x: x0, y: y1)]))
            }
        }
        return FloorPlan(nodes: nodes, rooms: rooms, pathLossExponent: 2.0)
    }

    struct Random {
        var state: UInt64
        mutating func next() -> Double {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return (Double(state >> 11) + 0.5) / Double(1 << 53)
        }
        mutating func gaussian() -> Double { (-2 * log(next())).squareRoot() * cos(2 * .pi * next()) }
    }

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// `seconds` ticks (after 5 of warm-up) of `devices` devices on `nodes` nodes; `window` nil:
    /// the filter's default window, else this many metres (1 000: the whole floor).
    static func measure(nodes: Int, devices: Int, seconds: Int, window: Double?) -> Row {
        let plan = warehouse(nodes: nodes)
        var configuration = GridPositioner.Configuration()
        if let window { configuration.window = window }
        let grid = PositioningGrid(plan: plan, outsideWeight: configuration.outsideWeight)
        let model = PathLossModel(exponent: plan.pathLossExponent)
        let b = plan.bounds(floor: 0, margin: 0)
        var random = Random(state: 7)
        var positioners = (0 ..< devices).map { _ in GridPositioner(grid: grid, model: model, configuration: configuration) }
        var where_ = (0 ..< devices).map { _ in
            PlanPoint(x: b.minX + random.next() * (b.maxX - b.minX), y: b.minY + random.next() * (b.maxY - b.minY), z: 1)
        }
        let offsets = (0 ..< devices).map { _ in 6 * random.gaussian() }
        var perEstimate: [Double] = []
        var batches: [Double] = []
        var heard = 0, estimates = 0
        var errors: [Double] = []
        for second in 0 ..< 5 + seconds {
            let t = Double(second)
            var batch = 0.0
            for d in 0 ..< devices {
                // A slow random walk (0–1 m a second), kept on the floor.
                var p = where_[d]
                p.x = min(max(p.x + (random.next() - 0.5), b.minX), b.maxX)
                p.y = min(max(p.y + (random.next() - 0.5), b.minY), b.maxY)
                where_[d] = p
                var hearings: [NodeHearing] = []
                for node in plan.nodes {
                    let distance = node.position.distance(to: p)
                    guard distance <= hearingRange else { continue }
                    let rssi = -59 + offsets[d] - 20 * log10(max(0.3, distance)) + 4 * random.gaussian()
                    hearings.append(NodeHearing(node: node.name, rssi: rssi, spread: 3, samples: 8, measuredPower: -59,
                                                distance: pow(10, (-59 - rssi) / 20), time: t))
                }
                let start = now()
                let estimate = positioners[d].estimate(hearings, at: t)
                let cost = now() - start
                if second >= 5, let e = estimate { errors.append(e.position.distance2D(to: p)) }
                batch += cost
                if second >= 5 {
                    perEstimate.append(cost)
                    heard += hearings.count
                    estimates += 1
                }
            }
            if second >= 5 { batches.append(batch) }
        }
        perEstimate.sort()
        batches.sort()
        func q(_ a: [Double], _ p: Double) -> Double { a[min(a.count - 1, Int(Double(a.count) * p))] }
        return Row(nodes: nodes, devices: devices, cells: grid.count, cellSize: grid.cell,
                   window: window.map { $0 >= 1_000 ? "whole floor" : "\(Int($0)) m" }
                       ?? "\(Int(GridPositioner.Configuration().window)) m (default)",
                   heardBy: Double(heard) / Double(max(1, estimates)),
                   microsecondsPerEstimateP50: q(perEstimate, 0.5) * 1e6, microsecondsPerEstimateP99: q(perEstimate, 0.99) * 1e6,
                   coreShare: batches.reduce(0, +) / Double(batches.count), batchP50: q(batches, 0.5), batchMax: batches.last!,
                   medianError: errors.isEmpty ? .nan : q(errors.sorted(), 0.5))
    }

    static let header = "nodes  devices  cells (size)     window            heard by  µs/estimate p50    p99   one core  " +
        "tick batch p50    max  median error"

    static func render(_ r: Row) -> String {
        String(format: "%5d  %7d  %6d (%.2f m)  %@  %8.1f  %15.0f  %5.0f  %8.1f%%  %11.0f ms  %5.0f ms  %10.2f m",
               r.nodes, r.devices, r.cells, r.cellSize, r.window.padding(toLength: 16, withPad: " ", startingAt: 0) as NSString, r.heardBy,
               r.microsecondsPerEstimateP50, r.microsecondsPerEstimateP99, r.coreShare * 100, r.batchP50 * 1000, r.batchMax * 1000,
               r.medianError)
    }
}
