/// The publisher's rate control, as ESPresense's nodes do it: a node publishes a device's distance
/// at most once per ``Configuration/heartbeat`` (5 s), sooner when the distance moved by at least
/// ``Configuration/skipDistance`` (0.5 m) from the last one published.
///
/// ESPresense (`BleFingerprint::report`, `skip_ms` 5000 and `skip_distance` 0.5) aligns its
/// heartbeats to 5 s slots per device and lets a larger move report earlier within the slot; this
/// is the plain form of the same rule: a report is due when
///
///     nothing was published yet,  or  t − t_last ≥ heartbeat,  or  |d − d_last| ≥ skipDistance
///
/// Pure: one entry per device, time passed in.
public struct ReportThrottle: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// The longest a device still ranged goes without a report, seconds. Valid: 0...3600
        /// (0: every distance is published).
        public var heartbeat: Double
        /// A distance this far from the last one published is published at once, metres. Valid:
        /// 0...100 (0: every distance is published).
        public var skipDistance: Double

        public init(heartbeat: Double = 5, skipDistance: Double = 0.5) {
            self.heartbeat = heartbeat
            self.skipDistance = skipDistance
        }

        public static let heartbeatRange: ClosedRange<Double> = 0...3600
        public static let skipDistanceRange: ClosedRange<Double> = 0...100

        /// Why the configuration is invalid, or nil.
        public var problem: String? {
            if !(heartbeat.isFinite && Self.heartbeatRange.contains(heartbeat)) { return "heartbeat must be in 0...3600 s" }
            if !(skipDistance.isFinite && Self.skipDistanceRange.contains(skipDistance)) { return "skipDistance must be in 0...100 m" }
            return nil
        }
    }

    /// The last report published for a device.
    public struct Published: Sendable, Hashable {
        public var distance: Double
        public var at: Double

        public init(distance: Double, at: Double) {
            self.distance = distance
            self.at = at
        }
    }

    public let configuration: Configuration
    public private(set) var published: [String: Published] = [:]

    public init(configuration: Configuration = Configuration()) {
        precondition(configuration.problem == nil, configuration.problem ?? "")
        self.configuration = configuration
    }

    /// Offers the device's current distance at `t`; true when it is to be published now (it is then
    /// remembered as the last one published).
    public mutating func offer(device: String, distance: Double, at t: Double) -> Bool {
        if let last = published[device],
           t - last.at < configuration.heartbeat,
           abs(distance - last.distance) < configuration.skipDistance {
            return false
        }
        published[device] = Published(distance: distance, at: t)
        return true
    }

    /// Remembers a distance published at `t` by another rule (the node's native report, for the
    /// compatibility forms' throttle).
    public mutating func record(device: String, distance: Double, at t: Double) {
        published[device] = Published(distance: distance, at: t)
    }

    /// The device is no longer ranged (gone from the node's table): the next distance offered is
    /// published at once.
    public mutating func forget(device: String) {
        published[device] = nil
    }
}
