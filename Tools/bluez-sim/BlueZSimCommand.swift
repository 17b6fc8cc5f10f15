import ArgumentParser
import ProximityVersion

/// `bluez-sim`: the root command only lists the subcommands; `run` is the default.
@main
struct BlueZSimCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bluez-sim",
        abstract: "A BlueZ simulator: several boxes, each with its own bus, and the radio between them.",
        discussion: """
            `bluez-sim --scenario FILE` starts one private bus per box of the scenario (or attaches \
            to the buses given with --attach), plays bluetoothd (org.bluez) on each, prints each \
            box's bus address, and simulates the air until SIGTERM or SIGINT. Point a client at a \
            box with DBUS_SYSTEM_BUS_ADDRESS. `bluez-sim ctl` drives the control service \
            (org.proximityd.BlueZSim); see docs/simulator.md.
            """,
        version: ProximitydVersion.string,
        subcommands: [Run.self, Ctl.self, Bench.self],
        defaultSubcommand: Run.self
    )
}
