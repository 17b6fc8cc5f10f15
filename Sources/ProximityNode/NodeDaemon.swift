import DBusKit
import Foundation
import Logging
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
/// ``run()`` starts the node (failing early and clearly with a ``StartupError``), serves until a
/// graceful shutdown or until the bus goes away, and on the way out closes the connection cleanly,
/// releasing its name. Starting inside the running group matters: under `Type=dbus` systemd may
/// send SIGTERM the moment the name appears, and the group's signal handling is already in place.
public final class NodeDaemon: Service, Sendable {
    public let configuration: NodeConfiguration
    let logger: Logger

    public init(_ configuration: NodeConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// What a started node holds.
    struct Running: Sendable {
        let identity: UUID
        let connection: DBusConnection
        let nodeObject: DBusObject
        let shared: NodeShared
        let state: StateDirectory
    }

    static func start(_ configuration: NodeConfiguration, logger: Logger) async throws(StartupError) -> Running {
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
        let settings: NodeSettings
        do {
            state = try StateDirectory(configuration.stateDirectory)
            settings = try NodeSettings.load(from: state)
            identity = try NodeIdentity.loadOrCreate(in: state, logger: logger)
        } catch {
            await connection.close()
            throw StartupError(error.kind == .corrupt ? .config : .ioError, error.description)
        }

        // Objects first, then the name: nobody sees the name without the objects (zbus's rule).
        let status = NodeStatus(identifier: identity.lowercased, serviceUUID: configuration.serviceUUID.lowercased,
                                name: configuration.name, advertising: false, discovering: false,
                                adapter: configuration.adapter,
                                clearInterval: configuration.clearInterval ?? settings.clearInterval ?? RangingConfiguration().clearInterval,
                                measuredPower: configuration.measuredPower)
        let shared = NodeShared(clearInterval: status.clearInterval, settings: settings, directory: state)
        let nodeObject: DBusObject
        do {
            try await connection.addObjectManager(at: NodeAPI.rootPath)
            nodeObject = try await connection.export([NodeAPI.node1Interface(status: status, shared: shared)], at: NodeAPI.rootPath)
        } catch {
            await connection.close()
            throw StartupError(.unavailable, "cannot export the node's objects: \(error)")
        }

        let reply: RequestNameReply
        do {
            reply = try await connection.requestName(configuration.busName, flags: [.doNotQueue])
        } catch let error as DBusError where error.name == .accessDenied {
            await connection.close()
            throw StartupError(.unavailable, "not allowed to own \(configuration.busName) on the \(describe(configuration.bus)) (run as root or as a member of group proximityd; see dbus/org.proximityd.conf): \(error.message)")
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
        return Running(identity: identity, connection: connection, nodeObject: nodeObject, shared: shared, state: state)
    }

    private enum Ending { case shutdownRequested, busLost }

    public func run() async throws {
        let node = try await NodeDaemon.start(configuration, logger: logger)
        let connection = node.connection
        let engine = NodeEngine(configuration: configuration, identity: node.identity, connection: connection,
                                nodeObject: node.nodeObject, shared: node.shared, state: node.state, logger: logger)
        let ending: Ending = await withTaskGroup(of: Ending?.self) { group in
            group.addTask {
                await engine.run()
                return nil
            }
            group.addTask { [connection] in
                await connection.waitUntilDisconnected()
                return Task.isCancelled ? nil : .busLost
            }
            group.addTask {
                do {
                    try await gracefulShutdown()
                    return .shutdownRequested
                } catch {
                    return Task.isCancelled ? nil : .shutdownRequested
                }
            }
            var result: Ending = .shutdownRequested
            while let next = await group.next() {
                if let next { result = next; break }
            }
            group.cancelAll()
            return result
        }
        switch ending {
        case .shutdownRequested:
            logger.info("shutting down")
            await engine.stop()
            await connection.close()
            logger.info("stopped")
        case .busLost:
            throw StartupError(.unavailable, "lost the connection to the \(describe(configuration.bus))")
        }
    }
}

func alreadyOwned(_ configuration: NodeConfiguration, _ owner: BusName?) -> String {
    "\(configuration.busName) is already owned on the \(describe(configuration.bus))\(owner.map { " by \($0)" } ?? ""): is another proximityd running? (use --bus-name to run several nodes on one bus)"
}

func describe(_ bus: BusAddress) -> String {
    switch bus {
    case .system: "system bus"
    case .session: "session bus"
    case .address(let a): "bus at \(a)"
    }
}
