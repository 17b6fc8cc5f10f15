import Foundation

/// The radio of a scenario: one set of parameters for every link. Units are dBm, metres, seconds
/// and probabilities in 0...1. The scenario file spells the names in snake case
/// (`path_loss_exponent`, ...); see docs/simulator.md.
public struct RadioParameters: Sendable, Hashable {
    /// n in the log-distance model: 2 in free space, 2.5–4 indoors.
    public var pathLossExponent: Double
    /// Mean RSSI at 1 m, dBm (the "measured power" of iBeacon).
    public var measuredPower: Double
    /// Standard deviation of the Gaussian shadowing added to every sample, dB.
    public var shadowingSigma: Double
    /// Advertising interval of every box, seconds (each event also adds a 0–10 ms advDelay).
    public var advertisingInterval: Double
    /// Probability that one advertisement is not received, independently per packet and link.
    public var packetLoss: Double
    /// Mean time to establish a connection, seconds.
    public var connectionLatency: Double
    /// Probability that a connection attempt fails.
    public var connectionFailureRate: Double
    /// Reports weaker than this (after shadowing and rounding) are not received, dBm.
    public var sensitivity: Double
    /// Bursty loss (Gilbert–Elliott): the long-run fraction of time each link spends in a bad
    /// spell, in 0...1, during which every advertisement on it is lost. 0 turns bursts off.
    /// On its own it loses this fraction of the packets; with ``packetLoss`` p the loss is
    /// p + (1 − p) · burstLossRate.
    public var burstLossRate: Double
    /// Mean length of a bad spell, seconds (exponentially distributed; good spells have mean
    /// `burstDuration · (1 − burstLossRate) / burstLossRate`).
    public var burstDuration: Double
    /// Seconds over which each box's bluetoothd gathers advertising reports before it takes them
    /// in, all at once, as a controller that buffers reports delivers them in bunches. 0 (the
    /// default): each report as it is received.
    public var reportBatching: Double
    /// The parts of real RSSI beyond this model (per-device offsets, a shadowing field, AR(1)
    /// shadowing, channel offsets, outliers); all off by default (``RealisticRadio``).
    public var realistic = RealisticRadio()

    public init(
        pathLossExponent: Double = 2.0,
        measuredPower: Double = -59,
        shadowingSigma: Double = 2.0,
        advertisingInterval: Double = 0.1,
        packetLoss: Double = 0,
        connectionLatency: Double = 0.05,
        connectionFailureRate: Double = 0,
        sensitivity: Double = -100,
        burstLossRate: Double = 0,
        burstDuration: Double = 1.0,
        reportBatching: Double = 0
    ) {
        self.pathLossExponent = pathLossExponent
        self.measuredPower = measuredPower
        self.shadowingSigma = shadowingSigma
        self.advertisingInterval = advertisingInterval
        self.packetLoss = packetLoss
        self.connectionLatency = connectionLatency
        self.connectionFailureRate = connectionFailureRate
        self.sensitivity = sensitivity
        self.burstLossRate = burstLossRate
        self.burstDuration = burstDuration
        self.reportBatching = reportBatching
    }

    /// The legal range of an advertising interval: 20 ms to 10.24 s (Bluetooth Core 5.x, Vol 6,
    /// Part B, 4.4.2.2.1 for legacy advertising).
    public static let advertisingIntervalRange: ClosedRange<Double> = 0.020...10.24
    /// The shortest mean bad spell, seconds: half the shortest advertising interval. A spell that
    /// rarely covers a whole advertising event is independent loss (``packetLoss``), and shorter
    /// spells would only cost time.
    public static let minimumBurstDuration = 0.01
    /// The longest ``reportBatching``, seconds.
    public static let maximumReportBatching = 10.0

    /// Throws for the first parameter out of range, with the scenario file's key as the path
    /// (`packet_loss`, ...). ``Scenario/validate()`` prefixes it with `radio.`.
    public func validate() throws(ScenarioError) {
        func check(_ ok: Bool, _ key: String, _ message: @autoclosure () -> String) throws(ScenarioError) {
            if !ok { throw ScenarioError(path: key, message: message()) }
        }
        try check(pathLossExponent.isFinite && pathLossExponent > 0, "path_loss_exponent",
                  "must be a positive number (2 in free space, 2.5–4 indoors), not \(ScenarioError.show(pathLossExponent))")
        try check(RadioModel.rssiRange.contains(measuredPower), "measured_power",
                  "must be an RSSI in -127...20 dBm, not \(ScenarioError.show(measuredPower))")
        try check(shadowingSigma.isFinite && shadowingSigma >= 0, "shadowing_sigma",
                  "must be 0 or more dB, not \(ScenarioError.show(shadowingSigma))")
        try check(Self.advertisingIntervalRange.contains(advertisingInterval), "advertising_interval",
                  "must be 0.02...10.24 s (Bluetooth's advertising interval range), not \(ScenarioError.show(advertisingInterval))")
        try check((0...1).contains(packetLoss), "packet_loss", "must be a probability in 0...1, not \(ScenarioError.show(packetLoss))")
        try check(connectionLatency.isFinite && connectionLatency >= 0, "connection_latency",
                  "must be 0 or more seconds, not \(ScenarioError.show(connectionLatency))")
        try check((0...1).contains(connectionFailureRate), "connection_failure_rate",
                  "must be a probability in 0...1, not \(ScenarioError.show(connectionFailureRate))")
        try check(RadioModel.rssiRange.contains(sensitivity), "sensitivity",
                  "must be an RSSI in -127...20 dBm, not \(ScenarioError.show(sensitivity))")
        try check((0...1).contains(burstLossRate), "burst_loss_rate",
                  "must be a fraction of time in 0...1 (0: no bursts), not \(ScenarioError.show(burstLossRate))")
        try check(burstDuration.isFinite && burstDuration >= Self.minimumBurstDuration, "burst_duration",
                  "must be 0.01 or more seconds (the mean length of a bad spell), not \(ScenarioError.show(burstDuration))")
        try check((0...Self.maximumReportBatching).contains(reportBatching), "report_batching",
                  "must be 0...10 seconds (0: each report as it is received), not \(ScenarioError.show(reportBatching))")
        try realistic.validate()
    }

    /// The realistic preset (`preset: realistic`): the simple model's parameters and
    /// ``RealisticRadio/realistic``, in the ranges measured on real receivers: a small independent
    /// part (σ 1.5 dB), 10 % independent loss, and bursts covering 20 % of the time with a mean of
    /// 2 s (holes of 3–5 s common, some much longer).
    public static let realistic: RadioParameters = {
        var r = RadioParameters(shadowingSigma: 1.5, packetLoss: 0.1, burstLossRate: 0.2, burstDuration: 2.0)
        r.realistic = .realistic
        return r
    }()
}

/// The radio link model: log-distance path loss with Gaussian shadowing, independent packet loss,
/// bursty loss (a ``BurstProcess`` per link), a receiver sensitivity, advertising events with the
/// spec's random advDelay, and connection attempts with a latency distribution and a failure rate.
///
/// Pure: every random quantity comes from the generator passed in, every time is a parameter.
/// Each method consumes a fixed number of draws whatever the parameters, so a stream's later
/// numbers do not shift when, say, the loss rate changes. The burst process draws from a stream
/// of its own, so turning bursts on shifts no other stream either.
public struct RadioModel: Sendable, Hashable {
    public var parameters: RadioParameters

    public init(_ parameters: RadioParameters) {
        self.parameters = parameters
    }

    /// RSSI values BlueZ can report (HCI's range for a valid RSSI; 127 means "not available").
    public static let rssiRange: ClosedRange<Double> = -127...20
    /// Distances are floored here so the model stays finite when two points coincide.
    public static let minimumDistance = 0.1
    /// advDelay: a pseudo-random 0–10 ms added to every advertising event (Bluetooth Core 5.x,
    /// Vol 6, Part B, 4.4.2.2.1), so two advertisers never stay in lock step.
    public static let maximumAdvertisingDelay = 0.010
    /// Shape (σ of the logarithm) of the connection latency's lognormal distribution.
    public static let connectionLatencyLogSigma = 0.5

    /// The mean RSSI at `distance` metres: `measuredPower − 10·n·log10(max(d, 0.1))`.
    /// `measuredPower` overrides the scenario's (a beacon's own calibration).
    public func meanRSSI(distance: Double, measuredPower: Double? = nil) -> Double {
        let power = measuredPower ?? parameters.measuredPower
        let d = max(distance, Self.minimumDistance)
        return power - 10 * parameters.pathLossExponent * Foundation.log10(d)
    }

    /// The inverse of ``meanRSSI(distance:measuredPower:)``: the distance at which the mean RSSI
    /// is `rssi` (for checking a ranging algorithm against the truth).
    public func distance(forMeanRSSI rssi: Double, measuredPower: Double? = nil) -> Double {
        let power = measuredPower ?? parameters.measuredPower
        return Foundation.pow(10, (power - rssi) / (10 * parameters.pathLossExponent))
    }

    /// One received advertisement's RSSI, or nil when the packet is lost (probability
    /// `packetLoss`) or its RSSI is below `sensitivity`.
    ///
    /// RSSI = round(mean + N(0, σ)), clamped to −127...20. Three draws: one for loss, two for the
    /// shadowing deviate.
    /// `deviation` (dB, the realistic model's part) is added to the mean.
    public func sampleRSSI(distance: Double, measuredPower: Double? = nil, deviation: Double = 0,
                           using rng: inout SeededGenerator) -> Int16? {
        let lost = rng.chance(parameters.packetLoss)
        let value = rng.gaussian(mean: meanRSSI(distance: distance, measuredPower: measuredPower) + deviation,
                                 sigma: parameters.shadowingSigma)
        guard !lost else { return nil }
        let rounded = min(max(value.rounded(), Self.rssiRange.lowerBound), Self.rssiRange.upperBound)
        guard rounded >= parameters.sensitivity else { return nil }
        return Int16(rounded)
    }

    /// One advertisement at time `t` on a link whose burst process is `burst`: lost when the link
    /// is in a bad spell at `t`, else as ``sampleRSSI(distance:measuredPower:using:)``, whose three
    /// draws from `rng` are taken either way (the burst process draws from its own stream).
    public func sampleRSSI(distance: Double, measuredPower: Double? = nil, deviation: Double = 0, at t: SimTime, burst: inout BurstProcess,
                           using rng: inout SeededGenerator) -> Int16? {
        let bad = burst.state(at: t) == .bad
        let sample = sampleRSSI(distance: distance, measuredPower: measuredPower, deviation: deviation, using: &rng)
        return bad ? nil : sample
    }

    /// A link's burst process with this radio's ``RadioParameters/burstLossRate`` and
    /// ``RadioParameters/burstDuration``, drawing from `rng` (give each link a stream of its own).
    public func burstProcess(using rng: SeededGenerator) -> BurstProcess {
        BurstProcess(badFraction: parameters.burstLossRate, meanBadSpell: parameters.burstDuration, using: rng)
    }

    /// The burst process the air gives the link from `transmitter` to `listener` (box or beacon
    /// names) in a run with `seed`: its stream is `derived("burst:<transmitter>><listener>")` of
    /// the seed's, so a test can know in advance where that link's bad spells fall. Each direction
    /// of a pair has its own process, which every advertisement of the transmitter shares.
    public func burstProcess(seed: UInt64, from transmitter: String, to listener: String) -> BurstProcess {
        burstProcess(using: SeededGenerator(seed: seed).derived("burst:\(transmitter)>\(listener)"))
    }

    /// When the next advertising event happens: `t + interval + advDelay`, advDelay uniform in
    /// [0, 10 ms] (one draw). The mean spacing is therefore `interval + 5 ms`.
    public func nextAdvertisement(after t: SimTime, interval: Double, using rng: inout SeededGenerator) -> SimTime {
        t + interval + rng.uniform(0...Self.maximumAdvertisingDelay)
    }

    /// One connection attempt: how long it takes and whether it fails.
    ///
    /// The latency is lognormal with mean `connectionLatency` and log-σ 0.5 (coefficient of
    /// variation ≈ 0.53): a connection needs the central to catch an advertisement and then a few
    /// connection events, so it is never near zero, usually close to the mean, and has a moderate
    /// tail; an exponential would put the most likely latency at zero. A failed attempt takes
    /// a latency from the same distribution before it reports the failure. Three draws.
    public func connectionAttempt(using rng: inout SeededGenerator) -> (latency: Double, fails: Bool) {
        let sigma = Self.connectionLatencyLogSigma
        let z = rng.gaussian(mean: 0, sigma: 1)
        let fails = rng.chance(parameters.connectionFailureRate)
        let mean = parameters.connectionLatency
        guard mean > 0 else { return (0, fails) }
        let mu = Foundation.log(mean) - sigma * sigma / 2
        return (Foundation.exp(mu + sigma * z), fails)
    }
}

/// The Gilbert–Elliott burst process of one link, in continuous time: the link alternates between
/// good and bad spells, each of exponentially distributed length, with mean ``meanBadSpell`` for
/// bad spells and `meanBadSpell · (1 − badFraction) / badFraction` for good ones, so the link is
/// bad a fraction ``badFraction`` of the time. In a bad spell every packet is lost; in a good one
/// only the independent `packet_loss` applies.
///
/// The process starts at time 0 in its stationary distribution (bad with probability
/// ``badFraction``; the first spell's length drawn as any other, which memorylessness allows) and
/// draws one number per spell after that, from its own generator. Where its spells fall is
/// therefore a function of its generator's seed and the two parameters alone: not of when, or how
/// often, packets ask (``state(at:)``), so it does not depend on the advertising interval.
/// With `badFraction` 0 it is always good and never draws; with 1, always bad.
public struct BurstProcess: Sendable, Hashable {
    /// The state of a link.
    public enum State: Sendable, Hashable {
        /// Packets get through but for the independent `packet_loss`.
        case good
        /// Every packet is lost.
        case bad
    }

    /// The long-run fraction of time in bad spells, 0...1.
    public let badFraction: Double
    /// The mean length of a bad spell, seconds (> 0).
    public let meanBadSpell: Double
    /// The state of the current spell: the one that contains the last time asked.
    public private(set) var state: State
    /// When the current spell began (0 for the first).
    public private(set) var spellStart: SimTime
    /// When the current spell ends and the other state begins (infinity when bursts are off).
    public private(set) var spellEnd: SimTime
    private var rng: SeededGenerator

    /// A process starting at time 0. Two draws from `rng` (none when `badFraction` is 0).
    public init(badFraction: Double, meanBadSpell: Double, using rng: SeededGenerator) {
        precondition((0...1).contains(badFraction) && meanBadSpell > 0 && meanBadSpell.isFinite,
                     "a burst process needs a fraction in 0...1 and a positive mean spell")
        self.badFraction = badFraction
        self.meanBadSpell = meanBadSpell
        spellStart = 0
        var rng = rng
        if badFraction > 0 {
            state = rng.chance(badFraction) ? .bad : .good
            spellEnd = rng.exponential(mean: Self.meanSpell(state, badFraction: badFraction, meanBadSpell: meanBadSpell))
        } else {
            state = .good
            spellEnd = .infinity
        }
        self.rng = rng
    }

    /// The mean length of a spell in `state`, seconds: ``meanBadSpell`` for a bad one,
    /// `meanBadSpell · (1 − badFraction) / badFraction` for a good one (0 when always bad,
    /// infinity when bursts are off).
    public func meanSpell(_ state: State) -> Double {
        Self.meanSpell(state, badFraction: badFraction, meanBadSpell: meanBadSpell)
    }

    private static func meanSpell(_ state: State, badFraction: Double, meanBadSpell: Double) -> Double {
        switch state {
        case .bad: meanBadSpell
        case .good: meanBadSpell * (1 - badFraction) / badFraction
        }
    }

    /// The link's state at `t`, running the process forward through every spell that ended by
    /// then (one draw each). Times must not go back: an earlier `t` gets the current spell's state.
    public mutating func state(at t: SimTime) -> State {
        while spellEnd <= t {
            state = state == .good ? .bad : .good
            spellStart = spellEnd
            spellEnd = spellStart + rng.exponential(mean: meanSpell(state))
        }
        return state
    }
}
