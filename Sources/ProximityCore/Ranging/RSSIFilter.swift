/// Smooths a peer's RSSI samples. Small on purpose (Android Beacon Library's `RssiFilter`): the
/// node's default and the baselines it is benchmarked against are all of this shape.
public protocol RSSIFilter: Sendable {
    /// Adds a sample taken at `t`.
    mutating func add(_ rssi: Double, at t: Timestamp)
    /// The smoothed RSSI as of `t`, or nil with no usable samples.
    func estimate(at t: Timestamp) -> Double?
}

/// The node's filter: a one-dimensional Kalman filter on RSSI that is time-aware, learns the noise
/// level, clips outliers and restarts when the level changes (the peer moved).
///
/// - Model: the true RSSI is a random walk whose variance grows by `processNoisePerSecond` × Δt
///   between samples, so the filter behaves the same at 10 samples a second as at one; each sample
///   is the true RSSI plus noise of variance R.
/// - R starts at `measurementNoise` and, when `noiseAdaptation` > 0, follows the data: an
///   exponentially weighted mean (weight `noiseAdaptation` per sample) of half the squared
///   difference between successive samples, whose expectation is σ² for a steady level; each term
///   is capped at 9 R, so a step or a spike hardly moves it.
/// - A sample further than `outlierSigmas` standard deviations of the innovation from the
///   prediction is clipped to that bound before the update (RSSI has heavy tails).
/// - Change detection: a two-sided CUSUM on the standardised innovation u (clipped to
///   ±`outlierSigmas`), g⁺ = max(0, g⁺ + u − k), g⁻ = max(0, g⁻ − u − k) with k = `changeSlack`.
///   When either passes h = `changeThreshold`, the filter restarts at that CUSUM's estimate of the
///   change point (the first sample since it last left zero) and runs again over the samples
///   since, with the process noise raised to `maneuverNoise` for `maneuverTime` seconds: a peer
///   that has started to move usually keeps moving. Without this a filter smooth enough to stand
///   still on a zone boundary would take seconds to follow a real move. `.infinity` disables it.
public struct KalmanRSSIFilter: RSSIFilter, Hashable {
    public var processNoisePerSecond: Double
    /// The noise variance to start from, dB²; setting it also resets the learnt one.
    public var measurementNoise: Double {
        didSet { r = measurementNoise }
    }
    public var outlierSigmas: Double
    public var noiseAdaptation: Double
    public var changeThreshold: Double
    public var changeSlack: Double
    public var maneuverNoise: Double
    public var maneuverTime: Double
    /// Bounds of the learnt noise variance, dB².
    public static let noiseRange: ClosedRange<Double> = 1...400
    /// The most samples a CUSUM keeps for a restart (the oldest are dropped).
    static let changeWindow = 64

    private var x: Double?
    private var p: Double = 0
    private var last: Timestamp = 0
    private var r: Double
    private var previous: Double?
    private var rise = Cusum()
    private var fall = Cusum()
    private var maneuverUntil: Timestamp = -.infinity

    /// One side of the change detector: its statistic, and the samples since it left zero.
    struct Cusum: Hashable {
        var g = 0.0
        var samples: [Sample] = []

        mutating func add(_ step: Double, _ sample: Sample) {
            if g == 0 { samples.removeAll(keepingCapacity: true) }
            g = max(0, g + step)
            if g > 0 {
                if samples.count == KalmanRSSIFilter.changeWindow { samples.removeFirst() }
                samples.append(sample)
            }
        }
    }

    struct Sample: Hashable {
        var t: Timestamp
        var rssi: Double
    }

    /// The defaults are the node's, chosen by `ranging-bench` (docs/ranging.md). With
    /// `noiseAdaptation: 0, changeThreshold: .infinity` it is a plain time-aware Kalman filter.
    public init(processNoisePerSecond: Double = 0.25, measurementNoise: Double = 36, outlierSigmas: Double = 2.5,
                noiseAdaptation: Double = 0.01, changeThreshold: Double = 3.25, changeSlack: Double = 0.75,
                maneuverNoise: Double = 64, maneuverTime: Double = 3) {
        self.processNoisePerSecond = processNoisePerSecond
        self.measurementNoise = measurementNoise
        self.outlierSigmas = outlierSigmas
        self.noiseAdaptation = noiseAdaptation
        self.changeThreshold = changeThreshold
        self.changeSlack = changeSlack
        self.maneuverNoise = maneuverNoise
        self.maneuverTime = maneuverTime
        r = measurementNoise
    }

    /// The noise variance in use (learnt when `noiseAdaptation` > 0), dB².
    public var noiseVariance: Double { r }

    public mutating func add(_ rssi: Double, at t: Timestamp) {
        guard let x else {
            restart(at: Sample(t: t, rssi: rssi))
            previous = rssi
            return
        }
        if noiseAdaptation > 0, let previous {
            let half = (rssi - previous) * (rssi - previous) / 2
            r += noiseAdaptation * (min(half, 9 * r) - r)
            r = min(max(r, Self.noiseRange.lowerBound), Self.noiseRange.upperBound)
        }
        previous = rssi
        let (predicted, sd) = predict(to: t)
        let u = min(max((rssi - x) / sd, -outlierSigmas), outlierSigmas)
        let sample = Sample(t: t, rssi: rssi)
        rise.add(u - changeSlack, sample)
        fall.add(-u - changeSlack, sample)
        if rise.g > changeThreshold || fall.g > changeThreshold {
            let window = rise.g > changeThreshold ? rise.samples : fall.samples
            restart(at: window[0])
            maneuverUntil = window[0].t + maneuverTime
            for sample in window.dropFirst() {
                let (predicted, sd) = predict(to: sample.t)
                update(sample.rssi, predicted: predicted, sd: sd)
            }
            return
        }
        update(rssi, predicted: predicted, sd: sd)
    }

    /// Advances the variance to `t`: the predicted variance and the innovation's standard deviation.
    private mutating func predict(to t: Timestamp) -> (p: Double, sd: Double) {
        let dt = max(0, t - last)
        last = max(last, t)
        let q = t < maneuverUntil ? max(maneuverNoise, processNoisePerSecond) : processNoisePerSecond
        let predicted = p + q * dt
        return (predicted, (predicted + r).squareRoot())
    }

    /// The Kalman update with the sample clipped to `outlierSigmas` innovation deviations.
    private mutating func update(_ rssi: Double, predicted: Double, sd: Double) {
        guard let x else { return }
        let bound = outlierSigmas * sd
        let z = min(max(rssi, x - bound), x + bound)
        let gain = predicted / (predicted + r)
        self.x = x + gain * (z - x)
        p = (1 - gain) * predicted
    }

    private mutating func restart(at sample: Sample) {
        x = sample.rssi
        p = r
        last = sample.t
        rise = Cusum()
        fall = Cusum()
    }

    public func estimate(at t: Timestamp) -> Double? { x }
}

/// Mean of the last `count` samples: the AltBeacon iOS library's smoothing (baseline).
public struct MeanOfLastFilter: RSSIFilter, Hashable {
    public let count: Int
    private var samples: [Double] = []
    public init(count: Int = 10) { self.count = count }
    public mutating func add(_ rssi: Double, at t: Timestamp) {
        samples.append(rssi)
        if samples.count > count { samples.removeFirst(samples.count - count) }
    }
    public func estimate(at t: Timestamp) -> Double? {
        samples.isEmpty ? nil : samples.reduce(0, +) / Double(samples.count)
    }
}

/// The Android Beacon Library's `RunningAverageRssiFilter` (baseline): the mean of the samples of
/// the last `window` seconds, sorted, without the top and bottom `count / 10 + 1` when there are
/// more than two (its `calculateRssi`: a little over 10% off each end).
public struct TrimmedRunningAverageFilter: RSSIFilter, Hashable {
    public let window: Double
    private var samples: [(t: Timestamp, rssi: Double)] = []
    public init(window: Double = 20) { self.window = window }

    public static func == (a: Self, b: Self) -> Bool {
        a.window == b.window && a.samples.map(\.rssi) == b.samples.map(\.rssi) && a.samples.map(\.t) == b.samples.map(\.t)
    }
    public func hash(into hasher: inout Hasher) { hasher.combine(window); hasher.combine(samples.count) }

    public mutating func add(_ rssi: Double, at t: Timestamp) {
        samples.append((t, rssi))
        let cutoff = t - window
        if let firstKept = samples.firstIndex(where: { $0.t >= cutoff }), firstKept > 0 {
            samples.removeFirst(firstKept)
        }
    }
    public func estimate(at t: Timestamp) -> Double? {
        let recent = samples.filter { $0.t >= t - window }.map(\.rssi).sorted()
        guard !recent.isEmpty else { return nil }
        let n = recent.count
        let kept = n > 2 ? recent[(n / 10 + 1)...(n - n / 10 - 2)] : recent[...]
        return kept.reduce(0, +) / Double(kept.count)
    }
}

/// room-assistant's filter (baseline): kalmanjs with R = 0.8 (process noise) and Q = 15
/// (measurement noise), one step per sample whatever the time between them.
public struct RoomAssistantKalmanFilter: RSSIFilter, Hashable {
    public var processNoise: Double
    public var measurementNoise: Double
    private var x: Double?
    private var cov: Double = 0
    public init(processNoise: Double = 0.8, measurementNoise: Double = 15) {
        self.processNoise = processNoise
        self.measurementNoise = measurementNoise
    }
    public mutating func add(_ rssi: Double, at t: Timestamp) {
        guard let x else {
            self.x = rssi
            cov = measurementNoise
            return
        }
        let predictedCov = cov + processNoise
        let gain = predictedCov / (predictedCov + measurementNoise)
        self.x = x + gain * (rssi - x)
        cov = predictedCov - gain * predictedCov
    }
    public func estimate(at t: Timestamp) -> Double? { x }
}
