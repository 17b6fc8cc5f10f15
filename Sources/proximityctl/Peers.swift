import ArgumentParser
import Foundation
import ProximityAPI

struct Peers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the peers the node ranges, nearest first.")

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
