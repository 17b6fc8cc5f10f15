import Foundation
import ProximityTesting
import Testing

/// `proximityctl alerts add` and `alerts remove` against proximityd on a private bus with no
/// radio: every AddAlert key from the options, a definition from a JSON file, the refusals it makes
/// itself (exit 64, in the node's words, checked against the node's own reply) and those of the
/// node (exit 69). The definitions are read back with `alerts list --json`.
@Suite("proximityctl alerts add and remove", .serialized)
struct ProximityctlAlertDefinitionsTests {
    static let fleet = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"

    static func alerts(_ box: Box, _ arguments: [String]) async throws -> CommandResult {
        try await runCommand(BuiltProducts.path("proximityctl"), ["alerts"] + arguments + ["--bus", box.address])
    }

    /// identifier → the definition as `alerts list --json` shows it.
    static func definitions(_ box: Box) async throws -> [String: [String: Any]] {
        let list = try await alerts(box, ["list", "--json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: Any], "\(list)")
        var out: [String: [String: Any]] = [:]
        for alert in object["alerts"] as? [[String: Any]] ?? [] {
            out[alert["identifier"] as? String ?? ""] = alert["definition"] as? [String: Any]
        }
        return out
    }

    /// An alert of the config file, to be refused.
    static func startDaemon(_ box: Box) async throws -> ManagedProcess {
        let config = box.bus.directory.appendingPathComponent("proximityd.yaml")
        try """
            alerts:
              - identifier: desk
                title: Desk
                match: {kind: node}
            """.write(to: config, atomically: true, encoding: .utf8)
        return try await box.startDaemon(["--config", config.path])
    }

    @Test("add with every option, add with --json (and options on top), replace, remove, remove of an unknown alert")
    func addAndRemove() async throws {
        try await withBox { box in
            let daemon = try await Self.startDaemon(box)

            let added = try await Self.alerts(box, [
                "add", "welcome", "--title", "Welcome to the desk", "--description", "Hot desks are on the left.",
                "--text-to-speech", "Welcome", "--thumbnail", "/usr/share/pixmaps/desk.png", "--action", "webview",
                "--url", "https://example.com/desk", "--uri", "app://desk", "--extra", "room=4.02", "--extra", "floor=4",
                "--range", "immediate", "--comparison", "<=", "--strategy", "time", "--max-time-before-reset", "30",
                "--cooldown", "600", "--cap-count", "3", "--cap-window", "3600", "--days", "mon-fri", "--start", "08:30",
                "--end", "18:00", "--outside", "drop",
                "--match-uuid", Self.fleet.uppercased(), "--match-major", "1", "--match-minor", "2",
            ])
            #expect(added.status == 0 && added.stdout == "added alert welcome\n", "\(added)")

            let welcome = try #require(try await Self.definitions(box)["welcome"])
            let expected: [String: String] = [
                "Title": "Welcome to the desk", "Description": "Hot desks are on the left.", "TextToSpeech": "Welcome",
                "Thumbnail": "/usr/share/pixmaps/desk.png", "Action": "webview", "URL": "https://example.com/desk", "URI": "app://desk",
                "Range": "immediate", "Comparison": "<=", "Strategy": "time", "Days": "mon,tue,wed,thu,fri", "Start": "08:30",
                "End": "18:00", "Outside": "drop",
            ]
            for (key, value) in expected { #expect(welcome[key] as? String == value, "\(key): \(welcome)") }
            #expect(welcome["MaxTimeBeforeReset"] as? Double == 30 && welcome["Cooldown"] as? Double == 600, "\(welcome)")
            #expect(welcome["CapCount"] as? Int == 3 && welcome["CapWindow"] as? Double == 3600, "\(welcome)")
            #expect(welcome["Extra"] as? [String: String] == ["room": "4.02", "floor": "4"], "\(welcome)")
            let match = try #require(welcome["Match"] as? [String: Any])
            #expect(match.count == 3 && match["UUID"] as? String == Self.fleet && match["Major"] as? Int == 1 && match["Minor"] as? Int == 2,
                    "\(match)")

            // A JSON file of bus and config names, with options on top; then `list --json`'s
            // definition added back under another identifier.
            let file = box.bus.directory.appendingPathComponent("alert.json")
            try """
                {"title": "Seasonal offer", "Range": "far", "max-time-before-reset": 5, "extra": {"menu": "mulled wine"},
                 "match": {"kind": "ibeacon", "uuid": "\(Self.fleet)", "Major": 7}}
                """.write(to: file, atomically: true, encoding: .utf8)
            let fromJSON = try await Self.alerts(box, ["add", "xmas", "--json", file.path, "--cooldown", "60"])
            #expect(fromJSON.status == 0 && fromJSON.stdout == "added alert xmas\n", "\(fromJSON)")
            let xmas = try #require(try await Self.definitions(box)["xmas"])
            #expect(xmas["Title"] as? String == "Seasonal offer" && xmas["Range"] as? String == "far", "\(xmas)")
            #expect(xmas["MaxTimeBeforeReset"] as? Double == 5 && xmas["Cooldown"] as? Double == 60, "\(xmas)")
            #expect(xmas["Extra"] as? [String: String] == ["menu": "mulled wine"], "\(xmas)")
            let xmasMatch = try #require(xmas["Match"] as? [String: Any])
            #expect(xmasMatch["Kind"] as? String == "ibeacon" && xmasMatch["Major"] as? Int == 7, "\(xmasMatch)")

            let copy = box.bus.directory.appendingPathComponent("copy.json")
            try JSONSerialization.data(withJSONObject: welcome).write(to: copy)
            let copied = try await Self.alerts(box, ["add", "copy", "--json", copy.path])
            #expect(copied.status == 0, "\(copied)")
            #expect(NSDictionary(dictionary: try #require(try await Self.definitions(box)["copy"])).isEqual(to: welcome))

            // Every peer; a replacement of a bus alert.
            let anyone = try await Self.alerts(box, ["add", "anyone", "--title", "Hello", "--every-peer"])
            #expect(anyone.status == 0, "\(anyone)")
            #expect(try await Self.definitions(box)["anyone"]?["Match"] as? [String: Any] != nil)
            let replaced = try await Self.alerts(box, ["add", "anyone", "--title", "Hello again", "--every-peer"])
            #expect(replaced.status == 0, "\(replaced)")
            #expect(try await Self.definitions(box)["anyone"]?["Title"] as? String == "Hello again")

            // remove: in order, stopping at the first refusal.
            let removed = try await Self.alerts(box, ["remove", "copy", "anyone"])
            #expect(removed.status == 0 && removed.stdout == "removed alert copy\nremoved alert anyone\n", "\(removed)")
            #expect(Set(try await Self.definitions(box).keys) == ["desk", "welcome", "xmas"])
            let unknown = try await Self.alerts(box, ["remove", "xmas", "nope", "welcome"])
            #expect(unknown.status == 69 && unknown.stdout == "removed alert xmas\n", "\(unknown)")
            #expect(unknown.stderr == "proximityctl: error: cannot remove alert \"nope\": org.proximityd.Error.DoesNotExist: no alert \"nope\" is defined\n",
                    "\(unknown)")
            #expect(Set(try await Self.definitions(box).keys) == ["desk", "welcome"])

            await daemon.stop()
            #expect(daemon.exitStatus == 0, "\(daemon.stderr)")
        }
    }

    @Test("definitions refused here (exit 64, the node's words), refusals of the node (exit 69)")
    func errors() async throws {
        try await withBox { box in
            let daemon = try await Self.startDaemon(box)

            // The node's own words for a bad range, through busctl.
            let node = try await box.busctl(["call", "org.proximityd", "/org/proximityd", "org.proximityd.AlertManager1", "AddAlert",
                                             "sa{sv}", "x", "2", "Range", "s", "nearby", "Match", "a{sv}", "0"])
            #expect(node.status != 0 && node.stderr.contains("Range must be one of immediate, near, far, not \"nearby\""), "\(node)")

            let file = box.bus.directory.appendingPathComponent("bad.json")
            try #"{"Title": "x", "Match": {"Major": 1}}"#.write(to: file, atomically: true, encoding: .utf8)
            let titled = box.bus.directory.appendingPathComponent("titled.json")
            try #"{"Title": "x", "Match": {}}"#.write(to: titled, atomically: true, encoding: .utf8)
            let badJSON = box.bus.directory.appendingPathComponent("notjson.json")
            try "title: x".write(to: badJSON, atomically: true, encoding: .utf8)
            let usage: [([String], String)] = [
                (["add", "x", "--range", "nearby", "--every-peer"], "Range must be one of immediate, near, far, not \"nearby\""),
                (["add", "x", "--title", "x"], "Match is missing: an alert needs a matcher for its targets (use an empty one for every peer)"),
                (["add", "x", "--match-major", "1"], "Match Major needs UUID"),
                (["add", "x", "--match-uuid", Self.fleet, "--match-major", "seven"], "Match Major must be an integer in 0...65535, not \"seven\""),
                (["add", "x", "--cooldown", "soon", "--every-peer"], "Cooldown must be a number of seconds, not \"soon\""),
                (["add", "x", "--max-time-before-reset=-1", "--every-peer"], "MaxTimeBeforeReset must be from 0 to 2592000 seconds, not -1.0"),
                (["add", "x", "--cap-count", "3", "--every-peer"], "CapWindow is missing: a cap needs both CapCount and CapWindow"),
                (["add", "x", "--days", "fry", "--every-peer"], "Days \"fry\" is not a day of the week (mon, tue, wed, thu, fri, sat, sun)"),
                (["add", "x", "--start", "09:00", "--end", "09:00", "--every-peer"], "End is the same time as Start: the schedule would never open"),
                (["add", "x", "--extra", "room", "--every-peer"], "Extra \"room\" is not KEY=VALUE"),
                (["add", "x", "--every-peer", "--match-kind", "node"], "Match cannot be every peer and Kind at once"),
                (["add", "x", "--json", file.path], "Match Major needs UUID"),
                (["add", "x", "--json", titled.path, "--title", "y"], "Title is given twice"),
                (["add", "x", "--json", titled.path, "--every-peer"], "Match is given twice"),
                (["add", "", "--every-peer"], "the alert identifier is empty"),
                (["remove", "a\u{1}b"], "the alert identifier contains control characters"),
            ]
            for (arguments, message) in usage {
                let result = try await Self.alerts(box, arguments)
                #expect(result.status == 64, "\(arguments): \(result)")
                #expect(result.stderr == "proximityctl: error: \(message)\n", "\(arguments): \(result)")
                #expect(result.stdout.isEmpty, "\(arguments): \(result)")
            }
            let notJSON = try await Self.alerts(box, ["add", "x", "--json", badJSON.path])
            #expect(notJSON.status == 64 && notJSON.stderr.hasPrefix("proximityctl: error: \(badJSON.path): not a JSON object of alert parts"),
                    "\(notJSON)")
            let missing = try await Self.alerts(box, ["add", "x", "--json", "/nonexistent.json"])
            #expect(missing.status == 66 && missing.stderr == "proximityctl: error: cannot read /nonexistent.json: no such file\n", "\(missing)")
            #expect(try await Self.alerts(box, ["remove"]).status == 64)
            #expect(Set(try await Self.definitions(box).keys) == ["desk"])

            let refused: [([String], String)] = [
                (["add", "desk", "--every-peer"],
                 "cannot add alert \"desk\": org.proximityd.Error.NotPermitted: alert \"desk\" is defined in the config file; change it there and reload"),
                (["remove", "desk"],
                 "cannot remove alert \"desk\": org.proximityd.Error.NotPermitted: alert \"desk\" is defined in the config file; remove it there and reload"),
            ]
            for (arguments, message) in refused {
                let result = try await Self.alerts(box, arguments)
                #expect(result.status == 69, "\(arguments): \(result)")
                #expect(result.stderr == "proximityctl: error: \(message)\n", "\(arguments): \(result)")
            }

            await daemon.stop()
            #expect(daemon.exitStatus == 0, "\(daemon.stderr)")
        }
    }
}
