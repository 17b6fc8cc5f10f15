import ArgumentParser
import Foundation
import ProximityAPI

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the node's identity and state.",
        discussion: """
            Examples:
              $ proximityctl status
                The node on the system bus.
              $ proximityctl status --session --json
                The node on the session bus, as JSON.
            """)

    @OptionGroup var node: NodeOptions

    @Flag(name: .long, help: "Print JSON instead of text.")
    var json = false

    func run() async throws {
        let (properties, peers) = await node.withNode("cannot read the node's state") { node in
            (try await node.properties(), try await node.peers().count)
        }
        let fields: [(String, String, Any)] = [
            ("identifier", "Identifier", properties.identifier),
            ("name", "Name", properties.name),
            ("service_uuid", "Service UUID", properties.serviceUUID),
            ("adapter", "Adapter", properties.adapter),
            ("advertising", "Advertising", properties.advertising),
            ("discovering", "Discovering", properties.discovering),
            ("health", "Health", properties.healthDetail.isEmpty ? properties.health : "\(properties.health): \(properties.healthDetail)"),
            ("clear_interval", "Clear after", properties.clearInterval),
            ("measured_power", "1 m RSSI", Int(properties.measuredPower)),
            ("path_loss_exponent", "Path loss n", properties.pathLossExponent),
            ("rssi_offset", "RSSI offset", properties.rssiOffset),
            ("peers", "Peers", peers),
        ]
        if json {
            var object: [String: Any] = [:]
            for (key, _, value) in fields { object[key] = value }
            object["health"] = properties.health
            object["health_detail"] = properties.healthDetail
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
                case ("RSSI offset", let d as Double): "\(d.formatted()) dB"
                case ("Path loss n", let d as Double): d.formatted()
                default: "\(value)"
                }
                print("\((label + ":").padding(toLength: 14, withPad: " ", startingAt: 0))\(shown)")
            }
        }
    }
}
