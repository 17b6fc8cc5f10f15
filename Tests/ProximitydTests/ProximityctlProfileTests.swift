import Foundation
import ProximityAPI
import ProximityTesting
import Testing

/// `proximityctl profile`, `track`, `clear`, `rules` and `events` against a node on a private bus.
@Suite("proximityctl profile, rules and events", .serialized)
struct ProximityctlProfileTests {
    static func ctl(_ box: Box, _ arguments: [String], stdin: String? = nil) async throws -> CommandResult {
        try await runCommand(BuiltProducts.path("proximityctl"), arguments + ["--bus", box.address])
    }

    static let rule = #"{"on": ["tracking"], "when": {"all": [{"key": "a.beacon.major", "op": "eq", "value": "12"}, {"key": "a.beacon.prox", "op": "le", "value": 2}]}, "do": [{"signal": {"major": "{%a.beacon.major%}"}}], "frequency": "once"}"#

    @Test("profile set/show/unset, track and clear; rules add/list/test (a match and a non-match explained)/remove; a bad rule refused with its path")
    func profileAndRules() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            #expect(try await Self.ctl(box, ["profile", "set", "a.user", "albert"]).status == 0)
            #expect(try await Self.ctl(box, ["rules", "add", "near-12", Self.rule]).status == 0)

            // Not yet: the rule's condition does not hold, and the test says why.
            var test = try await Self.ctl(box, ["rules", "test", "near-12"])
            #expect(test.status == 1, "\(test)")
            #expect(test.stdout == """
                near-12: the condition does not hold
                  false  all of:
                    false  a.beacon.major eq "12"  (a.beacon.major is missing)
                    false  a.beacon.prox le "2"  (a.beacon.prox is missing)

                """, "\(test.stdout)")

            #expect(try await Self.ctl(box, ["track", "f7826da6-4fa2-4e98-8024-bc5b71e0893e", "12", "7", "2", "site=museum"]).status == 0)
            test = try await Self.ctl(box, ["rules", "test", "near-12"])
            #expect(test.status == 0 && test.stdout.contains("true   a.beacon.prox le \"2\"  (a.beacon.prox is \"2\")"), "\(test)")

            let show = try await Self.ctl(box, ["profile"])
            #expect(show.stdout == """
                a.beacon.major  12
                a.beacon.minor  7
                a.beacon.prox   2
                a.beacon.uuid   f7826da6-4fa2-4e98-8024-bc5b71e0893e
                a.user          albert

                """, "\(show.stdout)")
            let json = try await Self.ctl(box, ["profile", "show", "--json"])
            let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: String]
            #expect(object?["a.beacon.prox"] == "2" && object?.count == 5)

            #expect(try await Self.ctl(box, ["clear"]).status == 0)
            #expect(try await Self.ctl(box, ["profile", "unset", "a.user"]).status == 0)
            #expect(try await Self.ctl(box, ["profile"]).stdout.isEmpty)
            let unsetAgain = try await Self.ctl(box, ["profile", "unset", "a.user"])
            #expect(unsetAgain.status == 69 && unsetAgain.stderr.contains("no attribute \"a.user\""), "\(unsetAgain)")

            let list = try await Self.ctl(box, ["rules", "list", "--json"])
            let rules = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: [String: Any]]
            #expect(rules?["near-12"]?["source"] as? String == "bus" && rules?["near-12"]?["frequency"] as? String == "once", "\(list)")

            let bad = try await Self.ctl(box, ["rules", "add", "r", #"{"when": {"all": [{"key": "a", "op": "gt", "value": "x"}]}, "do": [{"log": {}}]}"#])
            #expect(bad.status == 64 && bad.stderr.contains("rule \"r\": when.all[0]: gt compares numbers: \"x\" is not a number"), "\(bad)")
            for bad in ["9", "nearby"] {
                let badTrack = try await Self.ctl(box, ["track", "u", "1", "2", bad])
                #expect(badTrack.status == 64 && badTrack.stderr.contains("prox must be immediate, near, far or unknown, or 0 (unknown)"), "\(badTrack)")
            }
            #expect(try await Self.ctl(box, ["rules", "remove", "near-12"]).status == 0)
            #expect(try await Self.ctl(box, ["rules", "list"]).stdout.isEmpty)
            await daemon.stop()
        }
    }

    @Test("track takes the zone by name (immediate, near, far, unknown, in any case) or by number, as a.beacon.prox holds it")
    func trackZoneNames() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            for (prox, number) in [("immediate", "1"), ("near", "2"), ("FAR", "3"), ("unknown", "0"), ("3", "3"), ("0", "0")] {
                let track = try await Self.ctl(box, ["track", "f7826da6-4fa2-4e98-8024-bc5b71e0893e", "12", "7", prox])
                #expect(track.status == 0, "\(prox): \(track)")
                let json = try await Self.ctl(box, ["profile", "show", "--json"])
                let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: String]
                #expect(object?["a.beacon.prox"] == number, "\(prox): \(json)")
            }
            await daemon.stop()
        }
    }

    @Test("events: the log in order, as lines and JSON, --since, and --follow printing a new entry once it is logged")
    func events() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            #expect(try await Self.ctl(box, ["track", "u", "1", "2", "3"]).status == 0)
            #expect(try await Self.ctl(box, ["profile", "set", "a.k", "v"]).status == 0)
            let lines = try await Self.ctl(box, ["events"]).stdout.split(separator: "\n")
            #expect(lines.count == 2 && lines[0].hasPrefix("1  ") && lines[0].contains("tracking.tracked") && lines[0].contains("a.beacon.prox=3"),
                    "\(lines)")
            #expect(lines[1].hasPrefix("2  ") && lines[1].contains("profile.changed") && lines[1].contains("a.k=v"))
            let json = try await Self.ctl(box, ["events", "--json", "--since", "1h"]).stdout.split(separator: "\n")
            let first = try JSONSerialization.jsonObject(with: Data(json[0].utf8)) as? [String: Any]
            #expect(first?["seq"] as? Int == 1 && first?["source"] as? String == "tracking" && json.count == 2)
            #expect(try await Self.ctl(box, ["events", "--since", "4000000000"]).stdout.isEmpty, "nothing from the future")
            let badSince = try await Self.ctl(box, ["events", "--since", "yesterday"])
            #expect(badSince.status == 64, "\(badSince)")

            let follow = try ManagedProcess(BuiltProducts.path("proximityctl"), ["events", "--follow", "--bus", box.address])
            defer { follow.signal(SIGTERM) }
            try await follow.waitForOutput(containing: "profile.changed", timeout: .seconds(10))
            #expect(try await Self.ctl(box, ["profile", "set", "a.k", "w"]).status == 0)
            try await follow.waitForOutput(containing: "a.k=w", timeout: .seconds(10))
            #expect(follow.stdout.components(separatedBy: "profile.changed").count == 3, "each entry once: \(follow.stdout)")
            await daemon.stop()
        }
    }
}
