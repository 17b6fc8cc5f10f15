import Foundation
import ProximityCore

/// What the fleet service is told at start (`proximity-fleet`'s options; docs/fleet.md).
public struct FleetConfiguration: Sendable {
    /// The broker, as its log lines name it (`mqtt://HOST:PORT`).
    public var broker = "the broker"
    /// The nodes' topic root: their prefixes are `<root>/<node name>` (the nodes' default).
    public var root = "proximityd"
    /// This service's topics start with it.
    public var prefix = "proximity-fleet"
    public var discovery = true
    public var discoveryPrefix = "homeassistant"
    /// Which rule decides the rooms: the fleet's own (``RoomDecider``), or a baseline.
    public var rule: RoomRuleKind = .fleet
    public var decider = RoomDecider.Configuration()
    /// The devices tracked (peer identifiers); nil: every device a node reports.
    public var track: Set<String>?
    /// The live table (`<prefix>/table`) goes out at most this often, seconds, and 2 s more for
    /// every 500 devices it holds (a fleet of 10 000 devices: every 42 s); a room change goes out
    /// at once.
    public var tableInterval = 2.0
    /// A device's attributes (its distances) go out with each room change, and at most this often
    /// otherwise, seconds.
    public var attributesInterval = 10.0
    /// The floor plan (`--plan`): devices that nodes in it hear get a position, and their room is
    /// the room holding it; nil: rooms by the nearest node only, as without positioning.
    public var plan: FloorPlan?
    /// With a plan, what the reports of nodes not in it do (`--outside-nodes`); without one, every
    /// node's reports are taken.
    public var outsideNodes: OutsideNodes = .ignore
    /// The positioning's settings (the grid filter's defaults).
    public var positioner = GridPositioner.Configuration()
    /// Which estimator places the devices (a baseline only for `replay --estimator`).
    public var estimator: FleetEstimator = .fleet
    /// The map's views (`--http`): shown the plan and, once a second, the state; none without a map.
    public var views: FleetViews?

    public init() {}

    func makeRule() -> any RoomRule {
        switch rule {
        case .fleet: RoomDecider(configuration: decider)
        case .nearest: NearestInRange(timeout: decider.awayAfter)
        case .bermuda: BermudaRule()
        }
    }
}

/// With a floor plan, what the fleet service does with the reports of nodes not in the plan
/// (`proximity-fleet run --outside-nodes`; docs/fleet.md, Floor plan and positions).
public enum OutsideNodes: String, Sendable, Hashable, CaseIterable {
    /// Ignored, for rooms, positions, the calibration, the table, Home Assistant and the map; each
    /// such node is logged once. Only the plan's nodes count (a trusted fleet: docs/mqtt.md).
    case ignore
    /// Taken for rooms: a device only they hear gets the rule's nearest-node room, without a
    /// position (issue 24's fallback, for a plan that covers part of a site).
    case nearest
}
