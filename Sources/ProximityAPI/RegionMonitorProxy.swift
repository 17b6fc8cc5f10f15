import DBusKit
import ProximityCore

/// A node's region monitor (`org.proximityd.RegionMonitor1` at ``ProximityBus/rootPath``) and its
/// `Region1` objects, for clients.
extension NodeProxy {
    /// `StartMonitoring`: adds the region, or replaces the one with this identifier.
    public func startMonitoring(_ identifier: String, matcher: RegionMatcher) async throws {
        try await call(ProximityBus.RegionMonitor1.startMonitoring, identifier,
                       DBusVardict(matcher.busValues))
    }

    /// `StopMonitoring`.
    public func stopMonitoring(_ identifier: String) async throws {
        try await call(ProximityBus.RegionMonitor1.stopMonitoring, identifier)
    }

    /// `StopMonitoringAll`: the regions added over the bus.
    public func stopMonitoringAll() async throws {
        try await call(ProximityBus.RegionMonitor1.stopMonitoringAll)
    }

    /// `RequestState`: `inside`, `outside` or `unknown`.
    public func requestState(_ identifier: String) async throws -> String {
        try await call(ProximityBus.RegionMonitor1.requestState, identifier)
    }

    /// `GetMonitoredRegions`, as identifiers.
    public func monitoredRegions() async throws -> [String] {
        try await call(ProximityBus.RegionMonitor1.getMonitoredRegions).map(\.decodedLastElement)
    }

    /// Every region with its properties, from one `GetManagedObjects`, by identifier.
    public func regionProperties() async throws -> [String: RegionProperties] {
        var out: [String: RegionProperties] = [:]
        for entry in try await managedObjects().body.first?.dictEntries ?? [] {
            guard let path = entry.key.objectPath, path.isDescendant(of: ProximityBus.regionsPath, orEqual: false) else { continue }
            for interface in entry.value.dictEntries ?? [] where interface.key.string == ProximityBus.Region1.interface.rawValue {
                let properties = RegionProperties(Lenient.properties(interface.value))
                out[properties.identifier] = properties
            }
        }
        return out
    }

    /// The regions' signals from now on, decoded; ends when the connection closes.
    public func regionSignals() async throws -> AsyncStream<RegionSignal> {
        let signals = try await connection.subscribe(MatchRule(sender: name, interface: ProximityBus.Region1.interface))
        return Self.decoded([signals], RegionSignal.init)
    }
}

/// One `Region1` signal.
public struct RegionSignal: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case entered, exited
        case stateDetermined(String)
        /// Identifier, zone, distance (m), RSSI (dBm), nearest first.
        case ranged([RangedPeerValue])
    }
    public var region: String
    public var kind: Kind

    /// Decodes a signal of `Region1`; nil for anything else.
    public init?(_ message: DBusMessage) {
        guard message.interface == ProximityBus.Region1.interface, let path = message.path,
              path.isDescendant(of: ProximityBus.regionsPath, orEqual: false), let member = message.member else { return nil }
        region = path.decodedLastElement
        switch member {
        case ProximityBus.Region1.entered: kind = .entered
        case ProximityBus.Region1.exited: kind = .exited
        case ProximityBus.Region1.stateDetermined: kind = .stateDetermined(message.body.first?.string ?? "unknown")
        case ProximityBus.Region1.ranged:
            kind = .ranged((message.body.first?.arrayElements ?? []).compactMap { item in
                guard case .structure(let f) = item, f.count == 4, let id = f[0].string, let zone = f[1].string,
                      let distance = f[2].double, let rssi = Lenient.integer(f[3], as: Int16.self) else { return nil }
                return RangedPeerValue(identifier: id, proximity: zone, distance: distance, rssi: rssi)
            })
        default: return nil
        }
    }
}

/// One peer of a `Ranged` signal.
public struct RangedPeerValue: Sendable, Hashable {
    public var identifier: String
    public var proximity: String
    public var distance: Double
    public var rssi: Int16
}
