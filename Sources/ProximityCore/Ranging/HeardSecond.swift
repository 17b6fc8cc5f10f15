/// What a node heard of one peer between two reports (about a second): how many samples, a
/// robust level (their median) and how far they spread (1.4826 × the median absolute deviation,
/// the standard deviation of Gaussian samples, unmoved by a burst of multipath). The fleet's
/// positioning reads these, published once a second per node (docs/mqtt.md, hearings), instead
/// of the zone filter's smoothed level: they are a second old at most.
public struct HeardSecond: Sendable, Hashable {
    public var count: Int
    /// The samples' median, dBm (with the node's RSSI offset).
    public var rssi: Double
    /// 1.4826 × the median absolute deviation from ``rssi``, dB; 0 for a single sample.
    public var spread: Double

    public init(count: Int, rssi: Double, spread: Double) {
        self.count = count
        self.rssi = rssi
        self.spread = spread
    }

    /// How long a fleet counts a second's hearing, seconds: this second's and the one before (a
    /// device advertising once a second is not heard in every one).
    public static let freshFor = 2.5

    /// At most this many samples of a peer are kept per report (the count goes on): a peer
    /// advertising 100 times a second costs no more memory than one advertising 64 times.
    public static let keptSamples = 64

    /// The statistics of `samples` (at most ``keptSamples`` of the `count` heard); nil without any.
    public init?(samples: [Float], count: Int) {
        guard !samples.isEmpty else { return nil }
        let sorted = samples.sorted()
        let median = Self.median(sorted)
        let deviations = sorted.map { abs($0 - median) }.sorted()
        self.init(count: max(count, samples.count), rssi: Double(median),
                  spread: sorted.count < 2 ? 0 : 1.4826 * Double(Self.median(deviations)))
    }

    private static func median(_ sorted: [Float]) -> Float {
        let n = sorted.count
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2
    }
}
