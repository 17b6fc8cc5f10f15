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

            Examples:
              $ proximityd run
                The node with /etc/proximityd/proximityd.yaml, if it exists.
              $ proximityd run --bus session --name desk --log-level debug
                A node on the session bus, named desk, logging more.
            """
    )

    @Option(name: .long, help: ArgumentHelp(
        "The config file. Default: \(ConfigFile.defaultPath) if it exists; a file named here must exist.", valueName: "file"))
    var config: String?

    // The run options: one property each, as ArgumentParser needs, with the name, help and
    // parsing of its declaration (RunOption); commandLine() checks them with it.

    @Option(name: .customLong(RunOption.bus.key), help: RunOption.bus.argumentHelp)
    var bus: String?

    @Option(name: .customLong(RunOption.busName.key), help: RunOption.busName.argumentHelp)
    var busName: String?

    @Option(name: .customLong(RunOption.stateDirectory.key), help: RunOption.stateDirectory.argumentHelp)
    var stateDirectory: String?

    @Option(name: .customLong(RunOption.name.key), help: RunOption.name.argumentHelp)
    var name: String?

    @Option(name: .customLong(RunOption.serviceUUID.key), help: RunOption.serviceUUID.argumentHelp)
    var serviceUUID: String?

    @Option(name: .customLong(RunOption.adapter.key), help: RunOption.adapter.argumentHelp)
    var adapter: String?

    @Flag(name: .customLong(RunOption.powerOn.key), inversion: .prefixedNo, help: RunOption.powerOn.argumentHelp)
    var powerOn: Bool?

    @Option(name: .customLong(RunOption.clearInterval.key), parsing: RunOption.clearInterval.parsing,
            help: RunOption.clearInterval.argumentHelp)
    var clearInterval: Double?

    @Option(name: .customLong(RunOption.measuredPower.key), parsing: RunOption.measuredPower.parsing,
            help: RunOption.measuredPower.argumentHelp)
    var measuredPower: Int?

    @Option(name: .customLong(RunOption.pathLossExponent.key), parsing: RunOption.pathLossExponent.parsing,
            help: RunOption.pathLossExponent.argumentHelp)
    var pathLossExponent: Double?

    @Option(name: .customLong(RunOption.rssiOffset.key), parsing: RunOption.rssiOffset.parsing,
            help: RunOption.rssiOffset.argumentHelp)
    var rssiOffset: Double?

    @Option(name: .customLong(RunOption.maxPeers.key), parsing: RunOption.maxPeers.parsing, help: RunOption.maxPeers.argumentHelp)
    var maxPeers: Int?

    @Flag(name: .customLong(RunOption.beacons.key), inversion: .prefixedNo, help: RunOption.beacons.argumentHelp)
    var beacons: Bool?

    @Option(name: .customLong(RunOption.logLevel.key), help: RunOption.logLevel.argumentHelp)
    var logLevel: String?

    /// The options given on the command line, checked by their declarations; nil for those not
    /// given. The first problem, in the order of ``RunOption/all``, is the one reported.
    func commandLine() throws(ValidationError) -> RunOptions {
        var options = RunOptions()
        func take<Input>(_ option: RunOption, _ value: Input?) throws(ValidationError) {
            do { try option.take(value, into: &options) } catch { throw ValidationError("--\(option.key): \(error.message)") }
        }
        try take(.bus, bus)
        try take(.busName, busName)
        try take(.stateDirectory, stateDirectory)
        try take(.name, name)
        try take(.serviceUUID, serviceUUID)
        try take(.adapter, adapter)
        try take(.powerOn, powerOn)
        try take(.clearInterval, clearInterval)
        try take(.measuredPower, measuredPower)
        try take(.pathLossExponent, pathLossExponent)
        try take(.rssiOffset, rssiOffset)
        try take(.maxPeers, maxPeers)
        try take(.beacons, beacons)
        try take(.logLevel, logLevel)
        return options
    }

    func validate() throws {
        _ = try commandLine()
        if let config, config.isEmpty { throw ValidationError("--config: must not be empty") }
    }

    func run() async throws {
        SystemAllocator.configure()
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

extension RunOption {
    /// The declaration's help and value name, for ArgumentParser.
    var argumentHelp: ArgumentHelp {
        ArgumentHelp(help, valueName: valueName.isEmpty ? nil : valueName)
    }

    /// Unconditional for an option whose value may be negative (`--measured-power -70`): the
    /// value is the next argument even when it looks like an option.
    var parsing: SingleValueParsingStrategy {
        takesNegativeValues ? .unconditional : .next
    }
}
