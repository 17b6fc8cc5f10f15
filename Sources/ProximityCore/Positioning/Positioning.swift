import Foundation

/// What one node last said of one device, as the positioning reads it: the filtered RSSI and how
/// much the samples spread, how many there were, the measured power the node ranged with, and
/// the node's own distance estimate (the distance-based baselines use it).
public struct NodeHearing: Sendable, Hashable {
    /// The node's name, as in the plan.
    public var node: String
    /// The smoothed RSSI, dBm, with the node's RSSI offset applied.
    public var rssi: Double
    /// The standard deviation of the samples behind it, dB.
    public var spread: Double
    /// How many samples it rests on.
    public var samples: Int
    /// The RSSI at 1 m the node ranged the device with, dBm.
    public var measuredPower: Double
    /// The node's distance estimate, metres.
    public var distance: Double
    /// When the node heard it, seconds (the fleet's clock).
    public var time: Double

    public init(node: String, rssi: Double, spread: Double = 3, samples: Int = 5, measuredPower: Double = -59,
                distance: Double, time: Double) {
        self.node = node
        self.rssi = rssi
        self.spread = spread
        self.samples = samples
        self.measuredPower = measuredPower
        self.distance = distance
        self.time = time
    }
}

/// Where a device is: a point with its floor, how uncertain that is (metres, the radial
/// standard deviation), and the room holding it (an index into the plan's rooms).
public struct PositionEstimate: Sendable, Hashable {
    public var position: PlanPoint
    public var floor: Int
    public var uncertainty: Double
    public var room: Int?

    public init(position: PlanPoint, floor: Int, uncertainty: Double, room: Int?) {
        self.position = position
        self.floor = floor
        self.uncertainty = uncertainty
        self.room = room
    }
}

/// One device's position estimator: fed the fresh hearings (one per node, at most) at each
/// step, in time order; nil when it cannot say (nobody hears the device).
public protocol Positioner: Sendable {
    var name: String { get }
    mutating func estimate(_ hearings: [NodeHearing], at t: Double) -> PositionEstimate?
}

/// The fleet's model of what a node receives from a device at distance d: log-distance path
/// loss, in dB, with each node's receive offset.
public struct PathLossModel: Sendable, Hashable {
    public var exponent: Double
    /// Node name → dB added to what it receives (the plan's `rx-offset`, or fitted).
    public var rxOffsets: [String: Double]
    /// Distances below this count as this (the model does not hold inside it), metres.
    public static let minimumDistance = 0.3

    public init(exponent: Double = FloorPlan.defaultPathLossExponent, rxOffsets: [String: Double] = [:]) {
        self.exponent = exponent
        self.rxOffsets = rxOffsets
    }

    /// The plan's model: its exponent and each node's `rx-offset` (the calibration it was given).
    public init(plan: FloorPlan) {
        var offsets: [String: Double] = [:]
        for node in plan.nodes { if let rx = node.rxOffset { offsets[node.name] = rx } }
        self.init(exponent: plan.pathLossExponent, rxOffsets: offsets)
    }

    /// The distance at which `hearing`'s RSSI is expected, corrected by the node's offset.
    public func distance(_ hearing: NodeHearing) -> Double {
        let corrected = hearing.rssi + (rxOffsets[hearing.node] ?? 0)
        return Foundation.pow(10, (hearing.measuredPower - corrected) / (10 * exponent))
    }
}
