import ArgumentParser
import ProximityVersion

/// `proximityd`: the root command only lists the subcommands.
@main
struct Proximityd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "proximityd",
        abstract: "Peer-to-peer Bluetooth LE proximity node.",
        discussion: """
            Advertises the general service UUID, serves this node's identity over GATT, discovers \
            and identifies peers, ranges them by RSSI, and publishes it all on D-Bus as \
            org.proximityd. See docs/dbus-api.md, or `busctl introspect org.proximityd /org/proximityd`.
            """,
        version: ProximitydVersion.string,
        subcommands: [Run.self, CheckConfig.self]
    )
}
