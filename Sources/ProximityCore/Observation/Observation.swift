/// Seconds on a monotonic clock. The core never reads a clock: every time is passed in.
public typealias Timestamp = Double

/// What one advertising device said in one report: the first stage of the pipeline.
///
/// The node makes one from each BlueZ `Device1` change. `rssi` is set only when the change is an
/// RSSI sample (under a discovery filter BlueZ announces `RSSI` at every report); `frame` only
/// when the advertised data is new or changed, so a beacon frame is parsed once per address and
/// not at every sample.
public struct Observation: Sendable, Hashable {
    /// `AA:BB:CC:DD:EE:FF`, uppercase.
    public var address: String
    /// dBm; nil when this change is no sample.
    public var rssi: Int16?
    public var time: Timestamp
    public var frame: AdvertisedFrame?
    /// Advertised TX power, dBm.
    public var txPower: Int16?
    /// The advertised name, once one was heard.
    public var name: String?

    public init(address: String, rssi: Int16?, time: Timestamp, frame: AdvertisedFrame? = nil, txPower: Int16? = nil,
                name: String? = nil) {
        self.address = address
        self.rssi = rssi.flatMap { Self.isMeasured($0) ? $0 : nil }
        self.time = time
        self.frame = frame
        self.txPower = txPower
        self.name = name
    }

    /// 127 is HCI's "RSSI not available" (emulated controllers report nothing else); a radio never
    /// hears anything above +20 dBm. Neither is a sample.
    public static func isMeasured(_ rssi: Int16) -> Bool { rssi >= -127 && rssi <= 20 }
}

/// The advertised data that says who a device is: its service UUIDs (lowercase, 128-bit, as BlueZ
/// lists them), manufacturer data (company → bytes after it) and service data (UUID → bytes).
public struct AdvertisedFrame: Sendable, Hashable {
    public var serviceUUIDs: [String]
    public var manufacturerData: [UInt16: [UInt8]]
    public var serviceData: [String: [UInt8]]

    public init(serviceUUIDs: [String] = [], manufacturerData: [UInt16: [UInt8]] = [:], serviceData: [String: [UInt8]] = [:]) {
        self.serviceUUIDs = serviceUUIDs
        self.manufacturerData = manufacturerData
        self.serviceData = serviceData
    }

    /// Whether the device advertises (or offers data for) the 128-bit service `uuid` (lowercase).
    public func advertises(_ uuid: String) -> Bool {
        serviceUUIDs.contains(uuid) || serviceData[uuid] != nil
    }
}
