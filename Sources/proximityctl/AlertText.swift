import DBusKit
import Foundation
import ProximityAPI
import ProximityCore

/// Alerts as `proximityctl alerts` reads and writes them: the ALERT argument, the table and JSON
/// of `alerts list`, the lines of `alerts watch`, and what `alerts consume` hands to a
/// notification or a command.
enum AlertText {
    // MARK: - The ALERT argument

    /// `alert/target` for an `Alert1` path (its identifiers, unescaped); the path itself for
    /// another.
    static func name(_ path: ObjectPath) -> String {
        guard let (alert, target) = ProximityBus.alertTarget(of: path) else { return path.rawValue }
        return "\(alert)/\(target)"
    }

    /// The `Alert1` paths an ALERT argument may name: the object path itself, or, for
    /// `alert-id/target-id`, one per `/` it may be split at (identifiers may hold `/`: an
    /// Eddystone-URL target does), the first split first. Throws the problem (exit 64).
    static func candidates(_ argument: String) throws(AlertArgumentError) -> [ObjectPath] {
        if argument.hasPrefix("/") {
            guard let path = try? ObjectPath(argument), ProximityBus.alertTarget(of: path) != nil else {
                throw AlertArgumentError("\(argument.debugDescription) is not an alert's object path " +
                    "(\(ProximityBus.alertsPath.rawValue)/ALERT/TARGET)")
            }
            return [path]
        }
        var out: [ObjectPath] = []
        var firstProblem: String?
        for index in argument.indices where argument[index] == "/" {
            let alert = String(argument[..<index])
            let target = String(argument[argument.index(after: index)...])
            if let problem = Alert.problem(identifier: alert) ?? identifierProblem(target, called: "the target identifier") {
                firstProblem = firstProblem ?? problem
                continue
            }
            out.append(ProximityBus.alertPath(alert: alert, target: target))
        }
        if out.isEmpty {
            throw AlertArgumentError(firstProblem.map { "\(argument.debugDescription): \($0)" }
                ?? "\(argument.debugDescription) is not ALERT/TARGET (an alert's identifier and a target's, as `alerts list` shows them) " +
                    "nor an object path")
        }
        return out
    }

    /// Of the `candidates`, the one that is an alert target of the node (in `existing`); the first
    /// when none is (the node then says it does not exist).
    static func resolve(_ candidates: [ObjectPath], existing: Set<ObjectPath>) -> ObjectPath {
        candidates.first(where: existing.contains) ?? candidates[0]
    }

    // MARK: - alerts list

    /// What `alerts list` shows: the targets, the definitions, and the alert offered or in
    /// progress.
    struct Listing: Sendable {
        var current: ObjectPath?
        var targets: [ObjectPath: AlertProperties]
        var definitions: [String: [String: DBusValue]]

        /// Every alert identifier, of a definition or of a target, sorted.
        var identifiers: [String] {
            Set(definitions.keys).union(targets.values.map(\.alert)).sorted()
        }

        /// The targets of `alert`, sorted by target.
        func targets(of alert: String) -> [AlertProperties] {
            targets.values.filter { $0.alert == alert }.sorted { $0.target < $1.target }
        }
    }

    /// `yes`/`no`.
    private static func yesNo(_ b: Bool) -> String { b ? "yes" : "no" }

    /// A mark, then ALERT, TARGET, STATUS, READY, CONDITION, STRATEGY, PROXIMITY, TITLE: one row per
    /// target, sorted by alert and target; an alert with no target yet has one row with
    /// `(no target yet)`. The alert offered or in progress is marked `*`.
    static func table(_ listing: Listing) -> String {
        var rows: [[String]] = []
        for alert in listing.identifiers {
            let definition = listing.definitions[alert] ?? [:]
            let targets = listing.targets(of: alert)
            if targets.isEmpty {
                let strategy = definition[Alert.Key.strategy.busName]?.unwrapped.string ?? AlertEngine.defaultStrategyKey
                rows.append([" ", alert, "(no target yet)", "-", "-", "-", strategy, "-",
                             definition[Alert.Key.title.busName]?.unwrapped.string ?? ""])
            }
            for t in targets {
                rows.append([t.path == listing.current ? "*" : " ", alert, t.target, t.actionStatus, yesNo(t.readyForAction),
                             yesNo(t.conditionValid), t.strategy, t.proximity, t.title])
            }
        }
        let header = [" ", "ALERT", "TARGET", "STATUS", "READY", "CONDITION", "STRATEGY", "PROXIMITY", "TITLE"]
        var widths = header.map(\.count)
        for row in rows {
            for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            var out = ""
            for (i, cell) in cells.enumerated() {
                if i == cells.count - 1 {
                    out += cell
                } else {
                    out += cell + String(repeating: " ", count: widths[i] - cell.count + (i == 0 ? 1 : 2))
                }
            }
            while out.hasSuffix(" ") { out.removeLast() }
            return out + "\n"
        }
        var out = line(header)
        for row in rows { out += line(row) }
        if rows.isEmpty { out += "(no alerts)\n" }
        if let current = listing.current, !listing.targets.keys.contains(current) {
            out += "* \(name(current)) is offered or in progress\n"
        }
        return out
    }

    /// `alerts list --json`: `{"current": path or null, "alerts": [...]}`, each alert with its
    /// identifier, source, definition (as `AddAlert` takes it) and targets.
    static func json(_ listing: Listing) -> [String: Any] {
        var alerts: [[String: Any]] = []
        for alert in listing.identifiers {
            var definition = listing.definitions[alert] ?? [:]
            let source = definition.removeValue(forKey: "Source")?.unwrapped.string
            let targets: [[String: Any]] = listing.targets(of: alert).map { t in
                ["target": t.target, "path": t.path.rawValue, "status": t.actionStatus, "ready": t.readyForAction,
                 "condition": t.conditionValid, "strategy": t.strategy, "proximity": t.proximity, "detected": t.detected,
                 "current": t.path == listing.current]
            }
            alerts.append(["identifier": alert, "source": source ?? NSNull(), "definition": definition.mapValues(jsonValue),
                           "targets": targets])
        }
        return ["current": listing.current?.rawValue ?? NSNull(), "alerts": alerts]
    }

    /// A value of a definition as JSON: strings, numbers, objects for `a{ss}` and `a{sv}`.
    static func jsonValue(_ value: DBusValue) -> Any {
        let value = value.unwrapped
        if let s = value.string { return s }
        if let d = value.double { return d }
        if let b = value.bool { return b }
        if let n = value.integer { return n }
        if let entries = value.dictEntries {
            var out: [String: Any] = [:]
            for entry in entries { out[entry.key.unwrapped.string ?? "\(entry.key)"] = jsonValue(entry.value) }
            return out
        }
        if let items = value.arrayElements { return items.map(jsonValue) }
        return "\(value)"
    }

    // MARK: - alerts watch

    /// One event of `alerts watch`.
    enum Event: Sendable {
        /// `AlertReady`: the content, and the distance when the node gave one.
        case ready(ObjectPath, AlertProperties, distance: Double?)
        case removed(ObjectPath, reason: String)
        /// `ActionStatus` changed.
        case status(ObjectPath, String)

        /// The events a signal is: property changes other than the status are none.
        init?(_ signal: AlertSignal) {
            switch signal {
            case .ready(let path, let content):
                let distance = content["Distance"]?.unwrapped.double
                self = .ready(path, AlertProperties(content), distance: distance.flatMap { $0 >= 0 && $0.isFinite ? $0 : nil })
            case .removed(let path, let reason): self = .removed(path, reason: reason)
            case .changed(let path, let properties):
                guard let status = properties[AlertProperties.Key.actionStatus.rawValue]?.unwrapped.string else { return nil }
                self = .status(path, status)
            }
        }

        var path: ObjectPath {
            switch self {
            case .ready(let p, _, _), .removed(let p, _), .status(let p, _): p
            }
        }

        /// The alert and target of the path (or of the content, for a path of another shape).
        var identifiers: (alert: String, target: String) {
            if let ids = ProximityBus.alertTarget(of: path) { return ids }
            if case .ready(_, let content, _) = self { return (content.alert, content.target) }
            return (path.rawValue, "")
        }
    }

    /// `2026-11-23T15:00:00.123Z welcome/ibeacon:…:1:2 ready "Welcome" near 1.52 m`,
    /// `… status inProgress`, `… removed not-detected`.
    static func humanLine(_ event: Event, time: String) -> String {
        let (alert, target) = event.identifiers
        let what: String = switch event {
        case .ready(_, let content, let distance):
            "ready \(content.title.debugDescription) \(content.proximity)" + (distance.map { String(format: " %.2f m", $0) } ?? "")
        case .removed(_, let reason): "removed \(reason)"
        case .status(_, let status): "status \(status)"
        }
        return "\(time) \(alert)/\(target) \(what)"
    }

    /// One JSON object on one line, keys in a fixed order: time, alert, target, path, event, then
    /// the event's fields.
    static func jsonLine(_ event: Event, time: String) -> String {
        let (alert, target) = event.identifiers
        var fields = [("time", JSONText.string(time)), ("alert", JSONText.string(alert)), ("target", JSONText.string(target)),
                      ("path", JSONText.string(event.path.rawValue))]
        switch event {
        case .ready(_, let c, let distance):
            let extra = JSONText.object(c.extra.sorted { $0.key < $1.key }.map { ($0.key, JSONText.string($0.value)) })
            fields += [("event", JSONText.string("ready")), ("title", JSONText.string(c.title)),
                       ("description", JSONText.string(c.description)), ("text_to_speech", JSONText.string(c.textToSpeech)),
                       ("thumbnail", JSONText.string(c.thumbnail)), ("action", JSONText.string(c.action)),
                       ("url", JSONText.string(c.url)), ("uri", JSONText.string(c.uri)), ("extra", extra),
                       ("proximity", JSONText.string(c.proximity)), ("distance", distance.map(JSONText.number) ?? "null")]
        case .removed(_, let reason):
            fields += [("event", JSONText.string("removed")), ("reason", JSONText.string(reason))]
        case .status(_, let status):
            fields += [("event", JSONText.string("status")), ("status", JSONText.string(status))]
        }
        return JSONText.object(fields)
    }

    // MARK: - alerts consume

    /// Whether a thumbnail names a local file (an absolute path or a `file://` URI), which a
    /// notification server can show as the icon.
    static func isFile(_ thumbnail: String) -> Bool {
        thumbnail.hasPrefix("/") || thumbnail.hasPrefix("file://")
    }

    /// The action key of the URL action of a notification.
    static let urlAction = "url"

    /// The notification showing `content`: the title as summary, the description as body, actions
    /// `default` ("Open") and, when the alert has a URL, `url` (labelled with the URL); the
    /// thumbnail as icon when it is a file, and as the `image-path` hint whenever it is set. It
    /// never expires.
    static func notification(_ content: AlertProperties) -> DesktopNotifications.Notification {
        var n = DesktopNotifications.Notification()
        n.summary = content.title.isEmpty ? "\(content.alert)" : content.title
        n.body = content.description
        n.actions = ["default", "Open"]
        if !content.url.isEmpty { n.actions += [urlAction, content.url] }
        if isFile(content.thumbnail) { n.appIcon = content.thumbnail }
        if !content.thumbnail.isEmpty { n.hints["image-path"] = .string(content.thumbnail) }
        n.expireTimeout = 0
        return n
    }

    /// The environment of an `--exec` command: every field of the alert, `PROXIMITY_EXTRA_<KEY>`
    /// for each extra field (the key in capitals, other characters than letters and digits as
    /// `_`).
    static func environment(_ path: ObjectPath, _ content: AlertProperties, distance: Double?) -> [String: String] {
        var env = [
            "PROXIMITY_ALERT": content.alert, "PROXIMITY_TARGET": content.target, "PROXIMITY_PATH": path.rawValue,
            "PROXIMITY_TITLE": content.title, "PROXIMITY_DESCRIPTION": content.description,
            "PROXIMITY_TEXT_TO_SPEECH": content.textToSpeech, "PROXIMITY_THUMBNAIL": content.thumbnail,
            "PROXIMITY_ACTION": content.action, "PROXIMITY_URL": content.url, "PROXIMITY_URI": content.uri,
            "PROXIMITY_PROXIMITY": content.proximity, "PROXIMITY_DISTANCE": distance.map { String(format: "%.2f", $0) } ?? "",
        ]
        for (key, value) in content.extra {
            env["PROXIMITY_EXTRA_" + environmentName(key)] = value
        }
        return env
    }

    /// `floor-2` → `FLOOR_2`.
    static func environmentName(_ key: String) -> String {
        String(key.uppercased().unicodeScalars.map { scalar -> Character in
            (scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar))) ? Character(scalar) : "_"
        })
    }

    /// A file name for an alert's speech: `alert--target.wav`, characters other than letters,
    /// digits, `.`, `_` and `-` as `_`.
    static func wavName(_ content: AlertProperties) -> String {
        func clean(_ s: String) -> String {
            String(s.unicodeScalars.map { scalar -> Character in
                scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar) || "._-".unicodeScalars.contains(scalar))
                    ? Character(scalar) : "_"
            })
        }
        return "\(clean(content.alert))--\(clean(content.target)).wav"
    }
}

/// An ALERT argument that names no alert target (exit 64).
struct AlertArgumentError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
