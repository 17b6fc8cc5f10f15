/// What the alert engine reports, in order.
public enum AlertEvent: Sendable, Hashable {
    /// The consumer offers this target's alert (`AlertReady`): accept, decline or mark it done.
    case offered(AlertTargetKey)
    /// The alert offered or in progress is taken back (`AlertRemoved`), with the reason.
    case removed(AlertTargetKey, reason: RemovalReason)
    /// A target's action status changed.
    case status(AlertTargetKey, ActionStatus)
    /// A target's condition began or stopped holding.
    case condition(AlertTargetKey, valid: Bool)
    /// A target appeared (its first report) or went (its alert removed, or it was forgotten).
    case target(AlertTargetKey, exists: Bool)
    /// An alert names a strategy key that is not registered: it uses its default strategy. Once
    /// per alert and key.
    case unknownStrategy(alert: String, key: String)
}

/// Why an offered or in-progress alert was taken back.
public enum RemovalReason: String, Sendable, Hashable {
    /// The target is no longer in the report.
    case notDetected = "not-detected"
    /// The target's condition no longer holds.
    case conditionNotValid = "condition-not-valid"
    /// The alert was removed (over the bus, or from the config file).
    case alertRemoved = "alert-removed"
    /// Its action status was forced to another value.
    case statusForced = "status-forced"
}

/// The consumer's refusal of a command.
public enum AlertCommandError: Error, Sendable, Hashable {
    case unknownTarget(AlertTargetKey)
    /// Accept or decline of a target that is not the one on offer.
    case notOffered(AlertTargetKey)
    /// Done of a target that is neither offered nor in progress.
    case notInProgress(AlertTargetKey)
    /// Forcing a target in progress while another is offered or in progress.
    case anotherCurrent(AlertTargetKey)
}

/// One target of one alert: the seed's beacon alert strategy parameter object.
public struct AlertTarget: Sendable {
    public internal(set) var actionStatus: ActionStatus = .waitingForAction
    public internal(set) var conditionValid = false
    /// Condition valid and waiting for action.
    public var readyForAction: Bool { conditionValid && actionStatus == .waitingForAction }
    /// The key of the strategy deciding it now (`range` for the default strategies).
    public internal(set) var strategy: String
    /// In the last report.
    public internal(set) var detected = false
    /// When it was last in a report.
    public internal(set) var lastDetected: Timestamp = -.infinity
    public internal(set) var proximity: Proximity = .unknown
    public internal(set) var distance: Double = .infinity
    /// Since when the condition has not held (nil while it holds): the reset counts from here.
    public internal(set) var invalidSince: Timestamp?
    /// Declined while on offer: not offered again until its condition stops holding and holds again.
    public internal(set) var declined = false
    /// Restored after a restart: its offer or action is not taken back before this time, while
    /// the table fills again.
    public internal(set) var graceUntil: Timestamp?
    /// Offered by a rule (``AlertEngine/offerNow(_:)``): not taken back for its condition until
    /// it is done.
    public internal(set) var forced = false
    var parameter: any Sendable
}

/// The alert engine (seed `000_…`): strategies keep each target's condition, the action status
/// keeps a done alert from firing again until it resets, and the consumer offers one alert at a
/// time, the closest ready target first. Pure; time is passed in.
///
/// - Only the strategy moves `done` → `waitingForAction`: `maxTimeBeforeReset` after the
///   condition stopped holding (if it holds again before, the alert stays done).
/// - Only the consumer moves `waitingForAction` → `inProgress` (`accept`) → `done` (`done`, or
///   the target gone or out of its condition while in progress).
/// - One alert is offered or in progress at a time. A declined target is not offered again until
///   its condition has stopped holding and holds again.
public struct AlertEngine: Sendable {
    public private(set) var alerts: [String: Alert] = [:]
    public private(set) var targets: [AlertTargetKey: AlertTarget] = [:]
    /// The target offered or in progress.
    public private(set) var current: AlertTargetKey?
    private var strategies: [String: AnyAlertStrategy] = [:]
    /// Alert identifier and strategy key of each unknown-strategy warning given.
    private var warned: Set<[String]> = []
    private var now: Timestamp = 0
    private var local: LocalTime?
    /// When each target's alert was last accepted (the cooldown), and each alert's accepted
    /// offers within its cap's window.
    private var acceptedAt: [AlertTargetKey: Timestamp] = [:]
    private var accepted: [String: [Timestamp]] = [:]
    public static let defaultStrategyKey = "range"
    /// How long a target out of the reports is kept when nothing else holds it (its strategy's
    /// parameter, such as a detection under way, is kept that long), seconds.
    public static let forgetAfter: Double = 300

    public init(strategies: [AnyAlertStrategy] = [AnyAlertStrategy(TimeStrategy())]) {
        for s in strategies { self.strategies[s.key] = s }
    }

    public var strategyKeys: [String] { strategies.keys.sorted() }

    /// Registers a strategy (replacing one with its key); targets of alerts that name it use it
    /// from the next report.
    public mutating func register(_ strategy: AnyAlertStrategy) {
        strategies[strategy.key] = strategy
    }

    /// Drops a strategy: its targets fall back to their default strategy at the next report.
    public mutating func unregister(_ key: String) {
        strategies[key] = nil
    }

    // MARK: - Alerts

    /// Adds an alert, or replaces the one with its identifier (its targets keep their status).
    public mutating func add(_ alert: Alert) -> [AlertEvent] {
        alerts[alert.identifier] = alert
        return []
    }

    /// Removes an alert and its targets; an offer or action of it is taken back.
    public mutating func remove(_ identifier: String) -> [AlertEvent] {
        guard alerts.removeValue(forKey: identifier) != nil else { return [] }
        var events: [AlertEvent] = []
        if let current, current.alert == identifier {
            events.append(.removed(current, reason: .alertRemoved))
            self.current = nil
        }
        for key in targets.keys.sorted() where key.alert == identifier {
            targets[key] = nil
            events.append(.target(key, exists: false))
        }
        return events + offerNext()
    }

    // MARK: - Each report

    /// Feeds one report: every peer in the table, with its zone and distance. `local` is the
    /// wall clock's day and time, for schedules (nil: schedules are open).
    public mutating func update(_ peers: [PeerSnapshot], at t: Timestamp, local: LocalTime? = nil) -> [AlertEvent] {
        now = t
        self.local = local
        var events: [AlertEvent] = []
        var seen: [AlertTargetKey: AlertObservation] = [:]
        for alert in alerts.values {
            for peer in peers where alert.targets.matches(peer) {
                seen[AlertTargetKey(alert: alert.identifier, peer: peer.identifier)] =
                    AlertObservation(peer: peer.identifier, proximity: peer.proximity, distance: peer.distance, lastSeen: peer.lastSeen)
            }
        }
        for key in seen.keys.sorted() where targets[key] == nil {
            let strategy = self.strategy(for: key.alert, &events)
            targets[key] = AlertTarget(strategy: strategy.key, invalidSince: t, parameter: strategy.make())
            events.append(.target(key, exists: true))
        }
        for key in targets.keys.sorted() {
            guard let alert = alerts[key.alert] else { continue }
            var target = targets[key]!
            let strategy = self.strategy(for: key.alert, &events)
            if strategy.key != target.strategy {
                target.strategy = strategy.key
                target.parameter = strategy.make()
            }
            let observation = seen[key]
            target.detected = observation != nil
            if observation != nil { target.lastDetected = t }
            target.proximity = observation?.proximity ?? .unknown
            target.distance = observation?.distance ?? .infinity
            strategy.updateBox(&target.parameter, observation, alert.parameters, t)
            evaluate(key, &target, strategy, alert.parameters, at: t, &events)
            // Forgotten once nothing is kept for it: gone for a while, waiting, its condition not
            // holding.
            if !target.detected, t - target.lastDetected > Self.forgetAfter, target.actionStatus == .waitingForAction,
               !target.conditionValid, current != key,
               target.graceUntil.map({ t >= $0 }) ?? true {
                targets[key] = nil
                events.append(.target(key, exists: false))
                continue
            }
            targets[key] = target
        }
        settle(at: t, &events)
        return events
    }

    /// Asks `strategy` whether `target`'s condition holds, and applies the answer: the condition's
    /// change, and a done status's reset `maxTimeBeforeReset` after the condition stopped holding.
    /// A target restored after a restart keeps the condition it was saved with during its grace.
    private func evaluate(_ key: AlertTargetKey, _ target: inout AlertTarget, _ strategy: AnyAlertStrategy, _ parameters: AlertParameters,
                          at t: Timestamp, _ events: inout [AlertEvent]) {
        var valid = strategy.valid(target.parameter, parameters, t)
        if strategy.undecided(target.parameter) { valid = target.conditionValid }
        if valid { target.graceUntil = nil }
        if let grace = target.graceUntil {
            if t < grace { valid = target.conditionValid } else { target.graceUntil = nil }
        }
        if valid != target.conditionValid {
            target.conditionValid = valid
            events.append(.condition(key, valid: valid))
            if valid { target.invalidSince = nil } else { target.invalidSince = t; target.declined = false }
        }
        if target.actionStatus == .done, let since = target.invalidSince, t - since >= parameters.maxTimeBeforeReset {
            target.actionStatus = .waitingForAction
            events.append(.status(key, .waitingForAction))
        }
    }

    /// After the targets' conditions changed: takes back the alert offered or in progress when
    /// its target left or its condition failed, drops what its schedule drops, and offers the next.
    private mutating func settle(at t: Timestamp, _ events: inout [AlertEvent]) {
        if let current, let target = targets[current], target.graceUntil.map({ t >= $0 }) ?? true {
            let reason: RemovalReason? = !target.detected ? .notDetected
                : !target.conditionValid && !target.forced ? .conditionNotValid : nil
            if let reason {
                events.append(.removed(current, reason: reason))
                self.current = nil
                targets[current]!.forced = false
                if target.actionStatus == .inProgress {
                    targets[current]!.actionStatus = .done
                    events.append(.status(current, .done))
                }
            }
        }
        // Outside its schedule, a ready target of an alert that drops is marked done.
        for (key, target) in targets.sorted(by: { $0.key < $1.key }) where target.readyForAction && current != key {
            guard let schedule = alerts[key.alert]?.parameters.schedule, schedule.outside == .drop, let local,
                  !schedule.isOpen(at: local) else { continue }
            targets[key]!.actionStatus = .done
            events.append(.status(key, .done))
        }
        events += offerNext()
    }

    // MARK: - Strategies outside the engine

    /// The targets a strategy decides now, with what it is asked about each.
    public func targets(decidedBy key: String) -> [(key: AlertTargetKey, target: AlertTarget, parameters: AlertParameters)] {
        targets.filter { $0.value.strategy == key }.sorted { $0.key < $1.key }.compactMap { entry in
            alerts[entry.key.alert].map { (entry.key, entry.value, $0.parameters) }
        }
    }

    /// An outside strategy's answers (``AnyAlertStrategy/external(key:)``): whether each target's
    /// condition holds. Targets it no longer decides, or that are gone, are skipped.
    public mutating func apply(verdicts: [AlertTargetKey: Bool], from key: String, at t: Timestamp) -> [AlertEvent] {
        now = t
        var events: [AlertEvent] = []
        guard let strategy = strategies[key] else { return [] }
        for (target, verdict) in verdicts.sorted(by: { $0.key < $1.key }) {
            guard var entry = targets[target], entry.strategy == key, let alert = alerts[target.alert] else { continue }
            entry.parameter = Optional(verdict)
            evaluate(target, &entry, strategy, alert.parameters, at: t, &events)
            targets[target] = entry
        }
        settle(at: t, &events)
        return events
    }

    /// Whether the cooldown, the cap and the schedule let `key` be offered now.
    public func gatesOpen(_ key: AlertTargetKey) -> Bool {
        guard let parameters = alerts[key.alert]?.parameters else { return false }
        if let cooldown = parameters.cooldown, let last = acceptedAt[key], now - last < cooldown { return false }
        if let cap = parameters.cap, (accepted[key.alert] ?? []).filter({ now - $0 < cap.window }).count >= cap.count { return false }
        if let schedule = parameters.schedule, let local, !schedule.isOpen(at: local) { return false }
        return true
    }

    private mutating func strategy(for alert: String, _ events: inout [AlertEvent]) -> AnyAlertStrategy {
        if let key = alerts[alert]?.parameters.strategy {
            if let strategy = strategies[key] { return strategy }
            if warned.insert([alert, key]).inserted { events.append(.unknownStrategy(alert: alert, key: key)) }
        }
        return AnyAlertStrategy(RangeStrategy())
    }

    /// A rule offers `key`'s alert now, whatever its condition: if it is waiting for action and in
    /// the report, and nothing is offered or in progress. Its condition does not take it back
    /// until it is done; leaving the report does.
    public mutating func offerNow(_ key: AlertTargetKey, at t: Timestamp) -> [AlertEvent] {
        now = max(now, t)
        guard current == nil, let target = targets[key], target.actionStatus == .waitingForAction, target.detected else { return [] }
        targets[key]!.forced = true
        current = key
        return [.offered(key)]
    }

    /// Offers the closest ready target, if nothing is offered or in progress.
    private mutating func offerNext() -> [AlertEvent] {
        guard current == nil else { return [] }
        let ready = targets.filter { $0.value.readyForAction && !$0.value.declined && $0.value.detected && gatesOpen($0.key) }
        guard let next = ready.min(by: { ($0.value.distance, $0.key) < ($1.value.distance, $1.key) })?.key else { return [] }
        current = next
        return [.offered(next)]
    }

    // MARK: - The consumer's commands (the app)

    /// The app shows the offered alert: `waitingForAction` → `inProgress`.
    public mutating func accept(_ key: AlertTargetKey, at t: Timestamp) throws(AlertCommandError) -> [AlertEvent] {
        guard targets[key] != nil else { throw .unknownTarget(key) }
        now = max(now, t)
        guard current == key, targets[key]!.actionStatus == .waitingForAction else { throw .notOffered(key) }
        targets[key]!.actionStatus = .inProgress
        acceptedAt[key] = now
        if let cap = alerts[key.alert]?.parameters.cap {
            accepted[key.alert, default: []].removeAll { now - $0 >= cap.window }
            accepted[key.alert, default: []].append(now)
        }
        return [.status(key, .inProgress)]
    }

    /// The app does not show the offered alert: the next closest is offered.
    public mutating func decline(_ key: AlertTargetKey, at t: Timestamp) throws(AlertCommandError) -> [AlertEvent] {
        guard targets[key] != nil else { throw .unknownTarget(key) }
        now = max(now, t)
        guard current == key, targets[key]!.actionStatus == .waitingForAction else { throw .notOffered(key) }
        targets[key]!.declined = true
        targets[key]!.forced = false
        current = nil
        return offerNext()
    }

    /// The user closed the alert (in progress, or offered): `done`; the next is offered.
    public mutating func done(_ key: AlertTargetKey, at t: Timestamp) throws(AlertCommandError) -> [AlertEvent] {
        guard targets[key] != nil else { throw .unknownTarget(key) }
        now = max(now, t)
        guard current == key else { throw .notInProgress(key) }
        targets[key]!.actionStatus = .done
        targets[key]!.forced = false
        current = nil
        return [.status(key, .done)] + offerNext()
    }

    /// Forces a target's status, as the seed allows. Forcing the current one away from its state
    /// takes its offer or action back.
    public mutating func setStatus(_ key: AlertTargetKey, _ status: ActionStatus,
                                   at t: Timestamp) throws(AlertCommandError) -> [AlertEvent] {
        guard let target = targets[key] else { throw .unknownTarget(key) }
        now = max(now, t)
        guard target.actionStatus != status else { return [] }
        // One alert in progress at a time: forcing another in progress while one is offered or in
        // progress is refused; with none, it becomes the current one (Done then closes it).
        if status == .inProgress, let current, current != key { throw .anotherCurrent(current) }
        var events: [AlertEvent] = []
        if current == key {
            let offered = target.actionStatus == .waitingForAction
            if !(offered && status == .inProgress) {
                events.append(.removed(key, reason: .statusForced))
                current = nil
                targets[key]!.forced = false
            }
        }
        targets[key]!.actionStatus = status
        if status == .inProgress { current = key }
        if status == .done, !target.conditionValid, target.invalidSince == nil { targets[key]!.invalidSince = now }
        events.append(.status(key, status))
        return events + offerNext()
    }

    /// What the engine keeps across a restart: each target's action status and the condition's
    /// state (which sets its reset deadline), the alert in progress, and when alerts were
    /// accepted (the cooldowns and caps).
    public struct Saved: Sendable, Hashable {
        public struct Target: Sendable, Hashable {
            public var status: ActionStatus
            /// Since when the condition has not held; nil while it holds. A done target resets at
            /// this time + `maxTimeBeforeReset`.
            public var invalidSince: Timestamp?
            public init(status: ActionStatus, invalidSince: Timestamp?) {
                self.status = status
                self.invalidSince = invalidSince
            }
        }
        public var targets: [AlertTargetKey: Target] = [:]
        /// When each target's alert was last accepted.
        public var acceptedAt: [AlertTargetKey: Timestamp] = [:]
        /// Each capped alert's accepted offers.
        public var accepted: [String: [Timestamp]] = [:]
        public init(targets: [AlertTargetKey: Target] = [:], acceptedAt: [AlertTargetKey: Timestamp] = [:],
                    accepted: [String: [Timestamp]] = [:]) {
            self.targets = targets
            self.acceptedAt = acceptedAt
            self.accepted = accepted
        }
    }

    /// What to keep: targets that are not simply waiting (in progress, done, or waiting with a
    /// condition holding is not kept: it is found again), and the acceptances that still count.
    public var saved: Saved {
        var out = Saved()
        for (key, target) in targets where target.actionStatus != .waitingForAction {
            out.targets[key] = Saved.Target(status: target.actionStatus, invalidSince: target.conditionValid ? nil : target.invalidSince)
        }
        for (key, time) in acceptedAt {
            if let cooldown = alerts[key.alert]?.parameters.cooldown, now - time < cooldown { out.acceptedAt[key] = time }
        }
        for (alert, times) in accepted {
            guard let cap = alerts[alert]?.parameters.cap else { continue }
            let counting = times.filter { now - $0 < cap.window }
            if !counting.isEmpty { out.accepted[alert] = counting }
        }
        return out
    }

    /// Restores what ``saved`` kept, after the alerts are added again: an `inProgress` target is
    /// the current alert again. For `grace` seconds, while the table fills again, each restored
    /// target keeps the condition it was saved with and is not taken back for being out of the
    /// table. Targets of alerts that no longer exist are skipped.
    public mutating func restore(_ saved: Saved, at t: Timestamp, grace: Double = 10) {
        now = t
        for (key, entry) in saved.targets.sorted(by: { $0.key < $1.key }) {
            guard let alert = alerts[key.alert] else { continue }
            let strategy = alert.parameters.strategy.flatMap { strategies[$0] } ?? AnyAlertStrategy(RangeStrategy())
            var target = AlertTarget(strategy: strategy.key, invalidSince: entry.invalidSince, parameter: strategy.make())
            target.conditionValid = entry.invalidSince == nil
            target.actionStatus = entry.status
            target.lastDetected = t
            target.graceUntil = t + grace
            targets[key] = target
            if entry.status == .inProgress, current == nil { current = key }
        }
        acceptedAt = saved.acceptedAt.filter { alerts[$0.key.alert] != nil }
        accepted = saved.accepted.filter { alerts[$0.key] != nil }
    }
}

extension AnyAlertStrategy {
    /// A strategy decided outside the engine: its condition is the last answer given with
    /// ``AlertEngine/apply(verdicts:from:at:)`` for each target (false until the first).
    public static func external(key: String) -> AnyAlertStrategy {
        AnyAlertStrategy(ExternalStrategy(key: key))
    }
}

/// The last answer for a target; nil until the first, while the target keeps the condition it had
/// (a strategy registered while an alert is offered does not take it back before it answers).
struct ExternalStrategy: AlertStrategy {
    let key: String
    func makeParameter() -> Bool? { nil }
    func update(_ p: inout Bool?, with observation: AlertObservation?, alert: AlertParameters, at t: Timestamp) {}
    func isConditionValid(_ p: Bool?, alert: AlertParameters, at t: Timestamp) -> Bool { p ?? false }
}
