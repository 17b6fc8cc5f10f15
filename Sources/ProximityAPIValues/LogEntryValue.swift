/// One entry of the event log: as the bus carries it (`a(tdssa{ss})`), and as the node's
/// `events.jsonl` keeps it (one JSON object a line).
public struct LogEntryValue: Sendable, Hashable, Codable {
    /// Increases by one with each entry, across rotations and restarts (0 until the log numbers it).
    public var seq: UInt64
    /// Seconds since the Unix epoch.
    public var time: Double
    /// What produced it: `tracking`, `profile`, `region`, `alert`, `rule`.
    public var source: String
    /// What happened: `tracked`, `cleared`, `entered`, `offered`, `fired`, …
    public var type: String
    public var data: [String: String]

    public init(seq: UInt64 = 0, time: Double, source: String, type: String, data: [String: String] = [:]) {
        self.seq = seq
        self.time = time
        self.source = source
        self.type = type
        self.data = data
    }
}
