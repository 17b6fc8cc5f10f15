import Foundation
import ProximityCore

/// The regions the node keeps across restarts, in the state directory's `regions.json`: the
/// regions added over the bus, and every region's state with its last-seen time.
///
/// Written atomically before the call that changed a region returns and before the signals that
/// announce a change of state; last-seen times of regions inside are refreshed at least every
/// ``refreshInterval`` seconds. A file that cannot be parsed stops the start with a clear error
/// and is never overwritten.
public struct RegionStore: Sendable {
    public static let fileName = "regions.json"
    public static let currentVersion = 1
    /// How stale the last-seen times on disk may grow while regions stay inside, seconds.
    /// How stale the last-seen times on disk may grow (``SavedRegions/refreshInterval``).
    public static var refreshInterval: Double { SavedRegions.refreshInterval }

    let state: StateDirectory

    public init(state: StateDirectory) { self.state = state }

    /// One region as saved. Times are seconds since the Unix epoch; the matcher's parts by their
    /// bus names (`UUID`, `Major`, …).
    public struct Record: Codable, Sendable, Equatable {
        public var identifier: String
        public var source: RegionSource
        public var matcher: [String: RegionMatcher.Value]
        public var state: RegionState
        public var lastSeen: Double?
    }

    struct File: Codable, VersionedStateFile {
        var version: Int
        /// When it was written, seconds since the Unix epoch.
        var savedAt: Double
        var regions: [Record]
    }

    /// What was saved: the bus's regions, and every region's state by identifier.
    /// What was saved, in the clock's times (the step's value).
    public typealias Saved = SavedRegions

    /// Reads `regions.json` (nothing saved yet: empty). `clock` turns the saved times into its own.
    public func load(clock: any NodeClock) throws(StateError) -> Saved {
        guard let file = try state.readVersioned(File.self, Self.fileName, what: "a regions file", version: Self.currentVersion) else {
            return Saved()
        }
        let path = state.file(Self.fileName).path
        var saved = Saved()
        for record in file.regions {
            if let problem = Region.problem(identifier: record.identifier) {
                throw StateError(kind: .corrupt, path: path, detail: "\(record.identifier.debugDescription): \(problem)")
            }
            var parts: [(RegionMatcher.Key, RegionMatcher.Value)] = []
            for (name, value) in record.matcher.sorted(by: { $0.key < $1.key }) {
                guard let key = RegionMatcher.Key(rawValue: name) else {
                    throw StateError(kind: .corrupt, path: path,
                                     detail: "region \(record.identifier.debugDescription): unknown matcher key \(name.debugDescription)")
                }
                parts.append((key, value))
            }
            let matcher: RegionMatcher
            do { matcher = try RegionMatcher.parse(parts) } catch {
                throw StateError(kind: .corrupt, path: path, detail: "region \(record.identifier.debugDescription): \(error)")
            }
            if record.source == .bus {
                saved.busRegions.append(Region(identifier: record.identifier, matcher: matcher, source: .bus))
            }
            saved.states[record.identifier] = SavedRegionState(
                matcher: matcher, state: record.state, lastSeen: record.lastSeen.map(clock.timestamp(fromEpoch:)),
                savedAt: clock.timestamp(fromEpoch: file.savedAt))
        }
        return saved
    }

    /// Writes every region with its state, atomically.
    public func save(_ regions: [RegionStatus], clock: any NodeClock) throws(StateError) {
        let records = regions.map { status in
            Record(identifier: status.region.identifier, source: status.region.source,
                   matcher: Dictionary(uniqueKeysWithValues: status.region.matcher.parts.map { ($0.0.busName, $0.1) }),
                   state: status.state, lastSeen: status.lastSeen.map(clock.epoch))
        }
        try state.writeJSON(Self.fileName, File(version: Self.currentVersion, savedAt: clock.epoch(clock.now), regions: records))
    }
}
