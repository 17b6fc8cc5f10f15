import ProximityCore

// What the step keeps across restarts, as values: the files that hold them are `State/`'s
// (`AlertStore`, `ProfileStore`, `RegionStore`), which read and write these.

/// The alerts kept across restarts (`alerts.json`), in the clock's times: those added over the
/// bus, and what the engine must not forget (``AlertEngine/Saved``).
public struct SavedAlerts: Sendable {
    public var busAlerts: [Alert] = []
    public var engine = AlertEngine.Saved()
    public init() {}
}

/// The profile kept across restarts (`profile.json`), in the clock's times: its attributes, the
/// rules added over the bus, when each rule last fired, and the beacon tracked.
public struct SavedProfile: Sendable, Hashable {
    /// How stale the tracker's values on disk may grow (what clients and rules change is saved
    /// before it is announced), seconds.
    public static let refreshInterval: Double = 10

    public struct Tracked: Codable, Sendable, Hashable {
        public var peer: String
        public var prox: Int
    }

    public var attributes: [String: String] = [:]
    public var busRules: [Rule] = []
    public var fired: [String: Timestamp] = [:]
    public var tracked: Tracked?
    public init() {}
}

/// The regions kept across restarts (`regions.json`), in the clock's times: those added over the
/// bus, and each region's state with its last-seen times.
public struct SavedRegions: Sendable {
    /// How stale the last-seen times on disk may grow, seconds.
    public static let refreshInterval: Double = 10

    public var busRegions: [Region] = []
    public var states: [String: SavedRegionState] = [:]
    public init() {}
}
