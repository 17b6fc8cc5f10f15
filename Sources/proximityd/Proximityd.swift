import ArgumentParser
import ProximityCommandLine
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

            Errors are one line on standard error, proximityd: error: MESSAGE (a bad argument adds \
            a line naming the help to read).

            Examples:
              $ proximityd run --bus system
                The node, as its systemd unit runs it.
              $ proximityd check-config /etc/proximityd/proximityd.yaml
                Whether the file may be used, before a reload.
            """,
        version: ProximitydVersion.string,
        subcommands: [Run.self, CheckConfig.self]
    )

    /// Errors in the one style: ``runReportingErrors(_:)``.
    static func main() async {
        await runReportingErrors(nil)
    }
}
