import Foundation
import ProximityCore

/// `tracking:`.
extension ConfigDecoder {
    // MARK: - Tracking

    /// `tracking:`: the tracker's matcher, heartbeat and context data; absent or empty, the defaults.
    mutating func decodeTracking(_ node: ConfigNode) {
        let path = "tracking"
        guard !node.isNull else { return }
        guard let entries = mapping(node, path: path, keys: ConfigFile.trackingKeys,
                                    expected: "a mapping of match, heartbeat and context-data") else { return }
        for entry in entries {
            let key = "\(path).\(entry.key)"
            switch entry.key {
            case "match":
                if let matcher = decodeMatcher(entry, path: key, refusing: [.within, .exitPeriod],
                                               refusal: "cannot be in tracking's match (the tracker takes the nearest peer it matches)",
                                               expected: "a mapping of matcher keys such as kind: and uuid:") {
                    tracking.matcher = matcher
                }
            case "heartbeat":
                if let v = seconds(entry, key, in: Tracker.Configuration.heartbeatRange) { tracking.heartbeat = v }
            case "context-data":
                if let data = contextData(entry, path: key) { tracking.contextData = data }
            default: break
            }
        }
    }

    /// `context-data:`: any names, each with a string (an unquoted scalar as its text); empty, none.
    /// A name is an identifier (1 to 255 bytes without control characters), a value at most
    /// ``Profile/maxValueLength`` bytes, as an attribute's.
    mutating func contextData(_ entry: ConfigEntry, path: String) -> [String: String]? {
        guard !entry.value.isNull else { return [:] }
        guard let entries = mapping(entry.value, path: path, keys: nil, expected: "a mapping of names to strings") else { return nil }
        var fields: [String: String] = [:]
        var valid = true
        for field in entries {
            let at = "\(path).\(field.key)"
            if let problem = identifierProblem(field.key, called: "a name") {
                report(field.keyPosition, "\(path): \(problem)")
                valid = false
            } else if let s = field.value.stringValue {
                if let problem = Profile.problem(value: s) {
                    report(at: field.value, "\(at): \(problem)")
                    valid = false
                } else {
                    fields[field.key] = s
                }
            } else {
                report(at: field.value, fallback: field.keyPosition, "\(at): must be a string, not \(field.value.summary)")
                valid = false
            }
        }
        return valid ? fields : nil
    }
}
