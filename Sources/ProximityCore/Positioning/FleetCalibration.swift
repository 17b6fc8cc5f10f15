import Foundation

/// The fleet's calibration, kept up continuously from the nodes of the plan hearing each other at
/// known distances (`docs/positioning.md`, Self-calibration): each pair's RSSI averaged over
/// ``Configuration/memory`` seconds, refitted every ``Configuration/refitInterval`` seconds
/// (``Calibration/fit(_:priors:iterations:)``, robust), and each node checked against where it
/// stood in the first good fit (the exponent inside its range, residual RMS within
/// ``Configuration/residualLimit``): a node whose offsets moved by more than
/// ``Configuration/driftLimit`` dB since, or whose hearings the fit no longer explains while the
/// others' it does (median residual above ``Configuration/residualLimit``), is reported drifting
/// (moved, turned, blocked). Pure: hearings and time in.
public struct FleetCalibration: Sendable {
    public struct Configuration: Sendable, Hashable {
        public var refitInterval = 60.0
        /// The time constant of each pair's average, seconds.
        public var memory = 600.0
        /// Fewer pairs than this: no fit.
        public var minimumPairs = 6
        /// No fit while a pair heard has been heard fewer times than this: the nodes report their
        /// hearings one after another, and a fit made halfway through the first rounds would
        /// leave out the pairs not heard yet.
        public var minimumHearings = 3
        public var driftLimit = 3.0
        public var residualLimit = 4.0
        public var priors = Calibration.Priors()

        public init() {}
    }

    /// One pair of the matrix: what `receiver` hears of `transmitter`.
    public struct Pair: Sendable, Hashable {
        public var receiver: String
        public var transmitter: String
        /// From the plan, metres.
        public var distance: Double
        /// The averaged RSSI, dBm.
        public var rssi: Double
        /// The transmitter's stated power at 1 m, dBm.
        public var stated: Double
        /// The weight of the average (samples, decayed).
        public var weight: Double
        public var lastHeard: Double
        /// How many hearings it was averaged from.
        public var hearings = 1
        /// What the last fit left of it, dB.
        public var residual: Double?
    }

    /// A node's state after a fit.
    public struct NodeState: Sendable, Hashable {
        public var rxOffset: Double?
        public var txPower: Double?
        public var residual: Double?
        /// Why it is reported drifting, if it is.
        public var drift: String?
    }

    public let plan: FloorPlan
    public var configuration: Configuration
    public private(set) var pairs: [String: Pair] = [:]
    public private(set) var fit: Calibration.Fit?
    public private(set) var nodes: [String: NodeState] = [:]
    public private(set) var lastFit: Double?
    /// Each node's offsets when first fitted (or as the plan's calibration keys give them).
    private var baseline: [String: (rx: Double?, tx: Double?)] = [:]

    public init(plan: FloorPlan, configuration: Configuration = .init()) {
        self.plan = plan
        self.configuration = configuration
        for node in plan.nodes where node.rxOffset != nil || node.txPower != nil {
            baseline[node.name] = (node.rxOffset, node.txPower)
        }
    }

    /// `receiver` heard `transmitter` (both nodes of the plan; anything else is ignored) at `rssi`
    /// (dBm, smoothed), `samples` samples behind it.
    public mutating func hear(receiver: String, transmitter: String, rssi: Double, stated: Double, samples: Int = 1, at t: Double) {
        guard receiver != transmitter, rssi.isFinite, let r = plan.node(named: receiver), let x = plan.node(named: transmitter) else {
            return
        }
        let key = receiver + "\u{0}" + transmitter
        let w = Double(max(1, samples))
        if var pair = pairs[key] {
            let decay = Foundation.exp(-max(0, t - pair.lastHeard) / configuration.memory)
            let old = pair.weight * decay
            pair.rssi = (pair.rssi * old + rssi * w) / (old + w)
            pair.weight = min(old + w, 10_000)
            pair.stated = stated
            pair.lastHeard = t
            pair.hearings += 1
            pairs[key] = pair
        } else {
            pairs[key] = Pair(receiver: receiver, transmitter: transmitter,
                              distance: max(PathLossModel.minimumDistance, r.position.distance(to: x.position)),
                              rssi: rssi, stated: stated, weight: w, lastHeard: t, residual: nil)
        }
    }

    /// Refits when ``Configuration/refitInterval`` has passed; true when it did.
    @discardableResult
    public mutating func refit(at t: Double) -> Bool {
        if let lastFit, t - lastFit < configuration.refitInterval { return false }
        // Pairs not heard for three memories are dropped.
        pairs = pairs.filter { t - $0.value.lastHeard < 3 * configuration.memory }
        guard pairs.count >= configuration.minimumPairs,
              pairs.values.allSatisfy({ $0.hearings >= configuration.minimumHearings }) else { return false }
        let keys = pairs.keys.sorted()
        let observations = keys.map { key -> Calibration.Observation in
            let p = pairs[key]!
            let decayed = p.weight * Foundation.exp(-max(0, t - p.lastHeard) / configuration.memory)
            return .init(receiver: p.receiver, transmitter: p.transmitter, distance: p.distance, rssi: p.rssi, stated: p.stated,
                         weight: min(max(decayed, 0.01), 50))
        }
        guard let fit = Calibration.fit(observations, priors: configuration.priors, holdout: true) else { return false }
        self.fit = fit
        lastFit = t
        for (i, key) in keys.enumerated() { pairs[key]?.residual = fit.residuals[i] }
        var states: [String: NodeState] = [:]
        // A drift is judged against a good fit (the exponent inside its range, the hearings
        // explained), not against whatever the first fit was: a first fit of half-heard pairs would
        // otherwise make every node drift from then on.
        let good = !fit.exponentAtBound && fit.rms <= configuration.residualLimit
        // A node's hearings off the fit count against it only when the others' are explained.
        let residuals = plan.nodes.compactMap { fit.nodeResiduals[$0.name]?.median }.sorted()
        let othersExplained = residuals.isEmpty || residuals[residuals.count / 2] <= configuration.residualLimit
        for node in plan.nodes {
            var state = NodeState(rxOffset: fit.rxOffsets[node.name], txPower: fit.txPowers[node.name],
                                  residual: fit.nodeResiduals[node.name]?.median)
            if baseline[node.name] == nil, good, state.rxOffset != nil || state.txPower != nil {
                baseline[node.name] = (state.rxOffset, state.txPower)
            }
            var reasons: [String] = []
            if let base = baseline[node.name] {
                if let now = state.rxOffset, let then = base.rx, abs(now - then) > configuration.driftLimit {
                    reasons.append(String(format: "receive offset moved %+.1f dB", now - then))
                }
                if let now = state.txPower, let then = base.tx, abs(now - then) > configuration.driftLimit {
                    reasons.append(String(format: "transmit power moved %+.1f dB", now - then))
                }
            }
            if let residual = state.residual, residual > configuration.residualLimit, othersExplained {
                reasons.append(String(format: "its hearings are %.1f dB off the fit (moved, or blocked?)", residual))
            }
            state.drift = reasons.isEmpty ? nil : reasons.joined(separator: "; ")
            states[node.name] = state
        }
        nodes = states
        return true
    }

    /// The model the positioning should use: the fitted exponent and receive offsets (the plan's
    /// where the fit has none, and the plan's alone before the first fit).
    public var model: PathLossModel {
        var model = PathLossModel(plan: plan)
        guard let fit else { return model }
        model.exponent = fit.exponent
        for node in plan.nodes { if let rx = fit.rxOffsets[node.name] { model.rxOffsets[node.name] = rx } }
        return model
    }
}
