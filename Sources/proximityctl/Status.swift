import ArgumentParser
import DBusKit
import Foundation
import ProximityNode

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the node's identity and state.")

    @OptionGroup var node: NodeOptions

    @Flag(name: .long, help: "Print JSON instead of text.")
    var json = false

    func run() async throws {
        let (connection, name) = await node.connect()
        let properties: [String: DBusValue]
        let peers: [DBusValue]
        do {
            properties = try await connection.getAllProperties(destination: name, path: NodeAPI.rootPath, interface: NodeAPI.node1)
            peers = try await connection.call(destination: name, path: NodeAPI.rootPath, interface: NodeAPI.node1,
                                              member: "GetPeers").first?.arrayElements ?? []
        } catch {
            await connection.close()
            fail("cannot read the node's state: \(error)")
        }
        await connection.close()
        let fields: [(String, String, Any)] = [
            ("identifier", "Identifier", properties["Identifier"]?.string ?? ""),
            ("name", "Name", properties["Name"]?.string ?? ""),
            ("service_uuid", "Service UUID", properties["ServiceUUID"]?.string ?? ""),
            ("adapter", "Adapter", properties["Adapter"]?.string ?? ""),
            ("advertising", "Advertising", properties["Advertising"]?.bool ?? false),
            ("discovering", "Discovering", properties["Discovering"]?.bool ?? false),
            ("clear_interval", "Clear after", properties["ClearInterval"]?.double ?? 0),
            ("measured_power", "1 m RSSI", Int(properties["MeasuredPower"]?.integer ?? 0)),
            ("peers", "Peers", peers.count),
        ]
        if json {
            var object: [String: Any] = [:]
            for (key, _, value) in fields { object[key] = value }
            object["bus"] = node.bus
            object["bus_name"] = node.busName
            let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        } else {
            for (_, label, value) in fields {
                let shown: String = switch (label, value) {
                case (_, let b as Bool): b ? "yes" : "no"
                case ("Clear after", let d as Double): "\(d.formatted()) s"
                case ("1 m RSSI", let p as Int): "\(p) dBm"
                default: "\(value)"
                }
                print("\((label + ":").padding(toLength: 14, withPad: " ", startingAt: 0))\(shown)")
            }
        }
    }
}
