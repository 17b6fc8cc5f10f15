import ArgumentParser
import ProximityCommandLine
import ProximityVersion

/// `proximityctl`: the root command only lists the subcommands.
@main
struct Proximityctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "proximityctl",
        abstract: "Query and control a proximityd node over D-Bus.",
        discussion: """
            Which node: every subcommand but fleet and fleet-key takes --bus BUS (system, session, or a D-Bus \
            address), --system, --session, -H/--host [USER@]HOST[:PORT] (the system bus of \
            another box, over ssh, as busctl -H) and --bus-name NAME, after the subcommand or \
            before it \
            (proximityctl --bus unix:path=/run/box/bus peers). With none of them, the bus is \
            $PROXIMITYD_BUS if it is set, else the system bus, whose address libdbus takes from \
            $DBUS_SYSTEM_BUS_ADDRESS (default unix:path=/run/dbus/system_bus_socket). With -H, \
            libdbus runs ssh -xT [-p PORT] -- [USER@]HOST systemd-stdio-bridge; \
            $PROXIMITYCTL_SSH, when set, replaces ssh (its words: a program and its arguments, \
            such as ssh -i ~/.ssh/node).

            Exit status: 0 on success, 64 for a bad argument, 69 when the node cannot be \
            reached or refuses the call; `proximityctl SUBCOMMAND --help` says more. Errors are one \
            line on standard error, proximityctl: error: MESSAGE (a bad argument adds a line \
            naming the help to read).

            Examples:
              $ proximityctl status
                The node on this box: its identity and state.
              $ proximityctl peers -H pi@kitchen.lan
                The peers of the node on another box, over ssh.
              $ proximityctl regions --help
                What regions can do.
            """,
        version: ProximitydVersion.string,
        subcommands: [Status.self, Peers.self, Watch.self, Names.self, IRKs.self, Regions.self, Alerts.self, ProfileCommand.self,
                      Track.self, Clear.self, Rules.self, Events.self, Record.self, Calibrate.self, FleetCommand.self,
                      FleetKeyCommand.self, Doctor.self]
    )

    /// The node's options may come before the subcommand: ``NodeOptionPlacement``. Errors in the
    /// one style: ``runReportingErrors(_:)``.
    static func main() async {
        await runReportingErrors(NodeOptionPlacement.place(Array(CommandLine.arguments.dropFirst()), root: Self.self))
    }
}
