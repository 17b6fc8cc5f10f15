import DBusKit
import Foundation
import ProximityAPI
import ProximityCore

/// Why `proximityctl regions add` refuses its `KEY=VALUE` arguments. The descriptions are the
/// daemon's for the same mistakes (``MatcherBusError``), so a matcher reads the same whichever
/// side refuses it.
enum MatcherArgumentError: Error, Sendable, CustomStringConvertible {
    /// An argument without `=`, or with nothing before it.
    case malformed(String)
    /// An unknown key, or a part that cannot be taken.
    case refused(MatcherBusError)

    var description: String {
        switch self {
        case .malformed(let argument): "matcher: \(argument.debugDescription) is not KEY=VALUE"
        case .refused(let error): error.description
        }
    }
}

/// Regions as `proximityctl regions` reads and writes them: `KEY=VALUE` matchers, the table, the
/// JSON, and the lines of `regions watch`.
enum RegionText {
    // MARK: - Matchers

    /// The matcher part a command-line key names: its bus name (`URLDomain`) or its config name
    /// (`url-domain`), in any case.
    static func key(named name: String) -> RegionMatcher.Key? {
        let lower = name.lowercased()
        return RegionMatcher.Key.allCases.first { $0.busName.lowercased() == lower || $0.configName == lower }
    }

    /// Reads `KEY=VALUE` arguments into a matcher, checked as the node checks one: each value is
    /// typed by its key (integers for `Major`, `Minor`, `ID2`, `ID3`; seconds for `ExitPeriod`;
    /// text otherwise), then ``RegionMatcher/parse(_:)`` checks the parts and how they go
    /// together. No arguments is the matcher of every peer.
    static func matcher(_ arguments: [String]) throws(MatcherArgumentError) -> RegionMatcher {
        var parts: [(RegionMatcher.Key, RegionMatcher.Value)] = []
        for argument in arguments {
            guard let equals = argument.firstIndex(of: "="), equals != argument.startIndex else { throw .malformed(argument) }
            let name = String(argument[..<equals])
            let text = String(argument[argument.index(after: equals)...])
            guard let key = key(named: name) else { throw .refused(.unknownKey(name)) }
            do { parts.append((key, try value(key, text))) } catch { throw .refused(.matcher(error)) }
        }
        do { return try RegionMatcher.parse(parts) } catch { throw .refused(.matcher(error)) }
    }

    /// A matcher part given on the command line as text, typed by its key: integers for `Major`,
    /// `Minor`, `ID2`, `ID3`; seconds for `ExitPeriod`; `true` or `false` for `Verified`; text
    /// otherwise.
    static func value(_ key: RegionMatcher.Key, _ text: String) throws(MatcherError) -> RegionMatcher.Value {
        let wrongType = MatcherError(key, "must be \(key.valueType.description), not \(text.debugDescription)")
        switch key.valueType {
        case .text:
            return .text(text)
        case .unsigned16:
            guard let n = Int64(text) else { throw wrongType }
            return .integer(n)
        case .seconds:
            guard let seconds = Double(text) else { throw wrongType }
            return .number(seconds)
        case .boolean:
            guard let b = Bool(text.lowercased()) else { throw wrongType }
            return .boolean(b)
        }
    }

    /// A matcher as `add` takes it back: `UUID=… Major=7 Within=near`, in the order of
    /// ``RegionMatcher/Key`` (keys the client does not know last, sorted); `(every peer)` when
    /// empty. Text with blanks or quotes is quoted.
    static func compact(_ matcher: [String: DBusValue]) -> String {
        let known = RegionMatcher.Key.allCases.map(\.busName)
        let names = known.filter { matcher[$0] != nil } + matcher.keys.filter { !known.contains($0) }.sorted()
        guard !names.isEmpty else { return "(every peer)" }
        return names.map { "\($0)=\(text(matcher[$0]!))" }.joined(separator: " ")
    }

    private static func text(_ value: DBusValue) -> String {
        let value = value.unwrapped
        if let s = value.string {
            return s.isEmpty || s.contains(where: { $0.isWhitespace || $0 == "\"" }) ? s.debugDescription : s
        }
        if let d = value.double { return seconds(d) }
        if let n = value.integer { return "\(n)" }
        if case .boolean(let b) = value { return "\(b)" }
        return "\(value)"
    }

    /// `30` for 30.0, `2.5` for 2.5.
    private static func seconds(_ d: Double) -> String {
        d.isFinite && d == d.rounded() && abs(d) < 1e15 ? "\(Int64(d))" : "\(d)"
    }

    /// A matcher value as JSON: a string, an integer or a number.
    private static func jsonValue(_ value: DBusValue) -> Any {
        let value = value.unwrapped
        if let s = value.string { return s }
        if let d = value.double { return d }
        if let n = value.integer { return n }
        if case .boolean(let b) = value { return b }
        return "\(value)"
    }

    // MARK: - regions list

    /// Sorted by identifier.
    static func rows(_ regions: [String: RegionProperties]) -> [RegionProperties] {
        regions.values.sorted { $0.identifier < $1.identifier }
    }

    /// One region of `regions list --json`.
    static func json(_ region: RegionProperties) -> [String: Any] {
        ["identifier": region.identifier, "path": region.path.rawValue, "state": region.state, "source": region.source,
         "peers": region.peers, "matcher": region.matcher.mapValues(jsonValue)]
    }

    /// IDENTIFIER, STATE, SOURCE, PEERS (how many), MATCHER, in the rows' order; the identifier
    /// column as wide as the longest.
    static func table(_ rows: [RegionProperties]) -> String {
        func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s + " " : s + String(repeating: " ", count: n - s.count) }
        let width = max(10, rows.map(\.identifier.count).max() ?? 0) + 2
        var out = pad("IDENTIFIER", width) + pad("STATE", 9) + pad("SOURCE", 8) + pad("PEERS", 7) + "MATCHER\n"
        for r in rows {
            out += pad(r.identifier, width) + pad(r.state, 9) + pad(r.source, 8) + pad("\(r.peers.count)", 7) + compact(r.matcher) + "\n"
        }
        if rows.isEmpty { out += "(no regions)\n" }
        return out
    }

    // MARK: - regions watch

    /// `2026-11-23T15:00:00.123Z fleet entered`, `… fleet state inside`,
    /// `… fleet ranged ibeacon:…:1:2 near 1.52 m -61 dBm, …`.
    static func humanLine(_ signal: RegionSignal, time: String) -> String {
        let event: String = switch signal.kind {
        case .entered: "entered"
        case .exited: "exited"
        case .stateDetermined(let state): "state \(state)"
        case .ranged(let peers) where peers.isEmpty: "ranged (no peers)"
        case .ranged(let peers):
            "ranged " + peers.map { "\($0.identifier) \($0.proximity) \(String(format: "%.2f", $0.distance)) m \($0.rssi) dBm" }
                .joined(separator: ", ")
        }
        return "\(time) \(signal.region) \(event)"
    }

    /// One JSON object on one line, keys in a fixed order: `{"time":…,"region":…,"event":…}`,
    /// with `"state"` for `state` and `"peers"` for `ranged`.
    static func jsonLine(_ signal: RegionSignal, time: String) -> String {
        var fields = [("time", JSONText.string(time)), ("region", JSONText.string(signal.region))]
        switch signal.kind {
        case .entered: fields.append(("event", JSONText.string("entered")))
        case .exited: fields.append(("event", JSONText.string("exited")))
        case .stateDetermined(let state):
            fields += [("event", JSONText.string("state")), ("state", JSONText.string(state))]
        case .ranged(let peers):
            let list = peers.map { p in
                JSONText.object([("identifier", JSONText.string(p.identifier)), ("zone", JSONText.string(p.proximity)),
                                 ("distance", JSONText.number(p.distance)), ("rssi", "\(p.rssi)")])
            }
            fields += [("event", JSONText.string("ranged")), ("peers", "[" + list.joined(separator: ",") + "]")]
        }
        return JSONText.object(fields)
    }
}

/// Compact JSON written by hand, for lines whose keys keep the order they are given in.
enum JSONText {
    /// `fields` are names and values already written as JSON.
    static func object(_ fields: [(String, String)]) -> String {
        "{" + fields.map { string($0.0) + ":" + $0.1 }.joined(separator: ",") + "}"
    }

    static func string(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// Shortest form that reads back the same; `null` for what JSON cannot hold (infinity, NaN).
    static func number(_ d: Double) -> String {
        d.isFinite ? "\(d)" : "null"
    }
}
