/// ESPresense's rate control for distance reports: a device's report goes out at most once per
/// `interval` seconds, unless its distance changed by at least `moved` metres since the last one
/// that went out. Pure: time is passed in.
public struct ReportThrottle: Sendable {
    public var interval: Double
    public var moved: Double
    private var last: [String: (time: Double, distance: Double)] = [:]

    public init(interval: Double = 5, moved: Double = 0.5) {
        self.interval = interval
        self.moved = moved
    }

    /// Whether `device`'s report of `distance` at `t` goes out; if it does, it is remembered as the
    /// last one sent.
    public mutating func admit(_ device: String, distance: Double, at t: Double) -> Bool {
        if let previous = last[device], t - previous.time < interval, abs(distance - previous.distance) < moved {
            return false
        }
        last[device] = (t, distance)
        return true
    }

    /// Forgets `device` (it left): its next report goes out at once.
    public mutating func forget(_ device: String) { last[device] = nil }

    /// Forgets every device.
    public mutating func reset() { last = [:] }

    public var count: Int { last.count }
}
