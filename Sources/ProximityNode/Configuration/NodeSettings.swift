import Foundation
import ProximityCore
import ProximityTrust

/// What a client changed over D-Bus and the node keeps across restarts, in the state directory's
/// `settings.json`: the clear interval, the per-peer measured-power overrides, the peers' names and
/// the IRKs given over the bus. The file is its owner's alone (mode 0600): IRKs are secrets.
///
/// A change is written (atomically) before the method or `Set` call that made it returns, so a
/// reply means the setting survives a crash. A file that cannot be parsed stops the start with a
/// clear error and is never overwritten: it holds the user's choices. (Reading and writing the
/// file: `State/NodeSettings+File.swift`.)
public struct NodeSettings: Codable, Sendable, Equatable {
    public static let fileName = "settings.json"
    public static let currentVersion = 1

    public var version = NodeSettings.currentVersion
    /// `ClearInterval` as last set over D-Bus, seconds.
    public var clearInterval: Double?
    /// Peer identifier → RSSI at 1 m (dBm) to use for it instead of its own or the default.
    public var measuredPower: [String: Int16] = [:]
    /// Peer identifier → display name, as given with `SetPeerName` (``PeerNames/given``).
    public var names: [String: String] = [:]
    /// IRK name → key (32 lowercase hexadecimal digits), as given with `AddIRK`.
    public var irks: [String: String] = [:]

    public init(clearInterval: Double? = nil, measuredPower: [String: Int16] = [:], names: [String: String] = [:]) {
        self.clearInterval = clearInterval
        self.measuredPower = measuredPower
        self.names = names
    }

    enum CodingKeys: String, CodingKey { case version, clearInterval, measuredPower, names, irks }

    /// Every key may be missing (a hand-written file may hold only what it changes).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        version = try c.decodeIfPresent(Int.self, forKey: .version) ?? NodeSettings.currentVersion
        clearInterval = try c.decodeIfPresent(Double.self, forKey: .clearInterval)
        measuredPower = try c.decodeIfPresent([String: Int16].self, forKey: .measuredPower) ?? [:]
        names = try c.decodeIfPresent([String: String].self, forKey: .names) ?? [:]
        irks = try c.decodeIfPresent([String: String].self, forKey: .irks) ?? [:]
    }

    /// The IRKs given over the bus, as keys.
    public var givenIRKs: [String: IdentityResolvingKey] {
        // Checked at load and when given.
        irks.compactMapValues { try? IdentityResolvingKey(parsing: $0) }
    }

    // MARK: - What may be set

    /// `ClearInterval` and `--clear-interval`: more than 0 s, at most an hour.
    public static let clearIntervalRange: ClosedRange<Double> = Double.leastNonzeroMagnitude...3600
    /// A measured power (RSSI at 1 m) a radio can have, dBm.
    public static let measuredPowerRange = NodePowerFrame.powerRange
    /// The most overrides kept (each is a few dozen bytes).
    public static let maxOverrides = 4096

    /// Why `identifier` cannot name a peer, or nil.
    public static func problem(identifier: String) -> String? {
        identifierProblem(identifier, called: "the identifier")
    }

    public static func problem(measuredPower: Int16) -> String? {
        measuredPowerRange.contains(measuredPower) ? nil
            : "a measured power of \(measuredPower) dBm is outside \(measuredPowerRange.lowerBound)…\(measuredPowerRange.upperBound)"
    }
}
