/// What an alert shows: the seed's beacon alert content (title, description, text to speech,
/// thumbnail), its action (a free string: `popup`, `webview`, …), URL, URI and extra fields.
public struct AlertContent: Sendable, Hashable {
    public var title: String
    public var description: String
    public var textToSpeech: String
    /// A URL or a file path of an image.
    public var thumbnail: String
    public var action: String
    public var url: String
    public var uri: String
    public var extra: [String: String]

    public init(title: String = "", description: String = "", textToSpeech: String = "", thumbnail: String = "",
                action: String = "popup", url: String = "", uri: String = "", extra: [String: String] = [:]) {
        self.title = title
        self.description = description
        self.textToSpeech = textToSpeech
        self.thumbnail = thumbnail
        self.action = action
        self.url = url
        self.uri = uri
        self.extra = extra
    }
}

/// The seed's default alert strategies: how a target's zone compares with the alert's range.
public enum RangeComparison: String, Sendable, Hashable, CaseIterable {
    /// `=`: exactly the range (near: near only).
    case equal = "="
    /// `<=`: the range or nearer (near: immediate or near).
    case nearerOrEqual = "<="
    /// `>=`: the range or farther (near: near or far).
    case fartherOrEqual = ">="

    /// Whether a target at `zone` satisfies `range` (unknown never does).
    public func holds(_ zone: Proximity, range: Proximity) -> Bool {
        guard zone != .unknown else { return false }
        switch self {
        case .equal: return zone == range
        case .nearerOrEqual: return zone <= range
        case .fartherOrEqual: return zone >= range
        }
    }
}

/// When an alert's action may happen for a target (the seed's beacon alert parameters).
public struct AlertParameters: Sendable, Hashable {
    /// The action range: `immediate`, `near` or `far`.
    public var range: Proximity
    /// The default strategy, used when there is no custom strategy or its key is unknown.
    public var comparison: RangeComparison
    /// A custom strategy's key; nil for the default strategy.
    public var strategy: String?
    /// How long after the condition stopped holding a done action goes back to waiting, seconds.
    public var maxTimeBeforeReset: Double
    /// At most one alert per target per this many seconds (counted from each accepted offer).
    public var cooldown: Double?
    /// At most this many alerts (accepted offers, all targets) per window.
    public var cap: AlertCap?
    /// When alerts may be offered.
    public var schedule: AlertSchedule?

    public init(range: Proximity = .near, comparison: RangeComparison = .equal, strategy: String? = nil,
                maxTimeBeforeReset: Double = 60, cooldown: Double? = nil, cap: AlertCap? = nil, schedule: AlertSchedule? = nil) {
        self.range = range
        self.comparison = comparison
        self.strategy = strategy
        self.maxTimeBeforeReset = maxTimeBeforeReset
        self.cooldown = cooldown
        self.cap = cap
        self.schedule = schedule
    }
}

/// At most `count` alerts per `window` seconds.
public struct AlertCap: Sendable, Hashable {
    public var count: Int
    public var window: Double
    public init(count: Int, window: Double) {
        self.count = count
        self.window = window
    }
}

/// The local time of day and day of the week, as the node passes it with each report.
public struct LocalTime: Sendable, Hashable {
    /// 1 Monday … 7 Sunday (ISO 8601).
    public var weekday: Int
    /// Minutes since midnight, 0…1439.
    public var minute: Int
    public init(weekday: Int, minute: Int) {
        self.weekday = weekday
        self.minute = minute
    }
}

/// Days of the week and hours when an alert may be offered. Outside them a ready target is
/// `held` (offered once the schedule opens, if still ready) or `dropped` (marked done, so it
/// fires again only after its reset).
public struct AlertSchedule: Sendable, Hashable {
    public enum Outside: String, Sendable, Hashable { case hold, drop }
    /// ISO weekdays, 1 Monday … 7 Sunday.
    public var days: Set<Int>
    /// Minutes since midnight: from `start` (included) to `end` (excluded); an `end` before the
    /// `start` runs past midnight (into the next day, which belongs to the day it started).
    public var start: Int
    public var end: Int
    public var outside: Outside

    public init(days: Set<Int> = Set(1...7), start: Int = 0, end: Int = 1440, outside: Outside = .hold) {
        self.days = days
        self.start = start
        self.end = end
        self.outside = outside
    }

    public func isOpen(at local: LocalTime) -> Bool {
        if start <= end { return days.contains(local.weekday) && local.minute >= start && local.minute < end }
        // Past midnight: the evening of an open day, or the early hours after one.
        let previous = local.weekday == 1 ? 7 : local.weekday - 1
        return (days.contains(local.weekday) && local.minute >= start) || (days.contains(previous) && local.minute < end)
    }
}

/// An alert: content and parameters, bound by a matcher to its targets (each matching peer).
public struct Alert: Sendable, Hashable {
    public var identifier: String
    public var content: AlertContent
    public var parameters: AlertParameters
    /// Which peers are its targets (the regions' matcher; its `within` and exit period unused).
    public var targets: RegionMatcher

    public init(identifier: String, content: AlertContent, parameters: AlertParameters = AlertParameters(),
                targets: RegionMatcher) {
        self.identifier = identifier
        self.content = content
        self.parameters = parameters
        self.targets = targets
    }
}

/// The seed's `actionStatus`.
public enum ActionStatus: String, Sendable, Hashable, CaseIterable, Codable {
    case waitingForAction, inProgress, done
}

/// One alert for one target: the seed's beacon alert strategy parameter object.
public struct AlertTargetKey: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var alert: String
    public var peer: PeerID

    public init(alert: String, peer: PeerID) {
        self.alert = alert
        self.peer = peer
    }

    public static func < (a: Self, b: Self) -> Bool { (a.alert, a.peer) < (b.alert, b.peer) }
    public var description: String { "\(alert)@\(peer)" }
}
