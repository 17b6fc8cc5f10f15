import BlueZSim
import DBusKit
import Foundation
import Logging
import ProximityCore
import ProximityNode
import ProximityTesting
import ServiceLifecycle
import SimTesting

/// The simulation's clock as a node's: a node in this process runs on the same time as the air,
/// so a test drives both with ``SimBoxes/advance(_:)`` (a 10-minute ban takes milliseconds).
public struct SimulationNodeClock: NodeClock {
    let clock: any SimClock
    public let epochAtOrigin: Double

    public init(_ clock: any SimClock, epochAtOrigin: Double = Date().timeIntervalSince1970) {
        self.clock = clock
        self.epochAtOrigin = epochAtOrigin
    }

    public var now: Timestamp { clock.now }
    public func sleep(until deadline: Timestamp) async throws { try await clock.sleep(until: deadline) }
}

/// What a node in this process logged, each entry stamped with the node's clock: a test reads
/// when (in simulated time) something happened, and waits for an entry without polling.
public final class CapturedLog: Sendable {
    public struct Entry: Sendable, CustomStringConvertible {
        public var time: Timestamp
        public var level: Logger.Level
        public var message: String
        public var metadata: [String: String]
        public var description: String {
            String(format: "%9.3f ", time) + "\(level) \(message) "
                + metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        }
    }

    /// The entries, as recorded (``EventRecorder``).
    public let recorder = EventRecorder<Entry>()
    /// The node's clock (in this process: the simulation's, with its epoch).
    public let clock: any NodeClock

    public init(clock: any NodeClock) { self.clock = clock }

    public var entries: [Entry] { recorder.events }

    /// Entries whose message contains `text` and whose metadata holds `metadata`.
    public func entries(_ text: String, _ metadata: [String: String] = [:]) -> [Entry] {
        entries.filter { e in e.message.contains(text) && metadata.allSatisfy { e.metadata[$0.key] == $0.value } }
    }

    func append(_ entry: Entry) { recorder.record(entry) }

    /// The first entry (already there, or still to come) that matches, or nil after `timeout` of
    /// real time.
    public func wait(timeout: Duration = .seconds(30), _ predicate: @escaping @Sendable (Entry) -> Bool) async -> Entry? {
        await recorder.wait(timeout: timeout, where: predicate)
    }

    /// A swift-log handler writing here.
    struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .debug

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var all = metadata
            if let extra = event.metadata { all.merge(extra) { _, new in new } }
            log.append(Entry(time: log.clock.now, level: event.level, message: "\(event.message)",
                             metadata: all.mapValues { "\($0)" }))
        }
    }
}

/// A proximityd node on a box of ``SimBoxes``, for tests, in one of two modes:
///
/// - **in this process** (``startInProcess(_:on:configure:)``): the node's services run here, on
///   the simulation's clock, with the log captured (``CapturedLog``), so identification, backoff
///   and bans are tested in simulated time;
/// - **as a process** (``startProcess(_:on:stateDirectory:arguments:)``): the built `proximityd`,
///   as a user runs it.
public final class NodeRunner: Sendable {
    public let box: String
    public let log: CapturedLog
    public let configuration: NodeConfiguration
    /// The node's engine: its commands and queries, as the bus handlers call them.
    public let engine: NodeEngine
    /// Every event the engine published since the node started (``NodeEvent``: identifications,
    /// reports, regions, alerts, the profile, the link …), to wait on.
    public let events: EventRecorder<NodeEvent>
    private let group: ServiceGroup
    private let task: Task<(any Error)?, Never>

    private init(box: String, log: CapturedLog, configuration: NodeConfiguration, engine: NodeEngine, events: EventRecorder<NodeEvent>,
                 group: ServiceGroup, task: Task<(any Error)?, Never>) {
        self.box = box
        self.log = log
        self.configuration = configuration
        self.engine = engine
        self.events = events
        self.group = group
        self.task = task
    }

    /// Starts a node on `box`'s bus in this process, on the simulation's clock, its state in the
    /// box's bus directory; returns once it owns its name.
    public static func startInProcess(_ box: String, on boxes: SimBoxes,
                                      configure: (inout NodeConfiguration) -> Void = { _ in }) async throws -> NodeRunner {
        let clock = SimulationNodeClock(boxes.simulator.clock)
        let log = CapturedLog(clock: clock)
        let logger = Logger(label: "proximityd.\(box)") { _ in CapturedLog.Handler(log: log) }
        let state = boxes.buses[box].map { $0.directory.appendingPathComponent("state") }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("proximityd-\(box)-\(UUID().uuidString)")
        var configuration = NodeConfiguration(bus: .address(boxes.address(box)), name: box, stateDirectory: state)
        configure(&configuration)
        let running = try await NodeDaemon.start(configuration, clock: clock, logger: logger)
        // Subscribed before the services run, so no event is missed; a buffer the recorder's
        // task never fills (a full one would drop whole events, identifications among them).
        let events = EventRecorder(recording: running.engine.events.subscribe(buffer: 1 << 16))
        let group = ServiceGroup(configuration: .init(
            services: running.services(logger: logger).map {
                .init(service: $0, successTerminationBehavior: .gracefullyShutdownGroup,
                      failureTerminationBehavior: .gracefullyShutdownGroup)
            },
            logger: logger))
        let task = Task { () -> (any Error)? in
            do { try await group.run() } catch { return error }
            return nil
        }
        return NodeRunner(box: box, log: log, configuration: configuration, engine: running.engine, events: events, group: group,
                          task: task)
    }

    /// Shuts the node down gracefully (unregistering from BlueZ, releasing its name) and waits
    /// for it; returns the error it ended with, if any.
    @discardableResult
    public func stop() async -> (any Error)? {
        await group.triggerGracefulShutdown()
        let error = await task.value
        events.cancel()
        return error
    }

    /// Starts the built `proximityd` on `box`'s bus and returns once it owns `org.proximityd`.
    public static func startProcess(_ box: String, on boxes: SimBoxes, stateDirectory: URL,
                                    arguments extra: [String] = []) async throws -> ManagedProcess {
        let address = boxes.address(box)
        let daemon = try ManagedProcess(BuiltProducts.path("proximityd"),
                                        ["run", "--bus", address, "--state-dir", stateDirectory.path,
                                         "--name", box, "--log-level", "debug"]
                                            // Not the machine's /etc/proximityd/proximityd.yaml.
                                            + (extra.contains("--config") ? [] : ["--config", "/dev/null"]) + extra)
        let watcher = try await DBusConnection.connect(to: .address(address))
        let owners = try await watcher.subscribe(MatchRule(sender: .bus, interface: .bus, member: "NameOwnerChanged",
                                                           arg0: "org.proximityd"))
        enum Outcome: Sendable { case owned, exited, timedOut }
        let outcome: Outcome
        if try await watcher.nameOwner(of: "org.proximityd") != nil {
            outcome = .owned
        } else {
            outcome = await withTaskGroup(of: Outcome.self) { group in
                group.addTask {
                    for await change in owners where change.body.count == 3 && change.body[2].string?.isEmpty == false { return .owned }
                    return .exited
                }
                group.addTask {
                    _ = try? await daemon.waitForExit(timeout: .seconds(20))
                    return daemon.isRunning ? .timedOut : .exited
                }
                defer { group.cancelAll() }
                return await group.next() ?? .timedOut
            }
        }
        await watcher.close()
        guard outcome == .owned else {
            daemon.signal(SIGKILL)
            throw TestKitError("proximityd did not take org.proximityd (\(outcome)): \(daemon.stderr)")
        }
        return daemon
    }
}

/// Runs `body` with a node started in this process on `box` (``NodeRunner/startInProcess(_:on:configure:)``),
/// and stops the node after it, however it ends: a test's node never outlives its scope.
public func withNode<T>(_ box: String, on boxes: SimBoxes, configure: (inout NodeConfiguration) -> Void = { _ in },
                        _ body: (NodeRunner) async throws -> T) async throws -> T {
    let node = try await NodeRunner.startInProcess(box, on: boxes, configure: configure)
    do {
        let result = try await body(node)
        await node.stop()
        return result
    } catch {
        await node.stop()
        throw error
    }
}

extension NodeEvent {
    /// A peer node identified: its identity, the address it was learnt at, and whether it
    /// introduced itself (its hello) rather than being read over GATT.
    public var identification: (peer: PeerID, address: String, introduced: Bool)? {
        guard case .peerIdentified(let peer, let address, let introduced) = self else { return nil }
        return (peer, address, introduced)
    }
}

extension SimBoxes {
    /// Moves simulated time forward by `seconds`, `step` at a time, never ahead of what `nodes`
    /// (in this process) have heard: after each step in which the air put an advertising report on
    /// a node's box bus, it waits until that node has taken in a sample since the step began
    /// (at most `timeout` of real time, then it throws).
    ///
    /// The air sends its reports to a node over D-Bus, which takes real time, and simulated time
    /// does not wait for it. A test that moves time in a bare loop can, on a busy machine, run
    /// seconds of simulated time ahead of what the node has heard; the node then rightly finds
    /// its peers silent (stale, gone, exited; a retry waits for a sample and comes late). Paced,
    /// a node sees no silence the air did not make. The engine publishes no event per sample (a
    /// node takes thousands a second), so this reads ``NodeStep/lastSample`` until the sample is in.
    public func advance(_ seconds: Double, keepingUp nodes: [NodeRunner], step: Double = 0.1,
                        timeout: Duration = .seconds(20)) async throws {
        let end = simulator.clock.now + seconds
        while simulator.clock.now < end - 1e-9 {
            try await paced(min(step, end - simulator.clock.now), nodes, timeout)
        }
    }

    /// Moves simulated time forward as ``advance(_:keepingUp:step:timeout:)`` does until
    /// `condition` holds (checked before each step) or `limit` seconds have passed; returns
    /// whether it held.
    public func advance(until limit: Double, keepingUp nodes: [NodeRunner], step: Double = 0.1, timeout: Duration = .seconds(20),
                        _ condition: () async throws -> Bool) async throws -> Bool {
        let end = simulator.clock.now + limit
        while simulator.clock.now < end - 1e-9 {
            if try await condition() { return true }
            try await paced(min(step, end - simulator.clock.now), nodes, timeout)
        }
        return try await condition()
    }

    private func paced(_ step: Double, _ nodes: [NodeRunner], _ timeout: Duration) async throws {
        let from = simulator.clock.now
        await advance(step)
        for node in nodes {
            guard let delivered = await simulator.air.lastDelivery(to: node.box), delivered > from else { continue }
            let deadline = ContinuousClock.now + timeout
            while (await node.engine.read { $0.lastSample } ?? -.infinity) < from {
                guard ContinuousClock.now < deadline else {
                    throw TestKitError("\(node.box) took in no sample within \(timeout) of real time after simulated time \(from) s")
                }
                try await Task.sleep(for: .milliseconds(1))
            }
        }
    }
}
