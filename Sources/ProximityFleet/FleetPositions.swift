import Foundation
import ProximityCore
import ProximityMQTT

/// The fleet service's positions on a floor plan (`proximity-fleet run --plan`): the last hearing
/// of each device by each node, and one ``GridPositioner`` per device on one ``PositioningGrid``
/// per plan, shared. Pure: reports and time in, estimates out (``FleetService`` publishes them).
///
/// A hearing is what a node's last report of a device says (``hearing(node:report:at:)``), timed
/// when it arrived; it counts for ``staleAfter`` seconds (`--stale-after`), and a report with a
/// null distance (the node no longer hears the device) removes it at once. Only nodes in the plan
/// place a device; the hearings of the others are kept too, so that a reloaded plan that adds a
/// node uses it at once.
public struct FleetPositions: Sendable {
    public private(set) var plan: FloorPlan
    public private(set) var grid: PositioningGrid
    /// A hearing counts for this long, seconds.
    public var staleAfter: Double
    public var configuration: GridPositioner.Configuration
    /// Which estimator places each device: the fleet's grid filter, or a baseline.
    public let estimator: FleetEstimator
    /// Device → node → its last hearing.
    private var hearings: [String: [String: NodeHearing]] = [:]
    private var positioners: [String: any Positioner] = [:]
    private var planNodes: Set<String>
    /// The calibration kept up from the plan's nodes hearing each other; its model is the
    /// positioning's once it has a fit.
    public private(set) var calibration: FleetCalibration
    /// A node's identity (its lowercase UUID, as the others report it) → its name, from its state.
    private var nodeNames: [String: String] = [:]
    /// The nodes that publish their hearings each second (``HearingBatch``): the positioning and
    /// the calibration read those of them, not their peer reports (whose levels come late: the
    /// zone filter's, let through by the rate control).
    private var secondNodes: Set<String> = []

    /// A second's hearing counts for this long, seconds (``HeardSecond/freshFor``).
    public static let secondStale = HeardSecond.freshFor

    /// The RSSI at 1 m taken for a report that does not say (`rssi@1m` absent), dBm.
    public static let defaultMeasuredPower = -59.0
    /// The spread and sample count taken for a report of a node older than `rssi_spread` and `samples`.
    public static let defaultSpread = 3.0, defaultSamples = 5

    public init(plan: FloorPlan, staleAfter: Double, configuration: GridPositioner.Configuration = .init(),
                estimator: FleetEstimator = .fleet) {
        self.plan = plan
        self.staleAfter = staleAfter
        self.configuration = configuration
        self.estimator = estimator
        grid = PositioningGrid(plan: plan, outsideWeight: configuration.outsideWeight)
        planNodes = Set(plan.nodes.map(\.name))
        calibration = FleetCalibration(plan: plan)
    }

    /// The path-loss model every device's estimator uses: the plan's, then the calibration's.
    public var model: PathLossModel { calibration.model }

    /// A new plan (a reload): a new grid, every device's belief started afresh; the hearings stay.
    public mutating func replace(plan: FloorPlan) {
        self.plan = plan
        grid = PositioningGrid(plan: plan, outsideWeight: configuration.outsideWeight)
        planNodes = Set(plan.nodes.map(\.name))
        positioners = [:]
        calibration = FleetCalibration(plan: plan)
    }

    /// A node's state named its identity: its reports of the other nodes, and theirs of it,
    /// count for the calibration.
    public mutating func learn(node: String, identity: String) {
        nodeNames[identity.lowercased()] = node
    }

    public func isPlanNode(_ node: String) -> Bool { planNodes.contains(node) }

    /// The name of the node whose identity `device` is (from its state), if it is one.
    public func nodeName(of device: String) -> String? { nodeNames[device.lowercased()] }

    /// What a node's report says for the positioning: its filtered RSSI (a node older than
    /// `rssi_filtered` gives its last sample, `rssi`), spread, samples, measured power and distance;
    /// nil when it has no RSSI or no distance (a peer no longer heard).
    /// What a node's hearings of one second say of one device (``HearingBatch/Device``), for the
    /// positioning; nil for levels no radio gives. The distance is the node's model's (the
    /// distance-based baselines read it): exponent 2, the stated measured power.
    public static func hearing(node: String, second: HearingBatch.Device, at t: Double) -> NodeHearing? {
        guard second.rssi.isFinite, second.rssi < 30, second.rssi > -200, second.n > 0 else { return nil }
        let spread = second.spread.isFinite && second.spread >= 0 ? min(second.spread, 60) : defaultSpread
        let power = (-127 ... 20).contains(second.rssiAt1m) ? Double(second.rssiAt1m) : defaultMeasuredPower
        let distance = LogDistanceModel(exponent: 2).distance(rssi: second.rssi, measuredPower: power)
        return NodeHearing(node: node, rssi: second.rssi, spread: spread, samples: second.n, measuredPower: power,
                           distance: distance, time: t)
    }

    /// A node's hearings of one second, arrived at `t`: each device's for the positioning (those
    /// `place` says are to be placed) and, for a device that is a node, the calibration. From now
    /// on the node's peer reports no longer feed either.
    public mutating func hear(node: String, seconds batch: [HearingBatch.Device], at t: Double, place: (String) -> Bool) {
        secondNodes.insert(node)
        for second in batch {
            guard let hearing = Self.hearing(node: node, second: second, at: t) else { continue }
            let device = second.id
            if let other = nodeNames[device.lowercased()] {
                calibration.hear(receiver: node, transmitter: other, rssi: hearing.rssi, stated: hearing.measuredPower,
                                 samples: hearing.samples, at: t)
            }
            if place(device) {
                hearings[device, default: [:]][node] = hearing
            } else if hearings[device]?[node] != nil {
                hearings[device]?[node] = nil
                if hearings[device]?.isEmpty == true { hearings[device] = nil }
            }
        }
    }

    /// How long `node`'s hearing counts: a second's ``secondStale``, a peer report's ``staleAfter``.
    private func stale(_ node: String) -> Double { secondNodes.contains(node) ? Self.secondStale : staleAfter }

    public static func hearing(node: String, report: PeerReport, at t: Double) -> NodeHearing? {
        guard let distance = report.distance, distance.isFinite, distance > 0 else { return nil }
        guard let rssi = report.rssiFiltered ?? report.rssi.map(Double.init), rssi.isFinite, rssi < 30, rssi > -200 else { return nil }
        let spread = report.rssiSpread.flatMap { $0.isFinite && $0 >= 0 ? min($0, 60) : nil } ?? defaultSpread
        let samples = report.samples.map { max(1, $0) } ?? defaultSamples
        let power = report.rssiAt1m.flatMap { (-127 ... 20).contains($0) ? Double($0) : nil } ?? defaultMeasuredPower
        return NodeHearing(node: node, rssi: rssi, spread: spread, samples: samples, measuredPower: power, distance: distance, time: t)
    }

    /// A node's report of a device, arrived at `t`; with `place` false it feeds the calibration
    /// only (a node of the plan heard by another), and the device is not placed.
    public mutating func hear(device: String, node: String, report: PeerReport, at t: Double, place: Bool = true) {
        // A node that publishes its seconds: only a report that the device is gone counts here.
        if secondNodes.contains(node), report.distance != nil { return }
        let hearing = Self.hearing(node: node, report: report, at: t)
        if let other = nodeNames[device.lowercased()], let hearing {
            calibration.hear(receiver: node, transmitter: other, rssi: hearing.rssi, stated: hearing.measuredPower,
                             samples: hearing.samples, at: t)
        }
        if place, let hearing {
            hearings[device, default: [:]][node] = hearing
        } else if hearings[device]?[node] != nil {
            // No longer heard, or not to be placed (a node of the plan, learnt as one since).
            hearings[device]?[node] = nil
            if hearings[device]?.isEmpty == true { hearings[device] = nil }
        }
    }

    /// A node went offline (or is mobile): its hearings are dropped.
    public mutating func forget(node: String) {
        secondNodes.remove(node)
        for device in hearings.keys where hearings[device]?[node] != nil {
            hearings[device]?[node] = nil
            if hearings[device]?.isEmpty == true { hearings[device] = nil }
        }
    }

    /// A device gone (not_home): its hearings and its belief.
    public mutating func forget(device: String) {
        hearings[device] = nil
        positioners[device] = nil
    }

    /// The fresh hearings of `device` by nodes in the plan, by node name.
    public func hearings(of device: String, at t: Double) -> [NodeHearing] {
        (hearings[device] ?? [:]).values.filter { planNodes.contains($0.node) && t - $0.time < stale($0.node) }.sorted { $0.node < $1.node }
    }

    /// Whether a node in the plan has heard `device` within ``staleAfter``: its position, not the
    /// nearest node, decides its room.
    public func isPlaced(_ device: String, at t: Double) -> Bool {
        hearings[device]?.values.contains { planNodes.contains($0.node) && t - $0.time < stale($0.node) } ?? false
    }

    /// One step of every device a node in the plan hears: its estimate. Hearings gone stale are
    /// dropped, and the belief of a device that no node hears any more.
    public mutating func step(at t: Double) -> [String: PositionEstimate] {
        if calibration.refit(at: t) {
            let model = calibration.model
            for device in positioners.keys {
                guard var grid = positioners[device] as? GridPositioner else { continue }
                grid.model = model
                positioners[device] = grid
            }
        }
        var out: [String: PositionEstimate] = [:]
        for device in hearings.keys.sorted() {
            let kept = hearings[device]!.filter { t - $0.value.time < stale($0.key) }
            hearings[device] = kept.isEmpty ? nil : kept
            let fresh = kept.values.filter { planNodes.contains($0.node) }.sorted { $0.node < $1.node }
            guard !fresh.isEmpty else { continue }
            var positioner = positioners.removeValue(forKey: device)
                ?? estimator.positioner(plan: plan, grid: grid, model: model, configuration: configuration)
            if let estimate = positioner.estimate(fresh, at: t) { out[device] = estimate }
            positioners[device] = positioner
        }
        // A device no node hears any more loses its belief (a grid's worth of memory): it starts
        // afresh if heard again.
        for device in positioners.keys where hearings[device] == nil { positioners[device] = nil }
        return out
    }

    /// The calibration as `<prefix>/calibration` holds it; nil before the first fit.
    public func calibrationPayload(epoch: Double) -> FleetCalibrationPayload? {
        guard let fit = calibration.fit else { return nil }
        func tenth(_ v: Double?) -> Double? { v.flatMap { $0.isFinite ? ($0 * 10).rounded() / 10 : nil } }
        let nodes = plan.nodes.map { node -> FleetCalibrationPayload.Node in
            let state = calibration.nodes[node.name]
            return .init(name: node.name, rxOffset: tenth(state?.rxOffset), txPower: tenth(state?.txPower),
                         residual: tenth(state?.residual), drift: state?.drift)
        }
        let pairs = calibration.pairs.values.sorted { ($0.receiver, $0.transmitter) < ($1.receiver, $1.transmitter) }.map {
            FleetCalibrationPayload.Pair(receiver: $0.receiver, transmitter: $0.transmitter, distance: tenth($0.distance) ?? 0,
                                         rssi: tenth($0.rssi) ?? 0, residual: tenth($0.residual))
        }
        return FleetCalibrationPayload(time: MQTTRounding.milliseconds(epoch), exponent: (fit.exponent * 100).rounded() / 100,
                                       rms: tenth(fit.rms) ?? 0, holdoutRMS: tenth(fit.holdoutRMS),
                                       exponentAtBound: fit.exponentAtBound ? true : nil, nodes: nodes, pairs: pairs)
    }

    /// The devices with a belief (for tests and the table).
    public var devices: [String] { positioners.keys.sorted() }

    /// `estimate` as published: metres to 0.1 m, the floor and room by name.
    public func payload(_ estimate: PositionEstimate, at t: Double) -> FleetPosition {
        func tenth(_ v: Double) -> Double { v.isFinite ? (v * 10).rounded() / 10 : 0 }
        let floor = plan.floors.indices.contains(estimate.floor) ? plan.floors[estimate.floor].name : ""
        let room = estimate.room.flatMap { plan.rooms.indices.contains($0) ? plan.rooms[$0].name : nil }
        return FleetPosition(x: tenth(estimate.position.x), y: tenth(estimate.position.y), z: tenth(estimate.position.z),
                             floor: floor.isEmpty ? nil : floor, uncertainty: tenth(estimate.uncertainty), room: room,
                             time: MQTTRounding.milliseconds(t))
    }

    /// How far a device must move, or its uncertainty change, metres, for its position to go out again.
    public static let moved = 0.3

    /// Whether `new` says something `old` (the last published) did not: another room or floor, a
    /// move of ``moved`` or more, or an uncertainty that changed by as much.
    public static func isMeaningful(_ new: FleetPosition, since old: FleetPosition?) -> Bool {
        guard let old else { return true }
        if new.room != old.room || new.floor != old.floor { return true }
        let dx = new.x - old.x, dy = new.y - old.y, dz = new.z - old.z
        if (dx * dx + dy * dy + dz * dz).squareRoot() >= moved - 1e-9 { return true }
        return abs(new.uncertainty - old.uncertainty) >= moved - 1e-9
    }
}
