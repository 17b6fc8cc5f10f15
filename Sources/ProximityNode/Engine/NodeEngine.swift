import BlueZ
import DBusKit
import Foundation
import Logging
import ProximityAPI
import ProximityCore

/// The node at work. It feeds what BlueZ reports through the core's stages (observation →
/// identity → identification → ranging), carries out the actions they return (power the
/// adapter, register, discover, connect to identify), and publishes ``NodeEvent``s. It holds each
/// piece of state once: the adapter link, the identity resolver, the identification scheduler,
/// the found-devices table, the settings.
///
/// Events out, commands in: subscribers (the bus exporter, …) read ``events``; the D-Bus
/// handlers call the command methods (``setClearInterval(_:)`` …), which answer once the change
/// is saved, and apply it at once.
///
/// Time comes from the injected ``NodeClock``. BlueZ calls run as jobs in their own tasks and
/// report back here, so the engine never waits for BlueZ while samples arrive.
public actor NodeEngine {
    let configuration: NodeConfiguration
    public nonisolated let identity: UUID
    let connection: DBusConnection
    let mirror: BlueZObjectMirror
    let clock: any NodeClock
    let state: StateDirectory
    let logger: Logger
    let adapterPath: ObjectPath
    let serviceUUID: String
    /// What the engine publishes.
    public nonisolated let events = NodeEvents()

    private var link: AdapterLink
    private var resolver: IdentityResolver
    private var scheduler: IdentificationScheduler
    var table: FoundDevicesTable
    private var settings: NodeSettings
    /// dB added to every RSSI sample before ranging (`--rssi-offset`; a reload changes it).
    private var rssiOffset: Double
    private let directory: PeerDirectory
    /// The region monitor, fed by each report, and where its regions are kept.
    var regions: RegionMonitor
    let regionStore: RegionStore
    /// When `regions.json` was last written, and whether a last-seen time moved since.
    var regionsSavedAt: Timestamp
    var regionsSeenSinceSave = false
    var changeSequence: UInt64 = 0
    /// The states determined when monitoring started, published when the engine runs.
    var initialRegionEvents: [RegionEvent]
    /// The alert engine, fed by each report; where each alert came from; where they are kept,
    /// and what was last written there.
    var alerts: AlertEngine
    var alertSources: [String: RegionSource]
    let alertStore: AlertStore
    var alertsSaved: AlertEngine.Saved
    /// The tracker, the profile, the rules (and where each came from), where they are kept and
    /// what was last written there; the event log.
    var tracker: Tracker
    var profile: Profile
    var rules: RuleEngine
    var ruleSources: [String: RegionSource]
    let profileStore: ProfileStore
    var profileSaved: ProfileStore.Saved
    var profileSavedAt: Timestamp = 0
    let eventLog: EventLog
    /// Alerts rules offered from this report's region events, before the alert stage saw it.
    var pendingOffers: [AlertTargetKey] = []
    /// The strategies clients registered, by key.
    var strategyAgents: [String: StrategyAgent] = [:]
    var strategyGeneration = 0
    /// The clients recording samples, and the samples since the last report.
    var recording = RecordingState()
    private var advertisement: Advertisement?
    private var application: GattApplication?

    /// BlueZ calls (and other bus calls) to make, each run in a task of its own by ``run()``.
    typealias Job = @Sendable () async -> Void
    private let jobs: AsyncStream<Job>
    private let jobSink: AsyncStream<Job>.Continuation

    /// The table's ranging model, for the node's configuration.
    static func rangingConfiguration(_ configuration: NodeConfiguration, clearInterval: Double) -> RangingConfiguration {
        var ranging = RangingConfiguration()
        ranging.clearInterval = clearInterval
        ranging.maxPeers = configuration.maxPeers
        ranging.distanceModel = LogDistanceModel(exponent: configuration.pathLossExponent)
        ranging.defaultMeasuredPower = Double(configuration.measuredPower)
        return ranging
    }

    /// `settings` and `savedRegions` are the ones loaded from the state directory; `clock` gives
    /// every time.
    public init(configuration: NodeConfiguration, identity: UUID, connection: DBusConnection, mirror: BlueZObjectMirror,
                state: StateDirectory, settings: NodeSettings, savedRegions: RegionStore.Saved = .init(),
                savedAlerts: AlertStore.Saved = .init(), savedProfile: ProfileStore.Saved = .init(), eventLog: EventLog,
                clock: any NodeClock = SystemNodeClock(), logger: Logger) {
        self.configuration = configuration
        self.identity = identity
        self.connection = connection
        self.mirror = mirror
        self.clock = clock
        self.state = state
        self.logger = logger
        self.settings = settings
        self.rssiOffset = configuration.rssiOffset
        self.adapterPath = BlueZService.rootPath.appending(escaped: configuration.adapter)
        self.serviceUUID = configuration.serviceUUID.lowercased
        self.link = AdapterLink(powerOn: configuration.powerOn)
        self.directory = PeerDirectory(state: state, clock: clock, logger: logger)
        self.resolver = IdentityResolver(
            configuration: .init(serviceUUID: serviceUUID, ownIdentity: identity, rangeBeacons: configuration.trackBeacons,
                                 maxRememberedAddresses: configuration.maxRememberedAddresses),
            nodes: directory.load())
        self.scheduler = IdentificationScheduler(configuration: configuration.identification)
        self.table = FoundDevicesTable(configuration: Self.rangingConfiguration(
            configuration, clearInterval: Self.clearInterval(configuration, settings)))
        (jobs, jobSink) = AsyncStream.makeStream(of: Job.self, bufferingPolicy: .unbounded)
        self.regionStore = RegionStore(state: state)
        self.regionsSavedAt = clock.now
        (regions, initialRegionEvents) = Self.startRegions(configuration, savedRegions, at: clock.now, logger: logger)
        self.alertStore = AlertStore(state: state)
        (alerts, alertSources) = Self.startAlerts(configuration, savedAlerts, at: clock.now, logger: logger)
        alertsSaved = savedAlerts.engine
        profileStore = ProfileStore(state: state)
        profileSaved = savedProfile
        self.eventLog = eventLog
        (tracker, profile, rules, ruleSources) = Self.startProfile(configuration, savedProfile, at: clock.now, logger: logger)
    }

    /// What the node advertises: the general service UUID, its name, its measured power
    /// (``NodePowerFrame``, for peers to range it with) and its identity (when it fits: with a
    /// 128-bit service UUID it does not).
    static func advertisementContent(_ configuration: NodeConfiguration, identity: UUID) -> AdvertisementContent {
        AdvertisementContent(serviceUUID: configuration.serviceUUID.lowercased, localName: configuration.name,
                             manufacturerData: NodePowerFrame.manufacturerData(measuredPower: configuration.measuredPower),
                             identity: identity)
    }

    /// Runs `job` in a task of its own (a call to another process, whose answer comes back to the
    /// engine as a command).
    func enqueue(_ job: @escaping Job) {
        jobSink.yield(job)
    }

    /// Calls `left` once `client` (a unique name: never used again) leaves the bus, at once if it
    /// already has, or if it cannot be watched. `stillWatched` is asked after each change of its
    /// owner and ends the watch when false. For clients whose state the node keeps: alert
    /// strategies, recordings.
    func watchClient(_ client: BusName, stillWatched: @escaping @Sendable (NodeEngine) async -> Bool = { _ in true },
                     left: @escaping @Sendable (NodeEngine, _ reason: String) async -> Void) {
        let connection = self.connection
        enqueue { [self] in
            let changes: DBusSignalStream
            do {
                changes = try await connection.subscribe(MatchRule(sender: .bus, interface: .bus, member: "NameOwnerChanged",
                                                                   arg0: client.rawValue))
            } catch {
                await left(self, "cannot watch its client: \(error)")
                return
            }
            // It may have left before the subscription was in place.
            if (try? await connection.nameOwner(of: client)) == nil {
                await left(self, "its client left the bus")
                return
            }
            for await message in changes {
                if message.body.count == 3, message.body[2].string == "" {
                    await left(self, "its client left the bus")
                    return
                }
                guard await stillWatched(self) else { return }
            }
        }
    }

    /// The clear interval to start with: the command line's, else the one set over D-Bus, else
    /// the default.
    public static func clearInterval(_ configuration: NodeConfiguration, _ settings: NodeSettings) -> Double {
        configuration.clearInterval ?? settings.clearInterval ?? RangingConfiguration().clearInterval
    }

    // MARK: - Running

    /// Exports the advertisement and the GATT application, then follows BlueZ (through the
    /// mirror, which runs as a service of its own) until cancelled. Call ``stop()`` after.
    public func run() async {
        let callers = BlueZCallers(connection: connection)
        do {
            advertisement = try await Advertisement.export(
                on: connection, content: Self.advertisementContent(configuration, identity: identity), callers: callers, logger: logger)
            if advertisement?.plan.carriesManufacturerData == false {
                logger.warning("the advertisement has no room for the measured power: peers will assume their own")
            }
            application = try await GattApplication.export(on: connection, serviceUUID: serviceUUID, identity: identity,
                                                           callers: callers)
        } catch {
            logger.error("cannot export the advertisement or the GATT application", metadata: ["error": "\(error)"])
        }
        publishInitialRegions()
        logger.info("waiting for bluetoothd (org.bluez)", metadata: ["bluez.adapter": "\(configuration.adapter)"])
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.follow(self.mirror.events) }
            group.addTask {
                // On a fixed schedule (a report each second, not a second after the last one
                // ended), so the clear interval's bound holds; a late tick does not bunch up.
                let clock = self.clock
                var next = clock.now
                while !Task.isCancelled {
                    next = max(next + 1, clock.now + 0.5)
                    do { try await clock.sleep(until: next) } catch { return }
                    await self.tick()
                }
            }
            if let releases = advertisement?.releases {
                group.addTask {
                    for await _ in releases { await self.released() }
                }
            }
            if let hellos = application?.hellos {
                group.addTask {
                    for await hello in hellos { await self.introduced(hello) }
                }
            }
            group.addTask {
                await withDiscardingTaskGroup { running in
                    for await job in self.jobs { running.addTask { await job() } }
                }
            }
            await group.waitForAll()
        }
    }

    /// Unregisters the advertisement and the application; call after ``run()`` returned.
    public func stop() async {
        jobSink.finish()
        saveRegionsOnStop()
        saveAlertsOnStop()
        saveProfileOnStop()
        guard link.isRegistered else { return }
        let adapter = Adapter(connection: connection, path: adapterPath)
        do {
            if let advertisement { try await advertisement.unregister(from: adapter.advertisingManager) }
            if let application { try await application.unregister(from: adapter.gattManager) }
        } catch {
            logger.warning("cannot unregister from BlueZ", metadata: ["error": "\(error)"])
            return
        }
        logger.info("unregistered the advertisement and the GATT application")
    }

    // MARK: - Commands (from the bus)

    /// Address → identity of the peer nodes identified (`Node1.GetIdentities`).
    public var identities: [String: String] { resolver.identities }

    /// `ClearInterval`: saved, then applied to the table at once.
    public func setClearInterval(_ seconds: Double) throws(DBusError) {
        var next = settings
        next.clearInterval = seconds
        try save(next)
        applyClearInterval(seconds)
    }

    func applyClearInterval(_ seconds: Double) {
        guard seconds != table.configuration.clearInterval else { return }
        table.configuration.clearInterval = seconds
        events.publish(.clearInterval(seconds))
    }

    /// The clear interval when the configuration's changes (a reload): the configuration's, else
    /// the one set over D-Bus, else the default.
    func reconfigureClearInterval(_ configured: Double?) {
        applyClearInterval(configured ?? settings.clearInterval ?? RangingConfiguration().clearInterval)
    }

    /// The RSSI offset when the configuration's changes (a reload): from the next sample on.
    func reconfigureRSSIOffset(_ dB: Double) {
        guard dB != rssiOffset else { return }
        rssiOffset = dB
        logger.notice("the RSSI offset changed", metadata: ["rssi.offset": "\(dB)"])
        events.publish(.rssiOffset(dB))
    }

    public func setMeasuredPower(_ power: Int16, for identifier: String) throws(DBusError) {
        guard settings.measuredPower[identifier] != nil || settings.measuredPower.count < NodeSettings.maxOverrides else {
            throw DBusError(ProximityBus.Errors.invalidArguments,
                            "at most \(NodeSettings.maxOverrides) peers may have a measured power set; reset some first")
        }
        var next = settings
        next.measuredPower[identifier] = power
        try save(next)
    }

    public func resetMeasuredPower(for identifier: String) throws(DBusError) {
        var next = settings
        guard next.measuredPower.removeValue(forKey: identifier) != nil else {
            throw DBusError(ProximityBus.Errors.doesNotExist, "no measured power is set for \(identifier.debugDescription)")
        }
        try save(next)
    }

    /// Writes `next` to `settings.json` and only then makes it the settings in force: a failure
    /// to save changes nothing.
    private func save(_ next: NodeSettings) throws(DBusError) {
        do { try next.save(to: state) } catch {
            throw DBusError(ProximityBus.Errors.failed, "cannot save the setting: \(error)")
        }
        settings = next
    }

    // MARK: - BlueZ

    /// Takes BlueZ's events in order, on the engine itself: a sample costs no hop between the
    /// stream's task and the actor.
    private func follow(_ events: AsyncStream<BlueZEvent>) async {
        for await event in events { handle(event) }
    }

    private func handle(_ event: BlueZEvent) {
        switch event {
        case .adapterAdded(let info), .adapterChanged(let info, _):
            guard info.path == adapterPath else { return }
            apply(link.adapterSeen(powered: info.powered, discovering: info.discovering, address: info.address, at: clock.now))
        case .adapterRemoved(let path):
            if path == adapterPath { apply(link.adapterRemoved()) }
        case .bluezGone:
            apply(link.bluezGone())
        case .bluezRestarted:
            logger.notice("bluetoothd restarted")
        // Several nodes may share one bluetoothd, each with its own adapter: only this one's devices.
        case .deviceAdded(let info):
            guard info.adapter == adapterPath else { return }
            observe(info, sample: info.rssi != nil, frameChanged: true)
        case .deviceChanged(let info, let changed):
            guard info.adapter == adapterPath else { return }
            observe(info, sample: changed.contains("RSSI"),
                    frameChanged: changed.contains("ManufacturerData") || changed.contains("ServiceData") || changed.contains("UUIDs"))
        case .deviceRemoved:
            break
        }
    }

    private func released() {
        apply(link.released(at: clock.now))
    }

    /// Logs what the link noted and carries out its actions, in order, as one job.
    private func apply(_ step: ([AdapterLink.Action], [AdapterLink.Note]), error: String? = nil) {
        for note in step.1 {
            if case .ready(let address) = note { scheduler.ownAddress = address }
            log(note, error: error)
        }
        var calls: [AdapterLink.Action] = []
        for action in step.0 {
            if case .publish(let advertising, let discovering) = action {
                events.publish(.link(advertising: advertising, discovering: discovering))
            } else {
                calls.append(action)
            }
        }
        guard !calls.isEmpty else { return }
        let generation = link.generation
        jobSink.yield { [self, calls] in
            for call in calls { await self.carryOut(call, generation: generation) }
        }
    }

    private func apply(_ actions: [AdapterLink.Action]) { apply((actions, [])) }

    /// One BlueZ call the link asked for; its result goes back to the link.
    private nonisolated func carryOut(_ action: AdapterLink.Action, generation: Int) async {
        let adapter = Adapter(connection: connection, path: adapterPath)
        switch action {
        case .powerOn:
            do { try await adapter.setPowered(true) } catch BlueZCallError.other(name: "org.bluez.Error.Busy", _) {
                // A bluetoothd that just started powers its adapter itself (AutoEnable).
                logger.info("bluetoothd is powering the adapter on itself")
            } catch {
                logger.error("cannot power the adapter on", metadata: ["error": "\(error)"])
            }
        case .register:
            // BlueZ keeps registrations across a power cycle: AlreadyExists means registered.
            var failure: String?
            do {
                if let application = await application {
                    do { try await application.register(with: adapter.gattManager) } catch BlueZCallError.alreadyExists {}
                }
                if let advertisement = await advertisement {
                    do { try await advertisement.register(with: adapter.advertisingManager) } catch BlueZCallError.alreadyExists {}
                }
            } catch {
                failure = "\(error)"
            }
            await registrationEnded(failure: failure, generation: generation)
        case .startDiscovery:
            var failure: String?
            do {
                try await adapter.setDiscoveryFilter(.proximity(serviceUUID: serviceUUID, beacons: configuration.trackBeacons))
                do { try await adapter.startDiscovery() } catch BlueZCallError.inProgress {}
            } catch {
                failure = "\(error)"
            }
            await discoveryEnded(failure: failure, generation: generation)
        case .considerKnownDevices:
            // Devices already in the mirror (a restart, the adapter back) are considered again.
            for device in await mirror.devices(on: adapterPath) { await observe(device, sample: false, frameChanged: true) }
        case .publish:
            break
        }
    }

    private func registrationEnded(failure: String?, generation: Int) {
        apply(link.registrationEnded(succeeded: failure == nil, generation: generation, at: clock.now), error: failure)
    }

    private func discoveryEnded(failure: String?, generation: Int) {
        apply(link.discoveryEnded(succeeded: failure == nil, generation: generation, at: clock.now), error: failure)
    }

    /// `error`: what the BlueZ call behind a failure note answered.
    private func log(_ note: AdapterLink.Note, error: String? = nil) {
        let failure: Logger.Metadata = error.map { ["error": "\($0)"] } ?? [:]
        let adapter: Logger.Metadata = ["bluez.adapter": "\(configuration.adapter)"]
        switch note {
        case .poweringOn: logger.info("powering the adapter on", metadata: adapter)
        case .adapterOff: logger.warning("the adapter is off (use --power-on, or power it on with bluetoothctl)", metadata: adapter)
        case .ready(let address):
            logger.info("adapter ready", metadata: ["bluez.adapter": "\(adapterPath)", "bluez.address": "\(address)"])
        case .lost(let why, let waitingFor): logger.warning("\(why): waiting for \(waitingFor)", metadata: adapter)
        case .registered(let afterFailure):
            if afterFailure { logger.notice("registered the advertisement and the GATT application") }
        case .registrationFailed(let delay):
            logger.error("cannot register the advertisement or the GATT application; trying again in \(Int(delay.rounded())) s",
                         metadata: failure)
        case .discoveryFailed(let delay):
            logger.error("cannot start discovery; trying again in \(Int(delay.rounded())) s", metadata: failure)
        case .discoveryStoppedByOthers: logger.notice("discovery was stopped by another client: starting it again")
        case .released: logger.notice("BlueZ released the advertisement")
        }
    }

    // MARK: - Observation → identity → ranging or identification

    private func observe(_ info: DeviceInfo, sample: Bool, frameChanged: Bool) {
        let t = clock.now
        var observation = Observation(address: info.address, rssi: sample ? info.rssi : nil, time: t,
                                      frame: frameChanged ? Self.frame(info) : nil, txPower: info.txPower, name: info.name)
        var resolution = resolver.resolve(observation)
        if resolution == .needsFrame {
            observation.frame = Self.frame(info)
            resolution = resolver.resolve(observation)
        }
        switch resolution {
        case .range(let id, let kind, let beacon):
            guard let rssi = observation.rssi else { return }
            // An override, else what the beacon's frame or the peer node's advertisement says, else ours.
            let power = settings.measuredPower[id.rawValue].map(Double.init) ?? beacon?.measuredPower
                ?? Self.advertisedPower(info, kind, serviceUUID: serviceUUID) ?? table.configuration.defaultMeasuredPower
            let name = kind == .node ? info.name ?? info.alias : info.name
            // A full table may have no place for it (it keeps the nearest). The receiver's offset first.
            table.observe(id, rssi: Double(rssi) + rssiOffset, at: t, measuredPower: power,
                          details: PeerDetails(kind: kind, address: info.address, name: name, beacon: beacon))
            if recording.wants(id) { recordSample(id, at: t) }
        case .identify:
            start(scheduler.heard(info.address, at: t))
        case .ignore, .needsFrame:
            break
        }
    }

    /// The measured power a peer node advertises (``NodePowerFrame``), read only from a node that
    /// advertises the general service (`serviceUUID`, lowercase); nil for anything else, and for a
    /// node that advertises none (the node's own `--measured-power` applies then).
    static func advertisedPower(_ info: DeviceInfo, _ kind: PeerKind, serviceUUID: String) -> Double? {
        guard kind == .node, !info.manufacturerData.isEmpty, info.uuids.contains(serviceUUID) else { return nil }
        return NodePowerFrame.measuredPower(in: info.manufacturerData).map(Double.init)
    }

    private static func frame(_ info: DeviceInfo) -> AdvertisedFrame {
        AdvertisedFrame(serviceUUIDs: info.uuids, manufacturerData: info.manufacturerData, serviceData: info.serviceData)
    }

    private func start(_ connections: [IdentificationScheduler.Connect]) {
        guard !connections.isEmpty else { return }
        let identifier = Identifier(connection: connection, mirror: mirror, serviceUUID: serviceUUID, identity: identity, logger: logger)
        for connect in connections {
            if connect.afterYield {
                logger.info("the peer did not introduce itself: connecting to it", metadata: ["peer.address": "\(connect.address)"])
            }
            // BlueZ's path for a device: its address with '_' for ':' under the adapter.
            guard let path = try? ObjectPath(adapterPath.rawValue + "/dev_" + connect.address.replacingOccurrences(of: ":", with: "_"))
            else {
                _ = scheduler.finished(connect.address, .rejected, at: clock.now)
                continue
            }
            jobSink.yield { [self] in
                let result = await identifier.identify(path, address: connect.address, attempt: connect.attempt)
                await self.identified(connect.address, result)
            }
        }
    }

    private func identified(_ address: String, _ result: IdentificationResult) {
        let t = clock.now
        let outcome: IdentificationScheduler.Outcome
        switch result {
        case .identified(let uuid):
            learn(uuid, at: address, introduced: false)
            outcome = .identified
        case .rejected:
            outcome = .rejected
        case .failed:
            outcome = .failed
        }
        let (verdict, next) = scheduler.finished(address, outcome, at: t)
        if case .leftAlone(let time, let attempts) = verdict {
            let why = outcome == .rejected ? "leaving a peer alone" : "identification failed \(attempts) times: leaving the peer alone"
            logger.warning("\(why)", metadata: ["peer.address": "\(address)", "for": "\(Int(time)) s"])
        }
        start(next)
    }

    /// A peer that connected to this node wrote its identity to the hello characteristic.
    private func introduced(_ hello: GattHello) {
        // Only this adapter's devices (several nodes may share one bluetoothd).
        guard hello.device.rawValue.hasPrefix(adapterPath.rawValue + "/"), let address = DeviceInfo.address(fromPath: hello.device),
              hello.value.count == 16 else { return }
        let b = hello.value
        let uuid = UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
        learn(uuid, at: address, introduced: true)
    }

    /// Records an identity learnt at `address`: saved (`peers.json`) before it is published.
    private func learn(_ uuid: UUID, at address: String, introduced: Bool) {
        let learnt = resolver.learn(uuid, at: address, time: clock.now)
        scheduler.resolved(address)
        guard !learnt.isOwn, learnt.isNew else { return }
        if introduced {
            logger.info("a peer introduced itself", metadata: ["peer.address": "\(address)", "peer.id": "\(uuid.lowercased)"])
        }
        if !learnt.previousAddresses.isEmpty {
            logger.notice("a peer changed address", metadata: [
                "peer.id": "\(uuid.lowercased)", "peer.address": "\(address)",
                "peer.previous": "\(learnt.previousAddresses.joined(separator: ","))"])
        }
        directory.save(resolver.nodes)
        events.publish(.peerIdentified(.node(uuid), address: address, introduced: introduced))
    }

    // MARK: - The report

    private func tick() {
        let t = clock.now
        apply(link.tick(at: t))
        start(scheduler.tick(at: t))
        let report = table.tick(at: t)
        for change in report.changes {
            logger.debug("zone changed", metadata: ["peer.id": "\(change.peer)", "from": "\(change.from?.rawValue ?? "none")",
                                                    "to": "\(change.to.rawValue)"])
        }
        for id in report.removed { logger.debug("peer left the table", metadata: ["peer.id": "\(id)"]) }
        var peers: [PeerState] = []
        peers.reserveCapacity(table.count)
        var candidates: [RegionCandidate] = []
        // Every stage after ranging (regions, alerts, tracking) reads the peers as candidates.
        candidates.reserveCapacity(table.count)
        for peer in table.peers.values {
            guard let details = peer.details else { continue }
            candidates.append(RegionCandidate(
                identifier: peer.identifier, kind: details.kind, address: details.address, beacon: details.beacon,
                proximity: peer.proximity, distance: peer.distance, rssi: Int16(clamping: Int(peer.rssi.rounded())),
                lastSeen: peer.lastSeen))
            peers.append(PeerState(
                identifier: peer.identifier, kind: details.kind, address: details.address, name: details.name ?? "",
                rssi: Int16(clamping: Int(peer.rssi.rounded())), smoothedRSSI: peer.smoothedRSSI,
                measuredPower: Int16(clamping: Int(peer.measuredPower.rounded())), distance: peer.distance,
                proximity: peer.proximity, firstSeen: clock.epochMicroseconds(peer.firstSeen),
                lastSeen: clock.epochMicroseconds(peer.lastSeen), beacon: details.beacon))
        }
        peers.sort { ($0.proximity, $0.distance, $0.identifier) < ($1.proximity, $1.distance, $1.identifier) }
        events.publish(.report(NodeReport(time: t, peers: peers, silenced: report.silenced, removed: report.removed)))
        publishRecording(removed: report.removed, at: t)
        monitorRegions(candidates, at: t)
        runAlerts(candidates, at: t)
        runTracking(candidates, at: t)
        syncEventLog()
    }
}
