/// A signal of the profile or the event log.
public enum ProfileSignal: Sendable, Hashable {
    case tracked([String: String])
    case cleared
    case ruleFired(rule: String, data: [String: String])
    case logged(LogEntryValue)
    case attributes([String: String])
}
