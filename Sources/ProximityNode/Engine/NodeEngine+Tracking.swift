import DBusKit
import Foundation
import Logging
import ProximityAPI
import ProximityCore

/// The tracking stage and the rules: the tracker follows the nearest qualifying peer into the
/// profile (seed `004_…`), and every tracking, profile, region and alert event goes to the event
/// log, then through the rules, whose actions may change the profile (which the rules see in turn),
/// offer an alert, log, or signal. Everything the node keeps (the profile, bus rules, when rules
/// fired, the log) is on disk before the signal that announces it.
extension NodeEngine {
    /// An event on its way through the stage: what the log keeps, what the rules see, and the
    /// signal of its own (`Tracked`, `Cleared`) if any.
    struct Happening {
        /// Nil: nothing to log (a profile change the tracking event already holds).
        var log: LogEntryValue?
        var rules: RuleEvent
        var signal: ProfileSignal?
    }

    /// How many rounds of rule actions causing profile changes causing rules a step runs at most.
    static let maxRuleRounds = 8

    static func startProfile(_ configuration: NodeConfiguration, _ saved: ProfileStore.Saved, at t: Timestamp,
                             logger: Logger) -> (Tracker, Profile, RuleEngine, [String: RegionSource]) {
        var tracker = Tracker(configuration: configuration.tracking)
        if let tracked = saved.tracked { tracker.restore(current: PeerID(tracked.peer), prox: tracked.prox, at: t) }
        var rules = RuleEngine()
        var sources: [String: RegionSource] = [:]
        for rule in configuration.rules {
            rules.add(rule)
            sources[rule.identifier] = .config
        }
        for rule in saved.busRules {
            if sources[rule.identifier] != nil {
                logger.notice("a rule added over the bus is now defined in the config file", metadata: ["rule": "\(rule.identifier)"])
                continue
            }
            guard rules.rules.count < RuleEngine.maxRules else {
                logger.error("rule limit reached: a rule added over the bus was not restored", metadata: ["rule": "\(rule.identifier)", "limit": "\(RuleEngine.maxRules)"])
                continue
            }
            rules.add(rule)
            sources[rule.identifier] = .bus
        }
        rules.fired = saved.fired.filter { rules.rules[$0.key] != nil }
        return (tracker, Profile(saved.attributes), rules, sources)
    }

    /// The profile's part of the state: the profile, the bus's rules, when rules fired, the
    /// tracked peer.
    struct ProfileState {
        var tracker: Tracker
        var profile: Profile
        var rules: RuleEngine
        var sources: [String: RegionSource]

        var snapshot: ProfileStore.Saved {
            var saved = ProfileStore.Saved()
            saved.attributes = profile.attributes
            saved.busRules = rules.rules.values.filter { sources[$0.identifier] == .bus }.sorted { $0.identifier < $1.identifier }
            saved.fired = rules.fired
            saved.tracked = tracker.current.map { ProfileStore.Tracked(peer: $0.rawValue, prox: tracker.currentProx ?? 0) }
            return saved
        }
    }

    var profileState: ProfileState { ProfileState(tracker: tracker, profile: profile, rules: rules, sources: ruleSources) }

    /// Writes the profile's part of the state (this engine's, or `state`) if it changed; a failure
    /// is the caller's error.
    func saveProfile(_ state: ProfileState? = nil, force: Bool = false) throws(DBusError) {
        let snapshot = (state ?? profileState).snapshot
        guard force || snapshot != profileSaved else { return }
        do { try profileStore.save(snapshot, clock: clock) } catch {
            throw DBusError(Errors.failed, "cannot save the profile: \(error)")
        }
        profileSaved = snapshot
        profileSavedAt = clock.now
    }

    /// Appends to the event log; nil when it cannot be written (logged; the event still goes on,
    /// without its `Logged` signal).
    func record(_ event: LogEntryValue) -> LogEntryValue? {
        do { return try eventLog.append(event) } catch {
            logger.error("cannot write the event log", metadata: ["error": "\(error)"])
            return nil
        }
    }

    // MARK: - Each report

    func runTracking(_ candidates: [RegionCandidate], at t: Timestamp) {
        let actions = tracker.update(candidates, at: t)
        guard !actions.isEmpty else { return }
        let before = profile.attributes
        var happenings: [Happening] = []
        for action in actions { happenings += apply(action, at: t) }
        let offers = react(happenings, at: t, profileBefore: before)
        if !offers.isEmpty { settleAlerts(offers) }
    }

    /// Applies a tracking action to the profile; the happenings it makes (the tracking event, and
    /// the profile change for the rules).
    func apply(_ action: TrackingAction, at t: Timestamp) -> [Happening] {
        let epoch = clock.epoch(t)
        switch action {
        case .track(let peer, let attributes, let contextData):
            let changed = (try? profile.apply(attributes)) ?? [:]
            var data = contextData
            if let peer { data["peer"] = peer.rawValue }
            logger.info("tracked", metadata: ["peer.id": "\(peer?.rawValue ?? "manual")", "prox": "\(contextData[TrackingKeys.beaconProx] ?? contextData[TrackingKeys.nodeProx] ?? contextData[TrackingKeys.eddystoneProx] ?? "")"])
            var out = [Happening(log: LogEntryValue(time: epoch, source: "tracking", type: "tracked", data: data),
                                 rules: RuleEvent(trigger: .tracking, fields: data.merging(["type": "tracked"]) { _, type in type }, peer: peer),
                                 signal: .tracked(contextData))]
            if !changed.isEmpty { out.append(profileHappening(changed, by: "tracker", at: t, logged: false)) }
            return out
        case .clear(let peer):
            let changed = (try? profile.apply(Dictionary(uniqueKeysWithValues: TrackingKeys.all.map { ($0, nil) }))) ?? [:]
            let data = peer.map { ["peer": $0.rawValue] } ?? [:]
            logger.info("cleared the current beacon", metadata: ["peer.id": "\(peer?.rawValue ?? "manual")"])
            var out = [Happening(log: LogEntryValue(time: epoch, source: "tracking", type: "cleared", data: data),
                                 rules: RuleEvent(trigger: .tracking, fields: data.merging(["type": "cleared"]) { _, type in type }, peer: peer),
                                 signal: .cleared)]
            if !changed.isEmpty { out.append(profileHappening(changed, by: "tracker", at: t, logged: false)) }
            return out
        }
    }

    /// A profile change for the rules (and the log, unless the tracking event already holds it).
    func profileHappening(_ changed: [String: String?], by who: String, at t: Timestamp, logged: Bool = true) -> Happening {
        var data: [String: String] = ["by": who]
        for (key, value) in changed { data[key] = value ?? "" }
        let removed = changed.filter { $0.value == nil }.keys.sorted()
        if !removed.isEmpty { data["removed"] = removed.joined(separator: ",") }
        var fields = data
        fields["type"] = "changed"
        return Happening(log: logged ? LogEntryValue(time: clock.epoch(t), source: "profile", type: "changed", data: data) : nil,
                         rules: RuleEvent(trigger: .profile, fields: fields), signal: nil)
    }

    /// `ranging`: the report's peers per region, nearest first; an event's peer (for
    /// `offer-alert`) is its region's nearest present peer.
    static func regionHappenings(_ events: [RegionEvent], ranging: [RegionRanging]?, at epoch: Double) -> [Happening] {
        let nearest = Dictionary((ranging ?? []).compactMap { r in r.peers.first.map { (r.region, $0.identifier) } }) { a, _ in a }
        return events.map { event in
            var (type, data): (String, [String: String]) = switch event {
            case .determined(let id, let state): ("determined", ["region": id, "state": state.rawValue])
            case .entered(let id): ("entered", ["region": id])
            case .exited(let id): ("exited", ["region": id])
            }
            let peer = nearest[event.region]
            if let peer { data["peer"] = peer.rawValue }
            return Happening(log: LogEntryValue(time: epoch, source: "region", type: type, data: data),
                             rules: RuleEvent(trigger: .region, fields: data.merging(["type": type]) { _, type in type }, peer: peer), signal: nil)
        }
    }

    static func alertHappenings(_ events: [AlertEvent], at epoch: Double) -> [Happening] {
        events.compactMap { event in
            let (type, key, extra): (String, AlertTargetKey, [String: String])
            switch event {
            case .offered(let k): (type, key, extra) = ("offered", k, [:])
            case .removed(let k, let reason): (type, key, extra) = ("removed", k, ["reason": reason.rawValue])
            case .status(let k, let status): (type, key, extra) = ("status", k, ["status": status.rawValue])
            case .condition, .target, .unknownStrategy: return nil
            }
            let data = ["alert": key.alert, "target": key.peer.rawValue].merging(extra) { a, _ in a }
            return Happening(log: LogEntryValue(time: epoch, source: "alert", type: type, data: data),
                             rules: RuleEvent(trigger: .alert, fields: data.merging(["type": type]) { _, type in type }, peer: key.peer),
                             signal: nil)
        }
    }

    /// Logs `happenings`, runs the rules on each (and on the profile changes their actions make,
    /// ``maxRuleRounds`` rounds at most), saves what changed, and publishes the step. Returns the
    /// alert events of `offer-alert` actions, for the caller to publish with the alerts.
    @discardableResult
    /// `profileBefore`: the attributes before the happenings' own changes (the `Attributes` the
    /// bus shows until this step).
    func react(_ happenings: [Happening], at t: Timestamp, profileBefore: [String: String]? = nil) -> [AlertEvent] {
        guard !happenings.isEmpty else { return [] }
        let before = profileBefore ?? profile.attributes
        var signals: [ProfileSignal] = []
        var offers: [AlertEvent] = []
        var queue = happenings
        var round = 0
        // First the rules and the profile; then the log and the signals, in order, once the
        // state is saved.
        var ordered: [(signal: ProfileSignal?, log: LogEntryValue?)] = []
        var firedAny = false
        while !queue.isEmpty, round < Self.maxRuleRounds {
            var next: [Happening] = []
            for happening in queue {
                ordered.append((happening.signal, happening.log))
                let on = "\(happening.rules.trigger.rawValue).\(happening.rules.fields["type"] ?? "")"
                for firing in rules.evaluate(happening.rules, profile: profile, at: t) {
                    firedAny = true
                    logger.info("rule fired", metadata: ["rule": "\(firing.rule)", "on": "\(on)"])
                    ordered.append((nil, LogEntryValue(time: clock.epoch(t), source: "rule", type: "fired", data: ["rule": firing.rule, "on": on])))
                    for action in firing.actions {
                        switch action {
                        case .signal(let data):
                            ordered.append((.ruleFired(rule: firing.rule, data: data), nil))
                        case .set(let values):
                            changeProfile(values.mapValues { Optional($0) }, by: "rule \(firing.rule)", at: t, into: &next)
                        case .remove(let keys):
                            changeProfile(Dictionary(uniqueKeysWithValues: keys.map { ($0, String?.none) }), by: "rule \(firing.rule)", at: t, into: &next)
                        case .offerAlert(let id):
                            guard let peer = firing.peer ?? tracker.current else {
                                logger.notice("a rule offers an alert, but no peer goes with its event", metadata: ["rule": "\(firing.rule)", "alert": "\(id)"])
                                continue
                            }
                            let key = AlertTargetKey(alert: id, peer: peer)
                            let made = alerts.offerNow(key, at: t)
                            if made.isEmpty, alerts.targets[key] == nil, alerts.alerts[id] != nil {
                                // The alert stage has not seen this report yet (region events
                                // come first): offered once it has, in this report.
                                pendingOffers.append(key)
                            } else if made.isEmpty {
                                logger.notice("a rule's alert was not offered (no such target, not waiting, or another on offer)",
                                              metadata: ["rule": "\(firing.rule)", "alert": "\(id)", "peer.id": "\(peer)"])
                            }
                            offers += made
                        case .log(let data):
                            ordered.append((nil, LogEntryValue(time: clock.epoch(t), source: "rule", type: "log",
                                                             data: data.merging(["rule": firing.rule]) { _, rule in rule })))
                        }
                    }
                }
            }
            queue = next
            round += 1
        }
        if !queue.isEmpty {
            // The last round's changes are made and logged, but no rule sees them.
            logger.warning("rules changed the profile \(Self.maxRuleRounds) rounds in a row: the last changes reach no rule")
            for happening in queue { ordered.append((happening.signal, happening.log)) }
        }
        // What rules did (fired, changed) is on disk before it is announced; the tracker's own
        // values, which the next reports derive again, within ProfileStore.refreshInterval.
        if firedAny || t - profileSavedAt >= ProfileStore.refreshInterval {
            do { try saveProfile() } catch {
                logger.error("cannot save the profile", metadata: ["error": "\(error.message)"])
            }
        }
        for (signal, log) in ordered {
            if let signal { signals.append(signal) }
            if let log, let entry = record(log) { signals.append(.logged(entry)) }
        }
        changeSequence += 1
        events.publish(.profile(ProfileChanges(sequence: changeSequence, attributes: profile.attributes != before ? profile.attributes : nil,
                                               signals: signals)))
        return offers
    }

    private func changeProfile(_ changes: [String: String?], by who: String, at t: Timestamp, into next: inout [Happening]) {
        // A value its tokens made too long is not set (the profile keeps only what it can load).
        var changes = changes
        for (key, value) in changes {
            guard let value, let problem = Profile.problem(value: value) else { continue }
            logger.warning("a rule's value was not set: \(problem)", metadata: ["by": "\(who)", "key": "\(key)"])
            changes[key] = nil
        }
        do {
            let changed = try profile.apply(changes)
            if !changed.isEmpty { next.append(profileHappening(changed, by: who, at: t)) }
        } catch {
            logger.warning("the profile is full: a rule's change was not made", metadata: ["limit": "\(error.limit)"])
        }
    }

    /// The profile's part after the engine starts, for the exporter to show before the node
    /// takes its name.
    public var profileAttributes: [String: String] { profile.attributes }

    // MARK: - Commands (Profile1)

    /// Runs a profile command's happenings after `change` (applied to the profile) is saved;
    /// returns the sequence of the published step.
    private func profileCommand(_ change: () throws(DBusError) -> [Happening]) throws(DBusError) -> UInt64 {
        let before = (profile, tracker, rules, ruleSources)
        let happenings = try change()
        do { try saveProfile() } catch {
            (profile, tracker, rules, ruleSources) = before
            throw error
        }
        let offers = react(happenings, at: clock.now, profileBefore: before.0.attributes)
        if !offers.isEmpty { settleAlerts(offers) }
        return changeSequence
    }

    public func updateAttribute(_ key: String, _ value: String) throws(DBusError) -> UInt64 {
        try profileCommand { () throws(DBusError) in
            let changed: [String: String?]
            do throws(ProfileFull) { changed = try profile.apply([key: value]) } catch {
                throw DBusError(Errors.limitReached, "the profile holds at most \(error.limit) attributes; remove some first")
            }
            return changed.isEmpty ? [] : [profileHappening(changed, by: "bus", at: clock.now)]
        }
    }

    public func removeAttribute(_ key: String) throws(DBusError) -> UInt64 {
        guard profile[key] != nil else { throw DBusError(Errors.doesNotExist, "no attribute \(key.debugDescription)") }
        return try profileCommand { () throws(DBusError) in
            let changed = (try? profile.apply([key: nil])) ?? [:]
            return [profileHappening(changed, by: "bus", at: clock.now)]
        }
    }

    public func trackBeacon(uuid: String, major: String, minor: String, prox: Int, data: [String: String]) throws(DBusError) -> UInt64 {
        try profileCommand { apply(Tracker.manual(uuid: uuid, major: major, minor: minor, prox: prox, data: data), at: clock.now) }
    }

    public func clearCurrentBeacon() throws(DBusError) -> UInt64 {
        let peer = tracker.current
        return try profileCommand {
            tracker.reset()
            return apply(.clear(peer: peer), at: clock.now)
        }
    }

    public func addRule(_ rule: Rule) throws(DBusError) -> UInt64 {
        if ruleSources[rule.identifier] == .config {
            throw DBusError(Errors.notPermitted, "rule \(rule.identifier.debugDescription) is defined in the config file; change it there and reload")
        }
        if rules.rules[rule.identifier] == nil, rules.rules.count >= RuleEngine.maxRules {
            throw DBusError(Errors.limitReached, "at most \(RuleEngine.maxRules) rules may be defined; remove some first")
        }
        return try profileCommand {
            rules.add(rule)
            ruleSources[rule.identifier] = .bus
            logger.info("rule added", metadata: ["rule": "\(rule.identifier)"])
            return []
        }
    }

    public func removeRule(_ identifier: String) throws(DBusError) -> UInt64 {
        guard let source = ruleSources[identifier] else { throw DBusError(Errors.doesNotExist, "no rule \(identifier.debugDescription) is defined") }
        guard source == .bus else {
            throw DBusError(Errors.notPermitted, "rule \(identifier.debugDescription) is defined in the config file; remove it there and reload")
        }
        return try profileCommand {
            rules.remove(identifier)
            ruleSources[identifier] = nil
            logger.info("rule removed", metadata: ["rule": "\(identifier)"])
            return []
        }
    }

    /// `GetRules`: identifier → the rule's JSON, with `"source"`.
    public var ruleDefinitions: [String: String] {
        var out: [String: String] = [:]
        for (id, rule) in rules.rules {
            guard case .map(var entries, var order) = rule.definition else { continue }
            entries["source"] = .text((ruleSources[id] ?? .bus).rawValue)
            order.append("source")
            out[id] = RuleValue.map(entries, order: order).json
        }
        return out
    }

    /// `TestRule`: whether the rule's condition holds on the profile now (`event.*` fields are
    /// missing), and why.
    public func testRule(_ identifier: String) throws(DBusError) -> (Bool, [String]) {
        guard let rule = rules.rules[identifier] else { throw DBusError(Errors.doesNotExist, "no rule \(identifier.debugDescription) is defined") }
        let lookup = { [profile] (key: String) in RuleEngine.lookup(key, profile: profile, event: nil) }
        return (rule.condition.holds(lookup), rule.condition.explain(lookup))
    }

    /// `GetEvents`.
    public func loggedEvents(after seq: UInt64, since time: Double, limit: Int) -> [LogEntryValue] {
        eventLog.read(after: seq, since: time > 0 ? time : nil, limit: limit)
    }

    /// Flushes the event log's last entries to the disk once they are a second old, and saves the
    /// tracker's values once they are ``ProfileStore/refreshInterval`` old.
    func syncEventLog() {
        eventLog.syncIfDue()
        if clock.now - profileSavedAt >= ProfileStore.refreshInterval {
            do { try saveProfile() } catch {
                logger.error("cannot save the profile", metadata: ["error": "\(error.message)"])
            }
        }
    }

    // MARK: - Reload

    /// The config file's tracking and rules after a reload (rules of the bus with the same
    /// identifier give way): checked here, saved by the reload with the other parts, then kept by
    /// ``commitProfile(_:)``.
    func reconfiguredProfile(_ configuration: NodeConfiguration) throws(DBusError) -> ProfileState {
        var next = profileState
        next.tracker.configuration = configuration.tracking
        let wanted = Set(configuration.rules.map(\.identifier))
        for (id, source) in next.sources where source == .config && !wanted.contains(id) {
            next.rules.remove(id)
            next.sources[id] = nil
        }
        for rule in configuration.rules {
            if next.sources[rule.identifier] == .bus {
                logger.notice("a rule added over the bus is now defined in the config file", metadata: ["rule": "\(rule.identifier)"])
            }
            next.rules.add(rule)
            next.sources[rule.identifier] = .config
        }
        if next.rules.rules.count > RuleEngine.maxRules {
            throw DBusError(Errors.invalidConfiguration,
                            "\(next.rules.rules.count) rules (config file and bus) exceed \(RuleEngine.maxRules); remove some first; nothing changed")
        }
        return next
    }

    func commitProfile(_ next: ProfileState) -> UInt64 {
        (tracker, profile, rules, ruleSources) = (next.tracker, next.profile, next.rules, next.sources)
        return changeSequence
    }

    func saveProfileOnStop() {
        do { try saveProfile() } catch {
            logger.error("cannot save the profile at shutdown", metadata: ["error": "\(error.message)"])
        }
    }
}
