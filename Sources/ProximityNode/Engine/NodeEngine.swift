import BlueZ
import Foundation
import Logging
import ProximityAPI
import ProximityCore

/// The executor of the node's ``NodeStep``: it feeds the step what BlueZ reports, a report each
/// second and the clients' commands, with the time, and carries out the effects the step returns,
/// in order: it writes the state files, appends to the event log, publishes ``NodeEvent``s, logs,
/// and starts BlueZ and bus calls in tasks of their own, whose results it feeds back.
///
/// Events out, commands in: subscribers (the bus exporter, MQTT) read ``events``; the D-Bus
/// handlers call ``command(_:)``, which answers once the change is on disk, and applies it at
/// once. A command runs on a copy of the step, kept only once the files it must write are
/// written: a failure changes nothing.
public actor NodeEngine {
    public nonisolated let identity: UUID
    /// What the engine publishes.
    public nonisolated let events = NodeEvents()
    let configuration: NodeConfiguration
    let clock: any NodeClock
    let logger: Logger
    let files: StateFiles
    let eventLog: EventLog
    let bluez: BlueZSide
    let clients: any NodeClients
    /// The node's state; read it with ``read(_:)``.
    private var step: NodeStep

    /// BlueZ and bus calls, each run in a task of its own by ``run()``.
    typealias Job = @Sendable () async -> Void
    private let jobs: AsyncStream<Job>
    private let jobSink: AsyncStream<Job>.Continuation

    init(configuration: NodeConfiguration, identity: UUID, bluez: BlueZSide, clients: any NodeClients, files: StateFiles,
         saved: NodeStep.Saved, eventLog: EventLog, clock: any NodeClock, logger: Logger) {
        self.configuration = configuration
        self.identity = identity
        self.bluez = bluez
        self.clients = clients
        self.files = files
        self.eventLog = eventLog
        self.clock = clock
        self.logger = logger
        step = NodeStep(configuration: configuration, identity: identity, saved: saved,
                        at: NodeTime(now: clock.now, epoch: clock.epoch(clock.now)))
        (jobs, jobSink) = AsyncStream.makeStream(of: Job.self, bufferingPolicy: .unbounded)
    }

    /// The time a step runs at: now (one read of the clock).
    private var time: NodeTime {
        let now = clock.now
        return NodeTime(now: now, epoch: clock.epoch(now))
    }

    /// A value read from the node's state (`GetMonitoredRegions`, the snapshots the exporter
    /// shows at start …).
    public func read<T: Sendable>(_ value: (NodeStep) -> T) -> T { value(step) }

    // MARK: - Running

    /// Exports the advertisement and the GATT application, then follows BlueZ (through the
    /// mirror, which runs as a service of its own) until cancelled. Call ``stop()`` after.
    public func run() async {
        let (releases, hellos) = await bluez.export()
        carryOut(step.started(at: time))
        // Once, at the start: "mirroring BlueZ" follows as soon as bluetoothd is there.
        logger.info("waiting for bluetoothd (org.bluez); if nothing follows, check it with \(bluez.howToCheck)",
                    metadata: ["bluez.adapter": "\(configuration.adapter)"])
        await withTaskGroup(of: Void.self) { group in
            // BlueZ's events in order, on the engine itself: a sample costs no hop.
            group.addTask { await self.follow(self.bluez.events) }
            group.addTask {
                // On a fixed schedule (a report each second, not a second after the last one
                // ended), so the clear interval's bound holds; a late tick does not bunch up.
                let clock = self.clock
                var next = clock.now
                while !Task.isCancelled {
                    next = max(next + 1, clock.now + 0.5)
                    do { try await clock.sleep(until: next) } catch { return }
                    await self.report()
                }
            }
            if let releases {
                group.addTask { for await _ in releases { await self.feed(.released) } }
            }
            if let hellos {
                group.addTask { for await hello in hellos { await self.feed(hello) } }
            }
            group.addTask {
                await withDiscardingTaskGroup { running in
                    for await job in self.jobs { running.addTask { await job() } }
                }
            }
            await group.waitForAll()
        }
    }

    /// Saves what the node keeps and unregisters from BlueZ; call after ``run()`` returned.
    public func stop() async {
        jobSink.finish()
        for file in step.filesOnStop(exists: files.exists) {
            do { try files.write(file) } catch {
                logger.error("cannot save \(file.what) at shutdown", metadata: ["error": "\(error)"])
            }
        }
        if step.isRegistered { await bluez.unregister() }
    }

    private func follow(_ events: AsyncStream<BlueZEvent>) async {
        for await event in events {
            let time = self.time
            if let input = bluez.input(for: event, at: time.now) { carryOut(step.input(input, at: time)) }
        }
    }

    func feed(_ input: NodeInput) {
        carryOut(step.input(input, at: time))
    }

    private func report() {
        carryOut(step.report(at: time))
    }

    // MARK: - Commands

    /// Runs `command` on a copy of the step; once the files it must write are written (a failure
    /// writes back those already written, and changes nothing), keeps the copy and carries out
    /// the effects. Returns the outcome: its ``StepOutcome/sequence`` is the change to wait for.
    @discardableResult
    public func command(_ command: NodeCommand) throws(NodeRefusal) -> StepOutcome {
        var next = step
        let outcome = try next.command(command, at: time)
        try adopt(next, outcome)
        return outcome
    }

    /// Applies a reloaded configuration as one change (regions, alerts, tracking and rules, the
    /// clear interval, the RSSI offset), or changes nothing. Returns the sequence to wait for.
    public func reconfigure(_ configuration: NodeConfiguration) throws(NodeRefusal) -> UInt64 {
        var next = step
        let outcome = try next.reconfigure(configuration, at: time)
        try adopt(next, outcome)
        return outcome.sequence
    }

    private func adopt(_ next: NodeStep, _ outcome: StepOutcome) throws(NodeRefusal) {
        try files.commit(outcome.commit, previous: step.snapshot)
        step = next
        carryOut(outcome.effects)
    }

    /// `GetEvents`.
    public func loggedEvents(after seq: UInt64, since time: Double, limit: Int) -> [LogEntryValue] {
        eventLog.read(after: seq, since: time > 0 ? time : nil, limit: limit)
    }

    // MARK: - Effects

    private func carryOut(_ effects: [NodeEffect]) {
        for effect in effects { carryOut(effect) }
    }

    private func carryOut(_ effect: NodeEffect) {
        switch effect {
        case .save(let file): save(file)
        case .publish(let event): events.publish(event)
        case .profile(let sequence, let attributes, let items): publishProfile(sequence, attributes, items)
        case .syncEventLog: eventLog.syncIfDue()
        case .log(let line): logger.log(level: line.level, "\(line.message)", metadata: line.metadata)
        case .bluez(let action, let generation): call(action, generation: generation)
        case .identify(let connect): identify(connect)
        case .ask(let question): ask(question)
        case .release(let client): release(client)
        case .watch(let client): watch(client)
        case .trust(let settings):
            let bluez = self.bluez
            enqueue { await bluez.reconfigure(trust: settings) }
        }
    }

    private func save(_ file: StateFile) {
        do { try files.write(file) } catch {
            logger.error("cannot save \(file.what)", metadata: ["error": "\(error)"])
            step.saveFailed(file.kind)
        }
    }

    /// The entries to the event log, then the profile's step with a `Logged` for each written (an
    /// entry that cannot be written goes on without it).
    private func publishProfile(_ sequence: UInt64, _ attributes: [String: String]?, _ items: [ProfileItem]) {
        var signals: [ProfileSignal] = []
        for item in items {
            switch item {
            case .signal(let signal): signals.append(signal)
            case .log(let entry):
                do { signals.append(.logged(try eventLog.append(entry))) } catch {
                    logger.error("cannot write the event log", metadata: ["error": "\(error)"])
                }
            }
        }
        events.publish(.profile(ProfileChanges(sequence: sequence, attributes: attributes, signals: signals)))
    }

    private func call(_ action: AdapterLink.Action, generation: Int) {
        let bluez = self.bluez
        let now = clock.now
        enqueue {
            let inputs = await bluez.carryOut(action, generation: generation, at: now)
            for input in inputs { await self.feed(input) }
        }
    }

    private func identify(_ connect: IdentificationScheduler.Connect) {
        let bluez = self.bluez
        enqueue {
            let input = await bluez.identify(connect)
            await self.feed(input)
        }
    }

    private func ask(_ question: StrategyQuestion) {
        let clients = self.clients
        let time = self.time
        enqueue {
            let answer = await clients.ask(question, time: time)
            await self.answered(answer)
        }
    }

    private func release(_ client: StrategyClient) {
        let clients = self.clients
        enqueue { await clients.release(client) }
    }

    private func watch(_ client: String) {
        let clients = self.clients
        enqueue {
            let left = await clients.watch(client)
            await self.answered(left)
        }
    }

    /// What a call the node made answered: a command of its own (never refused).
    private func answered(_ command: NodeCommand) {
        do { try self.command(command) } catch {
            logger.error("cannot apply a client's answer", metadata: ["error": "\(error)"])
        }
    }

    private func enqueue(_ job: @escaping Job) {
        jobSink.yield(job)
    }
}

/// The calls the engine makes to the node's clients for the step (the bus's, in `Export/`
/// `BusClients`): each answers with the command to feed back.
protocol NodeClients: Sendable {
    /// Asks a strategy client about its targets: its verdicts, or why it is dropped.
    func ask(_ question: StrategyQuestion, time: NodeTime) async -> NodeCommand
    /// Tells a strategy client it was dropped.
    func release(_ client: StrategyClient) async
    /// Returns once `client` has left (at once if it already has or cannot be watched).
    func watch(_ client: String) async -> NodeCommand
}
