import ArgumentParser
import BlueZSim
import DBusKit
import Foundation
import Logging
import ProximityTesting
import ServiceLifecycle
import SimTesting

/// `bluez-sim run --scenario FILE`: the simulator, until SIGTERM or SIGINT.
struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start the boxes of a scenario and simulate the air between them (the default).")

    @Option(help: "The scenario file (.json, .yaml or .yml).")
    var scenario: String

    @Flag(help: "Print the boxes' bus addresses as one JSON document.")
    var json = false

    @Option(name: .customLong("attach"), help: ArgumentHelp(
        "Use an existing bus for a box instead of starting one (NAME=ADDRESS, repeatable).", valueName: "name=address"))
    var attachments: [String] = []

    @Option(help: "Write each box's bus address to DIR/NAME.address and all of them to DIR/boxes.json.")
    var runtimeDir: String?

    @Option(help: ArgumentHelp(
        "Keep each box's bonds under DIR/NAME/, as bluetoothd keeps them under /var/lib/bluetooth (else in memory only).",
        valueName: "dir"))
    var storage: String?

    @Option(help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "warning"

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown log level '\(logLevel)'") }
        for a in attachments {
            let parts = a.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, !parts[0].isEmpty, parts[1].contains(":") else {
                throw ValidationError("--attach takes NAME=ADDRESS, such as alpha=unix:path=/run/box/alpha, not '\(a)'")
            }
        }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .warning
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "bluez-sim")
        let loaded: Scenario
        do {
            loaded = try Scenario.load(from: URL(fileURLWithPath: scenario))
        } catch {
            throw ValidationError("\(error)")
        }
        var given: [String: String] = [:]
        for a in attachments {
            let parts = a.split(separator: "=", maxSplits: 1).map(String.init)
            guard loaded.box(named: parts[0]) != nil else { throw ValidationError("--attach: the scenario has no box '\(parts[0])'") }
            given[parts[0]] = parts[1]
        }

        let (json, runtimeDir) = (json, runtimeDir)
        let simulation = Simulation(scenario: loaded, attaching: given, storage: storage.map { URL(fileURLWithPath: $0) },
                                    logger: logger) { boxes in
            try Self.report(loaded, boxes.addresses, json: json, runtimeDir: runtimeDir)
        }
        let group = ServiceGroup(configuration: .init(
            services: [.init(service: simulation, successTerminationBehavior: .gracefullyShutdownGroup,
                             failureTerminationBehavior: .gracefullyShutdownGroup)],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        ))
        try await group.run()
    }

    /// Prints each box's bus address (and writes them to `runtimeDir`).
    private static func report(_ scenario: Scenario, _ addresses: [String: String], json: Bool, runtimeDir: String?) throws {
        let boxes: [[String: String]] = scenario.boxes.map {
            ["name": $0.name, "address": $0.address, "adapter": $0.adapter, "bus": addresses[$0.name] ?? ""]
        }
        let document: [String: Any] = [
            "boxes": boxes,
            "control": ["name": ControlService.busName.rawValue, "path": ControlService.objectPath.rawValue,
                        "interface": ControlService.interfaceName.rawValue],
        ]
        let data = try JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .withoutEscapingSlashes])
        if let runtimeDir {
            let dir = URL(fileURLWithPath: runtimeDir)
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            for box in scenario.boxes {
                try ((addresses[box.name] ?? "") + "\n").write(to: dir.appendingPathComponent("\(box.name).address"),
                                                            atomically: true, encoding: .utf8)
            }
            try data.write(to: dir.appendingPathComponent("boxes.json"), options: .atomic)
        }
        // Written straight to the descriptor: a script reading a pipe sees it at once.
        if json {
            FileHandle.standardOutput.write(data + Data("\n".utf8))
        } else {
            let lines = scenario.boxes.map { "\($0.name) \(addresses[$0.name] ?? "")\n" }.joined()
            FileHandle.standardOutput.write(Data(lines.utf8))
        }
    }
}

/// The simulation as a service: starts the boxes, reports their buses, simulates the air until
/// the group shuts down gracefully (SIGTERM or SIGINT), then stops the boxes.
struct Simulation: Service {
    let scenario: Scenario
    /// Buses given for boxes (`--attach`), by box.
    let attaching: [String: String]
    let storage: URL?
    let logger: Logger
    /// Called once every box is up: `org.bluez` and the control service are owned on every bus.
    let ready: @Sendable (SimBoxes) throws -> Void

    func run() async throws {
        try await withSimBoxes(scenario, time: .real, attaching: attaching, storage: storage, logger: logger) { boxes in
            try ready(boxes)
            try await gracefulShutdown()
        }
    }
}
