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
    }

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

    public init(powerOn: Bool) {
        self.powerOn = powerOn
    }

    public var isRegistered: Bool { registration == .done }

    // MARK: - Inputs

    /// The adapter was added or changed (or is there at the start).
    public mutating func adapterSeen(powered: Bool, discovering: Bool, address: String, at t: Timestamp) -> ([Action], [Note]) {
        if ready {
            guard powered else { return lost("the adapter was powered off") }
            if !discovering, discovery == .done {
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
        self.address = address.uppercased()
        registration = .busy(after: nil)
        discovery = .busy(after: nil)
        return ([.register, .startDiscovery, .considerKnownDevices], [.ready(address: self.address!)])
    }

    public mutating func adapterRemoved() -> ([Action], [Note]) { lost("the adapter was removed") }

    public mutating func bluezGone() -> ([Action], [Note]) { lost("bluetoothd went away", waitingFor: "bluetoothd (org.bluez)") }

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
            return (publish(discovering: true), [])
        }
        let retry = Retry.after(previous, now: t)
        discovery = .waiting(retry)
        return ([], [.discoveryFailed(retryIn: retry.at - t)])
    }

    /// Each report: retries that are due.
    public mutating func tick(at t: Timestamp) -> [Action] {
        var actions: [Action] = []
        if case .waiting(let retry) = registration, t >= retry.at {
            registration = .busy(after: retry)
            actions.append(.register)
        }
        if case .waiting(let retry) = discovery, t >= retry.at {
            discovery = .busy(after: retry)
            actions.append(.startDiscovery)
        }
        return actions
    }

    // MARK: -

    private mutating func lost(_ why: String, waitingFor: String = "the adapter") -> ([Action], [Note]) {
        guard ready || powering || registration != .idle else { return ([], []) }
        ready = false
        powering = false
        registration = .idle
        discovery = .idle
        generation += 1
        return (publish(advertising: false, discovering: false), [.lost(why, waitingFor: waitingFor)])
    }

    private mutating func publish(advertising: Bool? = nil, discovering: Bool? = nil) -> [Action] {
        let next = (advertising: advertising ?? shown.advertising, discovering: discovering ?? shown.discovering)
        guard next != shown else { return [] }
        shown = next
        return [.publish(advertising: next.advertising, discovering: next.discovering)]
    }
}
