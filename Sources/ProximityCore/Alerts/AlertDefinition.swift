import Foundation

/// An alert as a client writes it: parts by name, the same on the bus (`AddAlert`'s `a{sv}`), in
/// the config file (an item of `alerts:`) and in the state directory. Every part is optional
/// except the target (`Match`); parts left out take their defaults.
///
/// | part | bus key | config key | value |
/// |---|---|---|---|
/// | title, description, text to speech, thumbnail, action, URL, URI | `Title` … `URI` | `title` … `uri` | text |
/// | extra fields | `Extra` | `extra` | text → text |
/// | range | `Range` | `range` | `immediate`, `near` (default), `far` |
/// | default strategy | `Comparison` | `comparison` | `=` (default), `<=`, `>=` |
/// | custom strategy | `Strategy` | `strategy` | a key (`time`, or one registered over the bus) |
/// | reset | `MaxTimeBeforeReset` | `max-time-before-reset` | seconds, default 60 |
/// | cooldown | `Cooldown` | `cooldown` | seconds |
/// | cap | `CapCount`, `CapWindow` | `cap-count`, `cap-window` | a count, seconds |
/// | schedule | `Days`, `Start`, `End`, `Outside` | `days`, `start`, `end`, `outside` | `mon-fri,sun`, `HH:MM`, `HH:MM`, `hold`/`drop` |
/// | targets | `Match` | `match` | the regions' matcher, without `Within` and `ExitPeriod` |
extension Alert {
    public enum Key: String, Sendable, CaseIterable, Hashable {
        case title = "Title", description = "Description", textToSpeech = "TextToSpeech", thumbnail = "Thumbnail"
        case action = "Action", url = "URL", uri = "URI", extra = "Extra"
        case range = "Range", comparison = "Comparison", strategy = "Strategy", maxTimeBeforeReset = "MaxTimeBeforeReset"
        case cooldown = "Cooldown", capCount = "CapCount", capWindow = "CapWindow"
        case days = "Days", start = "Start", end = "End", outside = "Outside"
        case match = "Match"

        public var busName: String { rawValue }
        /// `text-to-speech`, `max-time-before-reset`, `cap-count`, …
        public var configName: String {
            switch self {
            case .textToSpeech: "text-to-speech"
            case .maxTimeBeforeReset: "max-time-before-reset"
            case .capCount: "cap-count"
            case .capWindow: "cap-window"
            default: rawValue.lowercased()
            }
        }

        public init?(configName: String) {
            guard let key = Self.allCases.first(where: { $0.configName == configName }) else { return nil }
            self = key
        }

        /// What the part holds, as messages say it.
        public var expected: String {
            switch self {
            case .title, .description, .textToSpeech, .thumbnail, .action, .url, .uri: "a string"
            case .extra: "a mapping of strings to strings"
            case .range: "one of immediate, near, far"
            case .comparison: "one of =, <=, >="
            case .strategy: "a strategy key"
            case .maxTimeBeforeReset, .cooldown, .capWindow: "a number of seconds"
            case .capCount: "a positive integer"
            case .days: "days of the week such as mon-fri,sun"
            case .start, .end: "a time of day HH:MM"
            case .outside: "hold or drop"
            case .match: "a matcher"
            }
        }
    }

    /// A part's value.
    public enum Value: Sendable, Hashable, Codable {
        case text(String)
        case number(Double)
        case integer(Int64)
        case map([String: String])
        /// The matcher's parts by their bus names.
        case matcher([String: RegionMatcher.Value])

        public init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let n = try? c.decode(Int64.self) { self = .integer(n) }
            else if let d = try? c.decode(Double.self) { self = .number(d) }
            else if let s = try? c.decode(String.self) { self = .text(s) }
            else if let m = try? c.decode([String: String].self) { self = .map(m) }
            else { self = .matcher(try c.decode([String: RegionMatcher.Value].self)) }
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            switch self {
            case .text(let s): try c.encode(s)
            case .number(let d): try c.encode(d)
            case .integer(let n): try c.encode(n)
            case .map(let m): try c.encode(m)
            case .matcher(let m): try c.encode(m)
            }
        }

        public var summary: String {
            switch self {
            case .text(let s): "the string \(s.debugDescription)"
            case .number(let d): "the number \(d)"
            case .integer(let n): "the integer \(n)"
            case .map: "a mapping"
            case .matcher: "a matcher"
            }
        }
    }

    /// The longest text a content part may hold, bytes.
    public static let maxTextLength = 4096
    /// The most extra fields.
    public static let maxExtraFields = 64
    /// Seconds a reset, a cooldown or a cap's window may take: up to 30 days.
    public static let secondsRange: ClosedRange<Double> = 0...2_592_000
    /// A cap's count.
    public static let capCountRange: ClosedRange<Int64> = 1...1_000_000

    /// Why `identifier` cannot name an alert, or nil.
    public static func problem(identifier: String) -> String? {
        identifierProblem(identifier, called: "the alert identifier")
    }

    /// Builds an alert from its parts, checking each and how they go together. Throws the first
    /// problem, naming the part.
    public static func parse(identifier: String, _ parts: [(Key, Value)]) throws(AlertDefinitionError) -> Alert {
        var content = AlertContent()
        var parameters = AlertParameters()
        var targets: RegionMatcher?
        var capCount: Int64?, capWindow: Double?
        var days: Set<Int>?, start: Int?, end: Int?, outside: AlertSchedule.Outside?
        var seen = Set<Key>()
        func fail(_ key: Key, _ problem: String) -> AlertDefinitionError { AlertDefinitionError(key, problem) }
        func text(_ key: Key, _ value: Value, max: Int = maxTextLength) throws(AlertDefinitionError) -> String {
            guard case .text(let s) = value else { throw fail(key, "must be \(key.expected), not \(value.summary)") }
            guard s.utf8.count <= max else { throw fail(key, "is longer than \(max) bytes") }
            return s
        }
        func seconds(_ key: Key, _ value: Value) throws(AlertDefinitionError) -> Double {
            let d: Double
            switch value {
            case .number(let x): d = x
            case .integer(let n): d = Double(n)
            default: throw fail(key, "must be \(key.expected), not \(value.summary)")
            }
            guard d.isFinite, secondsRange.contains(d) else {
                throw fail(key, "must be from 0 to \(Int(secondsRange.upperBound)) seconds, not \(d)")
            }
            return d
        }
        for (key, value) in parts {
            guard seen.insert(key).inserted else { throw fail(key, "is given twice") }
            switch key {
            case .title: content.title = try text(key, value)
            case .description: content.description = try text(key, value)
            case .textToSpeech: content.textToSpeech = try text(key, value)
            case .thumbnail: content.thumbnail = try text(key, value)
            case .action: content.action = try text(key, value, max: 255)
            case .url: content.url = try text(key, value)
            case .uri: content.uri = try text(key, value)
            case .extra:
                guard case .map(let m) = value else { throw fail(key, "must be \(key.expected), not \(value.summary)") }
                guard m.count <= maxExtraFields else { throw fail(key, "has more than \(maxExtraFields) fields") }
                for (name, field) in m {
                    if let problem = identifierProblem(name, called: "a field name") { throw fail(key, problem) }
                    guard field.utf8.count <= maxTextLength else {
                        throw fail(key, "field \(name.debugDescription) is longer than \(maxTextLength) bytes")
                    }
                }
                content.extra = m
            case .range:
                let s = try text(key, value, max: 64)
                guard let zone = Proximity(rawValue: s), zone != .unknown else {
                    throw fail(key, "must be \(key.expected), not \(s.debugDescription)")
                }
                parameters.range = zone
            case .comparison:
                let s = try text(key, value, max: 64)
                guard let comparison = RangeComparison(rawValue: s) else {
                    throw fail(key, "must be \(key.expected), not \(s.debugDescription)")
                }
                parameters.comparison = comparison
            case .strategy:
                let s = try text(key, value, max: 255)
                if let problem = AlertStrategyKey.problem(s) { throw fail(key, problem) }
                parameters.strategy = s == AlertEngine.defaultStrategyKey ? nil : s
            case .maxTimeBeforeReset: parameters.maxTimeBeforeReset = try seconds(key, value)
            case .cooldown: parameters.cooldown = try seconds(key, value)
            case .capWindow:
                let w = try seconds(key, value)
                guard w > 0 else { throw fail(key, "must be more than 0 seconds") }
                capWindow = w
            case .capCount:
                guard case .integer(let n) = value else { throw fail(key, "must be \(key.expected), not \(value.summary)") }
                guard capCountRange.contains(n) else { throw fail(key, "must be from 1 to \(capCountRange.upperBound), not \(n)") }
                capCount = n
            case .days:
                let spec = try text(key, value, max: 255)
                do { days = try AlertSchedule.parseDays(spec) } catch { throw fail(key, error.problem) }
            case .start, .end:
                let s = try text(key, value, max: 64)
                guard let minute = AlertSchedule.parseTime(s) else {
                    throw fail(key, "must be \(key.expected) (00:00 to 24:00), not \(s.debugDescription)")
                }
                if key == .start { start = minute } else { end = minute }
            case .outside:
                let s = try text(key, value, max: 64)
                guard let o = AlertSchedule.Outside(rawValue: s) else {
                    throw fail(key, "must be \(key.expected), not \(s.debugDescription)")
                }
                outside = o
            case .match:
                guard case .matcher(let m) = value else { throw fail(key, "must be \(key.expected), not \(value.summary)") }
                var matcherParts: [(RegionMatcher.Key, RegionMatcher.Value)] = []
                for (name, part) in m.sorted(by: { $0.key < $1.key }) {
                    guard let k = RegionMatcher.Key(rawValue: name) else { throw fail(key, "has an unknown key \(name.debugDescription)") }
                    guard k != .within, k != .exitPeriod else {
                        throw fail(key, "cannot have \(k.busName) (an alert's range and strategy say when it is ready)")
                    }
                    matcherParts.append((k, part))
                }
                do { targets = try RegionMatcher.parse(matcherParts) } catch { throw fail(key, "\(error)") }
            }
        }
        guard let targets else {
            throw fail(.match, "is missing: an alert needs a matcher for its targets (use an empty one for every peer)")
        }
        switch (capCount, capWindow) {
        case (nil, nil): break
        case (let n?, let w?): parameters.cap = AlertCap(count: Int(n), window: w)
        case (nil, _): throw fail(.capCount, "is missing: a cap needs both CapCount and CapWindow")
        case (_, nil): throw fail(.capWindow, "is missing: a cap needs both CapCount and CapWindow")
        }
        if days != nil || start != nil || end != nil || outside != nil {
            let schedule = AlertSchedule(days: days ?? Set(1...7), start: start ?? 0, end: end ?? 1440, outside: outside ?? .hold)
            guard schedule.start != schedule.end else { throw fail(.end, "is the same time as Start: the schedule would never open") }
            parameters.schedule = schedule
        }
        return Alert(identifier: identifier, content: content, parameters: parameters, targets: targets)
    }

    /// The parts of this alert that differ from the defaults (and always `Match`), in key order:
    /// what `GetDefinitions` answers and what the state directory keeps.
    public var parts: [(Key, Value)] {
        var out: [(Key, Value)] = []
        let defaults = AlertContent()
        for (key, value, base) in [(Key.title, content.title, defaults.title), (.description, content.description, defaults.description),
                                   (.textToSpeech, content.textToSpeech, defaults.textToSpeech),
                                   (.thumbnail, content.thumbnail, defaults.thumbnail),
                                   (.action, content.action, defaults.action), (.url, content.url, defaults.url),
                                   (.uri, content.uri, defaults.uri)]
            where value != base {
            out.append((key, .text(value)))
        }
        if !content.extra.isEmpty { out.append((.extra, .map(content.extra))) }
        out.append((.range, .text(parameters.range.rawValue)))
        out.append((.comparison, .text(parameters.comparison.rawValue)))
        if let s = parameters.strategy { out.append((.strategy, .text(s))) }
        out.append((.maxTimeBeforeReset, .number(parameters.maxTimeBeforeReset)))
        if let c = parameters.cooldown { out.append((.cooldown, .number(c))) }
        if let cap = parameters.cap {
            out.append((.capCount, .integer(Int64(cap.count))))
            out.append((.capWindow, .number(cap.window)))
        }
        if let s = parameters.schedule {
            out.append((.days, .text(AlertSchedule.formatDays(s.days))))
            out.append((.start, .text(AlertSchedule.formatTime(s.start))))
            out.append((.end, .text(AlertSchedule.formatTime(s.end))))
            out.append((.outside, .text(s.outside.rawValue)))
        }
        out.append((.match, .matcher(Dictionary(uniqueKeysWithValues: targets.parts.map { ($0.0.busName, $0.1) }))))
        return out
    }
}

/// Strategy keys: 1 to 64 characters of letters, digits, `-`, `_` and `.`.
public enum AlertStrategyKey {
    public static func problem(_ key: String) -> String? {
        if key.isEmpty { return "is empty: a strategy key needs 1 to 64 characters" }
        if key.count > 64 { return "is longer than 64 characters" }
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
        if let bad = key.first(where: { !allowed.contains($0) }) {
            return "\(key.debugDescription) has \(String(bad).debugDescription): a strategy key has letters, digits, '-', '_' and '.' only"
        }
        return nil
    }
}

/// Why an alert's parts cannot make an alert: the part, and the problem.
public struct AlertDefinitionError: Error, Sendable, Hashable, CustomStringConvertible {
    public var key: Alert.Key
    public var problem: String
    public init(_ key: Alert.Key, _ problem: String) {
        self.key = key
        self.problem = problem
    }
    public var description: String { "\(key.busName) \(problem)" }
}

extension AlertSchedule {
    static let dayNames = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]

    public struct DaysError: Error { public var problem: String }

    /// `mon-fri,sun` → {1, 2, 3, 4, 5, 7}; ranges may wrap (`fri-mon`); `*` or `all` is every day.
    public static func parseDays(_ text: String) throws(DaysError) -> Set<Int> {
        let t = text.lowercased().replacingOccurrences(of: " ", with: "")
        if t == "*" || t == "all" { return Set(1...7) }
        var days = Set<Int>()
        func day(_ s: Substring) throws(DaysError) -> Int {
            let full = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
            guard let i = dayNames.firstIndex(of: String(s)) ?? full.firstIndex(of: String(s)) else {
                throw DaysError(problem: "\(String(s).debugDescription) is not a day of the week (mon, tue, wed, thu, fri, sat, sun)")
            }
            return i + 1
        }
        for item in t.split(separator: ",", omittingEmptySubsequences: false) {
            guard !item.isEmpty else { throw DaysError(problem: "\(text.debugDescription) has an empty day") }
            let ends = item.split(separator: "-", omittingEmptySubsequences: false)
            guard ends.count <= 2 else { throw DaysError(problem: "\(String(item).debugDescription) is not a day or a range of days") }
            let a = try day(ends[0]), b = ends.count == 2 ? try day(ends[1]) : a
            var d = a
            while true {
                days.insert(d)
                if d == b { break }
                d = d % 7 + 1
            }
        }
        return days
    }

    /// {1, 2, 3, 4, 5, 7} → `mon,tue,wed,thu,fri,sun`.
    public static func formatDays(_ days: Set<Int>) -> String {
        days == Set(1...7) ? "all" : days.sorted().map { dayNames[$0 - 1] }.joined(separator: ",")
    }

    /// `HH:MM` (00:00 to 24:00) → minutes since midnight.
    public static func parseTime(_ text: String) -> Int? {
        let p = text.split(separator: ":", omittingEmptySubsequences: false)
        guard p.count == 2, p[0].count == 2, p[1].count == 2, let h = Int(p[0]), let m = Int(p[1]),
              p[0].allSatisfy(\.isASCII), p[1].allSatisfy(\.isASCII), (0...24).contains(h), (0...59).contains(m),
              h < 24 || m == 0 else { return nil }
        return h * 60 + m
    }

    public static func formatTime(_ minute: Int) -> String {
        String(format: "%02d:%02d", minute / 60, minute % 60)
    }
}
