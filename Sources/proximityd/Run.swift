import ArgumentParser
import DBusKit
import Foundation
import Logging
import ProximityNode
import ServiceLifecycle

/// `proximityd run`: reads the config file, applies the command line over it, and runs the node.
struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the node until SIGTERM or SIGINT.",
        discussion: """
            Every option may also be set in the config file, by its long name (clear-interval: 5); \
            an option given here wins over the file. The file also holds the regions. SIGHUP \
            re-reads it (docs/configuration.md).

            Exit status: 0 after a clean shutdown; 64 for a bad argument; 69 when the bus cannot be \
            reached, the name is taken or not allowed, or the bus goes away; 74 when the state \
            directory cannot be used; 78 when the config file cannot be read or is invalid (each \
            problem on its own line, FILE:LINE:COLUMN: message), or the state is corrupt.
            """
    )

    @Option(name: .long, help: ArgumentHelp(
        "The config file. Default: \(ConfigFile.defaultPath) if it exists; a file named here must exist.", valueName: "file"))
    var config: String?

    @Option(name: .long, help: ArgumentHelp("The bus to serve on: system, session, or a D-Bus address. Default: system.", valueName: "bus"))
    var bus: String?

    @Option(name: .customLong("bus-name"), help: ArgumentHelp(
        "The well-known name to own. Default: \(NodeConfiguration.defaultBusName).", valueName: "name"))
    var busName: String?

    @Option(name: .customLong("state-dir"), help: ArgumentHelp(
        "Where the node keeps its identity and what it has learnt. Default: $STATE_DIRECTORY, else /var/lib/proximityd.",
        valueName: "dir"))
    var stateDirectory: String?

    @Option(name: .long, help: ArgumentHelp("The node's human-readable name. Default: the host name.", valueName: "name"))
    var name: String?

    @Option(name: .customLong("service-uuid"), help: ArgumentHelp(
        "The general service UUID shared by all nodes of a deployment. Default: \(NodeConfiguration.defaultServiceUUID.lowercased).",
        valueName: "uuid"))
    var serviceUUID: String?

    @Option(name: .long, help: ArgumentHelp("The Bluetooth adapter to use. Default: hci0.", valueName: "name"))
    var adapter: String?

    @Flag(name: .customLong("power-on"), inversion: .prefixedNo,
          help: "Power the adapter on if it is off (--no-power-on: do not, whatever the config file says). Default: do not.")
    var powerOn: Bool?

    @Option(name: .customLong("clear-interval"), help: ArgumentHelp(
        "Seconds a peer stays in the found-devices table unheard (0 < s <= 3600). Default: the value last set over D-Bus (ClearInterval), else 10.",
        valueName: "seconds"))
    var clearInterval: Double?

    // Unconditional: the value is the next argument even when it looks like an option (-70).
    @Option(name: .customLong("measured-power"), parsing: .unconditional, help: ArgumentHelp(
        "This node's RSSI at 1 m in dBm (-127...20), advertised so that peer nodes range this node with it; also assumed for peer nodes that advertise none. Default: -59.",
        valueName: "dBm"))
    var measuredPower: Int?

    @Option(name: .customLong("path-loss-exponent"), help: ArgumentHelp(
        "The distance model's path-loss exponent (1.5...6). Default: 2; keep it unless the site was measured over a wide range of distances, and calibrate measured powers instead (docs/ranging.md).", valueName: "n"))
    var pathLossExponent: Double?

    @Option(name: .customLong("rssi-offset"), parsing: .unconditional, help: ArgumentHelp(
        "dB added to every RSSI sample this node receives, before ranging: positive for an adapter that reads low, negative for one that reads high (-40...40). SIGHUP applies a new value from the config file. Default: 0.",
        valueName: "dB"))
    var rssiOffset: Double?

    @Option(name: .customLong("max-peers"), help: ArgumentHelp("The most peers the found-devices table holds (1...100000). Default: 1024.",
                                                                valueName: "n"))
    var maxPeers: Int?

    @Flag(name: .customLong("beacons"), inversion: .prefixedNo,
          help: "Range iBeacon, AltBeacon and Eddystone beacons too (--no-beacons: nodes only). Default: beacons too.")
    var beacons: Bool?

    @Option(name: .customLong("log-level"), help: ArgumentHelp(
        "trace, debug, info, notice, warning, error or critical. Default: info.", valueName: "level"))
    var logLevel: String?

    /// The options given on the command line, checked; nil for those not given.
    func commandLine() throws(ValidationError) -> RunOptions {
        func checked<T, V>(_ option: String, _ value: V?, _ check: (V) throws(OptionProblem) -> T) throws(ValidationError) -> T? {
            guard let value else { return nil }
            do { return try check(value) } catch { throw ValidationError("--\(option): \(error.message)") }
        }
        var options = RunOptions()
        options.bus = try checked("bus", bus, RunOptions.checked(bus:))
        options.busName = try checked("bus-name", busName, RunOptions.checked(busName:))
        options.serviceUUID = try checked("service-uuid", serviceUUID, RunOptions.checked(serviceUUID:))
        options.logLevel = try checked("log-level", logLevel, RunOptions.checked(logLevel:))
        options.name = try checked("name", name, RunOptions.checked(name:))
        options.adapter = try checked("adapter", adapter, RunOptions.checked(adapter:))
        options.clearInterval = try checked("clear-interval", clearInterval, RunOptions.checked(clearInterval:))
        options.measuredPower = try checked("measured-power", measuredPower, RunOptions.checked(measuredPower:))
        options.pathLossExponent = try checked("path-loss-exponent", pathLossExponent, RunOptions.checked(pathLossExponent:))
        options.rssiOffset = try checked("rssi-offset", rssiOffset, RunOptions.checked(rssiOffset:))
        options.maxPeers = try checked("max-peers", maxPeers, RunOptions.checked(maxPeers:))
        options.stateDirectory = try checked("state-dir", stateDirectory, RunOptions.checked(stateDirectory:))
        options.powerOn = powerOn
        options.beacons = beacons
        return options
    }

    func validate() throws {
        _ = try commandLine()
        if let config, config.isEmpty { throw ValidationError("--config: must not be empty") }
    }

    func run() async throws {
        // The config file first: its log level decides what is logged from the start.
        let reloader = ConfigurationReloader(explicitPath: config, commandLine: try commandLine())
        let configuration: NodeConfiguration
        do {
            configuration = try reloader.read()
        } catch {
            fail(error.problems, status: StartupError.Status.config.rawValue)
        }
        LogLevelSwitch.shared.level = configuration.logLevel
        LoggingSystem.bootstrap { label in LogLevelSwitch.shared.handler(label: label) }
        let logger = Logger(label: "proximityd")
        do {
            let daemon = NodeDaemon(configuration, reloader: reloader, logger: logger)
            let group = ServiceGroup(configuration: .init(
                services: [.init(service: daemon, successTerminationBehavior: .gracefullyShutdownGroup,
                                 failureTerminationBehavior: .gracefullyShutdownGroup)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            ))
            try await group.run()
        } catch let error as StartupError {
            fail([error.description], status: error.status.rawValue)
        } catch {
            fail(["\(error)"], status: 1)
        }
    }

    /// Prints each line as `proximityd: error: line` and exits with `status`.
    private func fail(_ lines: [String], status: Int32) -> Never {
        FileHandle.standardError.write(Data(lines.map { "proximityd: error: \($0)\n" }.joined().utf8))
        Foundation.exit(status)
    }
}
