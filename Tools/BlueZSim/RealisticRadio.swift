import Foundation

/// The parts of real RSSI that log-distance path loss with independent Gaussian shadowing lacks
/// (issue 13; measured on recordings of real receivers), each optional and off by default, so a
/// scenario that does not ask for them keeps the simple model. Units are dB, metres and seconds.
///
/// A sample on the link from transmitter T to listener L, at time t, on advertising channel c:
///
///     RSSI = mean(d) + txOffset(T) + rxOffset(L)          per-device offsets
///          + σ_field · F_TL(position of L)                spatially correlated shadowing
///          + X_TL(t)                                      AR(1) temporal shadowing
///          + channelOffset_TL(c)                          c cycles 37, 38, 39 with each event
///          + N(0, σ)                                      the simple model's independent part
///          + (with probability p_out) N(0, σ_out)         heavy-tailed outliers
///
/// Bursty loss (Gilbert–Elliott) is ``RadioParameters/burstLossRate`` and
/// ``RadioParameters/burstDuration``, already part of the radio.
public struct RealisticRadio: Sendable, Hashable {
    /// SD of the static offset by position, dB (measured: 3.4–5.8 dB).
    public var fieldSigma: Double = 0
    /// Decorrelation distance of the field, metres: points this far apart correlate at 1/e
    /// (Gudmundson's exponential model).
    public var fieldDecorrelation: Double = 1.0
    /// SD of the AR(1) temporal shadowing, dB.
    public var temporalSigma: Double = 0
    /// Its time constant τ, seconds: samples Δt apart correlate at exp(−Δt/τ).
    public var temporalTau: Double = 0.2
    /// SD of each link's offset per advertising channel, dB (measured: levels often 5–15 dB apart).
    public var channelSigma: Double = 0
    /// Probability that a sample is an outlier (measured: 4–5 % lie 10 dB or more off).
    public var outlierRate: Double = 0
    /// SD of an outlier's extra deviation, dB.
    public var outlierSigma: Double = 12
    /// SD of each device's transmit and receive offsets, dB (measured: RSSI at 1 m spans −87 to −47
    /// dBm across pairs).
    public var deviceSigma: Double = 0

    public init() {}

    /// A preset with defaults in the ranges measured on real receivers (issue 13).
    public static let realistic: RealisticRadio = {
        var r = RealisticRadio()
        r.fieldSigma = 4.5
        r.fieldDecorrelation = 1.0
        r.temporalSigma = 2.0
        r.temporalTau = 0.25
        r.channelSigma = 4.0
        r.outlierRate = 0.03
        r.outlierSigma = 12
        r.deviceSigma = 6
        return r
    }()

    /// Throws for the first value out of range, with the scenario file's key.
    public func validate() throws(ScenarioError) {
        func check(_ ok: Bool, _ key: String, _ message: String) throws(ScenarioError) {
            if !ok { throw ScenarioError(path: key, message: message) }
        }
        for (key, value) in [("field_sigma", fieldSigma), ("temporal_sigma", temporalSigma), ("channel_sigma", channelSigma),
                             ("outlier_sigma", outlierSigma), ("device_sigma", deviceSigma)] {
            try check(value.isFinite && (0...30).contains(value), key, "must be 0...30 dB, not \(ScenarioError.show(value))")
        }
        try check(fieldDecorrelation.isFinite && fieldDecorrelation >= 0.01, "field_decorrelation",
                  "must be 0.01 or more metres, not \(ScenarioError.show(fieldDecorrelation))")
        try check(temporalTau.isFinite && temporalTau >= 0.001, "temporal_tau",
                  "must be 0.001 or more seconds, not \(ScenarioError.show(temporalTau))")
        try check((0...1).contains(outlierRate), "outlier_rate", "must be a probability in 0...1, not \(ScenarioError.show(outlierRate))")
    }

    public var isOff: Bool { fieldSigma == 0 && temporalSigma == 0 && channelSigma == 0 && outlierRate == 0 && deviceSigma == 0 }
}

/// A seeded, stationary Gaussian random field over the plane with unit variance and a correlation
/// that falls off over ``decorrelation`` metres: value noise on a grid of that spacing (a
/// standard normal at each grid point, from a hash of the seed and the point), blended smoothly
/// and renormalised so that every point has variance 1. Pure: the same seed and point give the
/// same value.
public struct ShadowingField: Sendable, Hashable {
    public let seed: UInt64
    public let decorrelation: Double

    public init(seed: UInt64, decorrelation: Double) {
        precondition(decorrelation > 0 && decorrelation.isFinite)
        self.seed = seed
        self.decorrelation = decorrelation
    }

    /// The grid's spacing, in decorrelation distances: chosen so that points one decorrelation
    /// distance apart correlate at about 1/e, as in Gudmundson's model. The fall-off is smooth
    /// rather than exponential (value noise: flat close by, zero beyond two grid spacings), which
    /// also keeps a 1 cm step small, as on real receivers.
    public static let gridSpacing = 1.25

    /// The field at (x, y): a standard normal value.
    public func value(x: Double, y: Double) -> Double {
        let cell = decorrelation * Self.gridSpacing
        let gx = x / cell, gy = y / cell
        let ix = Foundation.floor(gx), iy = Foundation.floor(gy)
        let fx = smooth(gx - ix), fy = smooth(gy - iy)
        let weights = [(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy]
        let corners = [(ix, iy), (ix + 1, iy), (ix, iy + 1), (ix + 1, iy + 1)]
        var sum = 0.0, norm = 0.0
        for (w, (cx, cy)) in zip(weights, corners) {
            sum += w * gridValue(Int64(cx), Int64(cy))
            norm += w * w
        }
        return sum / Foundation.sqrt(norm)
    }

    private func smooth(_ t: Double) -> Double { t * t * (3 - 2 * t) }

    private func gridValue(_ i: Int64, _ j: Int64) -> Double {
        var rng = SeededGenerator(seed: seed ^ (UInt64(bitPattern: i) &* 0x9E37_79B9_7F4A_7C15)
                                      ^ (UInt64(bitPattern: j) &* 0xC2B2_AE3D_27D4_EB4F))
        return rng.gaussian(mean: 0, sigma: 1)
    }
}

/// One link's time-varying part of the realistic model: its AR(1) shadowing (an
/// Ornstein–Uhlenbeck process sampled at the advertising events), its three channel offsets and
/// the channel of its next event, and its outliers. Draws only from its own generator.
public struct RealisticLink: Sendable, Hashable {
    public let radio: RealisticRadio
    /// The offsets of channels 37, 38 and 39, dB.
    public let channelOffsets: [Double]
    /// The transmitter's and the listener's device offsets together, dB.
    public let deviceOffset: Double
    /// The link's shadowing field (nil when `fieldSigma` is 0).
    public let field: ShadowingField?
    /// The channel of the next advertising event, 0...2 (37, 38, 39).
    public private(set) var channel: Int
    private var temporal: Double
    private var lastTime: SimTime?
    private var rng: SeededGenerator

    /// `deviceOffset` and `field` are fixed for the link (``RealisticRadio/link(seed:stream:from:to:)``
    /// works them out once).
    public init(radio: RealisticRadio, using rng: SeededGenerator, deviceOffset: Double = 0, field: ShadowingField? = nil) {
        self.radio = radio
        self.deviceOffset = deviceOffset
        self.field = field
        var rng = rng
        channelOffsets = (0..<3).map { _ in rng.gaussian(mean: 0, sigma: radio.channelSigma) }
        channel = Int(rng.next() % 3)
        temporal = rng.gaussian(mean: 0, sigma: radio.temporalSigma)
        self.rng = rng
    }

    /// The deviation of the sample at `t` (times must not go back): the AR(1) term moved on to
    /// `t`, the offset of this event's channel, and an outlier now and then. Advances the channel.
    /// The whole deviation of the sample at `t` with the listener at (x, y) from the transmitter:
    /// the device offsets, the field there, and ``deviation(at:)``.
    public mutating func deviation(at t: SimTime, x: Double, y: Double) -> Double {
        deviceOffset + (field.map { radio.fieldSigma * $0.value(x: x, y: y) } ?? 0) + deviation(at: t)
    }

    public mutating func deviation(at t: SimTime) -> Double {
        if let lastTime, radio.temporalSigma > 0 {
            let rho = Foundation.exp(-max(0, t - lastTime) / radio.temporalTau)
            temporal = rho * temporal + Foundation.sqrt(1 - rho * rho) * rng.gaussian(mean: 0, sigma: radio.temporalSigma)
        }
        lastTime = t
        let offset = channelOffsets[channel]
        channel = (channel + 1) % 3
        let outlier = rng.chance(radio.outlierRate)
        let extra = rng.gaussian(mean: 0, sigma: radio.outlierSigma)
        return temporal + offset + (outlier ? extra : 0)
    }
}

extension RealisticRadio {
    /// A device's transmit or receive offset, dB: N(0, deviceSigma) from the run's seed and the
    /// device's name and role, so it is the same for every link of that device.
    public func deviceOffset(seed: UInt64, device: String, role: String) -> Double {
        guard deviceSigma > 0 else { return 0 }
        var rng = SeededGenerator(seed: seed).derived("device:\(role):\(device)")
        return rng.gaussian(mean: 0, sigma: deviceSigma)
    }

    /// The shadowing field of the link from `transmitter` to `listener` (nil when off).
    public func field(seed: UInt64, from transmitter: String, to listener: String) -> ShadowingField? {
        guard fieldSigma > 0 else { return nil }
        return ShadowingField(seed: SeededGenerator(seed: seed).derived("field:\(transmitter)>\(listener)").seed,
                              decorrelation: fieldDecorrelation)
    }

    /// A link's state, with what is fixed for it worked out once: its stream is `stream` of the
    /// run's seed, its device offsets the transmitter's and the listener's, its field theirs.
    public func link(seed: UInt64, stream: String, from transmitter: String, to listener: String) -> RealisticLink {
        RealisticLink(radio: self, using: SeededGenerator(seed: seed).derived(stream),
                      deviceOffset: deviceOffset(seed: seed, device: transmitter, role: "tx")
                          + deviceOffset(seed: seed, device: listener, role: "rx"),
                      field: field(seed: seed, from: transmitter, to: listener))
    }
}
