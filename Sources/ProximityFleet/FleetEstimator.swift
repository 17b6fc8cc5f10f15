import ProximityCore

/// Which estimator places each device on the plan: the fleet's grid filter, or one of the
/// baselines it is measured against (`proximity-fleet replay --estimator`, `fleet-bench`).
public enum FleetEstimator: String, Sendable, Hashable, CaseIterable {
    /// The grid filter (``GridPositioner``), with the calibration's model.
    case fleet
    /// ESPresense Companion's multilateration.
    case espresense
    /// A weighted centroid of the nodes that hear the device.
    case centroid
    /// The nearest node's position.
    case nearest

    /// A device's estimator on `plan` (`grid` is shared by the grid filter's devices).
    public func positioner(plan: FloorPlan, grid: PositioningGrid, model: PathLossModel,
                           configuration: GridPositioner.Configuration = .init()) -> any Positioner {
        switch self {
        case .fleet: GridPositioner(grid: grid, model: model, configuration: configuration)
        case .espresense: MultilaterationPositioner(plan: plan)
        case .centroid: WeightedCentroidPositioner(plan: plan)
        case .nearest: NearestNodePositioner(plan: plan)
        }
    }
}
