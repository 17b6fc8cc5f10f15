/// What `<prefix>/calibration` holds (retained): the fleet's calibration from its nodes hearing
/// each other (`docs/positioning.md`, Calibration): the fitted exponent, each node's offsets and
/// state, and the matrix of who hears whom.
public struct FleetCalibrationPayload: Codable, Hashable, Sendable {
    public struct Node: Codable, Hashable, Sendable {
        public var name: String
        /// dB added to what it receives.
        public var rxOffset: Double?
        /// Its RSSI at 1 m as the others hear it, dBm.
        public var txPower: Double?
        /// The median residual of its hearings, dB.
        public var residual: Double?
        /// Why it is reported drifting; absent when it is not.
        public var drift: String?

        enum CodingKeys: String, CodingKey { case name, rxOffset = "rx_offset", txPower = "tx_power", residual, drift }

        public init(name: String, rxOffset: Double?, txPower: Double?, residual: Double?, drift: String?) {
            self.name = name
            self.rxOffset = rxOffset
            self.txPower = txPower
            self.residual = residual
            self.drift = drift
        }
    }

    public struct Pair: Codable, Hashable, Sendable {
        public var receiver: String
        public var transmitter: String
        /// From the plan, metres.
        public var distance: Double
        /// The averaged RSSI, dBm.
        public var rssi: Double
        /// What the fit leaves of it, dB.
        public var residual: Double?

        public init(receiver: String, transmitter: String, distance: Double, rssi: Double, residual: Double?) {
            self.receiver = receiver
            self.transmitter = transmitter
            self.distance = distance
            self.rssi = rssi
            self.residual = residual
        }
    }

    /// Seconds since the Unix epoch of the fit.
    public var time: Double
    public var exponent: Double
    /// The fit's residual RMS, dB.
    public var rms: Double
    /// Each pair predicted by a fit of the others (leave one out), RMS, dB: how well the fit
    /// explains hearings it did not use; absent with too few pairs.
    public var holdoutRMS: Double?
    /// The exponent is at a bound of its range (the hearings pushed it out).
    public var exponentAtBound: Bool?
    public var nodes: [Node]
    public var pairs: [Pair]

    enum CodingKeys: String, CodingKey {
        case time, exponent, rms, holdoutRMS = "holdout_rms", exponentAtBound = "exponent_at_bound", nodes, pairs
    }

    public init(time: Double, exponent: Double, rms: Double, holdoutRMS: Double? = nil, exponentAtBound: Bool? = nil, nodes: [Node],
                pairs: [Pair]) {
        self.time = time
        self.exponent = exponent
        self.rms = rms
        self.holdoutRMS = holdoutRMS
        self.exponentAtBound = exponentAtBound
        self.nodes = nodes
        self.pairs = pairs
    }
}
