import BlueZ
import DBusKit
import Foundation
import Logging
import ProximityAPI
import ProximityCore
import ServiceLifecycle

/// A failure to start, with the one line to print and the exit status to use.
public struct StartupError: Error, CustomStringConvertible, Sendable {
    /// sysexits(3) values, documented in `docs/architecture.md`.
    public enum Status: Int32, Sendable {
        case unavailable = 69   // EX_UNAVAILABLE: no bus, name taken, access denied
        case ioError = 74       // EX_IOERR: state directory unusable
        case config = 78        // EX_CONFIG: corrupt state, bad configuration
    }
    public let status: Status
    public let description: String
    public init(_ status: Status, _ description: String) {
        self.status = status
        self.description = description
    }
}

/// The node as a service: run it in a `ServiceGroup` with SIGTERM and SIGINT as graceful-shutdown
/// signals.
///
/// ``run()`` starts the node (failing early and clearly with a ``StartupError``), then runs its
/// parts as services of one `ServiceGroup`, started in this order and shut down in reverse: the
/// bus connection, the BlueZ mirror, the engine, the bus exporter. Starting inside the running
/// group matters: under `Type=dbus` systemd may send SIGTERM the moment the name appears, and the
/// group's signal handling is already in place. A lost bus ends the node with ``StartupError``
/// (exit 69).
public final class NodeDaemon: Service, Sendable {
    public let configuration: NodeConfiguration
    /// Reads the configuration again for `SIGHUP` and `Node1.Reload()`; nil: neither reloads.
    public let reloader: ConfigurationReloader?
    let clock: any NodeClock
    let logger: Logger

    public init(_ configuration: NodeConfiguration, reloader: ConfigurationReloader? = nil, clock: any NodeClock = SystemNodeClock(),
                logger: Logger) {
        self.configuration = configuration
        self.reloader = reloader
        self.clock = clock
        self.logger = logger
    }

    /// A started node: on the bus with its name, its parts made but not yet running.
    public struct Running: Sendable {
        public let identity: UUID
        public let connection: DBusConnection
        public let mirror: BlueZObjectMirror
        public let engine: NodeEngine
        public let exporter: BusExporter
        /// The MQTT publishing (idle while the configuration has no `mqtt:`).
        public let publisher: MQTTPublisher
        /// `SIGHUP` and `Node1.Reload()`.
        public let reload: ConfigurationReload
        /// The bus, as the log and errors name it.
        public let bus: String
        /// The exporter's subscription, made before the node took its name, so the exporter sees
        /// every event (a command may come the moment the name is taken).
        let exporterEvents: NodeEventStream
        let publisherEvents: NodeEventStream
        let reloads: Bool

        /// The node's parts as services, in start order.
        public func services(logger: Logger) -> [any Service] {
            var services: [any Service] = [
                ConnectionService(connection: connection, bus: bus),
                MirrorService(mirror: mirror, logger: logger),
                EngineService(engine: engine),
                ExporterService(exporter: exporter, events: exporterEvents),
                PublisherService(publisher: publisher, events: publisherEvents),
            ]
            if reloads { services.append(ReloadService(reload: reload)) }
            return services
        }
    }

    public static func start(_ configuration: NodeConfiguration, reloader: ConfigurationReloader? = nil,
                             clock: any NodeClock = SystemNodeClock(), logger: Logger) async throws(StartupError) -> Running {
        let connection: DBusConnection
        do {
            connection = try await DBusConnection.connect(to: configuration.bus, logger: logger)
        } catch {
            throw StartupError(.unavailable, "cannot connect to the \(describe(configuration.bus)): \(error.message)")
        }

        // A quick look before touching any state, so a second node on the same bus fails at once
        // with one line. RequestName below still decides, should two start together.
        if let owner = try? await connection.nameOwner(of: configuration.busName) {
            await connection.close()
            throw StartupError(.unavailable, alreadyOwned(configuration, owner))
        }

        let identity: UUID
        let state: StateDirectory
        let saved: NodeStep.Saved
        let eventLog: EventLog
        do {
            state = try StateDirectory(configuration.stateDirectory)
            let interrupted = state.removeInterruptedWrites()
            if !interrupted.isEmpty {
                logger.notice("removed the temporary files of \(interrupted.count) interrupted writes from the state directory",
                              metadata: ["files": "\(interrupted.joined(separator: " "))"])
            }
            saved = try StateFiles(state: state, clock: clock, logger: logger).load()
            eventLog = try EventLog(state: state, clock: clock)
            identity = try NodeIdentity.loadOrCreate(in: state, logger: logger)
        } catch {
            await connection.close()
            throw StartupError(error.kind == .corrupt ? .config : .ioError, error.description)
        }

        let mirror = BlueZObjectMirror(connection: connection, logger: logger)
        let engine = NodeEngine(configuration: configuration, identity: identity, connection: connection, mirror: mirror,
                                state: state, saved: saved, eventLog: eventLog, clock: clock, logger: logger)
        let exporter = BusExporter(connection: connection, logger: logger)
        let exporterEvents = engine.events.subscribe(buffer: 1024)
        let publisher = MQTTPublisher(identity: identity, configuration: configuration, engine: engine, state: state, eventLog: eventLog,
                                      clock: clock, logger: logger)
        // Events are never lost for MQTT (the event log is its outbox); the buffer only bounds
        // reports and state.
        let publisherEvents = engine.events.subscribe(buffer: 4096)
        let reload = ConfigurationReload(reloader: reloader, current: configuration, engine: engine, exporter: exporter,
                                         publisher: publisher, logger: logger)

        // Objects first, then the name: nobody sees the name without the objects (zbus's rule).
        let properties = NodeProperties(identifier: identity.lowercased, serviceUUID: configuration.serviceUUID.lowercased,
                                        name: configuration.name, adapter: configuration.adapter, advertising: false,
                                        discovering: false, health: AdapterLink.Health.starting.state,
                                        healthDetail: AdapterLink.Health.starting.detail,
                                        clearInterval: NodeStep.clearInterval(configuration, saved.settings),
                                        measuredPower: configuration.measuredPower,
                                        pathLossExponent: configuration.pathLossExponent, rssiOffset: configuration.rssiOffset,
                                        zoneDistances: ["immediate": configuration.zones.immediate, "near": configuration.zones.near],
                                        peerNames: Dictionary(uniqueKeysWithValues: await engine.read { $0.peerNames }
                                            .map { ($0.key.rawValue, $0.value) }),
                                        irks: await engine.read { $0.irkSources })
        do {
            try await connection.addObjectManager(at: ProximityBus.rootPath)
            // BlueZ's callbacks (the advertisement, the GATT application) in a tree of their own,
            // outside the one clients enumerate.
            try await connection.addObjectManager(at: BlueZExports.root)
            let commands = NodeCommands(engine: engine, exporter: exporter)
            let nodeObject = try await connection.export([
                NodeInterface.declaration(properties, commands: commands, exporter: exporter,
                                          reload: { () async throws(DBusError) in try await reload.reload() }, connection: connection),
                RegionMonitorInterface.declaration(commands: commands),
                AlertManagerInterface.declaration(commands: commands, connection: connection),
                ProfileInterface.declaration(commands: commands, attributes: await engine.read { $0.profileAttributes }),
                EventLogInterface.declaration(engine: engine),
            ], at: ProximityBus.rootPath)
            await exporter.attach(node: nodeObject)
            // The regions and alerts as they are at start, before the node takes its name (no
            // signals).
            await exporter.show(await engine.read { $0.regionSnapshot })
            await exporter.show(await engine.read { $0.alertSnapshot })
        } catch {
            await connection.close()
            throw StartupError(.unavailable, "cannot export the node's objects: \(error)")
        }

        let reply: RequestNameReply
        do {
            reply = try await connection.requestName(configuration.busName, flags: [.doNotQueue])
        } catch let error as DBusError where error.name == .accessDenied {
            await connection.close()
            throw StartupError(.unavailable, "not allowed to own \(configuration.busName) on the \(describe(configuration.bus)) " +
                "(run as root or as a member of group proximityd; see dbus/org.proximityd.conf): \(error.message)")
        } catch {
            await connection.close()
            throw StartupError(.unavailable, "cannot request \(configuration.busName) on the \(describe(configuration.bus)): \(error)")
        }
        switch reply {
        case .primaryOwner, .alreadyOwner:
            break
        case .exists, .inQueue:
            let owner = (try? await connection.nameOwner(of: configuration.busName)).flatMap { $0 }
            await connection.close()
            throw StartupError(.unavailable, alreadyOwned(configuration, owner))
        }
        logger.info("node ready", metadata: [
            "node.id": "\(identity.lowercased)",
            "dbus.name": "\(configuration.busName)",
            "dbus.bus": "\(configuration.bus)",
            "dbus.unique": "\(connection.uniqueName)",
        ])
        // Which file the node runs on, once it runs (a start that fails says one line only).
        if let file = configuration.configFile {
            logger.info("loaded the config file", metadata: [
                "config.file": "\(file)", "regions": "\(configuration.regions.count)", "alerts": "\(configuration.alerts.count)",
                "rules": "\(configuration.rules.count)",
            ])
        } else {
            logger.info("running without a config file: there is none at \(ConfigFile.defaultPath) and --config names none")
        }
        return Running(identity: identity, connection: connection, mirror: mirror, engine: engine, exporter: exporter,
                       publisher: publisher, reload: reload, bus: describe(configuration.bus), exporterEvents: exporterEvents,
                       publisherEvents: publisherEvents, reloads: reloader != nil)
    }

    public func run() async throws {
        let node = try await NodeDaemon.start(configuration, reloader: reloader, clock: clock, logger: logger)
        let group = ServiceGroup(configuration: .init(
            services: node.services(logger: logger).map {
                .init(service: $0, successTerminationBehavior: .gracefullyShutdownGroup,
                      failureTerminationBehavior: .gracefullyShutdownGroup)
            },
            logger: logger))
        try await withGracefulShutdownHandler {
            try await group.run()
        } onGracefulShutdown: { [logger] in
            logger.info("shutting down")
        }
        logger.info("stopped")
    }
}

/// The bus connection as a service: the last to stop. It ends the node if the bus goes away, and
/// closes the connection (releasing the name) at shutdown.
struct ConnectionService: Service {
    let connection: DBusConnection
    let bus: String

    func run() async throws {
        await cancelWhenGracefulShutdown { [connection] in await connection.waitUntilDisconnected() }
        // Disconnected without our closing it: the bus went away, even when another service (the
        // mirror, say) noticed first and began the shutdown.
        if !connection.isConnected { throw StartupError(.unavailable, "lost the connection to the \(bus)") }
        await connection.close()
    }
}

/// The mirror of BlueZ's objects as a service.
struct MirrorService: Service {
    let mirror: BlueZObjectMirror
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown { [mirror, logger] in
            do { try await mirror.run() } catch { logger.error("cannot follow BlueZ", metadata: ["error": "\(error)"]) }
        }
    }
}

/// The engine as a service: runs until shutdown, then unregisters from BlueZ.
struct EngineService: Service {
    let engine: NodeEngine

    func run() async throws {
        await cancelWhenGracefulShutdown { [engine] in await engine.run() }
        await engine.stop()
    }
}

/// The bus exporter as a service: the first to stop.
struct ExporterService: Service {
    let exporter: BusExporter
    let events: NodeEventStream

    func run() async throws {
        await cancelWhenGracefulShutdown { [exporter, events] in await exporter.run(events) }
    }
}

/// MQTT publishing as a service: stops before the bus exporter, saying `offline` first.
struct PublisherService: Service {
    let publisher: MQTTPublisher
    let events: NodeEventStream

    func run() async throws {
        await cancelWhenGracefulShutdown { [publisher, events] in await publisher.run(events) }
    }
}

func alreadyOwned(_ configuration: NodeConfiguration, _ owner: BusName?) -> String {
    "\(configuration.busName) is already owned on the \(describe(configuration.bus))\(owner.map { " by \($0)" } ?? ""): " +
        "is another proximityd running? (use --bus-name to run several nodes on one bus)"
}

func describe(_ bus: BusAddress) -> String {
    switch bus {
    case .system: "system bus"
    case .session: "session bus"
    case .address(let a): "bus at \(a)"
    }
}
