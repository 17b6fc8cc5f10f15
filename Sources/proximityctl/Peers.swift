import ArgumentParser
import DBusKit
import Foundation
import ProximityNode

struct Peers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the peers the node ranges, nearest first.")

    @OptionGroup var node: NodeOptions

    @Flag(name: .long, help: "Print JSON instead of a table.")
    var json = false

    func run() async throws {
        let (connection, name) = await node.connect()
        let rows: [PeerRow]
        do {
            rows = try await PeerTable.fetch(connection, name)
        } catch {
            await connection.close()
            fail("cannot read the node's peers: \(error)")
        }
        await connection.close()
        if json {
            let data = try JSONSerialization.data(withJSONObject: rows.map(\.json), options: [.prettyPrinted, .sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print(PeerTable.render(rows), terminator: "")
        }
    }
}
