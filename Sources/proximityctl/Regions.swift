import ArgumentParser
import DBusKit
import Foundation
import ProximityAPI
import ProximityCore

/// `proximityctl regions`: the node's region monitor (`org.proximityd.RegionMonitor1` and its
/// `Region1` objects). Each subcommand is one call, or one stream of signals, of that API.
///
/// Arguments the node would refuse (an identifier it cannot take, a matcher that cannot be) are
/// refused here first, with the node's words and exit 64; what the node refuses (a region of the
/// config file, the limit, a region that is not monitored) is one line and exit 69, as for every
/// other subcommand.
struct Regions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, add, remove and follow the node's regions.",
        discussion: """
            A region is an identifier and a matcher: the peers it is about. Its state is inside once \
            a matching peer is present, outside once none has been for its exit period, unknown until \
            either is known. Regions added here are kept by the node across restarts; those of the \
            config file (/etc/proximityd/proximityd.yaml) change only there.

            Exit status: 0 on success, 64 for a bad argument (with the message the node would give), \
            69 when the node cannot be reached, refuses the call, or leaves the bus.

            Examples:
              $ proximityctl regions add fleet uuid=f7826da6-4fa2-4e98-8024-bc5b71e0893e
                Monitors the iBeacons of this UUID as the region fleet.
              $ proximityctl regions watch fleet
                Follows fleet: entered, exited, state.
            """,
        subcommands: [List.self, Add.self, Remove.self, State.self, Watch.self])
}

extension Regions {
    /// `regions list`: one `GetManagedObjects`.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the monitored regions with their state, source, peers and matcher.",
            discussion: """
                One row per region, sorted by identifier: IDENTIFIER, STATE (inside, outside or \
                unknown), SOURCE (config or bus), PEERS (how many matching peers are present) and \
                MATCHER, written as `regions add` takes it. With --json, one array of objects with \
                the peers' identifiers and the matcher as an object.

                Examples:
                  $ proximityctl regions list
                    The table.
                  $ proximityctl regions list --json
                    The regions as one JSON array.
                """)

        @OptionGroup var node: NodeOptions

        @Flag(name: .long, help: "Print one JSON array instead of a table.")
        var json = false

        func run() async throws {
            let rows = RegionText.rows(await node.withNode("cannot read the node's regions") { try await $0.regionProperties() })
            if json {
                let data = try JSONSerialization.data(withJSONObject: rows.map(RegionText.json),
                                                      options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
                print(String(decoding: data, as: UTF8.self))
            } else {
                print(RegionText.table(rows), terminator: "")
            }
        }
    }

    /// `regions add`: `StartMonitoring`, after the matcher is checked here.
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start monitoring a region, or redefine the one with this identifier.",
            discussion: """
                Each KEY=VALUE is one part of the matcher; a peer matches when it satisfies every \
                part given, and with none the region matches every peer. Keys are taken as on the \
                bus (UUID, URLDomain, ExitPeriod) or as in the config file (uuid, url-domain, \
                exit-period), in any case. The parts:

                  Kind                 node, ibeacon, altbeacon or eddystone
                  Identifier           a peer's identifier, as `proximityctl peers` shows it
                  UUID, Major, Minor   iBeacon (a UUID, then 0...65535 each)
                  ID1, ID2, ID3        AltBeacon (a UUID, then 0...65535 each)
                  Namespace, Instance  Eddystone-UID (20 and 12 hex digits)
                  URL                  an Eddystone-URL, exactly (http:// or https://)
                  URLDomain            an Eddystone-URL whose host is this domain or under it
                  Address              the address it was last heard with (AA:BB:CC:DD:EE:FF)
                  Within               immediate, near or far: peers at that zone or nearer
                  ExitPeriod           seconds (1...86400) with no match before an exit

                A beacon's parts are given from the first: Major needs UUID, Minor needs Major, \
                ID3 needs ID2, and so on.

                The matcher is checked before the node is called: a bad one is refused with the \
                node's message and exit 64. Prints the region's object path and its matcher as the node keeps it. A \
                region of the config file cannot be redefined here (exit 69).

                Examples:
                  $ proximityctl regions add fleet uuid=f7826da6-4fa2-4e98-8024-bc5b71e0893e
                    The iBeacons of one UUID.
                  $ proximityctl regions add desk Kind=node Within=near ExitPeriod=30
                    Nodes near or nearer; exited 30 s after the last one left.
                  $ proximityctl regions add shop url-domain=example.com
                    Eddystone-URLs of example.com or under it.
                  $ proximityctl regions add anyone
                    Every peer.
                """)

        @OptionGroup var node: NodeOptions

        @Argument(help: ArgumentHelp("The region's identifier: 1 to 255 bytes, no control characters.", valueName: "id"))
        var identifier: String

        @Argument(help: ArgumentHelp("A part of the matcher, such as UUID=f7826da6-... or within=near.", valueName: "key=value"))
        var parts: [String] = []

        func run() async throws {
            if let problem = Region.problem(identifier: identifier) { fail(problem, status: 64) }
            let matcher: RegionMatcher
            do { matcher = try RegionText.matcher(parts) } catch { fail("\(error)", status: 64) }
            let identifier = identifier
            await node.withNode("cannot monitor \(identifier.debugDescription)") {
                try await $0.startMonitoring(identifier, matcher: matcher)
            }
            print("monitoring \(identifier) (\(ProximityBus.regionPath(identifier).rawValue)): \(RegionText.compact(matcher.busValues))")
        }
    }

    /// `regions remove`: `StopMonitoring` for each, or `StopMonitoringAll`.
    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop monitoring regions added over the bus.",
            discussion: """
                Stops the regions named, in order; the first the node refuses (one not monitored, \
                or one of the config file) ends the command with exit 69, those before it stopped. \
                With --all, stops every region added over the bus: the config file's regions stay \
                (edit the file and reload the node to change them).

                Examples:
                  $ proximityctl regions remove shop desk
                    Stops shop, then desk.
                  $ proximityctl regions remove --all
                    Stops every region added over the bus.
                """)

        @OptionGroup var node: NodeOptions

        @Flag(name: .long, help: "Stop every region added over the bus; the config file's regions stay.")
        var all = false

        @Argument(help: ArgumentHelp("The identifiers of the regions to stop.", valueName: "id"))
        var identifiers: [String] = []

        func validate() throws {
            if all && !identifiers.isEmpty { throw ValidationError("give region identifiers or --all, not both") }
            if !all && identifiers.isEmpty { throw ValidationError("give the identifiers of the regions to stop, or --all") }
        }

        func run() async throws {
            if all {
                let stay = await node.withNode("cannot stop the regions") { node in
                    try await node.stopMonitoringAll()
                    return RegionText.rows(try await node.regionProperties()).filter { $0.source == RegionSource.config.rawValue }
                }
                if stay.isEmpty {
                    print("stopped monitoring every region added over the bus")
                } else {
                    print("stopped monitoring every region added over the bus; the config file's regions stay: "
                          + stay.map(\.identifier).joined(separator: ", "))
                }
                return
            }
            for identifier in identifiers {
                if let problem = Region.problem(identifier: identifier) { fail(problem, status: 64) }
            }
            let identifiers = identifiers
            await node.withNode("cannot stop the regions") { node in
                for identifier in identifiers {
                    do {
                        try await node.stopMonitoring(identifier)
                    } catch {
                        await node.close()
                        fail("cannot stop monitoring \(identifier.debugDescription): \(error)")
                    }
                    print("stopped monitoring \(identifier)")
                }
            }
        }
    }

    /// `regions state`: `RequestState`.
    struct State: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a region's state: inside, outside or unknown.",
            discussion: """
                The node also announces the state to every client, as the region's \
                StateDetermined signal (`regions watch` shows it).

                Example:
                  $ proximityctl regions state fleet
                    inside, outside or unknown.
                """)

        @OptionGroup var node: NodeOptions

        @Argument(help: ArgumentHelp("The region's identifier.", valueName: "id"))
        var identifier: String

        func run() async throws {
            if let problem = Region.problem(identifier: identifier) { fail(problem, status: 64) }
            let identifier = identifier
            print(await node.withNode("cannot read the state of \(identifier.debugDescription)") {
                try await $0.requestState(identifier)
            })
        }
    }

    /// `regions watch`: the `Region1` signals, one line each.
    struct Watch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Follow the regions' events: one line per event.",
            discussion: """
                Prints each event as the node announces it, with the time it was received: \
                entered, exited, and state (when monitoring starts, on request with `regions \
                state`, and before each entry and exit); with --ranging also the matching peers \
                of each report, nearest first. Nothing is printed until an event comes. Output is \
                flushed after each line. Ends after --count lines, on Ctrl-C, or with exit 69 when \
                the node leaves the bus.

                  2026-11-23T15:00:00.123Z fleet state inside
                  2026-11-23T15:00:00.123Z fleet entered
                  2026-11-23T15:00:00.123Z fleet ranged ibeacon:...:1:2 near 1.52 m -61 dBm

                With --json:

                  {"time":"2026-11-23T15:00:00.123Z","region":"fleet","event":"entered"}
                  {"time":"...","region":"fleet","event":"state","state":"inside"}
                  {"time":"...","region":"fleet","event":"ranged","peers":[...]}

                where each peer is {"identifier":"...","zone":"near","distance":1.52,"rssi":-61} \
                (distance in metres, RSSI in dBm).

                Examples:
                  $ proximityctl regions watch --ranging
                    Every region's events and its peers at each report.
                  $ proximityctl regions watch fleet --json --count 2
                    fleet's next two events, as JSON.
                """)

        @OptionGroup var node: NodeOptions

        @OptionGroup var follow: FollowOptions

        @Flag(name: .long, help: "Print the matching peers of every report too (a line per region at each report).")
        var ranging = false

        @Argument(help: ArgumentHelp("Only these regions (default: every region).", valueName: "id"))
        var identifiers: [String] = []

        func run() async throws {
            for identifier in identifiers {
                if let problem = Region.problem(identifier: identifier) { fail(problem, status: 64) }
            }
            let (only, json, ranging) = (Set(identifiers), follow.json, ranging)
            await node.follow("cannot follow the regions", count: follow.count,
                              subscribe: { try await $0.regionSignals() }) { signal, time in
                guard only.isEmpty || only.contains(signal.region) else { return nil }
                if case .ranged = signal.kind, !ranging { return nil }
                return json ? RegionText.jsonLine(signal, time: time) : RegionText.humanLine(signal, time: time)
            }
        }
    }
}
