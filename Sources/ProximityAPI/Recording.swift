import DBusKit

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

    /// `(sddd)`.
    public var value: DBusValue { .structure([.string(peer), .double(time), .double(rssi), .double(measuredPower)]) }

    public init?(_ value: DBusValue) {
        guard case .structure(let f) = value.unwrapped, f.count == 4, let peer = f[0].string, let time = f[1].double,
              let rssi = f[2].double, let power = f[3].double else { return nil }
        self.init(peer: peer, time: time, rssi: rssi, measuredPower: power)
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

    /// `(ssdd)`.
    public var value: DBusValue { .structure([.string(peer), .string(zone), .double(distance), .double(measuredPower)]) }

    public init?(_ value: DBusValue) {
        guard case .structure(let f) = value.unwrapped, f.count == 4, let peer = f[0].string, let zone = f[1].string,
              let distance = f[2].double, let power = f[3].double else { return nil }
        self.init(peer: peer, zone: zone, distance: distance, measuredPower: power)
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

    /// The signal's arguments, `d`, `a(sddd)`, `a(ssdd)`.
    public var arguments: [DBusValue] {
        [.double(time),
         .array(element: .structure([.string, .double, .double, .double]), samples.map(\.value)),
         .array(element: .structure([.string, .string, .double, .double]), reports.map(\.value))]
    }

    /// Decodes a `Samples` signal; nil for another message or other types.
    public init?(_ message: DBusMessage) {
        guard message.interface == ProximityBus.Node1.interface, message.member == ProximityBus.Node1.samples,
              message.body.count == 3, let time = message.body[0].double,
              message.body[1].type == ProximityBus.Node1.samplesType, message.body[2].type == ProximityBus.Node1.reportsType
        else { return nil }
        self.init(time: time, samples: (message.body[1].arrayElements ?? []).compactMap(RecordedSample.init),
                  reports: (message.body[2].arrayElements ?? []).compactMap(RecordedReport.init))
    }
}
