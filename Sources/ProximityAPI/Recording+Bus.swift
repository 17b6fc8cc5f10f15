import DBusKit

// `Node1.Samples` on the bus: the values of ProximityAPIValues/Recording.swift as D-Bus values.

extension RecordedSample {
    /// `(sddd)`.
    public var value: DBusValue { .structure([.string(peer), .double(time), .double(rssi), .double(measuredPower)]) }

    public init?(_ value: DBusValue) {
        guard case .structure(let f) = value.unwrapped, f.count == 4, let peer = f[0].string, let time = f[1].double,
              let rssi = f[2].double, let power = f[3].double else { return nil }
        self.init(peer: peer, time: time, rssi: rssi, measuredPower: power)
    }
}

extension RecordedReport {
    /// `(ssdd)`.
    public var value: DBusValue { .structure([.string(peer), .string(zone), .double(distance), .double(measuredPower)]) }

    public init?(_ value: DBusValue) {
        guard case .structure(let f) = value.unwrapped, f.count == 4, let peer = f[0].string, let zone = f[1].string,
              let distance = f[2].double, let power = f[3].double else { return nil }
        self.init(peer: peer, zone: zone, distance: distance, measuredPower: power)
    }
}

extension RecordedBatch {
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
