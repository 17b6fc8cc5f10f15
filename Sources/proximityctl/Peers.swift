import ArgumentParser
import Foundation
import ProximityAPI

struct Peers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the peers the node ranges, nearest first.",
        discussion: """
            Examples:
              $ proximityctl peers
                A table: each peer, its zone, distance and RSSI.
              $ proximityctl peers --json -H pi@kitchen.lan
                The peers of another box's node, over ssh, as JSON.
            """)

    @OptionGroup var node: NodeOptions

    @Flag(name: .long, help: "Print JSON instead of a table.")
    var json = false

    func run() async throws {
        let rows = PeerTable.rows(await node.withNode("cannot read the node's peers") { try await $0.peerProperties() })
        if json {
            let data = try JSONSerialization.data(withJSONObject: rows.map(PeerTable.json), options: [.prettyPrinted, .sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print(PeerTable.render(rows), terminator: "")
        }
    }
}
