import DBusKit
import Foundation
import Logging
import ProximityCore
import ProximityTrust
import ProximityTesting
@testable import ProximityNode
import StrictYAML
import Testing

/// A config file that must be refused, and exactly the lines it must be refused with (without the
/// file name in front).
/// A `\u{FFFF}` in `yaml` stands for the byte 0xFF, which is not UTF-8.
struct BrokenConfig: Sendable, CustomTestStringConvertible {
    let name: String
    let bytes: [UInt8]
    let problems: [String]

    init(_ name: String, _ yaml: String, _ problems: String...) {
        self.name = name
        self.bytes = yaml.unicodeScalars.flatMap { $0 == "\u{FFFF}" ? [0xFF] : Array(String($0).utf8) }
        self.problems = problems
    }

    var testDescription: String { name }
}

/// The config file reader (`ConfigFile`), the merge with the command line, and the reloader.
@Suite struct ConfigFileTests {
    static let file = "test.yaml"

    /// Every kind of problem, each with its exact `LINE:COLUMN: message`.
    static let broken: [BrokenConfig] = [
        // YAML syntax, reported with Yams' position.
        BrokenConfig("an unclosed flow list", "bus: [\n",
                     "2:1: invalid YAML: did not find expected node content (while parsing a flow node at 2:1)"),
        BrokenConfig("a mapping value where none may be", "name: a\n bus: x\n",
                     "2:5: invalid YAML: mapping values are not allowed in this context"),
        BrokenConfig("a tab in the indentation", "region-monitor:\n\texit-period: 5\n",
                     "2:1: invalid YAML: found character that cannot start any token (while scanning for the next token at 2:1)"),
        BrokenConfig("two documents", "bus: system\n---\nbus: session\n",
                     "2:1: invalid YAML: but found another document (expected a single document in the stream at 1:1)"),
        BrokenConfig("an undefined alias", "name: *x\n", "1:7: invalid YAML: found undefined alias"),
        BrokenConfig("a control character", "name: \"a\u{7}\"\n", "1:9: invalid YAML: control characters are not allowed"),
        BrokenConfig("a control character after a duplicate key, whose renaming moves no column",
                     "regions:\n  - identifier: a\n    identifier: b\nname: \"ä\u{7}\"\n",
                     "4:9: invalid YAML: control characters are not allowed"),
        // The shape of the document.
        BrokenConfig("a list at the top", "- bus: system\n",
                     "1:1: the top level must be a mapping of keys such as bus: and regions:, not a list"),
        BrokenConfig("a scalar at the top", "system\n",
                     "1:1: the top level must be a mapping of keys such as bus: and regions:, not the string \"system\""),
        BrokenConfig("a key that is a mapping", "{a: 1}: 2\n", "1:1: a key must be a name, not a mapping"),
        // Unknown keys, with the nearest known one when it is close.
        BrokenConfig("a misspelt key", "clear-intervall: 10\n", "1:1: unknown key 'clear-intervall' (did you mean 'clear-interval'?)"),
        BrokenConfig("two letters swapped", "regoins: []\n", "1:1: unknown key 'regoins' (did you mean 'regions'?)"),
        BrokenConfig("a key in the wrong case", "Bus: system\n", "1:1: unknown key 'Bus' (did you mean 'bus'?)"),
        BrokenConfig("a key far from every known one", "colour: red\n", "1:1: unknown key 'colour'"),
        BrokenConfig("a section that does not exist", "rules: []\nfleet: {}\n", "2:1: unknown key 'fleet'"),
        BrokenConfig("an unknown key in region-monitor", "region-monitor:\n  period: 5\n",
                     "2:3: region-monitor: unknown key 'period' (expected 'exit-period', 'max-regions' or 'restore-limit')"),
        BrokenConfig("an unknown key in a region", "regions:\n  - identifier: a\n    matches: {}\n",
                     "3:5: regions[0]: unknown key 'matches' (did you mean 'match'?)"),
        BrokenConfig("an unknown matcher key", "regions:\n  - identifier: a\n    match:\n      uid: 1\n",
                     "4:7: regions[0].match: unknown key 'uid' (did you mean 'uuid'?)"),
        // Duplicate keys: reported where the second one is, wherever the mapping is.
        BrokenConfig("a duplicate top-level key", "bus: system\nname: a\nbus: session\n", "3:1: duplicate key 'bus' (first at 1:1)"),
        BrokenConfig("a key three times", "name: a\nname: b\nname: c\n",
                     "2:1: duplicate key 'name' (first at 1:1)", "3:1: duplicate key 'name' (first at 1:1)"),
        BrokenConfig("a quoted duplicate", "\"name\": a\n'name': b\n", "2:1: duplicate key 'name' (first at 1:1)"),
        BrokenConfig("a duplicate in a flow mapping", "region-monitor: {exit-period: 5, exit-period: 6}\n",
                     "1:34: region-monitor: duplicate key 'exit-period' (first at 1:18)"),
        BrokenConfig("a duplicate matcher key", """
            regions:
              - identifier: a
                match:
                  uuid: f7826da6-4fa2-4e98-8024-bc5b71e0893e
                  uuid: f7826da6-4fa2-4e98-8024-bc5b71e0893f
            """, "5:7: regions[0].match: duplicate key 'uuid' (first at 4:7)"),
        // Wrong types.
        BrokenConfig("seconds as words", "clear-interval: ten\n", "1:17: clear-interval: must be a number of seconds, not the string \"ten\""),
        BrokenConfig("a quoted number", "max-peers: \"10\"\n", "1:12: max-peers: must be an integer, not the string \"10\""),
        BrokenConfig("a fraction for an integer", "max-peers: 2.5\n", "1:12: max-peers: must be an integer, not the number 2.5"),
        BrokenConfig("a boolean for dBm", "measured-power: true\n", "1:17: measured-power: must be an integer (dBm), not the boolean true"),
        BrokenConfig("a list for a number", "path-loss-exponent: [2]\n", "1:21: path-loss-exponent: must be a number, not a list"),
        BrokenConfig("a quoted boolean", "power-on: \"true\"\n", "1:11: power-on: must be true or false, not the string \"true\""),
        BrokenConfig("a number for a boolean", "beacons: 1\n", "1:10: beacons: must be true or false, not the number 1"),
        BrokenConfig("a mapping for a string", "name: {first: a}\n", "1:7: name: must be a string, not a mapping"),
        BrokenConfig("an empty value, reported at its key", "log-level:\n", "1:1: log-level: must be a string, not an empty value"),
        BrokenConfig("null", "adapter: null\n", "1:10: adapter: must be a string, not null"),
        BrokenConfig("a string for the regions", "regions: kitchen\n", "1:10: regions: must be a list of regions, not the string \"kitchen\""),
        BrokenConfig("a scalar for a region", "regions:\n  - kitchen\n",
                     "2:5: regions[0]: must be a mapping with identifier: and match:, not the string \"kitchen\""),
        BrokenConfig("a list for a matcher", "regions:\n  - identifier: a\n    match: [uuid]\n",
                     "3:12: regions[0].match: must be a mapping of matcher keys such as uuid: and within:, not a list"),
        BrokenConfig("a number for region-monitor", "region-monitor: 5\n",
                     "1:17: region-monitor: must be a mapping of exit-period, max-regions and restore-limit, not the number 5"),
        BrokenConfig("a quoted major", "regions:\n  - identifier: a\n    match: {uuid: f7826da6-4fa2-4e98-8024-bc5b71e0893e, major: \"1\"}\n",
                     "3:64: regions[0].match.major: must be an integer in 0...65535, not the string \"1\""),
        BrokenConfig("a quoted exit period", "regions:\n  - identifier: a\n    match: {exit-period: \"5\"}\n",
                     "3:26: regions[0].match.exit-period: must be a number of seconds in 1...86400, not the string \"5\""),
        BrokenConfig("a list for an identifier", "regions:\n  - identifier: [a]\n",
                     "2:17: regions[0].identifier: must be a string, not a list"),
        // Out of range: the command line's ranges and words.
        BrokenConfig("a clear interval of 0", "clear-interval: 0\n", "1:17: clear-interval: 0 is not a number of seconds above 0 and at most 3600"),
        BrokenConfig("a clear interval over an hour", "clear-interval: 3600.5\n",
                     "1:17: clear-interval: 3600.5 is not a number of seconds above 0 and at most 3600"),
        BrokenConfig("a clear interval that is not a number", "clear-interval: .nan\n",
                     "1:17: clear-interval: nan is not a number of seconds above 0 and at most 3600"),
        BrokenConfig("a measured power too high", "measured-power: 21\n", "1:17: measured-power: a measured power of 21 dBm is outside -127…20"),
        BrokenConfig("a measured power beyond 16 bits", "measured-power: -40000\n",
                     "1:17: measured-power: a measured power of -40000 dBm is outside -127…20"),
        BrokenConfig("an integer beyond 64 bits", "max-peers: 99999999999999999999\n", "1:12: max-peers: 99999999999999999999 is out of range"),
        BrokenConfig("a path-loss exponent of 1", "path-loss-exponent: 1\n", "1:21: path-loss-exponent: 1 is not between 1.5 and 6"),
        BrokenConfig("an RSSI offset over 40 dB", "rssi-offset: 40.5\n", "1:14: rssi-offset: an offset of 40.5 dB is outside -40…40"),
        BrokenConfig("an RSSI offset under -40 dB", "rssi-offset: -41\n", "1:14: rssi-offset: an offset of -41 dB is outside -40…40"),
        BrokenConfig("an RSSI offset that is not a number", "rssi-offset: .nan\n",
                     "1:14: rssi-offset: an offset must be a finite number of dB, not nan"),
        BrokenConfig("an infinite RSSI offset", "rssi-offset: -.inf\n", "1:14: rssi-offset: an offset must be a finite number of dB, not -inf"),
        BrokenConfig("an RSSI offset in words", "rssi-offset: high\n", "1:14: rssi-offset: must be a number (dB), not the string \"high\""),
        BrokenConfig("a quoted RSSI offset", "rssi-offset: \"3\"\n", "1:14: rssi-offset: must be a number (dB), not the string \"3\""),
        BrokenConfig("an empty RSSI offset, reported at its key", "rssi-offset:\n", "1:1: rssi-offset: must be a number (dB), not an empty value"),
        BrokenConfig("a misspelt RSSI offset", "rssi-ofset: 3\n", "1:1: unknown key 'rssi-ofset' (did you mean 'rssi-offset'?)"),
        BrokenConfig("no peers", "max-peers: 0\n", "1:12: max-peers: 0 is not between 1 and 100000"),
        BrokenConfig("too many peers", "max-peers: 100001\n", "1:12: max-peers: 100001 is not between 1 and 100000"),
        BrokenConfig("a log level that is not one", "log-level: loud\n",
                     "1:12: log-level: 'loud' is not one of trace, debug, info, notice, warning, error, critical"),
        BrokenConfig("a bus that is not one", "bus: nonsense\n",
                     "1:6: bus: 'nonsense' is not 'system', 'session' or a D-Bus address such as unix:path=/run/dbus/system_bus_socket"),
        BrokenConfig("a bus name that is not one", "bus-name: org..x\n",
                     "1:11: bus-name: invalid bus name 'org..x': empty element"),
        BrokenConfig("a service UUID that is not one", "service-uuid: 12\n",
                     "1:15: service-uuid: '12' is not a UUID such as b89491c9-43dd-4d75-bf16-dff381aed967"),
        BrokenConfig("an empty name", "name: \"\"\n", "1:7: name: must be 1 to 248 bytes of UTF-8 (the Bluetooth name limit)"),
        BrokenConfig("an adapter with a space", "adapter: hci 0\n", "1:10: adapter: 'hci 0' is not an adapter name such as hci0"),
        BrokenConfig("an empty state directory", "state-dir: \"\"\n", "1:12: state-dir: must not be empty"),
        BrokenConfig("a relative state directory", "state-dir: var/lib\n",
                     "1:12: state-dir: must be an absolute path such as /var/lib/proximityd, not 'var/lib'"),
        BrokenConfig("a default exit period of 0", "region-monitor:\n  exit-period: 0\n",
                     "2:16: region-monitor.exit-period: must be a number of seconds in 1...86400, not 0"),
        BrokenConfig("too few regions allowed", "region-monitor:\n  max-regions: 10\n",
                     "2:16: region-monitor.max-regions: must be an integer in 1024...100000, not 10"),
        BrokenConfig("a restore limit over a day", "region-monitor:\n  restore-limit: 86401\n",
                     "2:18: region-monitor.restore-limit: must be a number of seconds in 0...86400, not 86401"),
        // Regions.
        BrokenConfig("a region without an identifier", "regions:\n  - match: {kind: node}\n",
                     "2:5: regions[0]: a region needs an identifier"),
        BrokenConfig("an empty region identifier", "regions:\n  - identifier: \"\"\n",
                     "2:17: regions[0].identifier: the region identifier is empty"),
        BrokenConfig("a region identifier with a control character", "regions:\n  - identifier: \"a\\tb\"\n",
                     "2:17: regions[0].identifier: the region identifier contains control characters"),
        BrokenConfig("a region defined twice", "regions:\n  - identifier: kitchen\n  - identifier: hall\n  - identifier: kitchen\n",
                     "4:17: regions[2].identifier: region 'kitchen' is already defined at 2:17"),
        // Each matcher part that cannot be taken, at its value.
        BrokenConfig("uuid: 12", "regions:\n  - identifier: a\n    match:\n      uuid: 12\n",
                     "4:13: regions[0].match.uuid: must be a UUID such as f7826da6-4fa2-4e98-8024-bc5b71e0893e, not \"12\""),
        BrokenConfig("a kind that is not one", "regions:\n  - identifier: a\n    match: {kind: phone}\n",
                     "3:19: regions[0].match.kind: must be one of node, ibeacon, altbeacon, eddystone, irk, not \"phone\""),
        BrokenConfig("verified that is not a boolean", "regions:\n  - identifier: a\n    match: {verified: \"yes\"}\n",
                     "3:23: regions[0].match.verified: must be true or false, not the string \"yes\""),
        BrokenConfig("an empty identifier to match", "regions:\n  - identifier: a\n    match: {identifier: \"\"}\n",
                     "3:25: regions[0].match.identifier: must not be empty"),
        BrokenConfig("a control character in an identifier to match", "regions:\n  - identifier: a\n    match: {identifier: \"x\\ty\"}\n",
                     "3:25: regions[0].match.identifier: must not contain control characters"),
        BrokenConfig("a major beyond 16 bits", "regions:\n  - identifier: a\n    match: {uuid: f7826da6-4fa2-4e98-8024-bc5b71e0893e, major: 65536}\n",
                     "3:64: regions[0].match.major: must be an integer in 0...65535, not 65536"),
        BrokenConfig("a negative minor", "regions:\n  - identifier: a\n    match: {uuid: f7826da6-4fa2-4e98-8024-bc5b71e0893e, major: 1, minor: -1}\n",
                     "3:74: regions[0].match.minor: must be an integer in 0...65535, not -1"),
        BrokenConfig("an id1 that is not a UUID", "regions:\n  - identifier: a\n    match: {id1: x}\n",
                     "3:18: regions[0].match.id1: must be a UUID such as f7826da6-4fa2-4e98-8024-bc5b71e0893e, not \"x\""),
        BrokenConfig("a short namespace", "regions:\n  - identifier: a\n    match: {namespace: abc}\n",
                     "3:24: regions[0].match.namespace: must be 10 bytes as 20 hex digits, not \"abc\""),
        BrokenConfig("an instance that is not hex", "regions:\n  - identifier: a\n    match: {namespace: edd1ebeac04e5defa017, instance: xyzxyzxyzxyz}\n",
                     "3:56: regions[0].match.instance: must be 6 bytes as 12 hex digits, not \"xyzxyzxyzxyz\""),
        BrokenConfig("a URL without a scheme", "regions:\n  - identifier: a\n    match: {url: example.com}\n",
                     "3:18: regions[0].match.url: must be an http:// or https:// URL such as https://example.com/, not \"example.com\""),
        BrokenConfig("a domain with a slash", "regions:\n  - identifier: a\n    match: {url-domain: example.com/x}\n",
                     "3:25: regions[0].match.url-domain: must be a host name such as example.com, not \"example.com/x\""),
        BrokenConfig("a short address", "regions:\n  - identifier: a\n    match: {address: \"AA:BB:CC\"}\n",
                     "3:22: regions[0].match.address: must be a Bluetooth address such as AA:BB:CC:DD:EE:FF, not \"AA:BB:CC\""),
        BrokenConfig("within unknown", "regions:\n  - identifier: a\n    match: {within: unknown}\n",
                     "3:21: regions[0].match.within: must be immediate, near or far, not \"unknown\""),
        BrokenConfig("an exit period of 0", "regions:\n  - identifier: a\n    match: {exit-period: 0}\n",
                     "3:26: regions[0].match.exit-period: must be a number of seconds in 1...86400, not 0"),
        // How the parts go together, at the key the matcher names.
        BrokenConfig("major without uuid", "regions:\n  - identifier: a\n    match:\n      major: 1\n",
                     "4:7: regions[0].match.major: needs uuid"),
        BrokenConfig("minor without major", "regions:\n  - identifier: a\n    match:\n      uuid: f7826da6-4fa2-4e98-8024-bc5b71e0893e\n      minor: 1\n",
                     "5:7: regions[0].match.minor: needs major"),
        BrokenConfig("id2 without id1", "regions:\n  - identifier: a\n    match:\n      id2: 1\n", "4:7: regions[0].match.id2: needs id1"),
        BrokenConfig("id3 without id2", "regions:\n  - identifier: a\n    match:\n      id1: f7826da6-4fa2-4e98-8024-bc5b71e0893e\n      id3: 1\n",
                     "5:7: regions[0].match.id3: needs id2"),
        BrokenConfig("instance without namespace", "regions:\n  - identifier: a\n    match:\n      instance: 0123456789ab\n",
                     "4:7: regions[0].match.instance: needs namespace"),
        BrokenConfig("url and url-domain", "regions:\n  - identifier: a\n    match:\n      url: https://example.com/\n      url-domain: example.com\n",
                     "5:7: regions[0].match.url-domain: cannot go with url (give one of them)"),
        BrokenConfig("two kinds of beacon", "regions:\n  - identifier: a\n    match:\n      uuid: f7826da6-4fa2-4e98-8024-bc5b71e0893e\n      namespace: edd1ebeac04e5defa017\n",
                     "5:7: regions[0].match.namespace: cannot go with uuid: a peer is one kind of beacon"),
        BrokenConfig("a namespace and a URL", "regions:\n  - identifier: a\n    match:\n      namespace: edd1ebeac04e5defa017\n      url: https://example.com/\n",
                     "5:7: regions[0].match.url: cannot go with namespace: Eddystone-UID and Eddystone-URL are different frames"),
        BrokenConfig("a kind that disagrees", "regions:\n  - identifier: a\n    match:\n      kind: node\n      uuid: f7826da6-4fa2-4e98-8024-bc5b71e0893e\n",
                     "4:7: regions[0].match.kind: is node, but uuid is ibeacon"),
        // Alerts: the shape.
        BrokenConfig("a mapping for the alerts", "alerts: {identifier: a}\n",
                     "1:9: alerts: must be a list of alerts, not a mapping"),
        BrokenConfig("a scalar for an alert", "alerts:\n  - lighthouse\n",
                     "2:5: alerts[0]: must be a mapping with identifier:, match: and the alert's keys such as title:, not the string \"lighthouse\""),
        BrokenConfig("a misspelt alert key", "alerts:\n  - identifier: a\n    tittle: The Lighthouse\n    match: {}\n",
                     "3:5: alerts[0]: unknown key 'tittle' (did you mean 'title'?)"),
        BrokenConfig("a duplicate alert key", "alerts:\n  - identifier: a\n    title: x\n    title: y\n    match: {}\n",
                     "4:5: alerts[0]: duplicate key 'title' (first at 3:5)"),
        BrokenConfig("an alert without an identifier", "alerts:\n  - title: x\n    match: {}\n",
                     "2:5: alerts[0]: an alert needs an identifier"),
        BrokenConfig("an empty alert identifier", "alerts:\n  - identifier: \"\"\n    match: {}\n",
                     "2:17: alerts[0].identifier: the alert identifier is empty"),
        BrokenConfig("an alert without a match", "alerts:\n  - identifier: a\n    title: x\n",
                     "2:5: alerts[0]: an alert needs a match (match: {} for every peer)"),
        BrokenConfig("an alert defined twice", "alerts:\n  - identifier: x\n    match: {}\n  - identifier: y\n    match: {}\n  - identifier: x\n    match: {}\n",
                     "6:17: alerts[2].identifier: alert 'x' is already defined at 2:17"),
        // Alerts: each part's type, at its value.
        BrokenConfig("a list for a title", "alerts:\n  - identifier: a\n    title: [x]\n    match: {}\n",
                     "3:12: alerts[0].title: must be a string, not a list"),
        BrokenConfig("an empty range, at its key", "alerts:\n  - identifier: a\n    range:\n    match: {}\n",
                     "3:5: alerts[0].range: must be one of immediate, near, far, not an empty value"),
        BrokenConfig("a quoted cooldown", "alerts:\n  - identifier: a\n    cooldown: \"300\"\n    match: {}\n",
                     "3:15: alerts[0].cooldown: must be a number of seconds, not the string \"300\""),
        BrokenConfig("a cooldown beyond 64 bits", "alerts:\n  - identifier: a\n    cooldown: 99999999999999999999\n    match: {}\n",
                     "3:15: alerts[0].cooldown: 99999999999999999999 is out of range"),
        BrokenConfig("a list for extra", "alerts:\n  - identifier: a\n    extra: [room]\n    match: {}\n",
                     "3:12: alerts[0].extra: must be a mapping of strings to strings, not a list"),
        BrokenConfig("an extra field that is not a string", "alerts:\n  - identifier: a\n    extra: {room: [3]}\n    match: {}\n",
                     "3:19: alerts[0].extra.room: must be a string, not a list"),
        BrokenConfig("a duplicate extra field", "alerts:\n  - identifier: a\n    extra: {room: a, room: b}\n    match: {}\n",
                     "3:22: alerts[0].extra: duplicate key 'room' (first at 3:13)"),
        BrokenConfig("a list for an alert's match", "alerts:\n  - identifier: a\n    match: [uuid]\n",
                     "3:12: alerts[0].match: must be a mapping of matcher keys such as uuid: and major:, not a list"),
        // Alerts: each part's value, as the alert's definition checks it, at its value.
        BrokenConfig("a range that is not one", "alerts:\n  - identifier: a\n    range: nearby\n    match: {}\n",
                     "3:12: alerts[0].range: must be one of immediate, near, far, not \"nearby\""),
        BrokenConfig("a range of unknown", "alerts:\n  - identifier: a\n    range: unknown\n    match: {}\n",
                     "3:12: alerts[0].range: must be one of immediate, near, far, not \"unknown\""),
        BrokenConfig("a comparison that is not one", "alerts:\n  - identifier: a\n    comparison: \"<\"\n    match: {}\n",
                     "3:17: alerts[0].comparison: must be one of =, <=, >=, not \"<\""),
        BrokenConfig("a strategy key with a space", "alerts:\n  - identifier: a\n    strategy: my strategy\n    match: {}\n",
                     "3:15: alerts[0].strategy: \"my strategy\" has \" \": a strategy key has letters, digits, '-', '_' and '.' only"),
        BrokenConfig("a negative cooldown", "alerts:\n  - identifier: a\n    cooldown: -1\n    match: {}\n",
                     "3:15: alerts[0].cooldown: must be from 0 to 2592000 seconds, not -1.0"),
        BrokenConfig("a cap count of 0", "alerts:\n  - identifier: a\n    cap-count: 0\n    cap-window: 60\n    match: {}\n",
                     "3:16: alerts[0].cap-count: must be from 1 to 1000000, not 0"),
        BrokenConfig("a fraction for a cap count", "alerts:\n  - identifier: a\n    cap-count: 2.5\n    cap-window: 60\n    match: {}\n",
                     "3:16: alerts[0].cap-count: must be a positive integer, not the number 2.5"),
        BrokenConfig("a cap window of 0", "alerts:\n  - identifier: a\n    cap-count: 3\n    cap-window: 0\n    match: {}\n",
                     "4:17: alerts[0].cap-window: must be more than 0 seconds"),
        BrokenConfig("days that are not days", "alerts:\n  - identifier: a\n    days: mon-fry\n    match: {}\n",
                     "3:11: alerts[0].days: \"fry\" is not a day of the week (mon, tue, wed, thu, fri, sat, sun)"),
        BrokenConfig("a start past midnight", "alerts:\n  - identifier: a\n    start: \"25:00\"\n    match: {}\n",
                     "3:12: alerts[0].start: must be a time of day HH:MM (00:00 to 24:00), not \"25:00\""),
        BrokenConfig("an end without minutes", "alerts:\n  - identifier: a\n    end: 18\n    match: {}\n",
                     "3:10: alerts[0].end: must be a time of day HH:MM (00:00 to 24:00), not \"18\""),
        BrokenConfig("outside that is neither", "alerts:\n  - identifier: a\n    outside: skip\n    match: {}\n",
                     "3:14: alerts[0].outside: must be hold or drop, not \"skip\""),
        BrokenConfig("an extra field name with a control character", "alerts:\n  - identifier: a\n    extra: {\"a\\tb\": x}\n    match: {}\n",
                     "3:12: alerts[0].extra: a field name contains control characters"),
        // Alerts: parts that do not go together. A part that is missing: at the key of the one that needs it.
        BrokenConfig("cap-count without cap-window", "alerts:\n  - identifier: a\n    cap-count: 3\n    match: {}\n",
                     "3:5: alerts[0].cap-window: is missing: a cap needs both cap-count and cap-window"),
        BrokenConfig("cap-window without cap-count", "alerts:\n  - identifier: a\n    match: {}\n    cap-window: 60\n",
                     "4:5: alerts[0].cap-count: is missing: a cap needs both cap-count and cap-window"),
        BrokenConfig("a schedule that never opens", "alerts:\n  - identifier: a\n    start: \"09:00\"\n    end: \"09:00\"\n    match: {}\n",
                     "4:10: alerts[0].end: is the same time as start: the schedule would never open"),
        BrokenConfig("a wrong cap-count is not reported missing too", "alerts:\n  - identifier: a\n    cap-count: many\n    cap-window: 60\n    match: {}\n",
                     "3:16: alerts[0].cap-count: must be a positive integer, not the string \"many\""),
        BrokenConfig("a wrong start is not compared with the end", "alerts:\n  - identifier: a\n    start: noon\n    end: \"00:00\"\n    match: {}\n",
                     "3:12: alerts[0].start: must be a time of day HH:MM (00:00 to 24:00), not \"noon\""),
        // Alerts: the match, as a region's but for within and exit-period, refused at their keys.
        BrokenConfig("within in an alert's match", "alerts:\n  - identifier: a\n    match: {kind: node, within: near}\n",
                     "3:25: alerts[0].match.within: cannot be in an alert's match (an alert's range and strategy say when it is ready)"),
        BrokenConfig("exit-period in an alert's match", "alerts:\n  - identifier: a\n    match:\n      exit-period: 30\n",
                     "4:7: alerts[0].match.exit-period: cannot be in an alert's match (an alert's range and strategy say when it is ready)"),
        BrokenConfig("a bad part in an alert's match", "alerts:\n  - identifier: a\n    match: {uuid: 12}\n",
                     "3:19: alerts[0].match.uuid: must be a UUID such as f7826da6-4fa2-4e98-8024-bc5b71e0893e, not \"12\""),
        BrokenConfig("major without uuid in an alert's match", "alerts:\n  - identifier: a\n    match:\n      major: 1\n",
                     "4:7: alerts[0].match.major: needs uuid"),
        BrokenConfig("an unknown key in an alert's match", "alerts:\n  - identifier: a\n    match: {mayor: 1}\n",
                     "3:13: alerts[0].match: unknown key 'mayor' (did you mean 'major'?)"),
        // Alerts: every problem of an alert, and of every alert.
        BrokenConfig("several problems in alerts", """
            alerts:
              - identifier: exhibit-1
                range: nearby
                comparison: ">"
                cap-count: 3
                days: someday
                match: {within: far}
              - identifier: exhibit-1
                start: "24:01"
            """,
            "3:12: alerts[0].range: must be one of immediate, near, far, not \"nearby\"",
            "4:17: alerts[0].comparison: must be one of =, <=, >=, not \">\"",
            "5:5: alerts[0].cap-window: is missing: a cap needs both cap-count and cap-window",
            "6:11: alerts[0].days: \"someday\" is not a day of the week (mon, tue, wed, thu, fri, sat, sun)",
            "7:13: alerts[0].match.within: cannot be in an alert's match (an alert's range and strategy say when it is ready)",
            "8:5: alerts[1]: an alert needs a match (match: {} for every peer)",
            "8:17: alerts[1].identifier: alert 'exhibit-1' is already defined at 2:17",
            "9:12: alerts[1].start: must be a time of day HH:MM (00:00 to 24:00), not \"24:01\""),
        // Tracking: its keys, the heartbeat's range, the match as an alert's, the context data's strings.
        BrokenConfig("an unknown key in tracking", "tracking:\n  heartbeet: 60\n",
                     "2:3: tracking: unknown key 'heartbeet' (did you mean 'heartbeat'?)"),
        BrokenConfig("a heartbeat of 0", "tracking:\n  heartbeat: 0\n",
                     "2:14: tracking.heartbeat: must be a number of seconds in 1...86400, not 0"),
        BrokenConfig("a quoted heartbeat", "tracking:\n  heartbeat: \"60\"\n",
                     "2:14: tracking.heartbeat: must be a number of seconds in 1...86400, not the string \"60\""),
        BrokenConfig("within in tracking's match", "tracking:\n  match: {kind: ibeacon, within: near}\n",
                     "2:26: tracking.match.within: cannot be in tracking's match (the tracker takes the nearest peer it matches)"),
        BrokenConfig("a bad part in tracking's match", "tracking:\n  match:\n    major: 1\n",
                     "3:5: tracking.match.major: needs uuid"),
        BrokenConfig("context data that is not a string", "tracking:\n  context-data: {site: museum, floors: [1, 2]}\n",
                     "2:40: tracking.context-data.floors: must be a string, not a list"),
        BrokenConfig("context data that is a list", "tracking:\n  context-data: [site]\n",
                     "2:17: tracking.context-data: must be a mapping of names to strings, not a list"),
        BrokenConfig("tracking that is a list", "tracking: [heartbeat]\n",
                     "1:11: tracking: must be a mapping of match, heartbeat and context-data, not a list"),
        // Rules: the identifier, as an alert's.
        BrokenConfig("rules that are a mapping", "rules: {identifier: a}\n", "1:8: rules: must be a list of rules, not a mapping"),
        BrokenConfig("a rule without an identifier", "rules:\n  - when: {key: a.x, op: ex}\n    do: [{log: {}}]\n",
                     "2:5: rules[0]: a rule needs an identifier"),
        BrokenConfig("an empty rule identifier", "rules:\n  - identifier: \"\"\n    when: {key: a.x, op: ex}\n    do: [{log: {}}]\n",
                     "2:17: rules[0].identifier: the rule identifier is empty"),
        BrokenConfig("a rule defined twice", """
            rules:
              - identifier: near
                when: {key: a.x, op: ex}
                do: [{log: {}}]
              - identifier: near
                when: {key: a.y, op: ex}
                do: [{log: {}}]
            """, "5:17: rules[1].identifier: rule 'near' is already defined at 2:17"),
        BrokenConfig("an unknown key in a rule, which then lacks it", "rules:\n  - identifier: a\n    wehn: {key: a.x, op: ex}\n    do: [{log: {}}]\n",
                     "2:5: rules[0]: a rule needs when: (its condition)",
                     "3:5: rules[0]: unknown key 'wehn' (did you mean 'when'?)"),
        // Rules: the definition's problems, at the node they are about.
        BrokenConfig("an operator that is not one, at its value", "rules:\n  - identifier: a\n    when: {key: a.beacon.prox, op: about, value: 2}\n    do: [{log: {}}]\n",
                     "3:36: rules[0].when.op: must be one of eq, ne, ex, nx, gt, ge, lt, le, co, nc, sw, ew, within, not the string \"about\""),
        BrokenConfig("gt with a value that is not a number, at the test", """
            rules:
              - identifier: a
                when:
                  all:
                    - {key: a.beacon.major, op: eq, value: 12}
                    - {key: a.beacon.prox, op: gt, value: near}
                do: [{log: {}}]
            """, "6:11: rules[0].when.all[1]: gt compares numbers: \"near\" is not a number (for a zone or nearer, and known, write op: within, value: near)"),
        BrokenConfig("an unknown action, at its key", "rules:\n  - identifier: a\n    when: {key: a.x, op: ex}\n    do:\n      - notify: {a: b}\n",
                     "5:9: rules[0].do[0].notify: unknown action (known: signal, set, remove, offer-alert, log)"),
        BrokenConfig("a rule without do, at the item", "rules:\n  - identifier: a\n    when: {key: a.x, op: ex}\n",
                     "2:5: rules[0]: a rule needs do: (its actions)"),
        BrokenConfig("frequency cooldown without a cooldown", "rules:\n  - identifier: a\n    when: {key: a.x, op: ex}\n    do: [{log: {}}]\n    frequency: cooldown\n",
                     "5:16: rules[0].frequency: cooldown needs cooldown: SECONDS"),
        BrokenConfig("a trigger that is not one", "rules:\n  - identifier: a\n    on: [weather]\n    when: {key: a.x, op: ex}\n    do: [{log: {}}]\n",
                     "3:10: rules[0].on[0]: must be one of profile, tracking, region, alert, not the string \"weather\""),
        BrokenConfig("a duplicate key in a test", "rules:\n  - identifier: a\n    when: {key: a.x, op: eq, op: ne, value: 1}\n    do: [{log: {}}]\n",
                     "3:30: rules[0].when: duplicate key 'op' (first at 3:22)"),
        BrokenConfig("a test without a key, at the test", "rules:\n  - identifier: a\n    when: {op: ex}\n    do: [{log: {}}]\n",
                     "3:11: rules[0].when.key: a test needs key: (a profile attribute, or event.<field>)"),
        BrokenConfig("an empty list item in a rule", "rules:\n  - identifier: a\n    when: {key: a.x, op: ex}\n    do:\n      -\n      - log: {}\n",
                     "5:8: rules[0].do[0]: must be a value, not an empty value"),
        BrokenConfig("a number beyond 64 bits in a rule", "rules:\n  - identifier: a\n    when: {key: a.x, op: eq, value: 99999999999999999999}\n    do: [{log: {}}]\n",
                     "3:37: rules[0].when.value: 99999999999999999999 is out of range"),
        BrokenConfig("an unknown key in a test, at the key", "rules:\n  - identifier: a\n    when: {key: a.x, op: ex, vaule: 1}\n    do: [{log: {}}]\n",
                     "3:30: rules[0].when.vaule: unknown key in a test (known: key, op, value, values; or all, any for a group)"),
        BrokenConfig("a rule that is a string", "rules:\n  - near-12\n",
                     "2:5: rules[0]: must be a mapping with identifier:, when:, do: and the rule's other keys such as on:, not the string \"near-12\""),
        BrokenConfig("a condition that is a list", "rules:\n  - identifier: a\n    when: [{key: a.x, op: ex}]\n    do: [{log: {}}]\n",
                     "3:11: rules[0].when: must be a test {key, op, value(s)} or a group {all: […]} / {any: […]}, not a list"),
        BrokenConfig("a context data name that is empty", "tracking:\n  context-data: {\"\": x}\n",
                     "2:18: tracking.context-data: a name is empty"),
        // Rules: every problem of a rule, and of every rule.
        BrokenConfig("several problems in rules", """
            rules:
              - identifier: a
                on: [tracking, weather, alerts]
                when:
                  any:
                    - {key: a.x, op: about, value: 1}
                    - {key: a.y, op: ex}
                    - {key: a.z, op: lt, values: [1, two]}
                do:
                  - signal: {a: b}
                  - notify: {}
                  - set: [a.x]
                frequency: sometimes
                cooldown: 60
              - identifier: a
                do: ""
            """,
            "3:20: rules[0].on[1]: must be one of profile, tracking, region, alert, not the string \"weather\"",
            "3:29: rules[0].on[2]: must be one of profile, tracking, region, alert, not the string \"alerts\"",
            "6:26: rules[0].when.any[0].op: must be one of eq, ne, ex, nx, gt, ge, lt, le, co, nc, sw, ew, within, not the string \"about\"",
            "8:11: rules[0].when.any[2]: lt compares numbers: \"two\" is not a number",
            "11:9: rules[0].do[1].notify: unknown action (known: signal, set, remove, offer-alert, log)",
            "12:14: rules[0].do[2].set: must be a mapping of names to text, not a list",
            "13:16: rules[0].frequency: must be always, once or cooldown, not the string \"sometimes\"",
            "15:5: rules[1]: a rule needs when: (its condition)",
            "15:17: rules[1].identifier: rule 'a' is already defined at 2:17",
            "16:9: rules[1].do: must be a non-empty list of actions"),
        BrokenConfig("a value that cannot be read does not hide the rule's other problems", """
            rules:
              - identifier: b
                on: [region, ~]
                when: {key: a.x, op: about, value: 99999999999999999999}
                do:
                  -
                  - notify: {}
                cooldown: -1
              - identifier: b
                when: {op: ex}
                do: [{log: {}}]
            """,
            "3:18: rules[0].on[1]: must be a value, not null",
            "4:26: rules[0].when.op: must be one of eq, ne, ex, nx, gt, ge, lt, le, co, nc, sw, ew, within, not the string \"about\"",
            "4:40: rules[0].when.value: 99999999999999999999 is out of range",
            "6:8: rules[0].do[0]: must be a value, not an empty value",
            "7:9: rules[0].do[1].notify: unknown action (known: signal, set, remove, offer-alert, log)",
            "8:15: rules[0].cooldown: must be a number of seconds from 0 (excluded) to 2592000, not the number -1.0",
            "9:17: rules[1].identifier: rule 'b' is already defined at 2:17",
            "10:11: rules[1].when.key: a test needs key: (a profile attribute, or event.<field>)"),
        // mqtt:
        BrokenConfig("mqtt without a broker", "mqtt:\n  username: node\n", "1:1: mqtt: broker is required (for example broker: mqtt://localhost)"),
        BrokenConfig("mqtt with a broker that is not a URL of MQTT", "mqtt:\n  broker: http://localhost\n",
                     "2:11: mqtt.broker: must be mqtt://HOST[:PORT] or mqtts://HOST[:PORT], not 'http://localhost'"),
        BrokenConfig("mqtt with credentials in the URL", "mqtt:\n  broker: mqtt://u:p@localhost\n",
                     "2:11: mqtt.broker: 'mqtt://u:p@localhost' holds credentials: give them as a username and a password file"),
        BrokenConfig("mqtt with bad values", """
            mqtt:
              broker: mqtt://localhost:1883
              prefix: a/+/b
              keepalive: 2
              report-interval: -1
              compat: [espresense, homie]
              room: kitchen/left
              password-file: secret.txt
              discovery: yes please
              outbox-size: 0
              colour: red
            """,
            "3:11: mqtt.prefix: 'a/+/b' contains a wildcard (+ or #)",
            "4:14: mqtt.keepalive: must be in 5...3600, not 2",
            "5:20: mqtt.report-interval: must be a number of seconds in 0...3600, not -1",
            "6:24: mqtt.compat[1]: must be one of 'espresense' or 'mqtt-room', not the string \"homie\"",
            "7:9: mqtt.room: 'kitchen/left' contains /, + or #, which a topic level cannot",
            "8:18: mqtt.password-file: must be an absolute path, not 'secret.txt'",
            "9:14: mqtt.discovery: must be true or false, not the string \"yes please\"",
            "10:16: mqtt.outbox-size: must be an integer in 1...1000000, not 0",
            "11:3: mqtt: unknown key 'colour'"),
        BrokenConfig("mqtt with a CA for a plain broker and a key without its certificate", """
            mqtt:
              broker: mqtt://localhost
              ca-file: /etc/ssl/ca.pem
              key-file: /etc/ssl/node.key
            """,
            "1:1: mqtt: key-file needs cert-file",
            "2:11: mqtt.broker: ca-file and cert-file need an mqtts:// broker"),
        // Not UTF-8.
        BrokenConfig("bytes that are not UTF-8", "name: caf\u{FFFF}\n", "1:10: the file is not UTF-8 text"),
        // Several problems: every one, in the order of the file.
        BrokenConfig("several problems at once", """
            clear-interval: 0
            max-peers: many
            regions:
              - identifier: fleet
                match: {uuid: nope}
              - identifier: fleet
            colour: red
            """,
            "1:17: clear-interval: 0 is not a number of seconds above 0 and at most 3600",
            "2:12: max-peers: must be an integer, not the string \"many\"",
            "5:19: regions[0].match.uuid: must be a UUID such as f7826da6-4fa2-4e98-8024-bc5b71e0893e, not \"nope\"",
            "6:17: regions[1].identifier: region 'fleet' is already defined at 4:17",
            "7:1: unknown key 'colour'"),
    ]

    /// The lines `ConfigFile.parse` refuses `bytes` with; none if it takes them.
    static func problems(_ bytes: [UInt8], path: String = file) -> [String] {
        do {
            _ = try ConfigFile.parse(bytes, path: path)
            return []
        } catch {
            return error.problems
        }
    }

    static func problems(_ text: String, path: String = file) -> [String] { problems(Array(text.utf8), path: path) }

    /// The lines `read` is refused with; none if it succeeds.
    static func problems(_ read: () throws(ConfigurationError) -> Void) -> [String] {
        do {
            try read()
            return []
        } catch {
            return error.problems
        }
    }

    @Test("a broken file is refused with every problem, exactly", arguments: broken)
    func refused(_ config: BrokenConfig) {
        #expect(Self.problems(config.bytes) == config.problems.map { "\(Self.file):\($0)" })
    }

    @Test("mqtt: every key, and the defaults")
    func mqttSection() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("config-mqtt-\(getpid())-\(UInt32.random(in: 0 ... .max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let passwordFile = directory.appendingPathComponent("mqtt.password").path
        try writeSecret("s3cret\n", to: passwordFile)
        let full = try ConfigFile.parse("""
            name: box1
            mqtt:
              broker: mqtts://[::1]
              ca-file: /etc/proximityd/ca.pem
              cert-file: /etc/proximityd/node.pem
              key-file: /etc/proximityd/node.key
              username: node1
              password-file: \(passwordFile)
              allow-plaintext: true
              client-id: box-one
              prefix: home/proximityd/box1
              keepalive: 60
              report-interval: 2.5
              report-moved: 1
              compat: [espresense, mqtt-room]
              room: office
              discovery: false
              discovery-prefix: ha
              outbox-size: 500
              reconnect-max: 30
            """, path: Self.file)
        let mqtt = try #require(full.mqtt)
        #expect(mqtt.broker == MQTTSettings.Broker(tls: true, host: "::1", port: 8883))
        #expect(mqtt.broker.description == "mqtts://[::1]:8883")
        #expect(mqtt.caFile == "/etc/proximityd/ca.pem" && mqtt.certificateFile == "/etc/proximityd/node.pem"
                && mqtt.keyFile == "/etc/proximityd/node.key")
        #expect(mqtt.username == "node1" && mqtt.passwordFile == passwordFile && mqtt.allowPlaintext)
        #expect(mqtt.clientID(name: "box1") == "box-one" && mqtt.prefix(name: "box1") == "home/proximityd/box1")
        #expect(mqtt.keepalive == 60 && mqtt.reportInterval == 2.5 && mqtt.reportMoved == 1)
        #expect(mqtt.compatibility == [.espresense, .mqttRoom] && mqtt.room(name: "box1") == "office")
        #expect(!mqtt.discovery && mqtt.discoveryPrefix == "ha" && mqtt.outboxSize == 500 && mqtt.reconnectMax == 30)

        let plain = try #require(try ConfigFile.parse("mqtt:\n  broker: mqtt://broker.lan\n", path: Self.file).mqtt)
        #expect(plain.broker == MQTTSettings.Broker(tls: false, host: "broker.lan", port: 1883))
        #expect(plain.clientID(name: "living room") == "proximityd-living room")
        #expect(plain.prefix(name: "living room") == "proximityd/living%20room")
        #expect(plain.keepalive == 30 && plain.reportInterval == 5 && plain.reportMoved == 0.5 && plain.compatibility.isEmpty)
        #expect(plain.discovery && plain.discoveryPrefix == "homeassistant" && plain.outboxSize == 10_000 && !plain.allowPlaintext)
        #expect(try ConfigFile.parse("mqtt:\n", path: Self.file).mqtt == nil)
        let configuration = NodeConfiguration(commandLine: RunOptions(), file: full, environment: [:])
        #expect(configuration.mqtt == mqtt)
    }

    @Test("secrets (issue 32): with a fleet key, accept-unverified defaults to false and a plaintext broker off this host is refused unless allow-plaintext: true; a password file readable by others is refused; inline IRKs in a file group or others may read are refused with the chmod")
    func secrets() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("config-secrets-\(getpid())-\(UInt32.random(in: 0 ... .max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = directory.appendingPathComponent("fleet.key").path
        try writeSecret(FleetKey.generate().fileText, to: key)

        // previous-fleet-key: a rotation's old key, until a time at most 7 days ahead.
        let old = directory.appendingPathComponent("old.key").path
        try writeSecret(FleetKey.generate().fileText, to: old)
        let soon = ISO8601DateFormatter().string(from: Date().addingTimeInterval(3600))
        let rotating = try ConfigFile.parse("fleet-key: \(key)\nprevious-fleet-key:\n  file: \(old)\n  until: \(soon)\n", path: Self.file)
        #expect(rotating.trust.previousKey != nil && rotating.trust.previousKey?.key != rotating.trust.key)
        let past = ISO8601DateFormatter().string(from: Date().addingTimeInterval(-60))
        let far = ISO8601DateFormatter().string(from: Date().addingTimeInterval(8 * 86_400))
        for (text, says) in [("previous-fleet-key:\n  file: \(old)\n  until: \(soon)\n", "needs fleet-key:"),
                             ("fleet-key: \(key)\nprevious-fleet-key:\n  file: \(key)\n  until: \(soon)\n", "holds the same key as fleet-key:"),
                             ("fleet-key: \(key)\nprevious-fleet-key:\n  file: \(old)\n  until: \(past)\n", "is past: the rotation is over"),
                             ("fleet-key: \(key)\nprevious-fleet-key:\n  file: \(old)\n  until: \(far)\n", "a week at most"),
                             ("fleet-key: \(key)\nprevious-fleet-key:\n  file: \(old)\n  until: tomorrow\n", "ISO 8601"),
                             ("fleet-key: \(key)\nprevious-fleet-key:\n  file: \(old)\n", "until: is required")] {
            let problems = Self.problems(text)
            #expect(problems.count == 1 && problems[0].contains(says) && problems[0].hasPrefix("\(Self.file):"), "\(text): \(problems)")
        }

        // accept-unverified: false with a key unless written; true without one.
        #expect(try ConfigFile.parse("fleet-key: \(key)\n", path: Self.file).trust.acceptUnverified == false)
        #expect(try ConfigFile.parse("fleet-key: \(key)\naccept-unverified: true\n", path: Self.file).trust.acceptUnverified == true)
        #expect(try ConfigFile.parse("names: {}\n", path: Self.file).trust.acceptUnverified == true)

        // A plaintext broker: refused with a key, at the broker's value, unless said; on this host, or over TLS, taken.
        #expect(Self.problems("fleet-key: \(key)\nmqtt:\n  broker: mqtt://broker.lan\n") == [
            "\(Self.file):3:11: mqtt.broker: a node with a fleet key would publish where the fleet's members are, in clear, to broker.lan: use mqtts:// (docs/mqtt.md), or write allow-plaintext: true under mqtt: to accept that"])
        for broker in ["mqtt://broker.lan\n  allow-plaintext: true", "mqtts://broker.lan", "mqtt://127.0.0.1:1884", "mqtt://localhost", "mqtt://[::1]"] {
            #expect(Self.problems("fleet-key: \(key)\nmqtt:\n  broker: \(broker)\n").isEmpty, "\(broker)")
        }
        #expect(Self.problems("mqtt:\n  broker: mqtt://broker.lan\n").isEmpty, "without a key, as before")

        // The password file: a secret's checks.
        let password = directory.appendingPathComponent("password").path
        try "s3cret\n".write(toFile: password, atomically: false, encoding: .utf8)
        chmod(password, 0o644)
        #expect(Self.problems("mqtt:\n  broker: mqtts://broker.lan\n  password-file: \(password)\n") == [
            "\(Self.file):3:18: mqtt.password-file: \(password) is readable or writable by group or others (mode 644): a password must be its owner's alone; chmod 600 \(password)"])
        chmod(password, 0o600)
        #expect(Self.problems("mqtt:\n  broker: mqtts://broker.lan\n  password-file: \(password)\n").isEmpty)

        // Inline IRKs: only in a file that group and others cannot read.
        let config = directory.appendingPathComponent("proximityd.yaml").path
        try "names: {}\nirks:\n  anna: \(String(repeating: "0f", count: 16))\n".write(toFile: config, atomically: false, encoding: .utf8)
        chmod(config, 0o644)
        #expect(Self.problems { () throws(ConfigurationError) in _ = try ConfigFile.load(path: config) } == [
            "\(config):2:1: irks: \(config) is readable by group or others (mode 644) and holds identity resolving keys: chmod 600 \(config) (owned by the user proximityd runs as), or move the keys to an IRK file of their own (irks: /etc/proximityd/irks.yaml, docs/security.md)"])
        chmod(config, 0o600)
        #expect(try ConfigFile.load(path: config).trust.irks.count == 1)
        // An IRK file named from a readable config: the config holds no key.
        let irks = directory.appendingPathComponent("irks.yaml").path
        try writeSecret("anna: \(String(repeating: "0f", count: 16))\n", to: irks)
        try "irks: \(irks)\n".write(toFile: config, atomically: false, encoding: .utf8)
        chmod(config, 0o644)
        #expect(try ConfigFile.load(path: config).trust.irks.count == 1)
    }

    @Test("an empty file, only comments, an empty document: a valid empty config", arguments: ["", "\n", "# nothing here\n  # at all\n", "---\n", "~\n"])
    func empty(_ text: String) throws {
        let file = try ConfigFile.parse(text, path: Self.file)
        #expect(file == ConfigFile(path: Self.file))
    }

    @Test("a full file: every option, the region monitor and the regions")
    func full() throws {
        let file = try ConfigFile.parse("""
            # every key
            bus: unix:path=/run/box/bus
            bus-name: org.proximityd.test
            state-dir: /srv/proximityd
            name: 1                      # a plain number is taken as its text where a string is expected
            service-uuid: 0D5E4C1A-1111-4222-8333-444455556666
            adapter: hci1
            power-on: yes
            clear-interval: 2.5
            measured-power: -70
            path-loss-exponent: 3
            rssi-offset: -6.5
            max-peers: 50
            beacons: false
            log-level: debug
            region-monitor:
              exit-period: 20.5
              max-regions: 2048
              restore-limit: 0
            regions:
              - identifier: fleet
                match:
                  uuid: F7826DA6-4FA2-4E98-8024-BC5B71E0893E
                  major: 1
                  minor: 0x10
                  within: near
              - identifier: "front desk"
                match: {kind: node, identifier: 4A1C2B3D-5E6F-4A7B-8C9D-0E1F2A3B4C5D, exit-period: 30}
              - identifier: warehouse
                match:
                  namespace: "0xEDD1EBEAC04E5DEFA017"
                  instance: 0123456789ab
              - identifier: shop
                match:
                  url-domain: Example.COM.
              - identifier: everyone
              - identifier: nobody-in-particular
                match:
              - identifier: altbeacons
                match: {id1: f7826da6-4fa2-4e98-8024-bc5b71e0893e, id2: 7, id3: 8, address: "aa:bb:cc:dd:ee:ff"}
            """, path: Self.file)

        var options = RunOptions()
        options[RunOption.bus] = BusAddress.address("unix:path=/run/box/bus")
        options[RunOption.busName] = BusName("org.proximityd.test")
        options[RunOption.stateDirectory] = "/srv/proximityd"
        options[RunOption.name] = "1"
        options[RunOption.serviceUUID] = UUID(uuidString: "0d5e4c1a-1111-4222-8333-444455556666")
        options[RunOption.adapter] = "hci1"
        options[RunOption.powerOn] = true
        options[RunOption.clearInterval] = 2.5
        options[RunOption.measuredPower] = Int16(-70)
        options[RunOption.pathLossExponent] = 3.0
        options[RunOption.rssiOffset] = -6.5
        options[RunOption.maxPeers] = 50
        options[RunOption.beacons] = false
        options[RunOption.logLevel] = Logger.Level.debug
        #expect(file.options == options)
        #expect(file.regionMonitor == RegionMonitor.Configuration(defaultExitPeriod: 20.5, maxRegions: 2048, restoreLimit: 0))

        func matcher(_ parts: [(RegionMatcher.Key, RegionMatcher.Value)]) throws -> RegionMatcher { try RegionMatcher.parse(parts) }
        let uuid = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"
        let expected = [
            Region(identifier: "fleet", matcher: try matcher([(.uuid, .text(uuid)), (.major, .integer(1)), (.minor, .integer(16)),
                                                              (.within, .text("near"))]), source: .config),
            Region(identifier: "front desk", matcher: try matcher([(.kind, .text("node")), (.identifier, .text("4a1c2b3d-5e6f-4a7b-8c9d-0e1f2a3b4c5d")),
                                                                   (.exitPeriod, .number(30))]), source: .config),
            Region(identifier: "warehouse", matcher: try matcher([(.namespace, .text("edd1ebeac04e5defa017")),
                                                                  (.instance, .text("0123456789ab"))]), source: .config),
            Region(identifier: "shop", matcher: try matcher([(.urlDomain, .text("example.com"))]), source: .config),
            Region(identifier: "everyone", matcher: RegionMatcher(), source: .config),
            Region(identifier: "nobody-in-particular", matcher: RegionMatcher(), source: .config),
            Region(identifier: "altbeacons", matcher: try matcher([(.id1, .text(uuid)), (.id2, .integer(7)), (.id3, .integer(8)),
                                                                   (.address, .text("AA:BB:CC:DD:EE:FF"))]), source: .config),
        ]
        #expect(file.regions == expected)
        #expect(file.regions[1].matcher.identifier == "4a1c2b3d-5e6f-4a7b-8c9d-0e1f2a3b4c5d")
    }

    @Test("alerts: every key, the defaults, plain scalars taken as text, an empty or null match for every peer")
    func alerts() throws {
        let file = try ConfigFile.parse("""
            alerts:
              - identifier: exhibit-1
                title: The Lighthouse
                description: Built in 1902
                text-to-speech: Welcome to the lighthouse
                thumbnail: /usr/share/pixmaps/lighthouse.png
                action: popup
                url: https://example.org/lighthouse
                extra: {room: "3"}
                range: near            # immediate | near | far
                comparison: "="        # = | <= | >=
                strategy: time         # optional
                max-time-before-reset: 60
                cooldown: 300
                cap-count: 3
                cap-window: 3600
                days: mon-fri
                start: "09:00"
                end: "18:00"
                outside: hold          # hold | drop
                match: {uuid: f7826da6-4fa2-4e98-8024-bc5b71e0893e, major: 1, minor: 1}
              - identifier: everyone
                match: {}
              - identifier: night-shift
                title: 1902
                uri: app://exhibit/2
                extra:
                  floor: 2
                  open: yes
                range: far
                comparison: "<="
                strategy: range
                max-time-before-reset: 0.5
                cap-count: 1
                cap-window: 1.5
                days: fri-mon
                start: 22:00
                end: 06:00
                outside: drop
                match:
              - identifier: front desk
                action: webview
                match:
                  kind: node
                  identifier: 4A1C2B3D-5E6F-4A7B-8C9D-0E1F2A3B4C5D
            """, path: Self.file)

        let uuid = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"
        let expected = [
            Alert(identifier: "exhibit-1",
                  content: AlertContent(title: "The Lighthouse", description: "Built in 1902", textToSpeech: "Welcome to the lighthouse",
                                        thumbnail: "/usr/share/pixmaps/lighthouse.png", action: "popup",
                                        url: "https://example.org/lighthouse", extra: ["room": "3"]),
                  parameters: AlertParameters(range: .near, comparison: .equal, strategy: "time", maxTimeBeforeReset: 60, cooldown: 300,
                                              cap: AlertCap(count: 3, window: 3600),
                                              schedule: AlertSchedule(days: Set(1...5), start: 9 * 60, end: 18 * 60, outside: .hold)),
                  targets: try RegionMatcher.parse([(.uuid, .text(uuid)), (.major, .integer(1)), (.minor, .integer(1))])),
            Alert(identifier: "everyone", content: AlertContent(), targets: RegionMatcher()),
            Alert(identifier: "night-shift",
                  content: AlertContent(title: "1902", uri: "app://exhibit/2", extra: ["floor": "2", "open": "yes"]),
                  parameters: AlertParameters(range: .far, comparison: .nearerOrEqual, strategy: nil, maxTimeBeforeReset: 0.5,
                                              cap: AlertCap(count: 1, window: 1.5),
                                              schedule: AlertSchedule(days: [5, 6, 7, 1], start: 22 * 60, end: 6 * 60, outside: .drop)),
                  targets: RegionMatcher()),
            Alert(identifier: "front desk", content: AlertContent(action: "webview"),
                  targets: try RegionMatcher.parse([(.kind, .text("node")), (.identifier, .text("4a1c2b3d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"))])),
        ]
        #expect(file.alerts == expected)

        // The same as the bus's definition from the same parts, by their bus names.
        let parts: [(Alert.Key, Alert.Value)] = [
            (.title, .text("The Lighthouse")), (.description, .text("Built in 1902")), (.textToSpeech, .text("Welcome to the lighthouse")),
            (.thumbnail, .text("/usr/share/pixmaps/lighthouse.png")), (.action, .text("popup")),
            (.url, .text("https://example.org/lighthouse")), (.extra, .map(["room": "3"])), (.range, .text("near")),
            (.comparison, .text("=")), (.strategy, .text("time")), (.maxTimeBeforeReset, .integer(60)), (.cooldown, .integer(300)),
            (.capCount, .integer(3)), (.capWindow, .integer(3600)), (.days, .text("mon-fri")), (.start, .text("09:00")),
            (.end, .text("18:00")), (.outside, .text("hold")),
            (.match, .matcher(["UUID": .text(uuid), "Major": .integer(1), "Minor": .integer(1)])),
        ]
        #expect(file.alerts.first == (try Alert.parse(identifier: "exhibit-1", parts)))

        // They reach the node's configuration.
        let configuration = NodeConfiguration(commandLine: RunOptions(), file: file, environment: [:])
        #expect(configuration.alerts == expected)
        #expect(try ConfigFile.parse("alerts:\n", path: Self.file).alerts.isEmpty)
        #expect(try ConfigFile.parse("alerts: []\n", path: Self.file).alerts.isEmpty)
    }

    @Test("every key of an alert is a part of the alert's definition, by its config name")
    func alertKeys() {
        #expect(ConfigFile.alertKeys == ["identifier"] + Alert.Key.allCases.map(\.configName))
        #expect(Set(ConfigFile.alertKeys).count == ConfigFile.alertKeys.count)
        #expect(YAMLKeys.nearest(to: "tittle", in: ConfigFile.alertKeys) == "title")
        #expect(ConfigDecoder.alertConfigNames(in: "is missing: a cap needs both CapCount and CapWindow")
                == "is missing: a cap needs both cap-count and cap-window")
        // What the file gave, quoted, is left as given.
        #expect(ConfigDecoder.alertConfigNames(in: "is Start, not \"Start \\\"End\\\"\" but End") == "is start, not \"Start \\\"End\\\"\" but end")
    }

    @Test("tracking and rules: every key, scalars as they look, the defaults, and the node's configuration")
    func trackingAndRules() throws {
        let file = try ConfigFile.parse("""
            tracking:
              match: {kind: ibeacon}
              heartbeat: 60
              context-data: {site: museum, floor: 2, open: yes}
            rules:
              - identifier: near-12
                on: [tracking]
                when:
                  all:
                    - {key: a.beacon.major, op: eq, value: "12"}
                    - {key: a.beacon.prox, op: le, value: 2}
                do:
                  - signal: {major: "{%a.beacon.major%}"}
                  - set: {a.visited: "yes"}
                frequency: once
              - identifier: lighthouse visitor
                on: region
                when:
                  any:
                    - {key: event.region, op: sw, values: [light, 1902, 2.5, true, yes]}
                    - all:
                        - {key: a.coupon, op: nx}
                        - {key: a.beacon.prox, op: lt, value: 3}
                do:
                  - offer-alert: lighthouse
                  - remove: a.coupon
                  - log:
                      note: near {%a.beacon.major%}
                      count: 1
                      open: on
                  - set: {a.flag: true}
                frequency: cooldown
                cooldown: 2.5
              - identifier: every event
                on:
                when: {key: event.type, op: ex}
                do: [{log: {}}]
                frequency:
            """, path: Self.file)

        #expect(file.tracking == Tracker.Configuration(matcher: try RegionMatcher.parse([(.kind, .text("ibeacon"))]), heartbeat: 60,
                                                       contextData: ["site": "museum", "floor": "2", "open": "yes"]))
        let expected = [
            Rule(identifier: "near-12", triggers: [.tracking],
                 condition: .all([.test(key: "a.beacon.major", op: .eq, values: ["12"]), .test(key: "a.beacon.prox", op: .le, values: ["2"])]),
                 actions: [.signal(["major": "{%a.beacon.major%}"]), .set(["a.visited": "yes"])], frequency: .once),
            Rule(identifier: "lighthouse visitor", triggers: [.region],
                 condition: .any([.test(key: "event.region", op: .sw, values: ["light", "1902", "2.5", "true", "yes"]),
                                  .all([.test(key: "a.coupon", op: .nx, values: []), .test(key: "a.beacon.prox", op: .lt, values: ["3"])])]),
                 actions: [.offerAlert("lighthouse"), .remove(["a.coupon"]),
                           .log(["note": "near {%a.beacon.major%}", "count": "1", "open": "on"]), .set(["a.flag": "true"])],
                 frequency: .cooldown(2.5)),
            Rule(identifier: "every event", condition: .test(key: "event.type", op: .ex, values: []), actions: [.log([:])]),
        ]
        #expect(file.rules == expected)

        // The same as the bus's definition of the same tree: numbers and booleans as YAML reads
        // them when plain, text when quoted or when they only look like something else to YAML 1.1.
        let tree = RuleValue.map([
            ("on", .list([.text("tracking")])),
            ("when", .map([("all", .list([
                .map([("key", .text("a.beacon.major")), ("op", .text("eq")), ("value", .text("12"))]),
                .map([("key", .text("a.beacon.prox")), ("op", .text("le")), ("value", .number(2))]),
            ]))])),
            ("do", .list([.map([("signal", .map([("major", .text("{%a.beacon.major%}"))]))]),
                          .map([("set", .map([("a.visited", .text("yes"))]))])])),
            ("frequency", .text("once")),
        ])
        #expect(file.rules.first == (try Rule.parse(identifier: "near-12", tree)))

        // They reach the node's configuration.
        let configuration = NodeConfiguration(commandLine: RunOptions(), file: file, environment: [:])
        #expect(configuration.tracking == file.tracking && configuration.rules == expected)

        // Absent or empty: the defaults, no rules. An empty match tracks every peer.
        for text in ["", "tracking:\nrules:\n", "tracking: {}\nrules: []\n"] {
            let empty = try ConfigFile.parse(text, path: Self.file)
            #expect(empty.tracking == Tracker.Configuration() && empty.rules.isEmpty, "\(text)")
        }
        #expect(try ConfigFile.parse("tracking:\n  match:\n  context-data:\n", path: Self.file).tracking
                == Tracker.Configuration(matcher: RegionMatcher()))
    }

    @Test("the keys of tracking and of a rule")
    func ruleKeys() {
        #expect(ConfigFile.keys.suffix(7) == ["tracking", "rules", "mqtt", "fleet-key", "previous-fleet-key", "accept-unverified", "irks"])
        #expect(ConfigFile.ruleKeys == ["identifier"] + Rule.keys)
        #expect(YAMLKeys.nearest(to: "hearbeat", in: ConfigFile.trackingKeys) == "heartbeat")
        #expect(YAMLKeys.nearest(to: "frequecy", in: ConfigFile.ruleKeys) == "frequency")
    }

    @Test("a rule's node is replaced by one that is right, so the next problem is found")
    func ruleTreeReplacing() throws {
        let tree = RuleValue.map([("on", .list([.text("a"), .text("b")])), ("when", .map([("all", .list([.map([("op", .text("x"))])]))]))])
        #expect(tree.replacing(["on", "[1]"], with: .text("profile"))
                == .map([("on", .list([.text("a"), .text("profile")])), ("when", .map([("all", .list([.map([("op", .text("x"))])]))]))]))
        #expect(tree.replacing(["on"], with: nil) == .map([("when", .map([("all", .list([.map([("op", .text("x"))])]))]))]))
        #expect(tree.replacing(["do"], with: .list([])) == .map([("on", .list([.text("a"), .text("b")])),
                                                               ("when", .map([("all", .list([.map([("op", .text("x"))])]))])),
                                                               ("do", .list([]))]))
        #expect(tree.replacing(["on", "[2]"], with: .text("x")) == nil)
        #expect(tree.replacing(["on", "[0]", "k"], with: .text("x")) == nil)
        #expect(tree.replacing(["cooldown"], with: nil) == tree)
        let error = RuleDefinitionError(["when", "all", "[0]", "op"], "must be one of …")
        let next = try #require(ConfigDecoder.ruleTree(tree, without: error))
        #expect(try Rule.parse(identifier: "r", next.replacing(["on"], with: nil)!.replacing(["do"], with: .list([.map([("log", .map([]))])]))!)
                .condition == .all([.test(key: "event.type", op: .ex, values: [])]))
    }

    @Test("more rules than a file may define are refused at the rules key")
    func tooManyRules() {
        let rules = (0 ..< ConfigFile.maxRules).map { "  - {identifier: r\($0), when: {key: a.x, op: ex}, do: [{log: {}}]}\n" }.joined()
        #expect(ConfigFile.maxRules == RuleEngine.maxRules)
        #expect(Self.problems("name: x\nrules:\n" + rules + "  - {identifier: last, when: {key: a.x, op: ex}, do: [{log: {}}]}\n")
                == ["\(Self.file):2:1: rules: 1001 rules are more than a config file may define (1000)"])
        #expect(Self.problems("rules:\n" + rules).isEmpty)
    }

    @Test("more alerts than a file may define are refused at the alerts key")
    func tooManyAlerts() {
        let alerts = (0 ..< ConfigFile.maxAlerts).map { "  - {identifier: a\($0), match: {}}\n" }.joined()
        #expect(Self.problems("name: x\nalerts:\n" + alerts + "  - {identifier: last, match: {}}\n")
                == ["\(Self.file):2:1: alerts: 1001 alerts are more than a config file may define (1000)"])
        #expect(Self.problems("alerts:\n" + alerts).isEmpty)
    }

    @Test("more regions than max-regions are refused at the regions key")
    func tooManyRegions() {
        let regions = (0...1024).map { "  - identifier: r\($0)\n" }.joined()
        #expect(Self.problems("region-monitor: {max-regions: 1024}\nregions:\n" + regions)
                == ["\(Self.file):2:1: regions: 1025 regions are more than max-regions (1024)"])
        #expect(Self.problems("regions:\n" + regions).isEmpty)
    }

    // MARK: - The command line over the file over the defaults

    @Test("each option: the command line's if given, else the file's, else the default")
    func precedence() throws {
        let file = try ConfigFile.parse("""
            bus: session
            name: from-file
            clear-interval: 7
            max-peers: 10
            beacons: false
            log-level: debug
            regions:
              - identifier: everyone
            """, path: "/etc/x.yaml")
        var commandLine = RunOptions()
        commandLine[RunOption.name] = "from-command-line"
        commandLine[RunOption.maxPeers] = 20
        commandLine[RunOption.beacons] = true
        let environment = ["STATE_DIRECTORY": "/var/lib/from-systemd"]

        let merged = NodeConfiguration(commandLine: commandLine, file: file, environment: environment)
        // The command line wins…
        #expect(merged.name == "from-command-line" && merged.maxPeers == 20 && merged.trackBeacons)
        // …over the file…
        #expect(merged.bus == .session && merged.clearInterval == 7 && merged.logLevel == .debug)
        #expect(merged.regions.map(\.identifier) == ["everyone"] && merged.configFile == "/etc/x.yaml")
        // …over the defaults.
        let defaults = NodeConfiguration(stateDirectory: URL(fileURLWithPath: "/var/lib/from-systemd"))
        #expect(merged.busName == defaults.busName && merged.serviceUUID == defaults.serviceUUID && merged.adapter == defaults.adapter)
        #expect(merged.powerOn == defaults.powerOn && merged.measuredPower == defaults.measuredPower)
        #expect(merged.pathLossExponent == defaults.pathLossExponent && merged.regionMonitor == defaults.regionMonitor)
        #expect(merged.stateDirectory.path == "/var/lib/from-systemd")

        // Without a file or options: the defaults, and no clear interval (the saved one comes next).
        let bare = NodeConfiguration(commandLine: RunOptions(), file: nil, environment: [:])
        #expect(bare.bus == .system && bare.busName == defaults.busName && bare.name == NodeConfiguration.hostName())
        #expect(bare.clearInterval == nil && bare.maxPeers == 1024 && bare.trackBeacons && !bare.powerOn && bare.logLevel == .info)
        #expect(bare.stateDirectory.path == "/var/lib/proximityd" && bare.regions.isEmpty && bare.configFile == nil)

        // A flag given as its inversion still wins over the file.
        var off = RunOptions()
        off[RunOption.beacons] = false
        let fileOn = try ConfigFile.parse("beacons: true\npower-on: true\n", path: Self.file)
        let mergedOff = NodeConfiguration(commandLine: off, file: fileOn, environment: [:])
        #expect(!mergedOff.trackBeacons && mergedOff.powerOn)
    }

    @Test("rssi-offset: the command line's over the file's, else 0; a reload applies it (it is no restart-only key)")
    func rssiOffset() throws {
        let file = try ConfigFile.parse("rssi-offset: 3\n", path: Self.file)
        #expect(NodeConfiguration(commandLine: RunOptions(), file: file, environment: [:]).rssiOffset == 3)
        var commandLine = RunOptions()
        commandLine[RunOption.rssiOffset] = try RunOptions.checked(rssiOffset: -2.5)
        let merged = NodeConfiguration(commandLine: commandLine, file: file, environment: [:])
        #expect(merged.rssiOffset == -2.5)
        #expect(NodeConfiguration(commandLine: RunOptions(), file: nil, environment: [:]).rssiOffset == 0)
        #expect(ConfigurationReload.restartOnly(NodeConfiguration(commandLine: RunOptions(), file: file, environment: [:]), merged).isEmpty)
        // The command line's words are the file's.
        for (value, message) in [(40.5, "an offset of 40.5 dB is outside -40…40"), (-.infinity, "an offset must be a finite number of dB, not -inf")] {
            #expect(throws: OptionProblem(message)) { try RunOptions.checked(rssiOffset: value) }
        }
        #expect(try RunOptions.checked(rssiOffset: -40) == -40 && RunOptions.checked(rssiOffset: 40) == 40)
    }

    // MARK: - The reloader

    @Test("the reloader reads the named file, or the default one if it is there, each time afresh")
    func reloader() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("proximityd-config-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("proximityd.yaml").path
        var commandLine = RunOptions()
        commandLine[RunOption.maxPeers] = 5

        // The default path, while nothing is there: the command line and the defaults.
        let byDefault = ConfigurationReloader(explicitPath: nil, defaultPath: path, commandLine: commandLine, environment: [:])
        let before = try byDefault.read()
        #expect(before.configFile == nil && before.maxPeers == 5 && before.regions.isEmpty)

        // Once written, it is read; the command line still wins.
        try "max-peers: 9\nclear-interval: 4\nregions:\n  - identifier: a\n".write(toFile: path, atomically: true, encoding: .utf8)
        let after = try byDefault.read()
        #expect(after.configFile == path && after.maxPeers == 5 && after.clearInterval == 4 && after.regions.map(\.identifier) == ["a"])

        // A change is picked up by the next read; a broken file is refused with its problems.
        try "clear-interval: 0\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(Self.problems { () throws(ConfigurationError) in _ = try byDefault.read() }
                == ["\(path):1:17: clear-interval: 0 is not a number of seconds above 0 and at most 3600"])

        // A file named with --config must be there.
        let missing = directory.appendingPathComponent("missing.yaml").path
        let explicit = ConfigurationReloader(explicitPath: missing, defaultPath: path, commandLine: commandLine, environment: [:])
        #expect(Self.problems { () throws(ConfigurationError) in _ = try explicit.read() } == ["\(missing): cannot read: No such file or directory"])
        #expect(Self.problems { () throws(ConfigurationError) in _ = try ConfigFile.load(path: directory.path) }
                == ["\(directory.path): cannot read: Is a directory"])
    }

    @Test("a reload does not take a state directory made since the start (--state-dir) for a changed one")
    func stateDirectoryMadeSinceStart() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("proximityd-state-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        var commandLine = RunOptions()
        commandLine[RunOption.stateDirectory] = path
        let atStart = NodeConfiguration(commandLine: commandLine, file: nil, environment: [:])
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        let atReload = NodeConfiguration(commandLine: commandLine, file: nil, environment: [:])
        #expect(ConfigurationReload.restartOnly(atStart, atReload).isEmpty)
        commandLine[RunOption.stateDirectory] = path + "-other"
        #expect(ConfigurationReload.restartOnly(atStart, NodeConfiguration(commandLine: commandLine, file: nil, environment: [:])) == ["state-dir"])
    }

    @Test("after a reload the node runs the new configuration, tracking and rules included, with the restart-only settings it started with")
    func appliedAfterReload() throws {
        var commandLine = RunOptions()
        commandLine[RunOption.stateDirectory] = "/var/lib/proximityd-test"
        let running = NodeConfiguration(commandLine: commandLine, file: try ConfigFile.parse("name: kitchen\nmax-peers: 10\n", path: "a"),
                                        environment: [:])
        let next = NodeConfiguration(commandLine: commandLine, file: try ConfigFile.parse("""
            name: hall
            max-peers: 20
            clear-interval: 4
            tracking: {heartbeat: 30}
            rules:
              - {identifier: r, when: {key: a.x, op: ex}, do: [{log: {}}]}
            """, path: "b"), environment: [:])
        #expect(ConfigurationReload.restartOnly(running, next) == ["name", "max-peers"])
        let applied = ConfigurationReload.applied(next, running: running)
        #expect(applied.name == "kitchen" && applied.maxPeers == 10, "restart-only settings wait for the restart")
        #expect(applied.clearInterval == 4 && applied.tracking.heartbeat == 30 && applied.rules.map(\.identifier) == ["r"],
                "everything else is taken")
        #expect(ConfigurationReload.restartOnly(applied, next) == ["name", "max-peers"], "the warning comes again at the next reload")
    }

    // MARK: - Limits: bad files cost little and change nothing

    /// "Billion laughs": `levels` anchors, each a list of `width` aliases of the one before.
    static func aliasBomb(levels: Int = 8, width: Int = 10) -> String {
        var text = "a0: &a0 [x]\n"
        for level in 1 ... levels {
            text += "a\(level): &a\(level) [" + Array(repeating: "*a\(level - 1)", count: width).joined(separator: ",") + "]\n"
        }
        return text
    }

    @Test("a YAML alias bomb (8 levels of 10 aliases, 10⁸ values from a few hundred bytes) is refused, at once, by its count")
    func aliasBomb() {
        let bomb = Self.aliasBomb()
        #expect(bomb.utf8.count < 500)
        let problems = Self.problems(bomb)
        #expect(problems.count == 1)
        #expect(problems.first?.hasPrefix("\(Self.file):") == true)
        #expect(problems.first?.contains("more than \(ConfigLimits.maxValues) values, with YAML aliases expanded") == true, "\(problems)")
        // Below the limit, aliases are taken as YAML means them.
        let small = Self.problems("region-monitor: &m {exit-period: 5}\nregions:\n  - identifier: a\n    match: {exit-period: 7}\n")
        #expect(small.isEmpty, "\(small)")
    }

    @Test("collections nested too deep are refused before YAML composes them: flow, block, and `- - -` on one line",
          arguments: [
            (String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000) + "\n", "1:64"),
            ("regions:\n" + (0 ..< 70).map { String(repeating: " ", count: 2 * $0 + 2) + "k\($0):\n" }.joined() + "\n", "65:"),
            ("regions:\n  " + String(repeating: "- ", count: 80) + "x\n", "2:"),
          ])
    func tooDeep(_ text: String, at position: String) {
        let problems = Self.problems(text)
        #expect(problems.count == 1)
        #expect(problems.first?.hasPrefix("\(Self.file):\(position)") == true, "\(problems)")
        #expect(problems.first?.hasSuffix(": collections nested more than \(ConfigLimits.maxDepth) deep") == true, "\(problems)")
    }

    @Test("the depth scan passes what is not nesting: brackets in quotes, comments and block scalars, deep but allowed files")
    func notTooDeep() {
        let brackets = String(repeating: "[", count: 200)
        let text = """
            # \(brackets)
            name: "\(brackets)"
            alerts:
              - identifier: a
                title: '\(brackets)'
                description: |
                  \(brackets)
                  {{{{{{{{
                text-to-speech: >-
                  \(brackets)
                match: {uuid: f7826da6-4fa2-4e98-8024-bc5b71e0893e, major: 1}
            """
        #expect(ConfigLimits.firstTooDeep(Array(text.unicodeScalars)) == nil)
        #expect(Self.problems(text).allSatisfy { !$0.contains("nested") })
        let deepButAllowed = String(repeating: "[", count: ConfigLimits.maxDepth - 1) + String(repeating: "]", count: ConfigLimits.maxDepth - 1)
        #expect(ConfigLimits.firstTooDeep(Array(deepButAllowed.unicodeScalars)) == nil)
    }

    @Test("a file larger than ConfigFile.maxSize is refused before it is parsed")
    func tooLarge() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("proximityd-large-\(UUID().uuidString.prefix(8)).yaml").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let line = "  - {identifier: r%06d, match: {uuid: f7826da6-4fa2-4e98-8024-bc5b71e0893e}}\n"
        var text = "regions:\n"
        var n = 0
        while text.utf8.count <= ConfigFile.maxSize { text += String(format: line, n); n += 1 }
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(Self.problems { () throws(ConfigurationError) in _ = try ConfigFile.load(path: path) }
                == ["\(path): cannot read: larger than \(ConfigFile.maxSize >> 20) MiB"])
    }

    // MARK: - The example

    static let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("dbus/proximityd.yaml.example")

    @Test("the example, the package's conffile, is valid and inert; with every option uncommented it is still valid and shows the defaults")
    func example() throws {
        let file = try ConfigFile.load(path: Self.example.path)
        #expect(file.options == RunOptions() && file.regionMonitor == RegionMonitor.Configuration())
        #expect(file.regions.isEmpty && file.alerts.isEmpty && file.rules.isEmpty && file.mqtt == nil,
                "installed as it is, the file switches nothing on")
        let text = try String(contentsOf: Self.example, encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        /// The block of `#`-commented lines from `key` on, each without its first `#`.
        func commented(_ key: Substring) throws -> String {
            let start = try #require(lines.firstIndex(of: key))
            return lines[start...].prefix { $0.hasPrefix("#") }.map { $0.dropFirst() }.joined(separator: "\n")
        }
        let regions = try ConfigFile.parse(commented("#regions:"), path: "regions").regions
        #expect(regions.map(\.identifier) == ["fleet", "front-desk", "warehouse", "shop"])

        // `#key: value` lines are the options, commented out at their defaults; the region
        // monitor's are inside its commented `#region-monitor:` block.
        let monitorStart = try #require(lines.firstIndex(of: "#region-monitor:"))
        let monitorBlock = monitorStart ..< (lines[monitorStart...].firstIndex { !$0.hasPrefix("#") } ?? lines.endIndex)
        let uncommented = lines.indices.map { monitorBlock.contains($0) ? lines[$0].dropFirst() : lines[$0] }.map { line -> String in
            let indent = line.prefix { $0 == " " }
            let rest = line.dropFirst(indent.count)
            guard rest.hasPrefix("#"), let colon = rest.firstIndex(of: ":"),
                  rest[rest.index(after: rest.startIndex) ..< colon].allSatisfy({ $0.isLowercase || $0 == "-" }),
                  rest.count > 1, rest[rest.index(after: rest.startIndex)].isLetter else { return String(line) }
            return String(indent + rest.dropFirst())
        }.joined(separator: "\n")
        let full = try ConfigFile.parse(uncommented, path: "uncommented")
        #expect(["\nregion-monitor:\n", "\n  exit-period: 10\n", "\n  max-regions: 4096\n", "\n  restore-limit: 900\n"]
            .allSatisfy(uncommented.contains), "the region monitor's keys are uncommented too")
        let options = full.options
        #expect(RunOption.all.allSatisfy(options.has), "every option is in the example: \(RunOption.all.filter { !options.has($0) }.map(\.key))")
        let shown = NodeConfiguration(commandLine: options, file: nil, environment: [:])
        let defaults = NodeConfiguration(commandLine: RunOptions(), file: nil, environment: [:])
        #expect(shown.bus == defaults.bus && shown.busName == defaults.busName && shown.serviceUUID == defaults.serviceUUID)
        #expect(shown.stateDirectory == defaults.stateDirectory && shown.adapter == defaults.adapter && shown.powerOn == defaults.powerOn)
        #expect(shown.measuredPower == defaults.measuredPower && shown.pathLossExponent == defaults.pathLossExponent)
        #expect(shown.rssiOffset == defaults.rssiOffset && defaults.rssiOffset == 0)
        #expect(shown.maxPeers == defaults.maxPeers && shown.trackBeacons == defaults.trackBeacons && shown.logLevel == defaults.logLevel)
        #expect(shown.clearInterval == 10, "the clear interval's own default")
        #expect(full.regionMonitor == RegionMonitor.Configuration())
        #expect(file.alerts.isEmpty && full.alerts.isEmpty, "the alerts are an example, commented out")

        // The commented alerts: from `#alerts:` on, each line without its `#`, are valid.
        let alerts = try ConfigFile.parse(commented("#alerts:"), path: "alerts").alerts
        #expect(alerts.map(\.identifier) == ["lighthouse", "welcome"])
        #expect(alerts.first?.parameters.cap == AlertCap(count: 3, window: 3600))
        #expect(alerts.first?.parameters.schedule == AlertSchedule(days: Set(1...5), start: 9 * 60, end: 18 * 60, outside: .hold))
        #expect(alerts.last == Alert(identifier: "welcome", content: AlertContent(title: "Welcome"), targets: RegionMatcher()))

        // The commented tracking and rules, likewise.
        #expect(file.tracking == Tracker.Configuration() && file.rules.isEmpty && full.rules.isEmpty, "an example, commented out")
        let tracking = try ConfigFile.parse(commented("#tracking:"), path: "tracking").tracking
        #expect(tracking.heartbeat == 60 && tracking.contextData == ["site": "museum", "floor": "2"])
        #expect(tracking.matcher == (try RegionMatcher.parse([(.kind, .text("ibeacon")), (.uuid, .text("f7826da6-4fa2-4e98-8024-bc5b71e0893e"))])))
        let rules = try ConfigFile.parse(commented("#rules:"), path: "rules").rules
        #expect(rules.map(\.identifier) == ["near-12", "welcome-offer"])
        #expect(rules.first?.actions == [.signal(["major": "{%a.beacon.major%}"]), .set(["a.visited": "yes"])])
        #expect(rules.last?.frequency == .cooldown(600) && rules.last?.actions == [.offerAlert("lighthouse"), .log(["note": "entered {%event.region%}"])])
    }

    // MARK: - Parts

    @Test("a typo is one or two edits away; a swap of neighbours is one")
    func nearestKey() {
        #expect(YAMLKeys.editDistance("regoins", "regions") == 1)
        #expect(YAMLKeys.editDistance("clear-intervall", "clear-interval") == 1)
        #expect(YAMLKeys.nearest(to: "nam", in: ConfigFile.keys) == "name")
        #expect(YAMLKeys.nearest(to: "colour", in: ConfigFile.keys) == nil)
        #expect(YAMLKeys.nearest(to: "mx", in: ConfigFile.keys) == nil)
    }

    @Test("the log level switch sets the level of every logger its handler made, unless one set its own")
    func logLevelSwitch() {
        let levels = LogLevelSwitch(.info)
        let first = Logger(label: "a", factory: levels.handler(label:))
        var second = Logger(label: "b", factory: levels.handler(label:))
        #expect(first.logLevel == .info && second.logLevel == .info)
        levels.level = .debug
        #expect(first.logLevel == .debug && second.logLevel == .debug)
        second.logLevel = .error
        levels.level = .trace
        #expect(first.logLevel == .trace && second.logLevel == .error)
    }
}
