import Logging
import ProximityAPIValues
import ProximityCore

/// The alert engine's part of the step: the engine, where each alert came from, what was last
/// written to `alerts.json`, the offers rules made before the engine saw the report, and the
/// strategies clients registered.
struct AlertStage: Sendable {
    /// What `alerts.json` holds.
    struct File: Sendable, Equatable {
        var bus: [Alert]
        var engine: AlertEngine.Saved
    }

    /// A strategy a client registered: asked at each report about the targets it decides.
    struct Agent: Sendable {
        var client: StrategyClient
        /// Tells this registration from an earlier one of the same key (a late answer of a dropped
        /// one is ignored).
        var generation: Int
        /// A question is on its way: the next report does not ask again.
        var asking = false
    }

    var engine = AlertEngine()
    var provenance: Provenance
    var persisted: Persisted<File>
    /// Alerts rules offered from this report's region events, before the alert stage saw it.
    var pendingOffers: [AlertTargetKey] = []
    var agents: [String: Agent] = [:]
    var generation = 0
    var startLines: [LogLine]

    /// The config file's alerts, then those added over the bus, then their saved statuses.
    init(_ configuration: NodeConfiguration, _ saved: SavedAlerts, at t: Timestamp) {
        var engine = AlertEngine()
        (provenance, startLines) = Provenance.start(noun: "alert", config: configuration.alerts, bus: saved.busAlerts, id: \.identifier,
                                                    limit: NodeStep.maxAlerts) { alert, source in
            guard source == .config || engine.alerts.count < NodeStep.maxAlerts else { return false }
            _ = engine.add(alert)
            return true
        }
        engine.restore(saved.engine, at: t)
        self.engine = engine
        persisted = Persisted(File(bus: saved.busAlerts, engine: saved.engine), at: t)
    }

    var busAlerts: [Alert] {
        provenance.identifiers(from: .bus).compactMap { engine.alerts[$0] }
    }

    var file: File { File(bus: busAlerts, engine: engine.saved) }
}

extension NodeStep {
    /// The most alerts (config file and bus together).
    public static let maxAlerts = 1000
    /// The most strategies registered over the bus.
    public static let maxStrategies = 16
    /// The strategy keys the engine has itself.
    public static let builtInStrategies: Set<String> = [AlertEngine.defaultStrategyKey, TimeStrategy.defaultKey]

    /// Every alert target as it is now, for the exporter to show before the node takes its name.
    public var alertSnapshot: AlertChanges {
        AlertChanges(sequence: sequence, targets: alertTargets, current: alerts.engine.current, strategies: strategyKeysShown)
    }

    /// Every alert target as `Alert1` shows it.
    var alertTargets: [AlertTargetKey: AlertProperties] {
        var targets: [AlertTargetKey: AlertProperties] = [:]
        for (key, target) in alerts.engine.targets {
            guard let alert = alerts.engine.alerts[key.alert] else { continue }
            targets[key] = AlertProperties(alert, key, target)
        }
        return targets
    }

    /// The keys alerts may name now: the default strategies', the built-in and the registered.
    var strategyKeysShown: [String] { Set(alerts.engine.strategyKeys + [AlertEngine.defaultStrategyKey]).sorted() }

    /// `GetAlerts`: every target, sorted.
    public var alertTargetKeys: [AlertTargetKey] { alerts.engine.targets.keys.sorted() }

    /// `GetDefinitions`: every alert, with where it came from.
    public var alertDefinitions: [(Alert, RegionSource)] {
        alerts.engine.alerts.values.sorted { $0.identifier < $1.identifier }.map { ($0, alerts.provenance[$0.identifier] ?? .bus) }
    }

    // MARK: - Each report

    mutating func runAlerts(_ peers: [PeerSnapshot], at time: NodeTime) -> [NodeEffect] {
        guard !alerts.engine.alerts.isEmpty || !alerts.engine.targets.isEmpty else {
            alerts.pendingOffers = []
            return []
        }
        var events = alerts.engine.update(peers, at: time.now, local: time.local)
        // Offers rules made from this report's region events, now that the targets are known.
        for key in alerts.pendingOffers { events += alerts.engine.offerNow(key, at: time.now) }
        alerts.pendingOffers = []
        return settleAlerts(events, at: time) + askStrategies(at: time)
    }

    /// Saves what changed, then publishes: a new status is on disk before it is announced.
    mutating func settleAlerts(_ events: [AlertEvent], at time: NodeTime) -> [NodeEffect] {
        var effects: [NodeEffect] = []
        let file = alerts.file
        if alerts.persisted.differs(file) { effects.append(save(.alerts(bus: file.bus, engine: file.engine), at: time.now)) }
        return effects + publishAlerts(events, at: time)
    }

    /// The engine's picture after a step, with the step's events, logged and through the rules
    /// first (a rule may offer an alert).
    mutating func publishAlerts(_ emitted: [AlertEvent], at time: NodeTime) -> [NodeEffect] {
        var effects: [NodeEffect] = []
        var happened = emitted
        var fresh = emitted
        for _ in 0..<Self.maxRuleRounds where !fresh.isEmpty {
            let (reacted, offers) = react(Self.alertHappenings(fresh, at: time.epoch), at: time)
            effects += reacted
            fresh = offers
            happened += fresh
        }
        effects += happened.compactMap(Self.line).map(NodeEffect.log)
        var notices: [AlertChanges.Notice] = []
        for event in happened {
            switch event {
            case .offered(let key): notices.append(.ready(key, distance: alerts.engine.targets[key]?.distance ?? .infinity))
            case .removed(let key, let reason): notices.append(.removed(key, reason: reason.rawValue))
            default: break
            }
        }
        effects.append(.publish(.alerts(AlertChanges(sequence: nextSequence(), targets: alertTargets, notices: notices,
                                                     current: alerts.engine.current, strategies: strategyKeysShown))))
        return effects
    }

    private static func line(_ event: AlertEvent) -> LogLine? {
        switch event {
        case .offered(let key): LogLine(.info, "alert offered", ["alert": "\(key.alert)", "peer.id": "\(key.peer)"])
        case .removed(let key, let reason):
            LogLine(.info, "alert taken back", ["alert": "\(key.alert)", "peer.id": "\(key.peer)", "reason": "\(reason.rawValue)"])
        case .status(let key, let status):
            LogLine(.debug, "alert status", ["alert": "\(key.alert)", "peer.id": "\(key.peer)", "status": "\(status.rawValue)"])
        case .unknownStrategy(let alert, let key):
            LogLine(.warning, "an alert names a strategy that is not registered: it uses its default strategy until one is",
                    ["alert": "\(alert)", "strategy": "\(key)"])
        case .condition, .target: nil
        }
    }

    // MARK: - Commands (AlertManager1)

    mutating func addAlert(_ alert: Alert, into outcome: inout StepOutcome, at time: NodeTime) throws(NodeRefusal) {
        try alerts.provenance.checkBusDefinition(alert.identifier, limit: Self.maxAlerts)
        alerts.provenance.set(alert.identifier, .bus)
        let events = alerts.engine.add(alert)
        commit(.alerts(bus: alerts.busAlerts, engine: alerts.engine.saved), into: &outcome, at: time)
        outcome.effects.append(.log(LogLine(.info, "alert added", ["alert": "\(alert.identifier)", "source": "bus"])))
        outcome.effects += publishAlerts(events, at: time)
    }

    mutating func removeAlert(_ identifier: String, into outcome: inout StepOutcome, at time: NodeTime) throws(NodeRefusal) {
        try alerts.provenance.checkBusRemoval(identifier)
        alerts.provenance.set(identifier, nil)
        let events = alerts.engine.remove(identifier)
        commit(.alerts(bus: alerts.busAlerts, engine: alerts.engine.saved), into: &outcome, at: time)
        outcome.effects.append(.log(LogLine(.info, "alert removed", ["alert": "\(identifier)"])))
        outcome.effects += publishAlerts(events, at: time)
    }

    /// Accept, decline, done, a status: on a copy's engine; saved when it changed, then published.
    mutating func alertCommand(_ key: AlertTargetKey, into outcome: inout StepOutcome, at time: NodeTime,
                               _ change: (inout AlertEngine) throws(AlertCommandError) -> [AlertEvent]) throws(NodeRefusal) {
        guard alerts.engine.targets[key] != nil else { throw NodeRefusal(.doesNotExist, "no alert target \(key)") }
        let events: [AlertEvent]
        do throws(AlertCommandError) { events = try change(&alerts.engine) } catch { throw Self.refusal(error) }
        let file = alerts.file
        if alerts.persisted.differs(file) { commit(.alerts(bus: file.bus, engine: file.engine), into: &outcome, at: time) }
        outcome.effects += publishAlerts(events, at: time)
    }

    static func refusal(_ error: AlertCommandError) -> NodeRefusal {
        switch error {
        case .unknownTarget(let key): NodeRefusal(.doesNotExist, "no alert target \(key)")
        case .notOffered(let key): NodeRefusal(.notOffered, "alert \(key.alert.debugDescription) for \(key.peer) is not on offer")
        case .notInProgress(let key):
            NodeRefusal(.notOffered, "alert \(key.alert.debugDescription) for \(key.peer) is neither offered nor in progress")
        case .anotherCurrent(let key):
            NodeRefusal(.notPermitted, "alert \(key.alert.debugDescription) for \(key.peer) is offered or in progress: one alert at a time")
        }
    }

    // MARK: - Reload

    /// The config file's alerts after a reload (bus alerts of the same identifier give way).
    mutating func reconfigureAlerts(
        _ configuration: NodeConfiguration
    ) throws(NodeRefusal) -> (events: [AlertEvent], lines: [LogLine], changed: Bool) {
        let reload = alerts.provenance.reload(config: configuration.alerts.map(\.identifier))
        let before = alerts.engine.alerts
        var events: [AlertEvent] = []
        for id in reload.removed { events += alerts.engine.remove(id) }
        for alert in configuration.alerts where alerts.engine.alerts[alert.identifier] != alert { events += alerts.engine.add(alert) }
        if alerts.engine.alerts.count > Self.maxAlerts {
            throw NodeRefusal(.invalidConfiguration,
                              "\(alerts.engine.alerts.count) alerts (config file and bus) exceed \(Self.maxAlerts); remove some first; " +
                                  "nothing changed")
        }
        let changed = reload.next != alerts.provenance || alerts.engine.alerts != before
        alerts.provenance = reload.next
        var lines = reload.lines
        if changed { lines.append(LogLine(.info, "alerts of the config file applied", ["alerts": "\(configuration.alerts.count)"])) }
        return (events, lines, changed)
    }
}

extension NodeCommand {
    public static func addAlert(_ alert: Alert) -> NodeCommand {
        NodeCommand("AddAlert") { step, outcome, time throws(NodeRefusal) in try step.addAlert(alert, into: &outcome, at: time) }
    }

    public static func removeAlert(_ identifier: String) -> NodeCommand {
        NodeCommand("RemoveAlert") { step, outcome, time throws(NodeRefusal) in try step.removeAlert(identifier, into: &outcome, at: time) }
    }

    public static func accept(_ key: AlertTargetKey) -> NodeCommand {
        NodeCommand("Accept") { step, outcome, time throws(NodeRefusal) in
            try step.alertCommand(key, into: &outcome, at: time) { engine throws(AlertCommandError) in
                try engine.accept(key, at: time.now)
            }
        }
    }

    public static func decline(_ key: AlertTargetKey) -> NodeCommand {
        NodeCommand("Decline") { step, outcome, time throws(NodeRefusal) in
            try step.alertCommand(key, into: &outcome, at: time) { engine throws(AlertCommandError) in
                try engine.decline(key, at: time.now)
            }
        }
    }

    public static func done(_ key: AlertTargetKey) -> NodeCommand {
        NodeCommand("Done") { step, outcome, time throws(NodeRefusal) in
            try step.alertCommand(key, into: &outcome, at: time) { engine throws(AlertCommandError) in try engine.done(key, at: time.now) }
        }
    }

    public static func setActionStatus(_ key: AlertTargetKey, _ status: ActionStatus) -> NodeCommand {
        NodeCommand("SetActionStatus") { step, outcome, time throws(NodeRefusal) in
            try step.alertCommand(key, into: &outcome, at: time) { engine throws(AlertCommandError) in
                try engine.setStatus(key, status, at: time.now)
            }
        }
    }
}
