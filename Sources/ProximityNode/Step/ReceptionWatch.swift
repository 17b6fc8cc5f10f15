import ProximityCore

/// Whether discovery still delivers: the radio's side of the node's watchdog (``AdapterLink``).
///
/// A scanner that goes deaf keeps `Discovering` true and delivers nothing; a quiet room delivers
/// little too. What tells them apart is what was heard before: the watch counts the advertisements
/// received in each second of the last minute, and calls a silence implausible when it is longer
/// than ``Configuration/minSilence`` and than the time ``Configuration/missedReports`` reports take
/// at the rate heard before it, and at least ``Configuration/minReports`` were heard in the minute
/// before the silence began (over the watch's own span, at least 5 s, when it is younger than a
/// minute). A box that heard three advertisements a minute is never deaf by this rule; one that
/// heard fifty a second is after 20 s of nothing. Pure: times are passed in.
public struct ReceptionWatch: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// The shortest silence ever called implausible, seconds.
        public var minSilence: Double = 20
        /// A silence is implausible when this many reports, at the rate before it, did not come.
        public var missedReports: Double = 20
        /// Reports in the minute before the silence needed to judge it at all.
        public var minReports: Int = 10
        public init() {}
    }

    public var configuration: Configuration
    /// Reports per second over the last 60 s, by second (`second % 60`), with the second each
    /// count is for.
    private var counts = [Int](repeating: 0, count: 60)
    private var seconds = [Int](repeating: Int.min, count: 60)
    public private(set) var lastHeard: Timestamp?
    /// The first report since the watch began (or was reset): a watch younger than a minute
    /// judges the rate over its own span.
    private var firstHeard: Timestamp?

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// An advertisement was received at `t`.
    public mutating func heard(at t: Timestamp) {
        let second = Int(t.rounded(.down))
        let slot = ((second % 60) + 60) % 60
        if seconds[slot] != second {
            seconds[slot] = second
            counts[slot] = 0
        }
        counts[slot] += 1
        lastHeard = t
        if firstHeard == nil { firstHeard = t }
    }

    /// What was heard before a silence: reports in the 60 s up to the last one.
    public var recentReports: Int {
        guard let last = lastHeard else { return 0 }
        let now = Int(last.rounded(.down))
        var total = 0
        for slot in 0 ..< 60 where seconds[slot] > now - 60 && seconds[slot] <= now { total += counts[slot] }
        return total
    }

    /// The silence at `t` and the rate before it, when the silence is implausible; nil otherwise.
    public func deafness(at t: Timestamp) -> (silence: Double, rate: Double)? {
        guard let last = lastHeard else { return nil }
        let reports = recentReports
        guard reports >= configuration.minReports else { return nil }
        let span = min(60, max(5, last - (firstHeard ?? last)))
        let rate = Double(reports) / span
        let silence = t - last
        guard silence > max(configuration.minSilence, configuration.missedReports / rate) else { return nil }
        return (silence, rate)
    }

    /// Forgets what was heard (a new adapter, or discovery started afresh after a recovery).
    public mutating func reset() {
        counts = [Int](repeating: 0, count: 60)
        seconds = [Int](repeating: Int.min, count: 60)
        lastHeard = nil
        firstHeard = nil
    }
}
