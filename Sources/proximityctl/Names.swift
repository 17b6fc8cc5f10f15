import ArgumentParser
import Foundation
import ProximityAPI
import ProximityCore

struct Names: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, set and remove the display names of peers.",
        discussion: """
            A peer's name is what `peers`, `watch`, the MQTT payloads, the fleet table and Home \
            Assistant show for it; its identifier stays what regions, alerts and rules match. \
            Names set here are kept by the node across restarts; those of the config file's \
            names: section win and change only there. A peer without a name shows the name it \
            advertises (another node's --name), if any.

            Exit status: 0 on success, 64 for a bad argument, 69 when the node cannot be \
            reached or refuses the call (a peer the config file names).

            Examples:
              $ proximityctl names set ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:10:1 \\
                  "Anna's badge"
                Names a beacon.
              $ proximityctl names list
                Every name, by identifier.
            """,
        subcommands: [List.self, Set.self, Remove.self])
}

extension Names {
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the names (the node's PeerNames), by identifier.",
            discussion: """
                Examples:
                  $ proximityctl names list
                    IDENTIFIER and NAME, one row per named peer.
                  $ proximityctl names list --json
                    One JSON object: identifier to name.
                """)

        @OptionGroup var node: NodeOptions

        @Flag(name: .long, help: "Print one JSON object instead of a table.")
        var json = false

        func run() async throws {
            let names = await node.withNode("cannot read the node's names") { try await $0.properties().peerNames }
            if json { return print(try jsonText(names)) }
            print(textTable(["IDENTIFIER", "NAME"], names.sorted { $0.key < $1.key }.map { [$0.key, $0.value] }), terminator: "")
            if names.isEmpty { print("(no names)") }
        }
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Give a peer a display name (SetPeerName).",
            discussion: """
                The identifier as `proximityctl peers` shows it (capitals are put right). The name: \
                1 to \(PeerNames.maxLength) characters, no control characters, no space at either end.

                Examples:
                  $ proximityctl names set 0f8e62a4-5c1e-4a57-9f0a-3b6c2d1e7f90 "Meeting room"
                    Names another node.
                  $ proximityctl names set eddystone:00112233445566778899:aabbccddeeff \\
                      "Front door"
                    Names an Eddystone beacon.
                """)

        @OptionGroup var node: NodeOptions

        @Argument(help: ArgumentHelp("The peer's identifier.", valueName: "identifier"))
        var identifier: String

        @Argument(help: ArgumentHelp("Its name.", valueName: "name"))
        var name: String

        func run() async throws {
            let peer = PeerID.canonical(identifier)
            if let problem = PeerID.formProblem(peer) ?? PeerNames.problem(name: name) { fail(problem, status: 64) }
            let name = name
            await node.withNode("cannot name \(peer)") { try await $0.setPeerName(name, for: peer) }
            print("\(peer) is \(name.debugDescription)")
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove the names given to peers (SetPeerName with an empty name).",
            discussion: """
                The peers show the names they advertise again, if any. A name of the config file \
                is removed there (exit 69 here).

                Examples:
                  $ proximityctl names remove ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:10:1
                    The beacon is its identifier again.
                """)

        @OptionGroup var node: NodeOptions

        @Argument(help: ArgumentHelp("The peers' identifiers.", valueName: "identifier"))
        var identifiers: [String]

        func run() async throws {
            let peers = identifiers.map(PeerID.canonical)
            for peer in peers { if let problem = PeerID.formProblem(peer) { fail(problem, status: 64) } }
            for peer in peers {
                await node.withNode("cannot remove the name of \(peer)") { try await $0.setPeerName("", for: peer) }
                print("\(peer) has no name")
            }
        }
    }
}
