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

    public init(range: Proximity = .near, comparison: RangeComparison = .equal, strategy: String? = nil,
                maxTimeBeforeReset: Double = 60) {
        self.range = range
        self.comparison = comparison
        self.strategy = strategy
        self.maxTimeBeforeReset = maxTimeBeforeReset
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
