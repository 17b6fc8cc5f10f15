import Foundation

/// Turns a smoothed RSSI into metres, given the transmitter's RSSI at 1 m.
public protocol DistanceModel: Sendable {
    func distance(rssi: Double, measuredPower: Double) -> Double
}

/// The log-distance path-loss model: d = 10^((P₁ₘ − RSSI) / (10 n)).
public struct LogDistanceModel: DistanceModel, Hashable {
    /// The path-loss exponent: 2 in free space, 2.5–4 indoors.
    public var exponent: Double
    public init(exponent: Double = 2.0) {
        precondition(exponent > 0, "path-loss exponent must be positive")
        self.exponent = exponent
    }
    public func distance(rssi: Double, measuredPower: Double) -> Double {
        pow(10, (measuredPower - rssi) / (10 * exponent))
    }
}

/// A curve fitted to one phone's measurements, r = RSSI / P₁ₘ: r^10 below 1, else a·r^b + c.
/// With (0.42093, 6.9476, 0.54992) it is the Android Beacon Library's default (Nexus 4); with
/// (0.89976, 7.7095, 0.111), room-assistant's.
public struct CurveFittedDistanceModel: DistanceModel, Hashable {
    public var a: Double, b: Double, c: Double
    public init(a: Double, b: Double, c: Double) {
        self.a = a
        self.b = b
        self.c = c
    }
    public static let androidBeaconLibrary = CurveFittedDistanceModel(a: 0.42093, b: 6.9476, c: 0.54992)
    public static let roomAssistant = CurveFittedDistanceModel(a: 0.89976, b: 7.7095, c: 0.111)

    public func distance(rssi: Double, measuredPower: Double) -> Double {
        guard measuredPower != 0 else { return .infinity }
        let ratio = rssi / measuredPower
        return ratio < 1 ? pow(ratio, 10) : a * pow(ratio, b) + c
    }
}
