/// Smooths a peer's RSSI samples. Small on purpose (Android Beacon Library's `RssiFilter`): the
/// node's default and the baselines it is benchmarked against are all of this shape.
public protocol RSSIFilter: Sendable {
    /// Adds a sample taken at `t`.
    mutating func add(_ rssi: Double, at t: Timestamp)
    /// The smoothed RSSI as of `t`, or nil with no usable samples.
    func estimate(at t: Timestamp) -> Double?
}

/// A one-dimensional Kalman filter on RSSI whose process noise grows with the time between
/// samples, so it behaves the same at 10 samples a second as at one: a random-walk model where
/// the true RSSI drifts with variance `processNoisePerSecond` × Δt, measured with variance
/// `measurementNoise` (σ² of the shadowing). Samples further than `outlierSigmas` standard
/// deviations from the prediction are clipped to that bound first (RSSI has heavy tails).
public struct KalmanRSSIFilter: RSSIFilter, Hashable {
    public var processNoisePerSecond: Double
    public var measurementNoise: Double
    public var outlierSigmas: Double
    private var x: Double?
    private var p: Double = 0
    private var last: Timestamp = 0

    public init(processNoisePerSecond: Double = 4, measurementNoise: Double = 16, outlierSigmas: Double = 2.5) {
        self.processNoisePerSecond = processNoisePerSecond
        self.measurementNoise = measurementNoise
        self.outlierSigmas = outlierSigmas
    }

    public mutating func add(_ rssi: Double, at t: Timestamp) {
        guard let x else {
            self.x = rssi
            p = measurementNoise
            last = t
            return
        }
        let dt = max(0, t - last)
        last = t
        let predictedP = p + processNoisePerSecond * dt
        let bound = outlierSigmas * (predictedP + measurementNoise).squareRoot()
        let z = min(max(rssi, x - bound), x + bound)
        let gain = predictedP / (predictedP + measurementNoise)
        self.x = x + gain * (z - x)
        p = (1 - gain) * predictedP
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
/// the last `window` seconds after dropping the top and bottom 10%.
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
        let trim = recent.count / 10
        let kept = recent[trim..<(recent.count - trim)]
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
