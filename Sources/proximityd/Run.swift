import ArgumentParser
import DBusKit
import Foundation
import Logging
import ProximityNode
import ServiceLifecycle

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the node until SIGTERM or SIGINT.",
        discussion: """
            Exit status: 0 after a clean shutdown; 64 for a bad argument; 69 when the bus cannot be \
            reached, the name is taken or not allowed, or the bus goes away; 74 when the state \
            directory cannot be used; 78 when the state is corrupt.
            """
    )

    @Option(name: .long, help: ArgumentHelp("The bus to serve on: system, session, or a D-Bus address.", valueName: "bus"))
    var bus: String = "system"

    @Option(name: .customLong("bus-name"), help: ArgumentHelp("The well-known name to own.", valueName: "name"))
    var busName: String = NodeConfiguration.defaultBusName.rawValue

    @Option(name: .customLong("state-dir"), help: ArgumentHelp(
        "Where the node keeps its identity and what it has learnt. Default: $STATE_DIRECTORY, else /var/lib/proximityd.",
        valueName: "dir"))
    var stateDirectory: String?

    @Option(name: .long, help: ArgumentHelp("The node's human-readable name. Default: the host name.", valueName: "name"))
    var name: String?

    @Option(name: .customLong("service-uuid"), help: ArgumentHelp(
        "The general service UUID shared by all nodes of a deployment.", valueName: "uuid"))
    var serviceUUID: String = NodeConfiguration.defaultServiceUUID.lowercased

    @Option(name: .long, help: ArgumentHelp("The Bluetooth adapter to use.", valueName: "name"))
    var adapter: String = "hci0"

    @Flag(name: .customLong("power-on"), help: "Power the adapter on if it is off.")
    var powerOn = false

    @Option(name: .customLong("clear-interval"), help: ArgumentHelp(
        "Seconds a peer stays in the found-devices table unheard (0 < s <= 3600). Default: the value last set over D-Bus (ClearInterval), else 10.",
        valueName: "seconds"))
    var clearInterval: Double?

    @Option(name: .customLong("measured-power"), help: ArgumentHelp(
        "This node's RSSI at 1 m in dBm, also assumed for peer nodes without an override (-127...20).", valueName: "dBm"))
    var measuredPower: Int16 = -59

    @Option(name: .customLong("path-loss-exponent"), help: ArgumentHelp(
        "The distance model's path-loss exponent: 2 in free space, 2.5-4 indoors (1.5...6).", valueName: "n"))
    var pathLossExponent: Double = 2

    @Option(name: .customLong("max-peers"), help: ArgumentHelp("The most peers the found-devices table holds (1...100000).",
                                                                valueName: "n"))
    var maxPeers: Int = 1024

    @Flag(name: .customLong("beacons"), inversion: .prefixedNo, help: "Range iBeacon, AltBeacon and Eddystone beacons too.")
    var beacons = true

    @Option(name: .customLong("log-level"), help: ArgumentHelp(
        "trace, debug, info, notice, warning, error or critical.", valueName: "level"))
    var logLevel: String = "info"

    func validate() throws {
        do { _ = try BusAddress(parsing: bus) } catch { throw ValidationError("--bus: \(error.message)") }
        do { _ = try BusName(busName) } catch { throw ValidationError("--bus-name: \(error)") }
        guard UUID(uuidString: serviceUUID) != nil else {
            throw ValidationError("--service-uuid: '\(serviceUUID)' is not a UUID such as \(NodeConfiguration.defaultServiceUUID.lowercased)")
        }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level: '\(logLevel)' is not one of trace, debug, info, notice, warning, error, critical")
        }
        if let name {
            guard !name.isEmpty, name.utf8.count <= 248, !name.utf8.contains(0) else {
                throw ValidationError("--name: must be 1 to 248 bytes of UTF-8 (the Bluetooth name limit)")
            }
        }
        guard !adapter.isEmpty, adapter.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7a) || $0 == 0x5f }) else {
            throw ValidationError("--adapter: '\(adapter)' is not an adapter name such as hci0")
        }
        if let clearInterval, !NodeSettings.clearIntervalRange.contains(clearInterval) {
            throw ValidationError("--clear-interval: \(clearInterval) is not a number of seconds above 0 and at most 3600")
        }
        if let problem = NodeSettings.problem(measuredPower: measuredPower) {
            throw ValidationError("--measured-power: \(problem)")
        }
        guard (1.5...6).contains(pathLossExponent) else {
            throw ValidationError("--path-loss-exponent: \(pathLossExponent) is not between 1.5 and 6")
        }
        guard (1...100_000).contains(maxPeers) else {
            throw ValidationError("--max-peers: \(maxPeers) is not between 1 and 100000")
        }
        if let stateDirectory, stateDirectory.isEmpty {
            throw ValidationError("--state-dir: must not be empty")
        }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "proximityd")
        var configuration = NodeConfiguration(
            bus: try BusAddress(parsing: bus),
            busName: try BusName(busName),
            serviceUUID: UUID(uuidString: serviceUUID)!,
            name: name ?? NodeConfiguration.hostName(),
            stateDirectory: StateDirectory.resolve(explicit: stateDirectory),
            adapter: adapter,
            powerOn: powerOn
        )
        configuration.clearInterval = clearInterval
        configuration.measuredPower = measuredPower
        configuration.maxPeers = maxPeers
        configuration.pathLossExponent = pathLossExponent
        configuration.trackBeacons = beacons
        do {
            let daemon = NodeDaemon(configuration, logger: logger)
            let group = ServiceGroup(configuration: .init(
                services: [.init(service: daemon, successTerminationBehavior: .gracefullyShutdownGroup,
                                 failureTerminationBehavior: .gracefullyShutdownGroup)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            ))
            try await group.run()
        } catch let error as StartupError {
            fail(error.description, status: error.status.rawValue)
        } catch {
            fail("\(error)", status: 1)
        }
    }

    private func fail(_ message: String, status: Int32) -> Never {
        FileHandle.standardError.write(Data("proximityd: error: \(message)\n".utf8))
        Foundation.exit(status)
    }
}
