import BlueZSim

/// The radio of one benchmark condition: the simulator's parameters for every link from the
/// walker or device to a listener (ranging-bench's one, fleet-bench's boxes).
public struct RadioCondition: Hashable, Codable, Sendable {
    /// The simple model (log-distance, independent Gaussian shadowing and loss), or bluez-sim's
    /// realistic preset (device offsets, a shadowing field, AR(1) shadowing, channel offsets,
    /// outliers, bursty loss; docs/simulator.md), whose own σ and losses replace `sigma` and `loss`.
    /// `calibrated` (fleet-bench) is the realistic preset with every node calibrated for the
    /// device: its measured power is what `proximityctl calibrate` finds at 1 m, the device's and
    /// the box's offsets (the shadowing field and the channel offsets remain).
    public enum Kind: String, Hashable, Codable, Sendable, CaseIterable {
        case simple, realistic, calibrated
    }

    public var sigma: Double
    public var exponent: Double
    public var interval: Double
    public var loss: Double
    public var measuredPower: Double
    public var kind: Kind

    public init(sigma: Double, exponent: Double, interval: Double, loss: Double, measuredPower: Double, kind: Kind = .simple) {
        self.sigma = sigma
        self.exponent = exponent
        self.interval = interval
        self.loss = loss
        self.measuredPower = measuredPower
        self.kind = kind
    }

    public var model: RadioModel {
        var parameters: RadioParameters
        switch kind {
        case .simple:
            parameters = RadioParameters(pathLossExponent: exponent, measuredPower: measuredPower, shadowingSigma: sigma,
                                         advertisingInterval: interval, packetLoss: loss)
        case .realistic, .calibrated:
            parameters = .realistic
            parameters.pathLossExponent = exponent
            parameters.measuredPower = measuredPower
            parameters.advertisingInterval = interval
        }
        return RadioModel(parameters)
    }

    /// The condition in a table's heading. ranging-bench, whose default is the simple model,
    /// does not name it; fleet-bench does (`namingSimple`).
    public func label(namingSimple: Bool = false) -> String {
        switch kind {
        case .simple:
            (namingSimple ? "simple " : "")
                + "σ=\(format(sigma, 0)) dB, n=\(format(exponent, 1)), adv \(format(interval * 1000, 0)) ms, loss \(format(loss * 100, 0))%"
        case .realistic:
            "realistic preset, n=\(format(exponent, 1)), adv \(format(interval * 1000, 0)) ms"
        case .calibrated:
            "realistic, nodes calibrated, n=\(format(exponent, 1)), adv \(format(interval * 1000, 0)) ms"
        }
    }
}
