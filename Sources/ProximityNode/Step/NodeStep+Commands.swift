import Logging
import ProximityAPIValues
import ProximityCore

extension NodeCommand {
    public static func updateAttribute(_ key: String, _ value: String) -> NodeCommand {
        NodeCommand("UpdateAttribute") { step, outcome, time throws(NodeRefusal) in
            try step.updateAttribute(key, value, into: &outcome, at: time)
        }
    }

    public static func removeAttribute(_ key: String) -> NodeCommand {
        NodeCommand("RemoveAttribute") { step, outcome, time throws(NodeRefusal) in
            try step.removeAttribute(key, into: &outcome, at: time)
        }
    }

    /// `TrackBeacon`: the seed's manual tracking.
    public static func trackBeacon(uuid: String, major: String, minor: String, prox: Int, data: [String: String]) -> NodeCommand {
        NodeCommand("TrackBeacon") { step, outcome, time in
            step.profileCommand(into: &outcome, at: time) { step, effects in
                step.apply(Tracker.manual(uuid: uuid, major: major, minor: minor, prox: prox, data: data), at: time, effects: &effects)
            }
        }
    }

    public static var clearCurrentBeacon: NodeCommand {
        NodeCommand("ClearCurrentBeacon") { step, outcome, time in
            let peer = step.profile.tracker.current
            step.profileCommand(into: &outcome, at: time) { step, effects in
                step.profile.tracker.reset()
                return step.apply(.clear(peer: peer), at: time, effects: &effects)
            }
        }
    }

    public static func addRule(_ rule: Rule) -> NodeCommand {
        NodeCommand("AddRule") { step, outcome, time throws(NodeRefusal) in try step.addRule(rule, into: &outcome, at: time) }
    }

    public static func removeRule(_ identifier: String) -> NodeCommand {
        NodeCommand("RemoveRule") { step, outcome, time throws(NodeRefusal) in try step.removeRule(identifier, into: &outcome, at: time) }
    }
}

/// Commands and reloads: each runs on the step (the executor runs it on a copy, and keeps the
/// copy once the files it must write are written), and answers with a ``StepOutcome``.
extension NodeStep {
    public mutating func command(_ command: NodeCommand, at time: NodeTime) throws(NodeRefusal) -> StepOutcome {
        var outcome = StepOutcome()
        try command.change(&self, &outcome, time)
        outcome.sequence = sequence
        return outcome
    }

    /// `file` must be written before the command counts; noted as written (the executor drops
    /// this step if the write fails).
    mutating func commit(_ file: StateFile, into outcome: inout StepOutcome, at time: NodeTime) {
        wrote(file, at: time.now)
        outcome.commit.removeAll { $0.kind == file.kind }
        outcome.commit.append(file)
    }

    // MARK: - Profile1

    /// Runs a profile command's happenings after `change` (applied to the profile) is committed.
    /// `before`: the attributes before the command, when it changed them already.
    mutating func profileCommand(into outcome: inout StepOutcome, at time: NodeTime, before: [String: String]? = nil,
                                 _ change: (inout NodeStep, inout [NodeEffect]) -> [Happening]) {
        let before = before ?? profile.profile.attributes
        var effects: [NodeEffect] = []
        let happenings = change(&self, &effects)
        let snapshot = profile.snapshot
        if profile.persisted.differs(snapshot) { commit(.profile(snapshot), into: &outcome, at: time) }
        let (reacted, offers) = react(happenings, at: time, profileBefore: before)
        outcome.effects += effects + reacted
        if !offers.isEmpty { outcome.effects += settleAlerts(offers, at: time) }
    }

    mutating func updateAttribute(_ key: String, _ value: String, into outcome: inout StepOutcome, at time: NodeTime) throws(NodeRefusal) {
        let before = profile.profile.attributes
        let changed: [String: String?]
        do throws(ProfileFull) { changed = try profile.profile.apply([key: value]) } catch {
            throw NodeRefusal(.limitReached, "the profile holds at most \(error.limit) attributes; remove some first")
        }
        profileCommand(into: &outcome, at: time, before: before) { step, _ in
            changed.isEmpty ? [] : [step.profileHappening(changed, by: "bus", at: time)]
        }
    }

    mutating func removeAttribute(_ key: String, into outcome: inout StepOutcome, at time: NodeTime) throws(NodeRefusal) {
        guard profile.profile[key] != nil else { throw NodeRefusal(.doesNotExist, "no attribute \(key.debugDescription)") }
        let before = profile.profile.attributes
        let changed = (try? profile.profile.apply([key: nil])) ?? [:]
        profileCommand(into: &outcome, at: time, before: before) { step, _ in [step.profileHappening(changed, by: "bus", at: time)] }
    }

    mutating func addRule(_ rule: Rule, into outcome: inout StepOutcome, at time: NodeTime) throws(NodeRefusal) {
        try profile.provenance.checkBusDefinition(rule.identifier, limit: RuleEngine.maxRules)
        profile.rules.add(rule)
        profile.provenance.set(rule.identifier, .bus)
        outcome.effects.append(.log(LogLine(.info, "rule added", ["rule": "\(rule.identifier)"])))
        profileCommand(into: &outcome, at: time) { _, _ in [] }
    }

    mutating func removeRule(_ identifier: String, into outcome: inout StepOutcome, at time: NodeTime) throws(NodeRefusal) {
        try profile.provenance.checkBusRemoval(identifier)
        profile.rules.remove(identifier)
        profile.provenance.set(identifier, nil)
        outcome.effects.append(.log(LogLine(.info, "rule removed", ["rule": "\(identifier)"])))
        profileCommand(into: &outcome, at: time) { _, _ in [] }
    }

    /// `GetRules`: identifier → the rule's JSON, with `"source"`.
    public var ruleDefinitions: [String: String] {
        var out: [String: String] = [:]
        for (id, rule) in profile.rules.rules {
            guard case .map(var entries, var order) = rule.definition else { continue }
            entries["source"] = .text((profile.provenance[id] ?? .bus).rawValue)
            order.append("source")
            out[id] = RuleValue.map(entries, order: order).json
        }
        return out
    }

    /// `TestRule`: whether the rule's condition holds on the profile now (`event.*` fields are
    /// missing), and why.
    public func testRule(_ identifier: String) throws(NodeRefusal) -> (Bool, [String]) {
        guard let rule = profile.rules.rules[identifier] else {
            throw NodeRefusal(.doesNotExist, "no rule \(identifier.debugDescription) is defined")
        }
        let lookup = { [profile = profile.profile] (key: String) in RuleEngine.lookup(key, profile: profile, event: nil) }
        return (rule.condition.holds(lookup), rule.condition.explain(lookup))
    }

    // MARK: - Reload

    /// A reloaded configuration's regions and monitor settings, alerts, tracking and rules, clear
    /// interval, names, zone distances and RSSI offset, as one change: checked first (a refusal changes nothing), its
    /// three files committed together, then published.
    public mutating func reconfigure(_ configuration: NodeConfiguration, at time: NodeTime) throws(NodeRefusal) -> StepOutcome {
        var outcome = StepOutcome()
        let (regionChanges, regionLines) = try reconfigureRegions(configuration, at: time.now)
        let (alertEvents, alertLines, alertsChanged) = try reconfigureAlerts(configuration)
        let ruleLines = try reconfigureRules(configuration)
        commit(.regions(regions.monitor.regions), into: &outcome, at: time)
        commit(.alerts(bus: alerts.busAlerts, engine: alerts.engine.saved), into: &outcome, at: time)
        commit(.profile(profile.snapshot), into: &outcome, at: time)
        outcome.effects += (regionLines + alertLines + ruleLines).map(NodeEffect.log)
        if alertsChanged { outcome.effects += publishAlerts(alertEvents, at: time) }
        outcome.effects += applyClearInterval(configuration.clearInterval ?? settings.clearInterval ?? RangingConfiguration().clearInterval)
        table.collectsSeconds = configuration.mqtt?.hearings == true
        if configuration.zones != table.configuration.thresholds {
            table.setThresholds(configuration.zones)
            outcome.effects.append(.log(LogLine(.notice, "the zone distances changed", [
                "zones.immediate": "\(configuration.zones.immediate)", "zones.near": "\(configuration.zones.near)"])))
            outcome.effects.append(.publish(.zoneDistances(configuration.zones)))
        }
        if configuration.names != configuredNames {
            configuredNames = configuration.names
            outcome.effects.append(.log(LogLine(.notice, "the peer names changed", ["names": "\(configuration.names.count)"])))
            outcome.effects.append(.publish(.peerNames(names.all, sequence: nextSequence())))
        }
        let was = trust
        trust = configuration.trust
        if trust.key != was.key || trust.acceptUnverified != was.acceptUnverified || trust.previousKey != was.previousKey {
            outcome.effects.append(.log(LogLine(.notice, trust.isTrusted ? "the fleet key changed: the trusted protocol from now on"
                                                    : "no fleet key: the open protocol from now on", [
                "fleet.key": "\(trust.key?.fingerprint ?? "none")", "was": "\(was.key?.fingerprint ?? "none")",
                "accept-unverified": "\(trust.acceptUnverified)"])))
            outcome.effects.append(.trust(trust))
            if trust.key != was.key {
                applyOrdering()
                outcome.effects += forgetAllPeers()
            }
        }
        outcome.effects += reconfigureIRKs(trust.irks, was: was.irks)
        if configuration.rssiOffset != rssiOffset {
            rssiOffset = configuration.rssiOffset
            outcome.effects.append(.log(LogLine(.notice, "the RSSI offset changed", ["rssi.offset": "\(rssiOffset)"])))
            outcome.effects.append(.publish(.rssiOffset(rssiOffset)))
        }
        outcome.effects += publishRegions(regionChanges, at: time)
        outcome.sequence = sequence
        return outcome
    }

    /// The config file's tracking and rules after a reload (rules of the bus with the same
    /// identifier give way).
    mutating func reconfigureRules(_ configuration: NodeConfiguration) throws(NodeRefusal) -> [LogLine] {
        profile.tracker.configuration = configuration.tracking
        let reload = profile.provenance.reload(config: configuration.rules.map(\.identifier))
        for id in reload.removed { profile.rules.remove(id) }
        for rule in configuration.rules { profile.rules.add(rule) }
        if profile.rules.rules.count > RuleEngine.maxRules {
            throw NodeRefusal(.invalidConfiguration,
                              "\(profile.rules.rules.count) rules (config file and bus) exceed \(RuleEngine.maxRules); remove some " +
                                  "first; nothing changed")
        }
        profile.provenance = reload.next
        return reload.lines
    }
}
