import Foundation
import Logging
import ProximityAPIValues
import ProximityCore

/// The tracking and rules part of the step: the tracker follows the nearest qualifying peer into
/// the profile (seed `004_…`), and every tracking, profile, region and alert event goes to the
/// event log, then through the rules, whose actions may change the profile (which the rules see
/// in turn), offer an alert, log, or signal. What rules did is on disk (`profile.json`) before it
/// is announced; the tracker's own values, which the next reports derive again, follow within
/// ``SavedProfile/refreshInterval``.
struct ProfileStage: Sendable {
    var tracker: Tracker
    var profile: Profile
    var rules: RuleEngine
    var provenance: Provenance
    var persisted: Persisted<SavedProfile>
    var startLines: [LogLine]

    init(_ configuration: NodeConfiguration, _ saved: SavedProfile, at t: Timestamp) {
        tracker = Tracker(configuration: configuration.tracking)
        if let tracked = saved.tracked { tracker.restore(current: PeerID(tracked.peer), prox: tracked.prox, at: t) }
        var rules = RuleEngine()
        (provenance, startLines) = Provenance.start(noun: "rule", config: configuration.rules, bus: saved.busRules, id: \.identifier,
                                                    limit: RuleEngine.maxRules) { rule, source in
            guard source == .config || rules.rules.count < RuleEngine.maxRules else { return false }
            rules.add(rule)
            return true
        }
        rules.fired = saved.fired.filter { rules.rules[$0.key] != nil }
        self.rules = rules
        profile = Profile(saved.attributes)
        persisted = Persisted(saved, at: t, refresh: SavedProfile.refreshInterval)
    }

    /// What `profile.json` holds: the profile, the bus's rules, when rules fired, the tracked peer.
    var snapshot: SavedProfile {
        var saved = SavedProfile()
        saved.attributes = profile.attributes
        saved.busRules = provenance.identifiers(from: .bus).compactMap { rules.rules[$0] }
        saved.fired = rules.fired
        saved.tracked = tracker.current.map { SavedProfile.Tracked(peer: $0.rawValue, prox: tracker.currentProx ?? 0) }
        return saved
    }
}

extension NodeStep {
    /// An event on its way through the stage: what the log keeps, what the rules see, and the
    /// signal of its own (`Tracked`, `Cleared`) if any.
    struct Happening: Sendable {
        /// Nil: nothing to log (a profile change the tracking event already holds).
        var log: LogEntryValue?
        var rules: RuleEvent
        var signal: ProfileSignal?
    }

    /// How many rounds of rule actions causing profile changes causing rules a step runs at most.
    static let maxRuleRounds = 8

    /// The profile's attributes, for the exporter to show before the node takes its name.
    public var profileAttributes: [String: String] { profile.profile.attributes }

    /// `.save(profile)` when it changed since the last save.
    mutating func saveProfileIfChanged(at t: Timestamp) -> [NodeEffect] {
        let snapshot = profile.snapshot
        guard profile.persisted.differs(snapshot) else { return [] }
        return [save(.profile(snapshot), at: t)]
    }

    // MARK: - Each report

    mutating func runTracking(_ peers: [PeerSnapshot], at time: NodeTime) -> [NodeEffect] {
        let actions = profile.tracker.update(peers, at: time.now)
        guard !actions.isEmpty else { return [] }
        let before = profile.profile.attributes
        var effects: [NodeEffect] = []
        var happenings: [Happening] = []
        for action in actions { happenings += apply(action, at: time, effects: &effects) }
        let (reacted, offers) = react(happenings, at: time, profileBefore: before)
        effects += reacted
        if !offers.isEmpty { effects += settleAlerts(offers, at: time) }
        return effects
    }

    /// Applies a tracking action to the profile; the happenings it makes (the tracking event, and
    /// the profile change for the rules).
    mutating func apply(_ action: TrackingAction, at time: NodeTime, effects: inout [NodeEffect]) -> [Happening] {
        switch action {
        case .track(let peer, let attributes, let contextData):
            let changed = (try? profile.profile.apply(attributes)) ?? [:]
            var data = contextData
            if let peer { data["peer"] = peer.rawValue }
            let prox = contextData[TrackingKeys.beaconProx] ?? contextData[TrackingKeys.nodeProx]
                ?? contextData[TrackingKeys.eddystoneProx] ?? ""
            effects.append(.log(LogLine(.info, "tracked", ["peer.id": "\(peer?.rawValue ?? "manual")", "prox": "\(prox)"])))
            var out = [Happening(log: LogEntryValue(time: time.epoch, source: "tracking", type: "tracked", data: data),
                                 rules: RuleEvent(trigger: .tracking, fields: data.merging(["type": "tracked"]) { _, type in type },
                                                  peer: peer),
                                 signal: .tracked(contextData))]
            if !changed.isEmpty { out.append(profileHappening(changed, by: "tracker", at: time, logged: false)) }
            return out
        case .clear(let peer):
            let changed = (try? profile.profile.apply(Dictionary(uniqueKeysWithValues: TrackingKeys.all.map { ($0, nil) }))) ?? [:]
            let data = peer.map { ["peer": $0.rawValue] } ?? [:]
            effects.append(.log(LogLine(.info, "cleared the current beacon", ["peer.id": "\(peer?.rawValue ?? "manual")"])))
            var out = [Happening(log: LogEntryValue(time: time.epoch, source: "tracking", type: "cleared", data: data),
                                 rules: RuleEvent(trigger: .tracking, fields: data.merging(["type": "cleared"]) { _, type in type },
                                                  peer: peer),
                                 signal: .cleared)]
            if !changed.isEmpty { out.append(profileHappening(changed, by: "tracker", at: time, logged: false)) }
            return out
        }
    }

    /// A profile change for the rules (and the log, unless the tracking event already holds it).
    func profileHappening(_ changed: [String: String?], by who: String, at time: NodeTime, logged: Bool = true) -> Happening {
        var data: [String: String] = ["by": who]
        for (key, value) in changed { data[key] = value ?? "" }
        let removed = changed.filter { $0.value == nil }.keys.sorted()
        if !removed.isEmpty { data["removed"] = removed.joined(separator: ",") }
        var fields = data
        fields["type"] = "changed"
        return Happening(log: logged ? LogEntryValue(time: time.epoch, source: "profile", type: "changed", data: data) : nil,
                         rules: RuleEvent(trigger: .profile, fields: fields), signal: nil)
    }

    /// Whether `peer` is a node that proved its identity with the fleet's key.
    func isVerified(_ peer: PeerID) -> Bool {
        UUID(uuidString: peer.rawValue).map(resolver.isVerified) ?? false
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
                             rules: RuleEvent(trigger: .region, fields: data.merging(["type": type]) { _, type in type }, peer: peer),
                             signal: nil)
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
    /// ``maxRuleRounds`` rounds at most), saves what changed, and publishes the profile's step.
    /// Returns the effects and the alert events of `offer-alert` actions, for the caller to
    /// publish with the alerts. `profileBefore`: the attributes before the happenings' own
    /// changes (the `Attributes` the bus shows until this step).
    mutating func react(_ happenings: [Happening], at time: NodeTime,
                        profileBefore: [String: String]? = nil) -> (effects: [NodeEffect], offers: [AlertEvent]) {
        guard !happenings.isEmpty else { return ([], []) }
        let t = time.now
        let before = profileBefore ?? profile.profile.attributes
        var effects: [NodeEffect] = []
        var offers: [AlertEvent] = []
        var queue = happenings
        var round = 0
        // First the rules and the profile; then the log and the signals, in order, once the
        // state is saved.
        var items: [ProfileItem] = []
        func add(_ happening: Happening) {
            if let signal = happening.signal { items.append(.signal(signal)) }
            if let log = happening.log { items.append(.log(log)) }
        }
        var firedAny = false
        while !queue.isEmpty, round < Self.maxRuleRounds {
            var next: [Happening] = []
            for happening in queue {
                add(happening)
                let on = "\(happening.rules.trigger.rawValue).\(happening.rules.fields["type"] ?? "")"
                // `event.verified`, for the conditions only (the log entry's data is the event's own).
                var event = happening.rules
                if let peer = event.peer { event.fields["verified"] = String(isVerified(peer)) }
                for firing in profile.rules.evaluate(event, profile: profile.profile, at: t) {
                    firedAny = true
                    effects.append(.log(LogLine(.info, "rule fired", ["rule": "\(firing.rule)", "on": "\(on)"])))
                    items.append(.log(LogEntryValue(time: time.epoch, source: "rule", type: "fired",
                                                    data: ["rule": firing.rule, "on": on])))
                    for action in firing.actions {
                        switch action {
                        case .signal(let data):
                            items.append(.signal(.ruleFired(rule: firing.rule, data: data)))
                        case .set(let values):
                            changeProfile(values.mapValues { Optional($0) }, by: "rule \(firing.rule)", at: time, into: &next,
                                          effects: &effects)
                        case .remove(let keys):
                            changeProfile(Dictionary(uniqueKeysWithValues: keys.map { ($0, String?.none) }), by: "rule \(firing.rule)",
                                          at: time, into: &next, effects: &effects)
                        case .offerAlert(let id):
                            offers += offerAlert(id, for: firing, at: t, effects: &effects)
                        case .log(let data):
                            items.append(.log(LogEntryValue(time: time.epoch, source: "rule", type: "log",
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
            effects.append(.log(LogLine(.warning,
                                        "rules changed the profile \(Self.maxRuleRounds) rounds in a row: the last changes reach no rule")))
            for happening in queue { add(happening) }
        }
        if firedAny || profile.persisted.isDue(at: t) { effects += saveProfileIfChanged(at: t) }
        effects.append(.profile(sequence: nextSequence(),
                                attributes: profile.profile.attributes != before ? profile.profile.attributes : nil,
                                items: items))
        return (effects, offers)
    }

    /// A rule's `offer-alert`: the alert for the event's peer (else the tracked one), now, or once
    /// the alert stage has seen this report (region events come first).
    private mutating func offerAlert(_ id: String, for firing: RuleFiring, at t: Timestamp, effects: inout [NodeEffect]) -> [AlertEvent] {
        guard let peer = firing.peer ?? profile.tracker.current else {
            effects.append(.log(LogLine(.notice, "a rule offers an alert, but no peer goes with its event",
                                        ["rule": "\(firing.rule)", "alert": "\(id)"])))
            return []
        }
        let key = AlertTargetKey(alert: id, peer: peer)
        let made = alerts.engine.offerNow(key, at: t)
        if made.isEmpty, alerts.engine.targets[key] == nil, alerts.engine.alerts[id] != nil {
            alerts.pendingOffers.append(key)
        } else if made.isEmpty {
            effects.append(.log(LogLine(.notice, "a rule's alert was not offered (no such target, not waiting, or another on offer)",
                                        ["rule": "\(firing.rule)", "alert": "\(id)", "peer.id": "\(peer)"])))
        }
        return made
    }

    private mutating func changeProfile(_ changes: [String: String?], by who: String, at time: NodeTime, into next: inout [Happening],
                                        effects: inout [NodeEffect]) {
        // A value its tokens made too long is not set (the profile keeps only what it can load).
        var changes = changes
        for (key, value) in changes {
            guard let value, let problem = Profile.problem(value: value) else { continue }
            effects.append(.log(LogLine(.warning, "a rule's value was not set: \(problem)", ["by": "\(who)", "key": "\(key)"])))
            changes[key] = nil
        }
        do {
            let changed = try profile.profile.apply(changes)
            if !changed.isEmpty { next.append(profileHappening(changed, by: who, at: time)) }
        } catch {
            effects.append(.log(LogLine(.warning, "the profile is full: a rule's change was not made", ["limit": "\(error.limit)"])))
        }
    }
}
