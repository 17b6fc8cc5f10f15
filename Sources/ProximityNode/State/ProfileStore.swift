import Foundation
import ProximityCore

/// The profile and the rules the node keeps across restarts, in the state directory's
/// `profile.json`: the attributes, the rules added over the bus, when each rule last fired (for
/// `once` and `cooldown`), and the peer the tracker follows.
///
/// Written atomically before the call or signal that announces a change made by a client or a
/// rule; the tracker's own values (which the next reports derive again) within
/// ``refreshInterval``. A file that cannot be
/// parsed stops the start with a clear error and is never overwritten.
public struct ProfileStore: Sendable {
    public static let fileName = "profile.json"
    public static let currentVersion = 1
    /// How stale the tracker's values on disk may grow (``SavedProfile/refreshInterval``).
    public static var refreshInterval: Double { SavedProfile.refreshInterval }

    let state: StateDirectory

    public init(state: StateDirectory) { self.state = state }

    public typealias Tracked = SavedProfile.Tracked

    struct File: Codable, VersionedStateFile {
        var version: Int
        var savedAt: Double
        var attributes: [String: String]
        var rules: [String: RuleValue]
        /// Seconds since the Unix epoch.
        var fired: [String: Double]
        var tracked: Tracked?
    }

    /// What was saved, in the clock's times.
    /// What was saved, in the clock's times (the step's value).
    public typealias Saved = SavedProfile

    public func load(clock: any NodeClock) throws(StateError) -> Saved {
        guard let file = try state.readVersioned(File.self, Self.fileName, what: "a profile file", version: Self.currentVersion) else {
            return Saved()
        }
        let path = state.file(Self.fileName).path
        var saved = Saved()
        for (key, value) in file.attributes {
            if let problem = Profile.problem(key: key) ?? Profile.problem(value: value) {
                throw StateError(kind: .corrupt, path: path, detail: "attribute \(key.debugDescription): \(problem)")
            }
        }
        saved.attributes = file.attributes
        for (id, tree) in file.rules.sorted(by: { $0.key < $1.key }) {
            do { saved.busRules.append(try Rule.parse(identifier: id, tree)) } catch {
                throw StateError(kind: .corrupt, path: path, detail: "rule \(id.debugDescription): \(error)")
            }
        }
        saved.fired = file.fired.mapValues(clock.timestamp(fromEpoch:))
        saved.tracked = file.tracked
        return saved
    }

    public func save(_ saved: Saved, clock: any NodeClock) throws(StateError) {
        let file = File(version: Self.currentVersion, savedAt: clock.epoch(clock.now), attributes: saved.attributes,
                        rules: Dictionary(uniqueKeysWithValues: saved.busRules.map { ($0.identifier, $0.definition) }),
                        fired: saved.fired.mapValues(clock.epoch), tracked: saved.tracked)
        try state.writeJSON(Self.fileName, file)
    }
}
