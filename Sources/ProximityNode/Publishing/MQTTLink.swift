import Logging

/// The node's link with its MQTT broker as one state machine, as ``AdapterLink`` is with the
/// adapter: which client is current, whether it and the ESPresense room connection are up, what
/// was last logged about the broker, and whether the outbox is being delivered. It does no I/O:
/// each input returns the actions the publisher carries out, in order. Inputs come tagged with
/// the ``generation`` of the client they are about; those of a client since replaced are
/// ignored.
///
/// ```
///            start(N)             connected                  refused / lost
///   idle ─────────────▶ connecting ─────────▶ connected ──────────────────▶ connecting
///     ▲                                  │ announce, subscribe, deliver    (log once, back-off)
///     └───────────────── stop ◀──────────┘ goodbye: offline, then disconnect
/// ```
///
/// The outbox is delivered by one delivery at a time: an event offered while one runs is taken
/// by it (it goes on until the outbox is empty), and a connection starts one.
struct MQTTLink: Sendable {
    enum Input: Sendable, Hashable {
        /// The main connection's news (MQTTKit's events).
        case connected
        case refused(code: Int32, reason: String)
        /// `pending`: the outbox's events not yet delivered, for the log.
        case lost(code: Int32, reason: String, tlsFailure: Bool, pending: Int)
        /// The ESPresense room connection's.
        case roomConnected
        case roomLost
        /// Events were put in the outbox.
        case offered
        /// A delivery ended: the outbox is empty, or the connection went.
        case deliveryEnded
        /// Home Assistant said `online` (its status topic).
        case homeAssistantOnline
    }

    enum Action: Sendable, Hashable {
        case log(Logger.Level, String, metadata: [String: String])
        /// Everything retained again: status `online`, the state, each region's, and discovery
        /// when it is on; the peers' report rates start over.
        case announce
        /// Subscribe to Home Assistant's status and the node's retained region discovery.
        case subscribe
        /// Discovery again (Home Assistant came back).
        case rediscover
        /// Publish the outbox's events in order until it is empty or the connection goes.
        case deliver
        /// The ESPresense status `online` on the room connection.
        case roomOnline
    }

    /// Increases with every client: what an older one says is ignored.
    private(set) var generation = 0
    private(set) var connected = false
    private(set) var roomConnected = false
    private(set) var delivering = false
    private var everConnected = false
    private var lastProblem: String?
    /// Whether discovery is on (the subscriptions and `rediscover` follow it).
    private var discovery = false
    /// The broker as the messages name it.
    private var broker = ""

    /// A new client (a start, or a restart with new settings): the earlier one's news is ignored
    /// from now on. Returns its generation.
    mutating func start(broker: String, discovery: Bool) -> Int {
        generation += 1
        connected = false
        roomConnected = false
        everConnected = false
        lastProblem = nil
        delivering = false
        self.broker = broker
        self.discovery = discovery
        return generation
    }

    /// The client is being stopped: which connections are up, to say goodbye on. Nothing the
    /// stopped client says counts any more.
    mutating func stop() -> (main: Bool, room: Bool) {
        let up = (main: connected, room: roomConnected)
        generation += 1
        connected = false
        roomConnected = false
        delivering = false
        return up
    }

    mutating func handle(_ input: Input, generation: Int) -> [Action] {
        guard generation == self.generation else { return [] }
        switch input {
        case .connected:
            connected = true
            lastProblem = nil
            var actions: [Action] = [.log(.notice, everConnected ? "reconnected to the MQTT broker" : "connected to the MQTT broker",
                                          metadata: ["mqtt.broker": broker]), .announce]
            everConnected = true
            if discovery { actions.append(.subscribe) }
            return actions + startDelivery()
        case .refused(let code, let reason):
            let hint = code == 4 || code == 5 ? " (check mqtt.username and mqtt.password-file)" : ""
            return problem("the MQTT broker refused the connection: \(reason)\(hint); retrying with back-off", code: code)
        case .lost(let code, let reason, let tlsFailure, let pending):
            let wasConnected = connected
            connected = false
            if wasConnected {
                lastProblem = nil
                return [.log(.warning, "lost the connection to the MQTT broker: reconnecting with back-off",
                             metadata: ["reason": reason, "events.pending": "\(pending)"])]
            }
            // A refusal is followed by libmosquitto's disconnection: the refusal said it.
            guard lastProblem?.hasPrefix("the MQTT broker refused") != true else { return [] }
            let hint = tlsFailure ? " (check mqtt.ca-file: the CA that signed the broker's certificate, and the host in mqtt.broker)" : ""
            return problem("cannot reach the MQTT broker at \(broker): \(reason)\(hint); retrying with back-off", code: code)
        case .roomConnected:
            roomConnected = true
            return [.roomOnline]
        case .roomLost:
            roomConnected = false   // the main connection logs the broker's problems
            return []
        case .offered:
            return startDelivery()
        case .deliveryEnded:
            delivering = false
            return []
        case .homeAssistantOnline:
            guard discovery else { return [] }
            return [.log(.info, "Home Assistant is online: sending discovery again", metadata: [:]), .rediscover]
        }
    }

    private mutating func startDelivery() -> [Action] {
        guard connected, !delivering else { return [] }
        delivering = true
        return [.deliver]
    }

    /// A connection problem is logged once as an error; the same again only at debug level.
    private mutating func problem(_ message: String, code: Int32) -> [Action] {
        if message == lastProblem { return [.log(.debug, message, metadata: [:])] }
        lastProblem = message
        return [.log(.error, message, metadata: ["code": "\(code)"])]
    }
}
