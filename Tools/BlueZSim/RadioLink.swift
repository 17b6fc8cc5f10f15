/// One direction of one link (a transmitter's advertisements heard by one listener) as the radio
/// samples it: the link's own stream for loss and shadowing, its realistic state when the
/// realistic model is on, and its burst process when bursts are on. The air keeps one per
/// advertiser and listener (sharing each burst process among a box's advertisements);
/// the benchmarks keep one per listener of their walker or device.
public struct RadioLink: Sendable, Hashable {
    /// Loss and the independent Gaussian shadowing (``RadioModel/sampleRSSI(distance:measuredPower:deviation:using:)``).
    public var rng: SeededGenerator
    /// The realistic model's state of the link; nil when the model is off.
    public var realistic: RealisticLink?
    /// The link's bad spells; nil when bursts are off.
    public var burst: BurstProcess?

    public init(rng: SeededGenerator, realistic: RealisticLink? = nil, burst: BurstProcess? = nil) {
        self.rng = rng
        self.realistic = realistic
        self.burst = burst
    }
}

extension RadioModel {
    /// One advertisement sent at `t` from `transmitter`, as `listener` hears it on `link`: its
    /// RSSI, or nil when it is lost (independently, in a bad spell of the link's burst process, or
    /// below the sensitivity). The one sampling function: the air's every advertising event and
    /// the benchmarks' traces go through it.
    ///
    /// The mean is the log-distance mean at their distance (with `measuredPower`, a beacon's own
    /// calibration, when given) plus `txOffset` (the transmitter's `tx_offset`) plus, when the
    /// link has a realistic state, its deviation with the listener at `listener − transmitter`
    /// (``RealisticLink/deviation(at:x:y:)``). The link's streams advance as
    /// ``sampleRSSI(distance:measuredPower:deviation:at:burst:using:)`` says: three draws from
    /// `link.rng` whatever happens.
    public func receive(from transmitter: Position, at listener: Position, time t: SimTime, measuredPower: Double? = nil,
                        txOffset: Double = 0, link: inout RadioLink) -> Int16? {
        var deviation = txOffset
        if var realistic = link.realistic {
            deviation += realistic.deviation(at: t, x: listener.x - transmitter.x, y: listener.y - transmitter.y)
            link.realistic = realistic
        }
        let distance = transmitter.distance(to: listener)
        guard var burst = link.burst else {
            return sampleRSSI(distance: distance, measuredPower: measuredPower, deviation: deviation, using: &link.rng)
        }
        let sample = sampleRSSI(distance: distance, measuredPower: measuredPower, deviation: deviation, at: t, burst: &burst,
                                using: &link.rng)
        link.burst = burst
        return sample
    }
}
