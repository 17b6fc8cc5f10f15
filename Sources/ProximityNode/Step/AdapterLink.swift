import ProximityCore

/// The node's link with BlueZ's adapter as one state machine: waiting for bluetoothd and the
/// adapter, powering it on, registering the advertisement and the GATT application, discovering,
/// and backing off after failures. It does no I/O: each input returns the actions to carry out,
/// and the node reports their results back, tagged with the ``generation`` they were started in
/// (a result from before the adapter was lost is ignored).
///
/// ```
///            adapter seen, off           adapter seen, powered
///   waiting ───────────────▶ off/powering ───────────────▶ ready ──▶ register, start discovery
///      ▲                                                      │       (each retried 1, 2, 4 … 60 s)
///      └──────── adapter removed, powered off, bluetoothd gone ┘
/// ```
///
/// **The watchdog.** While discovering, the link watches what the radio delivers
/// (``ReceptionWatch``). A silence the reception before it makes implausible (a scanner gone deaf:
/// `Discovering` still true, nothing delivered) is recovered in steps: discovery stopped and
/// started again; if nothing comes within ``restartGrace``, the adapter powered off and on (a
/// controller reset clears a wedged firmware); if nothing comes within ``powerCycleGrace`` either,
/// the health is `failed` and a power cycle is tried again after 1, 2, 4 … 10 min (a dead
/// controller does not make the node spin). The first advertisement heard ends it: `ok`. A lost
/// adapter or bluetoothd is `recovering` until discovery runs again. Each step is logged once.
public struct AdapterLink: Sendable {
    public enum Action: Sendable, Hashable {
        case powerOn
        /// Register the GATT application and the advertisement (AlreadyExists counts as done).
        case register
        /// Set the discovery filter and start discovery.
        case startDiscovery
        /// Consider the devices BlueZ already knows (after a restart, or the adapter coming back).
        case considerKnownDevices
        /// What the node shows as `Advertising` and `Discovering` changed.
        case publish(advertising: Bool, discovering: Bool)
        /// Stop discovery and start it again (the watchdog's first step).
        case restartDiscovery
        /// Power the adapter off and on (its second step).
        case powerCycle
        /// What the node shows as `Health` and `HealthDetail` changed.
        case health(Health)
    }

    /// How the link is: `Node1.Health` and `HealthDetail`.
    public enum Health: Sendable, Hashable {
        case ok
        /// Something went wrong and the link is on it: why, and what it does.
        case recovering(String)
        /// The steps did not help; the link tries again later: why, and when.
        case failed(String)

        /// At the start, until discovery runs.
        public static let starting = Health.recovering("starting: waiting for bluetoothd, the adapter and discovery")

        public var state: String {
            switch self {
            case .ok: "ok"
            case .recovering: "recovering"
            case .failed: "failed"
            }
        }

        public var detail: String {
            switch self {
            case .ok: ""
            case .recovering(let why), .failed(let why): why
            }
        }
    }

    /// The watchdog's recovery of a deaf scanner.
    enum Recovery: Sendable, Hashable {
        case none
        case restartingDiscovery(until: Timestamp)
        case powerCycling(until: Timestamp, nextDelay: Double)
        case failed(retryAt: Timestamp, delay: Double)
    }

    /// Seconds after restarting discovery before the adapter is power-cycled.
    public static let restartGrace: Double = 15
    /// Seconds after a power cycle before the recovery is called failed.
    public static let powerCycleGrace: Double = 30
    /// The first and the longest wait between power cycles once failed.
    public static let failedRetry: ClosedRange<Double> = 60 ... 600

    /// What happened, for the log.
    public enum Note: Sendable, Hashable {
        case poweringOn
        case adapterOff
        case ready(address: String)
        case lost(String, waitingFor: String)
        case registered(afterFailure: Bool)
        case registrationFailed(retryIn: Double)
        case discoveryFailed(retryIn: Double)
        case discoveryStoppedByOthers
        case released
        /// The watchdog: nothing heard for `silence` s after `rate` reports a second.
        case deaf(silence: Double, rate: Double)
        case stillDeafPowerCycling
        case recoveryFailed(retryIn: Double)
        case recovered(String)
    }

    /// A retry after a failure: when, and the delay after that (doubling, at most a minute).
    public struct Retry: Sendable, Hashable {
        public var at: Timestamp
        public var delay: Double

        /// The retry after `previous` failed (or after a first failure), from `now`.
        public static func after(_ previous: Retry?, now: Timestamp) -> Retry {
            let delay = previous?.delay ?? 1
            return Retry(at: now + delay, delay: min(delay * 2, 60))
        }
    }

    /// One of the two things the node sets up once the adapter is ready.
    public enum Step: Sendable, Hashable {
        case idle
        case busy(after: Retry?)
        case done
        case waiting(Retry)
    }

    public let powerOn: Bool
    public private(set) var ready = false
    public private(set) var registration: Step = .idle
    public private(set) var discovery: Step = .idle
    /// Bumped whenever the link is lost: results of actions started before are stale.
    public private(set) var generation = 0
    /// The adapter's address, once ready.
    public private(set) var address: String?
    private var powering = false
    private var shown = (advertising: false, discovering: false)
    /// What the radio delivered lately, for the watchdog.
    public private(set) var watch = ReceptionWatch()
    private(set) var recovery = Recovery.none
    /// What the node shows as `Health`.
    public private(set) var health = Health.starting
    /// Recoveries of each kind since the start: `deaf`, `adapter`, `bluetoothd`.
    public private(set) var recoveries: [String: Int] = [:]

    public init(powerOn: Bool) {
        self.powerOn = powerOn
    }

    public var isRegistered: Bool { registration == .done }

    // MARK: - Inputs

    /// The adapter was added or changed (or is there at the start).
    public mutating func adapterSeen(powered: Bool, discovering: Bool, address: String, at t: Timestamp) -> ([Action], [Note]) {
        if ready {
            guard powered else { return lost("the adapter was powered off", kind: "adapter") }
            if !discovering, discovery == .done, !isRestartingDiscovery {
                // Someone stopped our discovery (or BlueZ did): start it again.
                discovery = .busy(after: nil)
                return ([.startDiscovery] + publish(discovering: false), [.discoveryStoppedByOthers])
            }
            return ([], [])
        }
        guard powered else {
            guard !powering else { return ([], []) }
            powering = true
            return powerOn ? ([.powerOn], [.poweringOn]) : ([], [.adapterOff])
        }
        ready = true
        powering = false
        watch.reset()
        self.address = address.uppercased()
        registration = .busy(after: nil)
        discovery = .busy(after: nil)
        return ([.register, .startDiscovery, .considerKnownDevices], [.ready(address: self.address!)])
    }

    public mutating func adapterRemoved() -> ([Action], [Note]) { lost("the adapter was removed", kind: "adapter") }

    public mutating func bluezGone() -> ([Action], [Note]) {
        lost("bluetoothd went away", waitingFor: "bluetoothd (org.bluez)", kind: "bluetoothd")
    }

    /// BlueZ called `Release` on the advertisement: it dropped it; register again in a second.
    public mutating func released(at t: Timestamp) -> ([Action], [Note]) {
        let actions = publish(advertising: false)
        if registration == .done { registration = .waiting(Retry.after(nil, now: t)) }
        return (actions, [.released])
    }

    public mutating func registrationEnded(succeeded: Bool, generation: Int, at t: Timestamp) -> ([Action], [Note]) {
        guard generation == self.generation, ready, case .busy(let previous) = registration else { return ([], []) }
        if succeeded {
            registration = .done
            return (publish(advertising: true), [.registered(afterFailure: previous != nil)])
        }
        let retry = Retry.after(previous, now: t)
        registration = .waiting(retry)
        return ([], [.registrationFailed(retryIn: retry.at - t)])
    }

    public mutating func discoveryEnded(succeeded: Bool, generation: Int, at t: Timestamp) -> ([Action], [Note]) {
        guard generation == self.generation, ready, case .busy(let previous) = discovery else { return ([], []) }
        if succeeded {
            discovery = .done
            var actions = publish(discovering: true)
            if recovery == .none, case .recovering(let why) = health {
                actions += setHealth(.ok)
                return (actions, [.recovered(why)])
            }
            return (actions, [])
        }
        let retry = Retry.after(previous, now: t)
        discovery = .waiting(retry)
        return ([], [.discoveryFailed(retryIn: retry.at - t)])
    }

    /// An advertisement was delivered at `t`. Cheap: called for every one. Ends a recovery.
    public mutating func heard(at t: Timestamp) -> ([Action], [Note]) {
        watch.heard(at: t)
        guard recovery != .none else { return ([], []) }
        recovery = .none
        let why = health.detail
        return (setHealth(.ok), [.recovered(why)])
    }

    /// The watchdog's next step, due at `t` (each report).
    private mutating func watchdog(at t: Timestamp) -> ([Action], [Note]) {
        switch recovery {
        case .none:
            guard ready, discovery == .done, let (silence, rate) = watch.deafness(at: t) else { return ([], []) }
            recoveries["deaf", default: 0] += 1
            recovery = .restartingDiscovery(until: t + Self.restartGrace)
            let why = "discovery delivered nothing for \(Int(silence)) s after \(Self.rate(rate)) advertisements a second: restarting it"
            return ([.restartDiscovery] + setHealth(.recovering(why)), [.deaf(silence: silence, rate: rate)])
        case .restartingDiscovery(let until):
            guard t >= until else { return ([], []) }
            recovery = .powerCycling(until: t + Self.powerCycleGrace, nextDelay: Self.failedRetry.lowerBound)
            return ([.powerCycle] + setHealth(.recovering("discovery still delivers nothing: powering the adapter off and on")),
                    [.stillDeafPowerCycling])
        case .powerCycling(let until, let nextDelay):
            guard t >= until else { return ([], []) }
            recovery = .failed(retryAt: t + nextDelay, delay: nextDelay)
            let why = "the adapter delivers nothing after a restart of discovery and a power cycle: trying again in \(Int(nextDelay)) s"
            return (setHealth(.failed(why)), [.recoveryFailed(retryIn: nextDelay)])
        case .failed(let retryAt, let delay):
            guard t >= retryAt else { return ([], []) }
            recovery = .powerCycling(until: t + Self.powerCycleGrace, nextDelay: min(delay * 2, Self.failedRetry.upperBound))
            return ([.powerCycle], [.stillDeafPowerCycling])
        }
    }

    private var isRestartingDiscovery: Bool {
        if case .restartingDiscovery = recovery { true } else { false }
    }

    static func rate(_ rate: Double) -> String {
        rate >= 10 ? "\(Int(rate.rounded()))" : String(format: "%.1f", rate)
    }

    private mutating func setHealth(_ new: Health) -> [Action] {
        guard new != health else { return [] }
        health = new
        return [.health(new)]
    }

    /// Each report: retries that are due, and the watchdog's next step; the notes for the log.
    public mutating func tick(at t: Timestamp) -> ([Action], [Note]) {
        var (actions, notes) = watchdog(at: t)
        if case .waiting(let retry) = registration, t >= retry.at {
            registration = .busy(after: retry)
            actions.append(.register)
        }
        if case .waiting(let retry) = discovery, t >= retry.at {
            discovery = .busy(after: retry)
            actions.append(.startDiscovery)
        }
        return (actions, notes)
    }

    // MARK: -

    private mutating func lost(_ why: String, waitingFor: String = "the adapter", kind: String) -> ([Action], [Note]) {
        guard ready || powering || registration != .idle else {
            // Down already (bluetoothd powers its adapter off as it stops, then leaves): the
            // health says the latest cause.
            if case .recovering = health, recovery == .none { return (setHealth(.recovering("\(why): waiting for \(waitingFor)")), []) }
            return ([], [])
        }
        ready = false
        powering = false
        registration = .idle
        discovery = .idle
        generation += 1
        var actions = publish(advertising: false, discovering: false)
        // A power cycle of the watchdog's own is part of its recovery, not another one.
        if case .powerCycling = recovery {} else {
            recoveries[kind, default: 0] += 1
            actions += setHealth(.recovering("\(why): waiting for \(waitingFor)"))
        }
        return (actions, [.lost(why, waitingFor: waitingFor)])
    }

    private mutating func publish(advertising: Bool? = nil, discovering: Bool? = nil) -> [Action] {
        let next = (advertising: advertising ?? shown.advertising, discovering: discovering ?? shown.discovering)
        guard next != shown else { return [] }
        shown = next
        return [.publish(advertising: next.advertising, discovering: next.discovering)]
    }
}
