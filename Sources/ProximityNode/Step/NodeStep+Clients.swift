import Logging
import ProximityAPIValues
import ProximityCore

/// The step's outside clients, as one state machine: alert strategies that clients decide
/// (registered, asked once per report while no question is pending, answered or failed, dropped)
/// and the clients recording samples; each client is watched once, and leaving the bus drops
/// whatever it held.
///
/// ```
///   RegisterStrategy ──▶ registered ──report──▶ asking ──answer──▶ registered
///                            │                    │ failure, timeout
///                            ▼                    ▼
///              Unregister, client left ──────▶ dropped (Release, unless it left)
/// ```
extension NodeStep {
    /// Asks each strategy client about the targets it decides, unless its last question is still
    /// unanswered.
    mutating func askStrategies(at time: NodeTime) -> [NodeEffect] {
        var effects: [NodeEffect] = []
        for (key, agent) in alerts.agents.sorted(by: { $0.key < $1.key }) where !agent.asking {
            let decided = alerts.engine.targets(decidedBy: key)
            guard !decided.isEmpty else { continue }
            alerts.agents[key]!.asking = true
            effects.append(.ask(StrategyQuestion(key: key, client: agent.client, generation: agent.generation, targets: decided)))
        }
        return effects
    }

    mutating func registerStrategy(_ key: String, _ client: StrategyClient, into outcome: inout StepOutcome,
                                   at time: NodeTime) throws(NodeRefusal) {
        if let problem = AlertStrategyKey.problem(key) { throw NodeRefusal(.invalidArguments, "the strategy key \(problem)") }
        if Self.builtInStrategies.contains(key) {
            throw NodeRefusal(.alreadyExists, "\(key.debugDescription) is a built-in strategy; register under another key")
        }
        if let existing = alerts.agents[key], existing.client.owner != client.owner {
            throw NodeRefusal(.alreadyExists, "strategy \(key.debugDescription) is registered by \(existing.client.owner)")
        }
        if let other = alerts.agents.first(where: { $0.value.client == client && $0.key != key }) {
            throw NodeRefusal(.alreadyExists, "\(client.path) is already registered as strategy \(other.key.debugDescription)")
        }
        if alerts.agents[key] == nil, alerts.agents.count >= Self.maxStrategies {
            throw NodeRefusal(.limitReached, "at most \(Self.maxStrategies) strategies may be registered")
        }
        alerts.generation += 1
        alerts.agents[key] = AlertStage.Agent(client: client, generation: alerts.generation)
        alerts.engine.register(.external(key: key))
        outcome.effects.append(.log(LogLine(.info, "strategy registered", [
            "strategy": "\(key)", "dbus.sender": "\(client.owner)", "dbus.path": "\(client.path)"])))
        // Dropped when its client leaves the bus.
        outcome.effects += watch(client.owner)
        outcome.effects += publishAlerts([], at: time)
    }

    mutating func unregisterStrategy(_ client: StrategyClient, into outcome: inout StepOutcome, at time: NodeTime) throws(NodeRefusal) {
        guard let key = alerts.agents.first(where: { $0.value.client == client })?.key else {
            throw NodeRefusal(.doesNotExist, "no strategy is registered at \(client.path) by \(client.owner)")
        }
        alerts.agents[key] = nil
        alerts.engine.unregister(key)
        outcome.effects.append(.log(LogLine(.info, "strategy unregistered", ["strategy": "\(key)"])))
        outcome.effects += publishAlerts([], at: time)
    }

    mutating func strategyAnswered(_ key: String, generation: Int, _ verdicts: [AlertTargetKey: Bool], at time: NodeTime) -> [NodeEffect] {
        guard alerts.agents[key]?.generation == generation else { return [] }
        alerts.agents[key]!.asking = false
        let events = alerts.engine.apply(verdicts: verdicts, from: key, at: time.now)
        return events.isEmpty ? [] : settleAlerts(events, at: time)
    }

    /// Drops a strategy (it failed, timed out or left the bus): its targets fall back to their
    /// default strategy at the next report. It is told with `Release`, unless it left.
    mutating func dropStrategy(_ key: String, generation: Int?, because reason: String, release: Bool, at time: NodeTime) -> [NodeEffect] {
        guard let agent = alerts.agents[key], generation == nil || agent.generation == generation else { return [] }
        alerts.agents[key] = nil
        alerts.engine.unregister(key)
        var effects: [NodeEffect] = [.log(LogLine(.warning, "dropped a strategy: its alerts use their default strategy", [
            "strategy": "\(key)", "dbus.sender": "\(agent.client.owner)", "dbus.path": "\(agent.client.path)", "why": "\(reason)"]))]
        effects += publishAlerts([], at: time)
        if release { effects.append(.release(agent.client)) }
        return effects
    }

    /// Watches `client` leave the bus, once however often it registers or records.
    mutating func watch(_ client: String) -> [NodeEffect] {
        watchedClients.insert(client).inserted ? [.watch(client: client)] : []
    }

    /// `client` left the bus (or cannot be watched): its strategies and its recording go.
    mutating func clientLeft(_ client: String, because reason: String, at time: NodeTime) -> [NodeEffect] {
        watchedClients.remove(client)
        var effects: [NodeEffect] = []
        for (key, agent) in alerts.agents.sorted(by: { $0.key < $1.key }) where agent.client.owner == client {
            effects += dropStrategy(key, generation: nil, because: reason, release: false, at: time)
        }
        if recording.clients.removeValue(forKey: client) != nil {
            recording.recompute()
            effects.append(.log(LogLine(.info, "stopped recording samples", ["dbus.sender": "\(client)", "why": "\(reason)"])))
        }
        return effects
    }
}

extension NodeCommand {
    public static func registerStrategy(_ key: String, _ client: StrategyClient) -> NodeCommand {
        NodeCommand("RegisterStrategy") { step, outcome, time throws(NodeRefusal) in
            try step.registerStrategy(key, client, into: &outcome, at: time)
        }
    }

    public static func unregisterStrategy(_ client: StrategyClient) -> NodeCommand {
        NodeCommand("UnregisterStrategy") { step, outcome, time throws(NodeRefusal) in
            try step.unregisterStrategy(client, into: &outcome, at: time)
        }
    }

    /// A strategy's `Evaluate` answered the question of `generation`.
    public static func strategyAnswered(_ key: String, generation: Int, _ verdicts: [AlertTargetKey: Bool]) -> NodeCommand {
        NodeCommand("StrategyAnswered") { step, outcome, time in
            outcome.effects = step.strategyAnswered(key, generation: generation, verdicts, at: time)
        }
    }

    /// A strategy's `Evaluate` failed: the strategy is dropped.
    public static func strategyFailed(_ key: String, generation: Int, because reason: String) -> NodeCommand {
        NodeCommand("StrategyFailed") { step, outcome, time in
            outcome.effects = step.dropStrategy(key, generation: generation, because: reason, release: true, at: time)
        }
    }

    /// A watched client left the bus.
    public static func clientLeft(_ client: String, because reason: String) -> NodeCommand {
        NodeCommand("ClientLeft") { step, outcome, time in outcome.effects = step.clientLeft(client, because: reason, at: time) }
    }
}
