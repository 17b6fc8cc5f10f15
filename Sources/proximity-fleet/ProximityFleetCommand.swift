import ArgumentParser
import FleetMap
import ProximityVersion
import Foundation
import Logging
import MQTTKit
import ProximityCore
import ProximityCommandLine
import ProximityFleet
import ProximityMQTT
import ServiceLifecycle

/// `proximity-fleet`: the fleet's view, from every node's MQTT reports. The service is `run`, the
/// default subcommand, so `proximity-fleet --broker …` (the unit's form) runs it.
@main
struct ProximityFleetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "proximity-fleet",
        abstract: "Decide each device's room, and play recordings through the fleet's positioning.",
        discussion: """
            run (the default: proximity-fleet --broker ... is proximity-fleet run --broker ...) is the \
            service: each device's room from every proximityd node's reports on an MQTT broker \
            (docs/fleet.md). replay plays a recording of RSSI samples through the nodes' ranging \
            and the fleet's positioning on a floor plan, walk merges the nodes' recordings of a \
            calibration walk with its marks, calibrate fits a plan's calibration from it, and \
            check-plan checks a floor plan (docs/positioning.md).

            Examples:
              $ proximity-fleet run --broker mqtt://broker.lan
                The service: every device's room, from the nodes under proximityd/.
              $ proximity-fleet replay --plan house.yaml walk.csv --score
                A recorded walk through the positioning, scored against its truth.
            """,
        version: ProximitydVersion.string,
        subcommands: [Run.self, Replay.self, Walk.self, CalibrateCommand.self, CheckPlan.self],
        defaultSubcommand: Run.self
    )

    /// Errors in the one style: ``runReportingErrors(_:)``.
    static func main() async {
        await runReportingErrors(nil)
    }
}

/// `proximity-fleet run`: which box each tracked device is nearest to.
struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Decide each device's room from every proximityd node's reports on an MQTT broker.",
        discussion: """
            Subscribes to <root>/+/peers/+ (each node's distance reports) and <root>/+/status, \
            decides each device's room (the nearest node, with hysteresis; not_home when no node \
            has reported it for --away-after seconds), and publishes it retained on \
            <prefix>/devices/<device>/room, with its attributes, a live table on <prefix>/table \
            and Home Assistant device_tracker discovery (source_type bluetooth_le) whose \
            availability is this service's <prefix>/status. After a restart it takes each \
            device's room back from its retained messages. The default subcommand: \
            proximity-fleet --broker ... runs it. docs/fleet.md.

            With --plan, each device that nodes in the plan hear is placed on the floor plan once \
            a second, published on <prefix>/devices/<device>/position, and its room is the room \
            holding its position (home when it is in none). Only the plan's nodes count: the \
            reports of any other node are ignored, and each such node is logged once; \
            --outside-nodes nearest takes them instead, for nearest-node rooms of the devices \
            only they hear. SIGHUP reads the plan again (a node it adds is taken from its next \
            report, one it removes no longer); a plan with problems is logged and the running \
            one kept. docs/fleet.md, Floor plan and positions.

            With --http, a live map (read-only) is served on that address: the plan, each \
            device's position with its uncertainty, the devices' and nodes' tables, updated each \
            second; and /api/plan, /api/devices, /api/nodes as JSON, /events as server-sent \
            events. Off by default; behind a reverse proxy for remote access \
            (docs/positioning.md, The live map).

            Exit status: 0 after SIGTERM or SIGINT; 64 for a bad argument; 65 when the plan has \
            problems (each on its own line, FILE:LINE:COLUMN: message); 66 when the password \
            file or the plan cannot be read; 69 when the map cannot listen on --http's address; 75 \
            when another proximity-fleet with the same --prefix is online on the broker (it waits \
            1.5 keepalives for a crashed one's will first). Errors are one line on standard error, \
            proximity-fleet: error: MESSAGE (a bad argument adds a line naming the help to read).

            Examples:
              $ proximity-fleet run --broker mqtt://broker.lan
                Every device's room, from the nodes under proximityd/.
              $ proximity-fleet run --broker mqtts://broker.lan --username fleet \\
                  --password-file /etc/proximity-fleet/password --home-distance 15
                Over TLS, logged in; only reports nearer than 15 m give a room.
              $ proximity-fleet run --broker mqtt://broker.lan \\
                  --plan /etc/proximityd/plan.yaml
                Positions on the floor plan, and rooms from its outlines.
              $ proximity-fleet run --broker mqtt://broker.lan \\
                  --plan /etc/proximityd/plan.yaml --http 127.0.0.1:8080
                The same, with the live map on http://127.0.0.1:8080/.
              $ proximity-fleet run --broker mqtt://broker.lan \\
                  --plan /etc/proximityd/house.yaml --outside-nodes nearest
                The house on the plan; a device only the garage's box (not in the
                plan) hears gets the garage's room, without a position.
            """
    )

    @OptionGroup var connection: BrokerOptions

    @Option(name: .customLong("client-id"), help: ArgumentHelp("The MQTT client id.", valueName: "id"))
    var clientID = "proximity-fleet"

    @Option(help: ArgumentHelp(
        "The MQTT keepalive, seconds (5...3600): the broker says offline for a service that died without a word 1.5 times this later, " +
            "and a service started meanwhile with the same --prefix waits that long for it.",
        valueName: "seconds"))
    var keepalive = 30

    @Option(help: ArgumentHelp("The nodes' topic root: their prefixes are <root>/<node name>.", valueName: "topic"))
    var root = "proximityd"

    @Option(help: ArgumentHelp("This service's topics start with it.", valueName: "topic"))
    var prefix = "proximity-fleet"

    @Option(help: ArgumentHelp("fleet (the nearest node with hysteresis), nearest (room-assistant's) or bermuda (Bermuda's).",
                               valueName: "rule"))
    var rule: RoomRuleKind = .fleet

    @Option(name: .customLong("track"), help: ArgumentHelp(
        "Track only this device (a peer identifier); repeat for several. Default: every device.",
        valueName: "id"))
    var track: [String] = []

    @Option(name: .customLong("stale-after"), help: ArgumentHelp("A node's report counts for this long, seconds (1...600).",
                                                                 valueName: "seconds"))
    var staleAfter: Double = RoomDecider.Configuration().staleAfter

    @Option(name: .customLong("away-after"), help: ArgumentHelp(
        "not_home once no node reported a device for this long, seconds (stale-after...86400).",
        valueName: "seconds"))
    var awayAfter: Double = RoomDecider.Configuration().awayAfter

    @Option(name: .customLong("home-distance"), help: ArgumentHelp(
        "A node can give a device a room, and keeps it home, only while most of its last 9 reports (within 60 s) put it nearer than " +
            "this, metres (1...1000); a device no node hears near so for --away-after seconds is not_home. The default keeps devices " +
            "that stand in a room home with uncalibrated nodes; lower it (8 to 10 m in a flat) only where the nodes' far estimates " +
            "hold up (docs/fleet.md, Far from every node).",
        valueName: "metres"))
    var homeDistance: Double = RoomDecider.Configuration().homeDistance

    @Flag(name: .customLong("discovery"), inversion: .prefixedNo, help: "Home Assistant discovery.")
    var discovery = true

    @Option(name: .customLong("discovery-prefix"), help: ArgumentHelp("Home Assistant's discovery prefix.",
                                                                      valueName: "topic"))
    var discoveryPrefix = "homeassistant"

    @Option(name: .customLong("plan"), help: ArgumentHelp(
        "A floor plan (docs/positioning.md): devices its nodes hear get positions, and rooms from its outlines. SIGHUP reads it again.",
        valueName: "file"))
    var plan: String?

    @Option(name: .customLong("outside-nodes"), help: ArgumentHelp(
        "With --plan, the reports of nodes not in the plan: ignore (the default; each such node is logged once) or nearest " +
            "(a device only they hear gets the nearest of them as its room, without a position).",
        valueName: "policy"))
    var outsideNodes: OutsideNodes?

    @Option(name: .customLong("http"), help: ArgumentHelp(
        "Serve the live map and its JSON on this address and port (127.0.0.1:8080; [::1]:8080; port 0: any free one, logged). " +
            "Read-only; off by default.",
        valueName: "address:port"))
    var http: String?

    @Flag(name: .customLong("edit"), help: ArgumentHelp(
        "With --plan and --http: the map edits the plan (PUT /api/plan, with the token --edit-token holds); it is checked as " +
            "check-plan does, saved in place of the file and taken at once. Loopback addresses only, unless --edit-remote."))
    var edit = false

    @Option(name: .customLong("edit-token"), help: ArgumentHelp(
        "With --edit: the file the service writes a fresh random token to at start (mode 0600); every edit must carry it " +
            "(Authorization: Bearer TOKEN).",
        valueName: "file"))
    var editToken: String?

    @Flag(name: .customLong("edit-remote"), help: ArgumentHelp(
        "With --edit: allow it on an address other than loopback (put TLS and a login in front: docs/positioning.md, The live map)."))
    var editRemote = false

    @Option(name: .customLong("log-level"), help: ArgumentHelp("trace, debug, info, notice, warning, error or critical.",
                                                               valueName: "level"))
    var logLevel: String = "info"

    func validate() throws {
        var decider = RoomDecider.Configuration()
        decider.staleAfter = staleAfter
        decider.awayAfter = awayAfter
        decider.homeDistance = homeDistance
        if let problem = decider.problem { throw ValidationError("--stale-after/--away-after/--home-distance: \(problem)") }
        if Logger.Level(rawValue: logLevel) == nil { throw ValidationError("--log-level: not a level: \(logLevel)") }
        for (name, topic) in [("root", root), ("prefix", prefix), ("discovery-prefix", discoveryPrefix)] {
            if let problem = MQTTTopic.prefixProblem(topic) { throw ValidationError("--\(name): \(problem)") }
        }
        for id in track {
            if let problem = PeerID.formProblem(PeerID.canonical(id)) { throw ValidationError("--track: \(problem)") }
        }
        if clientID.isEmpty { throw ValidationError("--client-id: must not be empty") }
        if !(5...3600).contains(keepalive) { throw ValidationError("--keepalive: must be in 5...3600 seconds, not \(keepalive)") }
        if plan?.isEmpty == true { throw ValidationError("--plan: must not be empty") }
        if let outsideNodes, plan == nil {
            throw ValidationError("--outside-nodes \(outsideNodes.rawValue): only with --plan " +
                "(without a plan every node's reports make rooms)")
        }
        if let http {
            do { _ = try FleetMapAddress(parsing: http) } catch { throw ValidationError("--http: \(error)") }
        }
        if edit {
            guard plan != nil, let http else {
                throw ValidationError("--edit: needs --plan FILE (the plan it edits) and --http ADDRESS:PORT (the map that edits it)")
            }
            guard let editToken, !editToken.isEmpty else {
                throw ValidationError("--edit: needs --edit-token FILE (where the service writes the token an edit must carry, " +
                    "e.g. /run/proximity-fleet/edit-token)")
            }
            if !editRemote, let address = try? FleetMapAddress(parsing: http), !address.isLoopback {
                throw ValidationError("--edit on \(http): only on a loopback address (127.0.0.1, [::1]), unless --edit-remote is given " +
                    "too (then put TLS and a login in front)")
            }
        } else if editToken != nil || editRemote {
            throw ValidationError("--edit-token and --edit-remote: only with --edit")
        }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "proximity-fleet")
        // A plan with problems ends the command here (65; 66 when it cannot be read).
        let floorPlan = plan.map { Self.loadPlan($0) }
        var options: MQTTOptions
        do {
            options = try connection.options(clientID: clientID)
            options.keepalive = keepalive
        } catch {
            FileHandle.standardError.write(Data("proximity-fleet: error: --password-file \(error)\n".utf8))
            Foundation.exit(66)
        }
        var configuration = FleetConfiguration()
        configuration.root = root
        configuration.prefix = prefix
        configuration.rule = rule
        configuration.decider.staleAfter = staleAfter
        configuration.decider.awayAfter = awayAfter
        configuration.decider.homeDistance = homeDistance
        configuration.track = track.isEmpty ? nil : Set(track.map(PeerID.canonical))
        configuration.discovery = discovery
        configuration.discoveryPrefix = discoveryPrefix
        configuration.broker = (try? MQTTBrokerURL.parse(connection.broker)).map { "\($0)" } ?? connection.broker
        configuration.plan = floorPlan
        configuration.outsideNodes = outsideNodes ?? configuration.outsideNodes
        let map = try http.map { (address: try FleetMapAddress(parsing: $0), views: FleetViews(editable: edit)) }
        configuration.views = map?.views
        let service = FleetService(configuration, broker: options, logger: logger)
        // SIGHUP reads the plan again (systemctl reload); without --plan it does nothing, rather
        // than end the service as its default action would.
        signal(SIGHUP, SIG_IGN)
        let hangup = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
        hangup.setEventHandler { [plan] in
            guard let plan else {
                logger.notice("SIGHUP: no --plan to read again")
                return
            }
            do throws(FloorPlanFile.Problems) {
                let reloaded = try FloorPlanFile.load(path: plan)
                Task { await service.replacePlan(reloaded) }
            } catch {
                for line in error.lines { logger.error("\(line)") }
                logger.error("the floor plan has problems: keeping the running plan", metadata: ["plan": "\(plan)"])
            }
        }
        hangup.resume()
        defer { hangup.cancel() }
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: FleetRunner(service: service), successTerminationBehavior: .gracefullyShutdownGroup,
                  failureTerminationBehavior: .gracefullyShutdownGroup),
        ]
        var editing: FleetMapEditing?
        if edit, let plan, let editToken {
            do {
                let token = try FleetMapEditing.writeToken(to: editToken)
                editing = FleetMapEditing(planPath: plan, token: token) { saved in await service.replacePlan(saved) }
                logger.notice("the map edits the floor plan: an edit must carry the token in the file",
                              metadata: ["token-file": "\(editToken)", "plan": "\(plan)"])
            } catch {
                FileHandle.standardError.write(Data("proximity-fleet: error: --edit-token: \(error)\n".utf8))
                Foundation.exit(73)
            }
        }
        if let map {
            services.append(.init(service: FleetMapServer(address: map.address, views: map.views, logger: logger, planPath: plan,
                                                          editing: editing),
                                  successTerminationBehavior: .gracefullyShutdownGroup,
                                  failureTerminationBehavior: .gracefullyShutdownGroup))
        }
        let group = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do { try await group.run() } catch let error as FleetMapError {
            FileHandle.standardError.write(Data("proximity-fleet: error: --http: \(error)\n".utf8))
            Foundation.exit(69)
        } catch let error as FleetServiceConflict {
            FileHandle.standardError.write(Data("proximity-fleet: error: \(error)\n".utf8))
            Foundation.exit(75)
        }
    }
}

extension RoomRuleKind: ExpressibleByArgument {}
extension OutsideNodes: ExpressibleByArgument {}

struct FleetRunner: Service {
    let service: FleetService
    func run() async throws {
        try await cancelWhenGracefulShutdown { [service] in try await service.run() }
    }
}
