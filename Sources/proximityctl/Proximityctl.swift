import ArgumentParser
import ProximityVersion

/// `proximityctl`: the root command only lists the subcommands.
@main
struct Proximityctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "proximityctl",
        abstract: "Query and control a proximityd node over D-Bus.",
        version: ProximitydVersion.string,
        subcommands: [Status.self, Peers.self, Watch.self, Regions.self, Alerts.self, ProfileCommand.self, Track.self, Clear.self, Rules.self,
                      Events.self, Record.self, Calibrate.self, FleetCommand.self, Doctor.self]
    )
}
