import DBusKit
import Foundation
import Logging
import ProximityAPI
import ProximityCore

/// The alert stage: the core's ``AlertEngine`` fed by each report, its commands from
/// `AlertManager1`, its state saved in `alerts.json` before anything announces it, and the
/// strategies that clients decide over the bus.
extension NodeEngine {
    typealias Manager1 = ProximityBus.AlertManager1

    /// The most alerts (config file and bus together).
    public static let maxAlerts = 1000
    /// The most strategies registered over the bus.
    public static let maxStrategies = 16
    /// How long a strategy client has to answer `Evaluate`.
    public static let strategyTimeout: Duration = .seconds(2)
    /// The strategy keys the engine has itself.
    static let builtInStrategies: Set<String> = [AlertEngine.defaultStrategyKey, TimeStrategy.defaultKey]

    /// A strategy a client registered: it is asked at each report about the targets it decides.
    struct StrategyAgent: Sendable {
        var key: String
        var owner: BusName
        var path: ObjectPath
        /// Tells this registration from an earlier one of the same key (a late answer of a dropped
        /// one is ignored).
        var generation: Int
        /// A question is on its way: the next report does not ask again.
        var asking = false
    }

    /// The alerts at start: the config file's, then those added over the bus (a config alert of
    /// the same identifier wins), then their saved statuses.
    static func startAlerts(_ configuration: NodeConfiguration, _ saved: AlertStore.Saved, at t: Timestamp,
                            logger: Logger) -> (AlertEngine, [String: RegionSource]) {
        var engine = AlertEngine()
        var sources: [String: RegionSource] = [:]
        for alert in configuration.alerts {
            _ = engine.add(alert)
            sources[alert.identifier] = .config
        }
        for alert in saved.busAlerts {
            if sources[alert.identifier] != nil {
                logger.notice("an alert added over the bus is now defined in the config file", metadata: ["alert": "\(alert.identifier)"])
                continue
            }
            guard engine.alerts.count < maxAlerts else {
                logger.error("alert limit reached: an alert added over the bus was not restored", metadata: ["alert": "\(alert.identifier)", "limit": "\(maxAlerts)"])
                continue
            }
            _ = engine.add(alert)
            sources[alert.identifier] = .bus
        }
        engine.restore(saved.engine, at: t)
        return (engine, sources)
    }

    var busAlerts: [Alert] {
        alerts.alerts.values.filter { alertSources[$0.identifier] == .bus }.sorted { $0.identifier < $1.identifier }
    }

    /// Writes `engine`'s bus alerts and saved state, if they differ from what is on disk; a
    /// failure is the caller's error, with nothing changed.
    func saveAlerts(_ engine: AlertEngine, sources: [String: RegionSource], force: Bool = false) throws(DBusError) {
        let saved = engine.saved
        let bus = engine.alerts.values.filter { sources[$0.identifier] == .bus }.sorted { $0.identifier < $1.identifier }
        guard force || saved != alertsSaved || bus != busAlerts else { return }
        do { try alertStore.save(busAlerts: bus, engine: saved, clock: clock) } catch {
            throw DBusError(Errors.failed, "cannot save the alerts: \(error)")
        }
        alertsSaved = saved
    }

    /// The engine's picture after a step, published with the step's events (numbered in the same
    /// series as the regions' changes). Returns the sequence.
    @discardableResult
    func publishAlerts(_ emitted: [AlertEvent]) -> UInt64 {
        // Logged and through the rules before the signals go out; a rule may offer an alert.
        var happened = emitted
        var fresh = emitted
        for _ in 0..<Self.maxRuleRounds where !fresh.isEmpty {
            fresh = react(Self.alertHappenings(fresh, at: clock.epoch(clock.now)), at: clock.now)
            happened += fresh
        }
        for event in happened { log(event) }
        let targets = alertTargetProperties
        var signals: [AlertSignal] = []
        for event in happened {
            switch event {
            case .offered(let key):
                let path = ProximityBus.alertPath(alert: key.alert, target: key.peer.rawValue)
                signals.append(.ready(path, targets[path]?.offer(distance: alerts.targets[key]?.distance ?? .infinity) ?? [:]))
            case .removed(let key, let reason):
                signals.append(.removed(ProximityBus.alertPath(alert: key.alert, target: key.peer.rawValue), reason: reason.rawValue))
            default: break
            }
        }
        changeSequence += 1
        events.publish(.alerts(AlertChanges(sequence: changeSequence, targets: targets, signals: signals, current: currentAlertPath,
                                            strategies: strategyKeysShown)))
        return changeSequence
    }

    private func log(_ event: AlertEvent) {
        switch event {
        case .offered(let key): logger.info("alert offered", metadata: ["alert": "\(key.alert)", "peer.id": "\(key.peer)"])
        case .removed(let key, let reason):
            logger.info("alert taken back", metadata: ["alert": "\(key.alert)", "peer.id": "\(key.peer)", "reason": "\(reason.rawValue)"])
        case .status(let key, let status):
            logger.debug("alert status", metadata: ["alert": "\(key.alert)", "peer.id": "\(key.peer)", "status": "\(status.rawValue)"])
        case .unknownStrategy(let alert, let key):
            logger.warning("an alert names a strategy that is not registered: it uses its default strategy until one is",
                           metadata: ["alert": "\(alert)", "strategy": "\(key)"])
        case .condition, .target: break
        }
    }

    /// Every alert target as it is now, for the exporter to show before the node takes its name.
    public var alertSnapshot: AlertChanges {
        AlertChanges(sequence: changeSequence, targets: alertTargetProperties, current: currentAlertPath, strategies: strategyKeysShown)
    }

    /// Every alert target as `Alert1` shows it, by path.
    var alertTargetProperties: [ObjectPath: AlertProperties] {
        var targets: [ObjectPath: AlertProperties] = [:]
        for (key, target) in alerts.targets {
            guard let alert = alerts.alerts[key.alert] else { continue }
            let properties = AlertProperties(alert, key, target)
            targets[properties.path] = properties
        }
        return targets
    }

    var currentAlertPath: ObjectPath? { alerts.current.map { ProximityBus.alertPath(alert: $0.alert, target: $0.peer.rawValue) } }
    /// The keys alerts may name now: the default strategies', the built-in and the registered.
    var strategyKeysShown: [String] { Set(alerts.strategyKeys + [AlertEngine.defaultStrategyKey]).sorted() }

    // MARK: - Each report

    /// The wall clock's day of the week and minute at `t`, in the node's time zone (`TZ`).
    func localTime(at t: Timestamp) -> LocalTime {
        let date = Date(timeIntervalSince1970: clock.epoch(t))
        let c = Calendar.current.dateComponents([.weekday, .hour, .minute], from: date)
        // Calendar's weekday: 1 Sunday … 7 Saturday; ISO: 1 Monday … 7 Sunday.
        return LocalTime(weekday: ((c.weekday ?? 2) + 5) % 7 + 1, minute: (c.hour ?? 0) * 60 + (c.minute ?? 0))
    }

    func runAlerts(_ candidates: [RegionCandidate], at t: Timestamp) {
        guard !alerts.alerts.isEmpty || !alerts.targets.isEmpty else {
            pendingOffers = []
            return
        }
        var events = alerts.update(candidates, at: t, local: localTime(at: t))
        // Offers rules made from this report's region events, now that the targets are known.
        for key in pendingOffers { events += alerts.offerNow(key, at: t) }
        pendingOffers = []
        settleAlerts(events)
        askStrategies()
    }

    /// Saves what changed, then publishes: a new status is on disk before it is announced.
    func settleAlerts(_ events: [AlertEvent]) {
        do { try saveAlerts(alerts, sources: alertSources) } catch {
            logger.error("cannot save the alerts' state", metadata: ["error": "\(error.message)"])
        }
        publishAlerts(events)
    }

    // MARK: - Strategies decided by clients

    /// Asks each strategy client about the targets it decides, unless its last question is still
    /// unanswered. The answers come back to ``strategyAnswered(_:generation:_:)``.
    func askStrategies() {
        for (key, agent) in strategyAgents where !agent.asking {
            let decided = alerts.targets(decidedBy: key)
            guard !decided.isEmpty else { continue }
            var request: [DBusValue.DictEntry] = []
            for (target, state, parameters) in decided {
                let info: [String: DBusValue] = [
                    "Alert": .string(target.alert), "Target": .string(target.peer.rawValue),
                    "Detected": .boolean(state.detected), "Proximity": .string(state.proximity.rawValue),
                    "Distance": .double(state.distance.isFinite ? state.distance : -1),
                    "Range": .string(parameters.range.rawValue), "Comparison": .string(parameters.comparison.rawValue),
                    "ActionStatus": .string(state.actionStatus.rawValue),
                    "LastSeen": .uint64(state.lastDetected.isFinite ? clock.epochMicroseconds(state.lastDetected) : 0),
                ]
                request.append(.init(.objectPath(ProximityBus.alertPath(alert: target.alert, target: target.peer.rawValue)), .variantMap(info)))
            }
            strategyAgents[key]!.asking = true
            let argument = DBusValue.dictionary(key: .objectPath, value: .dictionary(key: .string, value: .variant), request)
            let connection = self.connection
            enqueue { [self] in
                do {
                    let reply = try await connection.call(destination: agent.owner, path: agent.path, interface: ProximityBus.AlertStrategy1.interface,
                                                          member: ProximityBus.AlertStrategy1.evaluate, [argument], timeout: Self.strategyTimeout)
                    guard reply.count == 1, reply[0].type == ProximityBus.AlertStrategy1.verdictsType, let entries = reply[0].dictEntries else {
                        throw DBusError(Errors.invalidArguments, "Evaluate answered '\(Signature(reply.map(\.type)))', expected 'a{ob}'")
                    }
                    var verdicts: [AlertTargetKey: Bool] = [:]
                    for entry in entries {
                        guard let path = entry.key.objectPath, let verdict = entry.value.bool,
                              let (alert, peer) = ProximityBus.alertTarget(of: path) else { continue }
                        verdicts[AlertTargetKey(alert: alert, peer: PeerID(peer))] = verdict
                    }
                    await self.strategyAnswered(key, generation: agent.generation, verdicts)
                } catch {
                    await self.dropStrategy(key, generation: agent.generation, because: "its Evaluate failed: \(error)")
                }
            }
        }
    }

    func strategyAnswered(_ key: String, generation: Int, _ verdicts: [AlertTargetKey: Bool]) {
        guard strategyAgents[key]?.generation == generation else { return }
        strategyAgents[key]!.asking = false
        let events = alerts.apply(verdicts: verdicts, from: key, at: clock.now)
        guard !events.isEmpty else { return }
        settleAlerts(events)
    }

    /// Drops a strategy (it failed, timed out or left the bus): its targets fall back to their
    /// default strategy at the next report. It is told with `Release`, unless it left.
    func dropStrategy(_ key: String, generation: Int, because reason: String, release: Bool = true) {
        guard let agent = strategyAgents[key], agent.generation == generation else { return }
        strategyAgents[key] = nil
        alerts.unregister(key)
        logger.warning("dropped a strategy: its alerts use their default strategy", metadata: [
            "strategy": "\(key)", "dbus.sender": "\(agent.owner)", "dbus.path": "\(agent.path)", "why": "\(reason)"])
        publishAlerts([])
        if release { sendRelease(agent) }
    }

    private func sendRelease(_ agent: StrategyAgent) {
        let connection = self.connection
        enqueue {
            // Its answer does not matter: the strategy is gone either way.
            _ = try? await connection.call(destination: agent.owner, path: agent.path, interface: ProximityBus.AlertStrategy1.interface,
                                           member: ProximityBus.AlertStrategy1.release, timeout: .seconds(1))
        }
    }

    // MARK: - Commands (AlertManager1)

    func targetKey(_ path: ObjectPath) throws(DBusError) -> AlertTargetKey {
        guard let (alert, peer) = ProximityBus.alertTarget(of: path),
              alerts.targets[AlertTargetKey(alert: alert, peer: PeerID(peer))] != nil else {
            throw DBusError(Errors.doesNotExist, "no alert target at \(path)")
        }
        return AlertTargetKey(alert: alert, peer: PeerID(peer))
    }

    /// Runs a command on a copy of the engine, saves the copy, then keeps it and publishes.
    private func command(_ change: (inout AlertEngine) throws(DBusError) -> [AlertEvent],
                         sources: [String: RegionSource]? = nil) throws(DBusError) -> UInt64 {
        var next = alerts
        let events = try change(&next)
        let nextSources = sources ?? alertSources
        try saveAlerts(next, sources: nextSources, force: sources != nil)
        alerts = next
        alertSources = nextSources
        return publishAlerts(events)
    }

    private static func refusal(_ error: AlertCommandError) -> DBusError {
        switch error {
        case .unknownTarget(let key): DBusError(Errors.doesNotExist, "no alert target \(key)")
        case .notOffered(let key): DBusError(Errors.notOffered, "alert \(key.alert.debugDescription) for \(key.peer) is not on offer")
        case .notInProgress(let key):
            DBusError(Errors.notOffered, "alert \(key.alert.debugDescription) for \(key.peer) is neither offered nor in progress")
        case .anotherCurrent(let key):
            DBusError(Errors.notPermitted, "alert \(key.alert.debugDescription) for \(key.peer) is offered or in progress: one alert at a time")
        }
    }

    /// `AddAlert`: adds or replaces an alert of the bus.
    public func addAlert(_ alert: Alert) throws(DBusError) -> UInt64 {
        if alertSources[alert.identifier] == .config {
            throw DBusError(Errors.notPermitted, "alert \(alert.identifier.debugDescription) is defined in the config file; change it there and reload")
        }
        if alerts.alerts[alert.identifier] == nil, alerts.alerts.count >= Self.maxAlerts {
            throw DBusError(Errors.limitReached, "at most \(Self.maxAlerts) alerts may be defined; remove some first")
        }
        var sources = alertSources
        sources[alert.identifier] = .bus
        let sequence = try command({ engine throws(DBusError) in engine.add(alert) }, sources: sources)
        logger.info("alert added", metadata: ["alert": "\(alert.identifier)", "source": "bus"])
        return sequence
    }

    /// `RemoveAlert`.
    public func removeAlert(_ identifier: String) throws(DBusError) -> UInt64 {
        guard let source = alertSources[identifier] else {
            throw DBusError(Errors.doesNotExist, "no alert \(identifier.debugDescription) is defined")
        }
        guard source == .bus else {
            throw DBusError(Errors.notPermitted, "alert \(identifier.debugDescription) is defined in the config file; remove it there and reload")
        }
        var sources = alertSources
        sources[identifier] = nil
        let sequence = try command({ engine throws(DBusError) in engine.remove(identifier) }, sources: sources)
        logger.info("alert removed", metadata: ["alert": "\(identifier)"])
        return sequence
    }

    public func acceptAlert(_ path: ObjectPath) throws(DBusError) -> UInt64 {
        let key = try targetKey(path)
        return try command { engine throws(DBusError) in
            do throws(AlertCommandError) { return try engine.accept(key, at: clock.now) } catch { throw Self.refusal(error) }
        }
    }

    public func declineAlert(_ path: ObjectPath) throws(DBusError) -> UInt64 {
        let key = try targetKey(path)
        return try command { engine throws(DBusError) in
            do throws(AlertCommandError) { return try engine.decline(key, at: clock.now) } catch { throw Self.refusal(error) }
        }
    }

    public func alertDone(_ path: ObjectPath) throws(DBusError) -> UInt64 {
        let key = try targetKey(path)
        return try command { engine throws(DBusError) in
            do throws(AlertCommandError) { return try engine.done(key, at: clock.now) } catch { throw Self.refusal(error) }
        }
    }

    public func setActionStatus(_ path: ObjectPath, _ status: ActionStatus) throws(DBusError) -> UInt64 {
        let key = try targetKey(path)
        return try command { engine throws(DBusError) in
            do throws(AlertCommandError) { return try engine.setStatus(key, status, at: clock.now) } catch { throw Self.refusal(error) }
        }
    }

    /// `GetAlerts`: every target's object, sorted.
    public var alertTargetPaths: [ObjectPath] {
        alerts.targets.keys.sorted().map { ProximityBus.alertPath(alert: $0.alert, target: $0.peer.rawValue) }
    }

    /// `GetDefinitions`: every alert's parts, with `Source`.
    public var alertDefinitions: [String: [String: DBusValue]] {
        var out: [String: [String: DBusValue]] = [:]
        for (id, alert) in alerts.alerts {
            var values = alert.busValues
            values["Source"] = .string((alertSources[id] ?? .bus).rawValue)
            out[id] = values
        }
        return out
    }

    /// `RegisterStrategy` by `owner` (its unique name), after the caller checked that the object
    /// implements `AlertStrategy1`.
    public func registerStrategy(_ key: String, owner: BusName, path: ObjectPath) throws(DBusError) -> UInt64 {
        if let problem = AlertStrategyKey.problem(key) { throw DBusError(Errors.invalidArguments, "the strategy key \(problem)") }
        if Self.builtInStrategies.contains(key) {
            throw DBusError(Errors.alreadyExists, "\(key.debugDescription) is a built-in strategy; register under another key")
        }
        if let existing = strategyAgents[key], existing.owner != owner {
            throw DBusError(Errors.alreadyExists, "strategy \(key.debugDescription) is registered by \(existing.owner)")
        }
        if let other = strategyAgents.values.first(where: { $0.owner == owner && $0.path == path && $0.key != key }) {
            throw DBusError(Errors.alreadyExists, "\(path) is already registered as strategy \(other.key.debugDescription)")
        }
        if strategyAgents[key] == nil, strategyAgents.count >= Self.maxStrategies {
            throw DBusError(Errors.limitReached, "at most \(Self.maxStrategies) strategies may be registered")
        }
        strategyGeneration += 1
        strategyAgents[key] = StrategyAgent(key: key, owner: owner, path: path, generation: strategyGeneration)
        alerts.register(.external(key: key))
        logger.info("strategy registered", metadata: ["strategy": "\(key)", "dbus.sender": "\(owner)", "dbus.path": "\(path)"])
        let generation = strategyGeneration
        // Dropped when its client leaves the bus; the watch ends with the registration.
        watchClient(owner, stillWatched: { await $0.strategyAgents[key]?.generation == generation }) {
            await $0.dropStrategy(key, generation: generation, because: $1, release: false)
        }
        return publishAlerts([])
    }

    /// `UnregisterStrategy` by `owner`.
    public func unregisterStrategy(_ path: ObjectPath, owner: BusName) throws(DBusError) -> UInt64 {
        guard let agent = strategyAgents.values.first(where: { $0.owner == owner && $0.path == path }) else {
            throw DBusError(Errors.doesNotExist, "no strategy is registered at \(path) by \(owner)")
        }
        strategyAgents[agent.key] = nil
        alerts.unregister(agent.key)
        logger.info("strategy unregistered", metadata: ["strategy": "\(agent.key)"])
        return publishAlerts([])
    }

    // MARK: - Reload

    /// The config file's alerts after a reload, as the engine would have them: checked here,
    /// saved by the reload with the other parts, then kept by ``commitAlerts(_:)``.
    func reconfiguredAlerts(_ configuration: NodeConfiguration) throws(DBusError) -> (AlertEngine, [String: RegionSource], [AlertEvent]) {
        var next = alerts
        var sources = alertSources
        var events: [AlertEvent] = []
        let wanted = Set(configuration.alerts.map(\.identifier))
        for (id, source) in alertSources.sorted(by: { $0.key < $1.key }) where source == .config && !wanted.contains(id) {
            events += next.remove(id)
            sources[id] = nil
        }
        for alert in configuration.alerts {
            if sources[alert.identifier] == .bus {
                logger.notice("an alert added over the bus is now defined in the config file", metadata: ["alert": "\(alert.identifier)"])
            }
            if next.alerts[alert.identifier] != alert { events += next.add(alert) }
            sources[alert.identifier] = .config
        }
        if next.alerts.count > Self.maxAlerts {
            throw DBusError(Errors.invalidConfiguration,
                            "\(next.alerts.count) alerts (config file and bus) exceed \(Self.maxAlerts); remove some first; nothing changed")
        }
        return (next, sources, events)
    }

    /// Keeps the reloaded alerts (saved already) and publishes them.
    func commitAlerts(_ next: (AlertEngine, [String: RegionSource], [AlertEvent])) -> UInt64? {
        guard next.1 != alertSources || next.0.alerts != alerts.alerts else { return nil }
        alerts = next.0
        alertSources = next.1
        logger.info("alerts of the config file applied", metadata: ["alerts": "\(next.1.values.filter { $0 == .config }.count)"])
        return publishAlerts(next.2)
    }

    func saveAlertsOnStop() {
        guard !alerts.alerts.isEmpty || alertStore.exists else { return }
        do { try saveAlerts(alerts, sources: alertSources, force: true) } catch {
            logger.error("cannot save the alerts at shutdown", metadata: ["error": "\(error.message)"])
        }
    }
}
