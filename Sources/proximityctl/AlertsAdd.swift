import ArgumentParser
import Foundation
import ProximityAPI
import ProximityCore

extension Alerts {
    /// `alerts add`: `AddAlert`, after the definition is checked here.
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add an alert, or redefine the one added over the bus with this identifier (AddAlert).",
            discussion: """
                The alert's parts are the options, each one key of AddAlert (docs/alerts.md and \
                docs/dbus-api.md say what each does, its default and its range), and the parts of \
                --json FILE: one JSON object of AddAlert's keys, by their bus names (Title, \
                MaxTimeBeforeReset, Match) or config names (title, max-time-before-reset, match), \
                as `alerts list --json` shows an alert's definition; - reads standard input. A \
                part given both ways is refused.

                The targets (Match) are required: the --match-... options (a beacon's parts from \
                the first: --match-major needs --match-uuid), Match in the JSON, or --every-peer. \
                Match has the regions' matcher keys but Within and ExitPeriod (the range and the \
                strategy say when an alert is ready).

                The definition is checked before the node is called: a bad one is refused with the \
                node's message and exit 64. The node refuses an alert of the config file \
                (NotPermitted) and a 1001st alert (LimitReached): exit 69.

                Examples:
                  $ proximityctl alerts add welcome --title Welcome \\
                      --url https://example.com/desk \\
                      --match-uuid f7826da6-4fa2-4e98-8024-bc5b71e0893e --match-major 1
                    Welcome, for the beacons of that UUID and major 1, when near.
                  $ proximityctl alerts add lunch --title Lunch --strategy time \\
                      --days mon-fri --start 12:00 --end 14:00 --cooldown 3600 \\
                      --extra room=cafeteria --every-peer
                    Lunch, for every peer, on weekdays 12:00 to 14:00, once an hour at most.
                  $ proximityctl alerts add copy --json welcome.json
                    The alert copy, as welcome.json defines it.
                """)

        @OptionGroup var node: NodeOptions

        @Argument(help: ArgumentHelp("The alert's identifier: 1 to 255 bytes, no control characters.", valueName: "id"))
        var identifier: String

        @Option(name: .customLong("json"),
                help: ArgumentHelp("A JSON object of AddAlert's keys, or - for standard input.", valueName: "file"))
        var jsonFile: String?

        // MARK: Content

        @Option(help: ArgumentHelp("Title (at most 4096 bytes).", valueName: "text")) var title: String?
        @Option(help: ArgumentHelp("Description.", valueName: "text")) var description: String?
        @Option(name: .customLong("text-to-speech"), help: ArgumentHelp("TextToSpeech: what a consumer says.", valueName: "text"))
        var textToSpeech: String?
        @Option(help: ArgumentHelp("Thumbnail: an image's URL or file path.", valueName: "image")) var thumbnail: String?
        @Option(help: ArgumentHelp("Action: popup (default), webview, any string of at most 255 bytes.", valueName: "action"))
        var action: String?
        @Option(help: ArgumentHelp("URL: a web page.", valueName: "url")) var url: String?
        @Option(help: ArgumentHelp("URI: an app page.", valueName: "uri")) var uri: String?
        @Option(help: ArgumentHelp("Extra: one field (repeat it; at most 64).", valueName: "key=value")) var extra: [String] = []

        // MARK: Parameters

        @Option(help: ArgumentHelp("Range: immediate, near (default) or far.", valueName: "zone")) var range: String?
        @Option(help: ArgumentHelp("Comparison of the default strategy: = (default), <= (the range or nearer), >= (the range or farther).",
                                   valueName: "op"))
        var comparison: String?
        @Option(help: ArgumentHelp("Strategy: time, or a key a client registers (default: the range strategy).", valueName: "key"))
        var strategy: String?
        @Option(name: .customLong("max-time-before-reset"),
                help: ArgumentHelp("MaxTimeBeforeReset: seconds after the condition stopped holding before done goes back to " +
                                   "waiting (default 60).",
                                   valueName: "seconds"))
        var maxTimeBeforeReset: String?
        @Option(help: ArgumentHelp("Cooldown: at most one accepted offer per target per this many seconds.", valueName: "seconds"))
        var cooldown: String?
        @Option(name: .customLong("cap-count"),
                help: ArgumentHelp("CapCount: at most this many accepted offers per --cap-window.", valueName: "n"))
        var capCount: String?
        @Option(name: .customLong("cap-window"), help: ArgumentHelp("CapWindow: the cap's sliding window.", valueName: "seconds"))
        var capWindow: String?
        @Option(help: ArgumentHelp("Days of the schedule: mon-fri,sun, all.", valueName: "days")) var days: String?
        @Option(help: ArgumentHelp("Start of the schedule, the node's local time.", valueName: "HH:MM")) var start: String?
        @Option(help: ArgumentHelp("End of the schedule (before --start: past midnight).", valueName: "HH:MM")) var end: String?
        @Option(help: ArgumentHelp("Outside the schedule a ready target is held (hold, default) or marked done (drop).",
                                   valueName: "hold|drop"))
        var outside: String?

        // MARK: Targets

        @Flag(name: .customLong("every-peer"), help: "Match every peer (an empty Match).") var everyPeer = false
        @Option(name: .customLong("match-kind"),
                help: ArgumentHelp("Match Kind: node, ibeacon, altbeacon or eddystone.", valueName: "kind"))
        var matchKind: String?
        @Option(name: .customLong("match-identifier"), help: ArgumentHelp("Match Identifier: a peer's identifier.", valueName: "id"))
        var matchIdentifier: String?
        @Option(name: .customLong("match-uuid"), help: ArgumentHelp("Match UUID: an iBeacon's proximity UUID.", valueName: "uuid"))
        var matchUUID: String?
        @Option(name: .customLong("match-major"), help: ArgumentHelp("Match Major (0...65535; needs --match-uuid).", valueName: "n"))
        var matchMajor: String?
        @Option(name: .customLong("match-minor"), help: ArgumentHelp("Match Minor (0...65535; needs --match-major).", valueName: "n"))
        var matchMinor: String?
        @Option(name: .customLong("match-id1"), help: ArgumentHelp("Match ID1: an AltBeacon's UUID.", valueName: "uuid"))
        var matchID1: String?
        @Option(name: .customLong("match-id2"), help: ArgumentHelp("Match ID2 (0...65535; needs --match-id1).", valueName: "n"))
        var matchID2: String?
        @Option(name: .customLong("match-id3"), help: ArgumentHelp("Match ID3 (0...65535; needs --match-id2).", valueName: "n"))
        var matchID3: String?
        @Option(name: .customLong("match-namespace"),
                help: ArgumentHelp("Match Namespace: an Eddystone-UID's (20 hex digits).", valueName: "hex"))
        var matchNamespace: String?
        @Option(name: .customLong("match-instance"),
                help: ArgumentHelp("Match Instance (12 hex digits; needs --match-namespace).", valueName: "hex"))
        var matchInstance: String?
        @Option(name: .customLong("match-url"), help: ArgumentHelp("Match URL: an Eddystone-URL, exactly.", valueName: "url"))
        var matchURL: String?
        @Option(name: .customLong("match-url-domain"),
                help: ArgumentHelp("Match URLDomain: Eddystone-URLs of this domain or under it.", valueName: "domain"))
        var matchURLDomain: String?
        @Option(name: .customLong("match-address"),
                help: ArgumentHelp("Match Address: the address a peer was last heard with.", valueName: "AA:BB:CC:DD:EE:FF"))
        var matchAddress: String?

        /// The options' parts, in ``Alert/Key`` order.
        func optionParts() throws(AlertDefinitionError) -> [(Alert.Key, Alert.Value)] {
            var parts: [(Alert.Key, Alert.Value)] = []
            let texts: [(Alert.Key, String?)] = [
                (.title, title), (.description, description), (.textToSpeech, textToSpeech), (.thumbnail, thumbnail), (.action, action),
                (.url, url), (.uri, uri), (.range, range), (.comparison, comparison), (.strategy, strategy),
                (.maxTimeBeforeReset, maxTimeBeforeReset), (.cooldown, cooldown), (.capCount, capCount), (.capWindow, capWindow),
                (.days, days), (.start, start), (.end, end), (.outside, outside),
            ]
            for case let (key, text?) in texts { parts.append((key, try AlertDefinitionText.value(key, text))) }
            if !extra.isEmpty { parts.append((.extra, .map(try AlertDefinitionText.extra(extra)))) }
            let matchOptions: [(RegionMatcher.Key, String?)] = [
                (.kind, matchKind), (.identifier, matchIdentifier), (.uuid, matchUUID), (.major, matchMajor), (.minor, matchMinor),
                (.id1, matchID1), (.id2, matchID2), (.id3, matchID3), (.namespace, matchNamespace), (.instance, matchInstance),
                (.url, matchURL), (.urlDomain, matchURLDomain), (.address, matchAddress),
            ]
            var matcher: [String: RegionMatcher.Value] = [:]
            for case let (key, text?) in matchOptions { matcher[key.busName] = try AlertDefinitionText.matcherValue(key, text) }
            if everyPeer && !matcher.isEmpty {
                throw AlertDefinitionError(.match, "cannot be every peer and \(matcher.keys.sorted().joined(separator: ", ")) at once")
            }
            if everyPeer || !matcher.isEmpty { parts.append((.match, .matcher(matcher))) }
            return parts
        }

        func run() async throws {
            if let problem = Alert.problem(identifier: identifier) { fail(problem, status: 64) }
            var parts: [(Alert.Key, Alert.Value)] = []
            if let jsonFile {
                let data: Data
                if jsonFile == "-" {
                    data = FileHandle.standardInput.readDataToEndOfFile()
                } else {
                    guard let contents = FileManager.default.contents(atPath: jsonFile) else {
                        fail("cannot read \(jsonFile)\(FileManager.default.fileExists(atPath: jsonFile) ? "" : ": no such file")",
                             status: 66)
                    }
                    data = contents
                }
                do { parts = try AlertDefinitionText.parts(json: data) } catch {
                    fail("\(jsonFile == "-" ? "standard input" : jsonFile): \(error)", status: 64)
                }
            }
            let alert: Alert
            do {
                parts += try optionParts()
                alert = try Alert.parse(identifier: identifier, parts)
            } catch {
                fail("\(error)", status: 64)
            }
            let identifier = identifier
            await node.withNode("cannot add alert \(identifier.debugDescription)") { try await $0.addAlert(alert) }
            print("added alert \(identifier)")
        }
    }

    /// `alerts remove`: `RemoveAlert` for each.
    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove alerts added over the bus (RemoveAlert).",
            discussion: """
                Removes the alerts named, in order, with their targets; an alert on offer or in \
                progress is taken back (alert-removed). The first the node refuses (one not defined, \
                or one of the config file) ends the command with exit 69, those before it removed.

                Example:
                  $ proximityctl alerts remove welcome lunch
                    Removes welcome, then lunch.
                """)

        @OptionGroup var node: NodeOptions

        @Argument(help: ArgumentHelp("The identifiers of the alerts to remove.", valueName: "id"))
        var identifiers: [String]

        func run() async throws {
            for identifier in identifiers {
                if let problem = Alert.problem(identifier: identifier) { fail(problem, status: 64) }
            }
            let identifiers = identifiers
            await node.withNode("cannot remove the alerts") { node in
                for identifier in identifiers {
                    do {
                        try await node.removeAlert(identifier)
                    } catch {
                        await node.close()
                        fail("cannot remove alert \(identifier.debugDescription): \(error)")
                    }
                    print("removed alert \(identifier)")
                }
            }
        }
    }
}
