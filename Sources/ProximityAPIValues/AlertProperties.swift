import ProximityCore

/// The properties of one `org.proximityd.Alert1` object (one alert for one target), typed
/// (`dbus/org.proximityd.Alert1.xml`, `docs/dbus-api.md`); ProximityAPI reads and writes them on
/// the bus.
public struct AlertProperties: Sendable, Hashable {
    /// The alert's identifier.
    public var alert: String
    /// The target peer's identifier.
    public var target: String
    public var title = ""
    public var description = ""
    public var textToSpeech = ""
    public var thumbnail = ""
    public var action = ""
    public var url = ""
    public var uri = ""
    public var extra: [String: String] = [:]
    /// `waitingForAction`, `inProgress` or `done`.
    public var actionStatus = ActionStatus.waitingForAction.rawValue
    public var conditionValid = false
    /// Condition valid and waiting for action.
    public var readyForAction = false
    /// The key of the strategy deciding it now (`range` for the default strategies).
    public var strategy = AlertEngine.defaultStrategyKey
    /// The target's zone in the last report (`unknown` when it is not in it).
    public var proximity = Proximity.unknown.rawValue
    /// In the last report.
    public var detected = false

    public init(alert: String, target: String) {
        self.alert = alert
        self.target = target
    }

    /// An alert's target as the engine holds it.
    public init(_ alert: Alert, _ key: AlertTargetKey, _ state: AlertTarget) {
        self.init(alert: key.alert, target: key.peer.rawValue)
        content = alert.content
        actionStatus = state.actionStatus.rawValue
        conditionValid = state.conditionValid
        readyForAction = state.readyForAction
        strategy = state.strategy
        proximity = state.proximity.rawValue
        detected = state.detected
    }

    /// The content parts.
    public var content: AlertContent {
        get {
            AlertContent(title: title, description: description, textToSpeech: textToSpeech, thumbnail: thumbnail, action: action,
                         url: url, uri: uri, extra: extra)
        }
        set {
            title = newValue.title
            description = newValue.description
            textToSpeech = newValue.textToSpeech
            thumbnail = newValue.thumbnail
            action = newValue.action
            url = newValue.url
            uri = newValue.uri
            extra = newValue.extra
        }
    }

    public enum Key: String, Sendable, CaseIterable {
        case alert = "Alert", target = "Target"
        case title = "Title", description = "Description", textToSpeech = "TextToSpeech", thumbnail = "Thumbnail"
        case action = "Action", url = "URL", uri = "URI", extra = "Extra"
        case actionStatus = "ActionStatus", conditionValid = "ConditionValid", readyForAction = "ReadyForAction"
        case strategy = "Strategy", proximity = "Proximity", detected = "Detected"
    }
}
