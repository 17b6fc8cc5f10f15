import Foundation
import ProximityTesting
import Testing

/// `proximityctl regions` against proximityd on a private bus with no radio: every subcommand, the
/// errors it refuses itself (exit 64) and those of the node (exit 69), and `watch` following the
/// signals from the moment it is subscribed. With no radio no region is entered; the state events
/// (from StartMonitoring and RequestState) are what `watch` sees.
@Suite("proximityctl regions", .serialized)
struct ProximityctlRegionsTests {
    static let fleet = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"

    /// `proximityctl regions ARGUMENTS --bus BOX`.
    static func regions(_ box: Box, _ arguments: [String]) async throws -> CommandResult {
        try await runCommand(BuiltProducts.path("proximityctl"), ["regions"] + arguments + ["--bus", box.address])
    }

    /// A watcher of `box`'s regions, started now.
    static func watcher(_ box: Box, _ arguments: [String]) throws -> ManagedProcess {
        try ManagedProcess(BuiltProducts.path("proximityctl"), ["regions", "watch"] + arguments + ["--bus", box.address])
    }

    /// Starts proximityd with a config file holding the region `desk` (kind node), and an exit
    /// period of an hour so that no region turns outside while a test runs.
    static func startDaemon(_ box: Box) async throws -> ManagedProcess {
        let config = box.bus.directory.appendingPathComponent("proximityd.yaml")
        try """
            region-monitor:
              exit-period: 3600
            regions:
              - identifier: desk
                match:
                  kind: node
            """.write(to: config, atomically: true, encoding: .utf8)
        return try await box.startDaemon(["--config", config.path])
    }

    static func lines(_ text: String) -> [String] {
        text.split(separator: "\n").map(String.init)
    }

    @Test("add with bus and config names, list and list --json, state, remove and remove --all")
    func addListStateRemove() async throws {
        try await withBox { box in
            let daemon = try await Self.startDaemon(box)

            // Bus names, a UUID in capitals: normalised as the node keeps it.
            let fleet = try await Self.regions(box, ["add", "fleet", "UUID=\(Self.fleet.uppercased())", "Major=7", "Within=near"])
            #expect(fleet.status == 0, "\(fleet)")
            #expect(fleet.stdout == "monitoring fleet (/org/proximityd/regions/fleet): UUID=\(Self.fleet) Major=7 Within=near\n", "\(fleet)")
            // Config names, and keys in any case.
            let shop = try await Self.regions(box, ["add", "shop", "urldomain=Shop.Example.COM.", "Exit-Period=30", "WITHIN=far"])
            #expect(shop.status == 0, "\(shop)")
            #expect(shop.stdout == "monitoring shop (/org/proximityd/regions/shop): URLDomain=shop.example.com Within=far ExitPeriod=30\n", "\(shop)")
            // No parts: every peer.
            let anyone = try await Self.regions(box, ["add", "anyone"])
            #expect(anyone.status == 0 && anyone.stdout == "monitoring anyone (/org/proximityd/regions/anyone): (every peer)\n", "\(anyone)")

            let table = try await Self.regions(box, ["list"])
            #expect(table.status == 0, "\(table)")
            #expect(table.stdout == """
                IDENTIFIER  STATE    SOURCE  PEERS  MATCHER
                anyone      unknown  bus     0      (every peer)
                desk        unknown  config  0      Kind=node
                fleet       unknown  bus     0      UUID=\(Self.fleet) Major=7 Within=near
                shop        unknown  bus     0      URLDomain=shop.example.com Within=far ExitPeriod=30

                """, "\(table)")

            let json = try await Self.regions(box, ["list", "--json"])
            #expect(json.status == 0, "\(json)")
            let array = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]], "\(json)")
            #expect(array.map { $0["identifier"] as? String } == ["anyone", "desk", "fleet", "shop"])
            #expect(array.map { $0["source"] as? String } == ["bus", "config", "bus", "bus"])
            #expect(array.allSatisfy { $0["state"] as? String == "unknown" && ($0["peers"] as? [Any])?.isEmpty == true })
            let fleetJSON = try #require(array.first { $0["identifier"] as? String == "fleet" })
            #expect(fleetJSON["path"] as? String == "/org/proximityd/regions/fleet")
            let matcher = try #require(fleetJSON["matcher"] as? [String: Any])
            #expect(matcher.count == 3 && matcher["UUID"] as? String == Self.fleet && matcher["Major"] as? Int == 7
                    && matcher["Within"] as? String == "near", "\(matcher)")
            let shopMatcher = try #require(array.last?["matcher"] as? [String: Any])
            #expect(shopMatcher["ExitPeriod"] as? Double == 30 && shopMatcher["URLDomain"] as? String == "shop.example.com")
            #expect((array.first?["matcher"] as? [String: Any])?.isEmpty == true)

            let state = try await Self.regions(box, ["state", "fleet"])
            #expect(state.status == 0 && state.stdout == "unknown\n", "\(state)")

            // remove: one region; then --all leaves the config file's.
            let removed = try await Self.regions(box, ["remove", "fleet"])
            #expect(removed.status == 0 && removed.stdout == "stopped monitoring fleet\n", "\(removed)")
            let afterRemove = try await Self.regions(box, ["list"])
            #expect(!afterRemove.stdout.contains("fleet") && afterRemove.stdout.contains("shop"), "\(afterRemove)")
            let all = try await Self.regions(box, ["remove", "--all"])
            #expect(all.status == 0, "\(all)")
            #expect(all.stdout == "stopped monitoring every region added over the bus; the config file's regions stay: desk\n", "\(all)")
            let left = try await Self.regions(box, ["list", "--json"])
            let leftArray = try #require(try JSONSerialization.jsonObject(with: Data(left.stdout.utf8)) as? [[String: Any]], "\(left)")
            #expect(leftArray.map { $0["identifier"] as? String } == ["desk"])

            await daemon.stop()
            #expect(daemon.exitStatus == 0, "\(daemon.stderr)")
        }
    }

    @Test("matchers and identifiers refused here (exit 64, the node's words), refusals of the node (exit 69)")
    func errors() async throws {
        try await withBox { box in
            let daemon = try await Self.startDaemon(box)
            let usage: [([String], String)] = [
                (["add", "x", "Major=7"], "matcher: Major needs UUID"),
                (["add", "x", "uuid=\(Self.fleet)", "major=seven"], "matcher: Major must be an integer in 0...65535, not \"seven\""),
                (["add", "x", "uuid=\(Self.fleet)", "major=70000"], "matcher: Major must be an integer in 0...65535, not 70000"),
                (["add", "x", "exit-period=soon"], "matcher: ExitPeriod must be a number of seconds, not \"soon\""),
                (["add", "x", "within=unknown"], "matcher: Within must be immediate, near or far, not \"unknown\""),
                (["add", "x", "uuid=\(Self.fleet)", "UUID=\(Self.fleet)"], "matcher: UUID is given twice"),
                (["add", "x", "uuid"], "matcher: \"uuid\" is not KEY=VALUE"),
                (["add", "x", "=near"], "matcher: \"=near\" is not KEY=VALUE"),
                (["add", "x", "Colour=red"],
                 "unknown matcher key \"Colour\" (known: Kind, Identifier, UUID, Major, Minor, ID1, ID2, ID3, Namespace, Instance, URL, URLDomain, Address, Verified, Within, ExitPeriod)"),
                (["add", ""], "the region identifier is empty"),
                (["state", "a\u{1}b"], "the region identifier contains control characters"),
            ]
            for (arguments, message) in usage {
                let result = try await Self.regions(box, arguments)
                #expect(result.status == 64, "\(arguments): \(result)")
                #expect(result.stderr == "proximityctl: error: \(message)\n", "\(arguments): \(result)")
                #expect(result.stdout.isEmpty, "\(arguments): \(result)")
            }
            // Argument structure, refused by the parser.
            for arguments in [["remove"], ["remove", "--all", "desk"], ["watch", "--count", "0"]] {
                let result = try await Self.regions(box, arguments)
                #expect(result.status == 64, "\(arguments): \(result)")
            }
            // Nothing was added.
            #expect(try await Self.regions(box, ["list"]).stdout.split(separator: "\n").count == 2)

            let refused: [([String], String)] = [
                (["add", "desk", "kind=ibeacon"],
                 "cannot monitor \"desk\": org.proximityd.Error.NotPermitted: region \"desk\" is defined in the config file; change it there and reload"),
                (["remove", "desk"],
                 "cannot stop monitoring \"desk\": org.proximityd.Error.NotPermitted: region \"desk\" is defined in the config file; remove it there and reload"),
                (["remove", "nope"], "cannot stop monitoring \"nope\": org.proximityd.Error.DoesNotExist: no region \"nope\" is monitored"),
                (["state", "nope"], "cannot read the state of \"nope\": org.proximityd.Error.DoesNotExist: no region \"nope\" is monitored"),
            ]
            for (arguments, message) in refused {
                let result = try await Self.regions(box, arguments)
                #expect(result.status == 69, "\(arguments): \(result)")
                #expect(result.stderr == "proximityctl: error: \(message)\n", "\(arguments): \(result)")
            }
            // remove stops at the first refusal, those before it stopped.
            #expect(try await Self.regions(box, ["add", "a"]).status == 0)
            let partly = try await Self.regions(box, ["remove", "a", "nope", "desk"])
            #expect(partly.status == 69 && partly.stdout == "stopped monitoring a\n", "\(partly)")
            #expect(partly.stderr.hasPrefix("proximityctl: error: cannot stop monitoring \"nope\""), "\(partly)")

            await daemon.stop()
            // No node: one line, exit 69.
            let gone = try await Self.regions(box, ["list"])
            #expect(gone.status == 69, "\(gone)")
            #expect(gone.stderr == "proximityctl: error: proximityd is not running on the \(box.address) bus (org.proximityd has no owner)\n")
        }
    }

    @Test("watch: JSON and text lines, only the regions named, --count, and exit 69 when the node leaves")
    func watch() async throws {
        try await withBox { box in
            let daemon = try await Self.startDaemon(box)
            let onlyFleet = try Self.watcher(box, ["fleet", "--json", "--count", "3"])
            let text = try Self.watcher(box, ["--count", "4"])
            let untilGone = try Self.watcher(box, ["--json"])
            defer { for w in [onlyFleet, text, untilGone] { w.signal(SIGKILL) } }

            // StartMonitoring announces each new region's state; so does each RequestState. The
            // watchers print nothing until a signal comes, and are subscribed once they print:
            // ask for the states until each has printed (the counted ones have exited).
            #expect(try await Self.regions(box, ["add", "fleet", "UUID=\(Self.fleet)"]).status == 0)
            #expect(try await Self.regions(box, ["add", "other", "Kind=node"]).status == 0)
            var rounds = 0
            while onlyFleet.isRunning || text.isRunning || !untilGone.stdout.contains("\"region\":\"fleet\"") {
                rounds += 1
                try #require(rounds <= 40, "the watchers did not print: \(onlyFleet.stdout) | \(text.stdout) | \(untilGone.stdout)")
                #expect(try await Self.regions(box, ["state", "other"]).stdout == "unknown\n")
                #expect(try await Self.regions(box, ["state", "fleet"]).stdout == "unknown\n")
                for counted in [onlyFleet, text] where counted.isRunning {
                    _ = try? await counted.waitForExit(timeout: .milliseconds(250))
                }
                _ = try? await untilGone.waitForOutput(containing: "\"region\":\"fleet\"", timeout: .milliseconds(250))
            }

            let time = #/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/#
            // --json --count 3, fleet only: three state lines, keys in order, nothing of `other`.
            #expect(onlyFleet.exitStatus == 0, "\(onlyFleet.stderr)")
            let fleetLines = Self.lines(onlyFleet.stdout)
            #expect(fleetLines.count == 3, "\(onlyFleet.stdout)")
            for line in fleetLines {
                #expect(line.hasPrefix("{\"time\":\"") && line.hasSuffix("\"region\":\"fleet\",\"event\":\"state\",\"state\":\"unknown\"}"), "\(line)")
                let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String], "\(line)")
                #expect(object.count == 4 && object["region"] == "fleet" && object["event"] == "state" && object["state"] == "unknown")
                #expect(object["time"].map { (try? time.wholeMatch(in: $0)) != nil } == true, "\(line)")
            }
            // Text, --count 4, every region: both regions.
            #expect(text.exitStatus == 0, "\(text.stderr)")
            let textLines = Self.lines(text.stdout)
            #expect(textLines.count == 4, "\(text.stdout)")
            for line in textLines {
                #expect((try? #/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (fleet|other) state unknown/#.wholeMatch(in: line)) != nil, "\(line)")
            }
            #expect(textLines.contains { $0.hasSuffix(" other state unknown") } && textLines.contains { $0.hasSuffix(" fleet state unknown") })

            // The node leaves: one line, exit 69.
            await daemon.stop()
            let status = try await untilGone.waitForExit(timeout: .seconds(10))
            #expect(status == 69, "\(untilGone.stderr)")
            #expect(untilGone.stderr == "proximityctl: error: org.proximityd left the \(box.address) bus\n")
            #expect(Self.lines(untilGone.stdout).allSatisfy { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) != nil },
                    "\(untilGone.stdout)")
        }
    }
}
