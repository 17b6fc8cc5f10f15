import Foundation
import ProximityCore

/// The alerts the node keeps across restarts, in the state directory's `alerts.json`: the alerts
/// added over the bus, and what the engine must not forget (``AlertEngine/Saved``): each target's
/// action status with the time its condition stopped holding (its reset deadline), the alert in
/// progress, and the acceptances that count for cooldowns and caps.
///
/// Written atomically before a call that changed them returns, and before the signal or property
/// change that announces a new status. A file that cannot be parsed stops the start with a clear
/// error and is never overwritten.
public struct AlertStore: Sendable {
    public static let fileName = "alerts.json"
    public static let currentVersion = 1

    let state: StateDirectory

    public init(state: StateDirectory) { self.state = state }

    struct Definition: Codable, Equatable {
        var identifier: String
        /// The parts by their bus names, as `AddAlert` took them.
        var parts: [String: Alert.Value]
    }

    struct Target: Codable, Equatable {
        var alert: String
        var peer: String
        var status: ActionStatus
        /// Seconds since the Unix epoch; nil while the condition holds.
        var invalidSince: Double?
    }

    struct Acceptance: Codable, Equatable {
        var alert: String
        var peer: String
        var at: Double
    }

    struct File: Codable, VersionedStateFile {
        var version: Int
        var savedAt: Double
        var alerts: [Definition]
        var targets: [Target]
        /// The last acceptance of each target whose alert has a cooldown running.
        var cooldowns: [Acceptance]
        /// The acceptances within each capped alert's window.
        var caps: [String: [Double]]
    }

    /// What was saved, in the clock's times (the step's value).
    public typealias Saved = SavedAlerts


    /// Reads `alerts.json` (nothing saved yet: empty).
    public func load(clock: any NodeClock) throws(StateError) -> Saved {
        guard let file = try state.readVersioned(File.self, Self.fileName, what: "an alerts file", version: Self.currentVersion) else {
            return Saved()
        }
        let path = state.file(Self.fileName).path
        var saved = Saved()
        for definition in file.alerts {
            if let problem = Alert.problem(identifier: definition.identifier) {
                throw StateError(kind: .corrupt, path: path, detail: "\(definition.identifier.debugDescription): \(problem)")
            }
            var parts: [(Alert.Key, Alert.Value)] = []
            for (name, value) in definition.parts.sorted(by: { $0.key < $1.key }) {
                guard let key = Alert.Key(rawValue: name) else {
                    throw StateError(kind: .corrupt, path: path,
                                     detail: "alert \(definition.identifier.debugDescription): unknown key \(name.debugDescription)")
                }
                // JSON does not say a matcher of text parts from a mapping: the key does.
                if key == .match, case .map(let texts) = value {
                    parts.append((key, .matcher(texts.mapValues { RegionMatcher.Value.text($0) })))
                } else {
                    parts.append((key, value))
                }
            }
            do { saved.busAlerts.append(try Alert.parse(identifier: definition.identifier, parts)) } catch {
                throw StateError(kind: .corrupt, path: path, detail: "alert \(definition.identifier.debugDescription): \(error)")
            }
        }
        for target in file.targets {
            saved.engine.targets[AlertTargetKey(alert: target.alert, peer: PeerID(target.peer))] =
                .init(status: target.status, invalidSince: target.invalidSince.map(clock.timestamp(fromEpoch:)))
        }
        for acceptance in file.cooldowns {
            saved.engine.acceptedAt[AlertTargetKey(alert: acceptance.alert,
                                                   peer: PeerID(acceptance.peer))] = clock.timestamp(fromEpoch: acceptance.at)
        }
        saved.engine.accepted = file.caps.mapValues { $0.map(clock.timestamp(fromEpoch:)) }
        return saved
    }

    /// Writes the bus's alerts and the engine's saved state, atomically.
    public func save(busAlerts: [Alert], engine: AlertEngine.Saved, clock: any NodeClock) throws(StateError) {
        let file = File(
            version: Self.currentVersion, savedAt: clock.epoch(clock.now),
            alerts: busAlerts.sorted { $0.identifier < $1.identifier }.map { alert in
                Definition(identifier: alert.identifier, parts: Dictionary(uniqueKeysWithValues: alert.parts.map { ($0.0.busName, $0.1) }))
            },
            targets: engine.targets.sorted { $0.key < $1.key }.map {
                Target(alert: $0.key.alert, peer: $0.key.peer.rawValue, status: $0.value.status,
                       invalidSince: $0.value.invalidSince.map(clock.epoch))
            },
            cooldowns: engine.acceptedAt.sorted { $0.key < $1.key }.map {
                Acceptance(alert: $0.key.alert, peer: $0.key.peer.rawValue, at: clock.epoch($0.value))
            },
            caps: engine.accepted.mapValues { $0.map(clock.epoch) })
        try state.writeJSON(Self.fileName, file)
    }
}
