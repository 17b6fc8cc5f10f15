/// One RSSI sample a node fed its ranging table (`Node1.Samples`): the value exactly as the table
/// took it, with the measured power it was ranged with.
public struct RecordedSample: Sendable, Hashable {
    /// The peer's identifier, as `GetRanging` lists it.
    public var peer: String
    /// When the node took the sample, seconds since the Unix epoch.
    public var time: Double
    /// dBm, as the ranging table took it.
    public var rssi: Double
    /// The RSSI at 1 m the sample was ranged with, dBm.
    public var measuredPower: Double

    public init(peer: String, time: Double, rssi: Double, measuredPower: Double) {
        self.peer = peer
        self.time = time
        self.rssi = rssi
        self.measuredPower = measuredPower
    }
}

/// What one report of a node said of one recorded peer (`Node1.Samples`).
public struct RecordedReport: Sendable, Hashable {
    /// The zone of a peer the report dropped from the table (it was reported unknown before).
    public static let removed = "removed"

    public var peer: String
    /// `immediate`, `near`, `far`, `unknown`, or ``removed``.
    public var zone: String
    /// Metres; −1 for a removed peer.
    public var distance: Double
    /// The RSSI at 1 m in use for the peer, dBm.
    public var measuredPower: Double

    public init(peer: String, zone: String, distance: Double, measuredPower: Double) {
        self.peer = peer
        self.zone = zone
        self.distance = distance
        self.measuredPower = measuredPower
    }
}

/// One `Node1.Samples` signal: a report's time, the samples of the recorded peers since the report
/// before (in the order the node took them), and what the report said of each recorded peer.
public struct RecordedBatch: Sendable, Hashable {
    /// The report's time, seconds since the Unix epoch.
    public var time: Double
    public var samples: [RecordedSample]
    public var reports: [RecordedReport]

    public init(time: Double, samples: [RecordedSample], reports: [RecordedReport]) {
        self.time = time
        self.samples = samples
        self.reports = reports
    }
}

/// How much a node records for its clients (`Node1.StartRecording`).
public enum RecordingLimits {
    /// The most peers one `StartRecording` may name, and the most clients recording at once.
    public static let maxRecordedPeers = 64
    public static let maxRecorders = 16
    /// The most clients one user outside group proximityd may record from at once (root and the
    /// group have ``maxRecorders`` slots of their own).
    public static let maxRecordersPerUser = 2
}
