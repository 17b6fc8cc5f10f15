import Foundation
import Logging
import MQTTKit
import ProximityTrust
import ProximityAPI
import ProximityCore
import ProximityMQTT

/// Publishes the node to an MQTT broker (`mqtt:` in the config file; topics and payloads in
/// `docs/mqtt.md`). It subscribes to the node's events, like the bus exporter:
///
/// - availability: `<prefix>/status`, retained `online`, with `offline` as the last will and at a
///   clean stop;
/// - the node's state (`<prefix>/state`) and each region's (`<prefix>/regions/<id>`), retained;
/// - what it heard of its peers in each second (`<prefix>/hearings`, QoS 0, one batch a
///   second: ``HearingBatch``), for a fleet's positioning;
/// - each peer's distance report (`<prefix>/peers/<id>`, QoS 0), at most one per
///   `report-interval` seconds per peer unless it moved by `report-moved` metres
///   (``ReportThrottle``), and in ESPresense's and `mqtt_room`'s forms when `compat` asks;
/// - the event log's entries (`<prefix>/events/<source>`, QoS 1, in order) through the
///   ``MQTTOutbox``, so none is lost while the broker is away, nor by a SIGKILL meanwhile;
/// - Home Assistant discovery, retained, sent again when Home Assistant says `online`.
///
/// The connection (MQTTKit) reconnects by itself with a back-off; the link (``MQTTLink``, a state
/// machine without I/O) decides what each of its news means, and logs a problem once (a refused
/// password, an unreachable broker), not at every attempt. Everything the publisher waits on (the
/// node's events, the clients' news and messages, a subscription, a delivery) is a child task of
/// ``run(_:)``'s task group: none outlives it.
public actor MQTTPublisher {
    let identity: UUID
    let engine: NodeEngine
    let state: StateDirectory
    let eventLog: EventLog
    let clock: any NodeClock
    let logger: Logger

    private var settings: MQTTSettings?
    private var name: String
    /// The node has a fleet key: no peer's radio address is published.
    private var keyed: Bool
    private var messages: MQTTMessages?
    private var client: MQTTClient?
    /// With `compat: [espresense]`: a second connection whose will is the room's ESPresense status
    /// (a connection has one will).
    private var roomClient: MQTTClient?
    private var link = MQTTLink()
    private var outbox: MQTTOutbox?
    /// What ``run(_:)``'s task group is asked to wait on.
    private let work: AsyncStream<Work>
    private let workSink: AsyncStream<Work>.Continuation

    enum Work: Sendable {
        /// A new client's news and messages (and its room connection's news) until it is stopped.
        case follow(MQTTClient, room: MQTTClient?, generation: Int)
        /// Subscriptions on a client (each waits for the broker's SUBACK).
        case subscribe(MQTTClient, [String])
        /// The outbox's delivery on a client.
        case deliver(MQTTClient, generation: Int)
    }

    private var connected: Bool { link.connected }

    private var view: NodeView
    private var regions: [String: RegionState] = [:]
    /// Which peers each report publishes (the rate control, and `gone` once for a peer no
    /// longer heard).
    private var publishing = PeerPublishing()

    public init(identity: UUID, configuration: NodeConfiguration, engine: NodeEngine, state: StateDirectory, eventLog: EventLog,
                clock: any NodeClock, logger: Logger) {
        self.identity = identity
        self.engine = engine
        self.state = state
        self.eventLog = eventLog
        self.clock = clock
        self.logger = logger
        name = configuration.name
        settings = configuration.mqtt
        keyed = configuration.trust.isTrusted
        view = NodeView(adapter: configuration.adapter, rssiOffset: configuration.rssiOffset)
        (work, workSink) = AsyncStream.makeStream()
    }

    /// Connects (when configured) and publishes `events` until they end or the task is
    /// cancelled; then says `offline` and disconnects.
    public func run(_ events: NodeEventStream) async {
        for status in await engine.read({ $0.regionSnapshot }).defined { regions[status.region.identifier] = status.state }
        if let settings { start(settings) }
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await event in events { await self.handle(event) }
                self.workSink.finish()
            }
            // Until the node's events end, or the publisher's task is cancelled.
            for await work in self.work {
                switch work {
                case .follow(let client, let room, let generation):
                    group.addTask { for await event in client.events { await self.connection(event, generation: generation) } }
                    group.addTask { for await message in client.messages { await self.received(message, generation: generation) } }
                    if let room {
                        group.addTask { for await event in room.events { await self.roomConnection(event, generation: generation) } }
                    }
                case .subscribe(let client, let patterns):
                    group.addTask {
                        for pattern in patterns {
                            do { try await client.subscribe(pattern) } catch { return }
                        }
                    }
                case .deliver(let client, let generation):
                    group.addTask { await self.deliver(on: client, generation: generation) }
                }
            }
            // Offline said and the clients disconnected first: that ends their streams and fails
            // the acknowledgements still awaited (libmosquitto's waits know no cancellation), so
            // every task of the group ends. In a task of its own, the one outside the group, on
            // purpose: saying offline waits for the broker's acknowledgement, which a cancelled
            // task would not.
            await Task { await self.stop() }.value
            group.cancelAll()
        }
    }

    /// Applies a reloaded configuration: a changed `mqtt:` section (or node name) reconnects with
    /// the new settings; removing it says `offline` and disconnects. While not connected, a
    /// reload starts again with the same settings too (reading the password file again: the fix
    /// for a refused password is a new file and a reload).
    public func reconfigure(_ configuration: NodeConfiguration) async {
        keyed = configuration.trust.isTrusted
        messages?.publishesAddresses = !keyed
        guard configuration.mqtt != settings || configuration.name != name || (settings != nil && !connected) else { return }
        await stop()
        name = configuration.name
        settings = configuration.mqtt
        if let settings = configuration.mqtt {
            logger.notice("MQTT settings changed: reconnecting", metadata: ["mqtt.broker": "\(settings.broker)"])
            start(settings)
        }
    }

    // MARK: - The connection

    private func start(_ settings: MQTTSettings) {
        let messages = MQTTMessages(identity: identity, name: name, settings: settings, publishesAddresses: !keyed)
        self.messages = messages
        publishing = PeerPublishing(throttle: .init(heartbeat: settings.reportInterval, skipDistance: settings.reportMoved),
                                    compatibility: !settings.compatibility.isEmpty && settings.role != .mobile)
        if let outbox { outbox.capacity = settings.outboxSize } else {
            outbox = MQTTOutbox(state: state, log: eventLog, capacity: settings.outboxSize, clock: clock, logger: logger)
        }
        var password: String?
        if let file = settings.passwordFile {
            do { password = try SecretFile.password(path: file) } catch {
                logger.error("cannot read mqtt.password-file: not connecting to the MQTT broker until a reload",
                             metadata: ["error": "\(error)"])
                return
            }
        }
        var tls: MQTTOptions.TLS?
        if settings.broker.tls {
            tls = MQTTOptions.TLS(caFile: settings.caFile, caPath: settings.caFile == nil ? MQTTOptions.TLS.systemCAPath : nil,
                                  certificateFile: settings.certificateFile, keyFile: settings.keyFile)
        }
        let options = MQTTOptions(host: settings.broker.host, port: settings.broker.port, clientID: settings.clientID(name: name),
                                  keepalive: settings.keepalive, username: settings.username, password: password,
                                  will: .init(topic: messages.topics.status, payload: "offline", qos: 1, retain: true), tls: tls,
                                  reconnectDelay: 1...settings.reconnectMax)
        let client: MQTTClient
        do { client = try MQTTClient(options) } catch {
            logger.error("cannot set up the MQTT client: not connecting until a reload", metadata: ["error": "\(error)"])
            return
        }
        let generation = link.start(broker: "\(settings.broker)", discovery: settings.discovery)
        self.client = client
        roomClient = nil
        if settings.compatibility.contains(.espresense) {
            var roomOptions = options
            roomOptions.clientID = settings.clientID(name: name) + "-espresense"
            roomOptions.will = .init(topic: messages.espresenseStatusTopic, payload: "offline", qos: 1, retain: true)
            roomClient = try? MQTTClient(roomOptions)
        }
        workSink.yield(.follow(client, room: roomClient, generation: generation))
        logger.info("connecting to the MQTT broker", metadata: ["mqtt.broker": "\(settings.broker)", "mqtt.prefix": "\(messages.prefix)"])
        roomClient?.connect()
        client.connect()
    }

    /// The ESPresense status connection: `online` on each connection (its will says `offline`).
    private func roomConnection(_ event: MQTTConnectionEvent, generation: Int) {
        perform(link.handle(event == .connected ? .roomConnected : .roomLost, generation: generation))
    }

    /// Says `offline` (waiting at most 2 s for the broker's acknowledgement), disconnects, and
    /// saves the outbox's position.
    private func stop() async {
        guard let client, let messages else { return }
        self.client = nil
        let up = link.stop()
        let room = roomClient
        roomClient = nil
        var goodbyes: [(MQTTClient, MQTTOutgoing)] = []
        if up.room, let room { goodbyes.append((room, messages.espresenseStatus(false))) }
        if up.main { goodbyes.append((client, messages.status(false))) }
        if !goodbyes.isEmpty {
            let sending = goodbyes
            await withTaskGroup(of: Void.self) { group in
                group.addTask { for (c, m) in sending { try? await c.publish(m.topic, m.payload, qos: m.qos, retain: m.retain) } }
                group.addTask { try? await Task.sleep(for: .seconds(2)) }
                await group.next()
                group.cancelAll()
            }
        }
        // Ends the clients' streams, and so the group's tasks that follow them.
        client.disconnect()
        room?.disconnect()
        outbox?.save()
        logger.info("disconnected from the MQTT broker")
    }

    private func connection(_ event: MQTTConnectionEvent, generation: Int) {
        let input: MQTTLink.Input = switch event {
        case .connected: .connected
        case .refused(let code, let reason): .refused(code: code, reason: reason)
        case .disconnected(let code, let reason):
            .lost(code: code, reason: reason, tlsFailure: event.isTLSFailure, pending: outbox?.count ?? 0)
        }
        perform(link.handle(input, generation: generation))
    }

    /// Carries out the link's actions, in order.
    private func perform(_ actions: [MQTTLink.Action]) {
        guard !actions.isEmpty else { return }
        for action in actions {
            switch action {
            case .log(let level, let message, let metadata):
                logger.log(level: level, "\(message)", metadata: metadata.mapValues { .string($0) })
            case .announce:
                guard let messages else { continue }
                publishing.restart()
                send(messages.status(true))
                send(messages.state(currentView))
                for id in regions.keys.sorted() { send(messages.region(id, regions[id])) }
                if settings?.discovery == true { for message in messages.discovery(regions: regions.keys.sorted()) { send(message) } }
            case .subscribe:
                guard let client, let messages else { continue }
                workSink.yield(.subscribe(client, [messages.homeAssistantStatusTopic, messages.binarySensorDiscoveryPattern]))
            case .rediscover:
                guard let messages else { continue }
                for message in messages.discovery(regions: regions.keys.sorted()) { send(message) }
            case .deliver:
                guard let client else { continue }
                workSink.yield(.deliver(client, generation: link.generation))
            case .roomOnline:
                guard let roomClient, let messages else { continue }
                try? roomClient.send(messages.espresenseStatus(true))
            }
        }
    }

    private func received(_ message: MQTTMessage, generation: Int) {
        guard generation == link.generation, let messages, settings?.discovery == true else { return }
        if message.topic == messages.homeAssistantStatusTopic {
            if message.string == "online" { perform(link.handle(.homeAssistantOnline, generation: generation)) }
            return
        }
        // A region's discovery retained by the broker, for a region this node no longer has
        // (removed while it was away): deleted.
        let levels = message.topic.split(separator: "/", omittingEmptySubsequences: false)
        guard levels.count >= 2, !message.payload.isEmpty else { return }
        let object = String(levels[levels.count - 2])
        guard object.hasPrefix("region_"), !regions.keys.contains(where: { MQTTMessages.regionObject($0) == object }) else { return }
        logger.info("deleting the discovery of a region this node no longer has", metadata: ["topic": "\(message.topic)"])
        send(MQTTOutgoing(topic: message.topic, payload: "", retain: true))
        if let config = MQTTJSON.decode(DiscoveryConfig.self, from: message.payload),
           config.stateTopic.hasPrefix(messages.prefix + "/regions/") {
            send(MQTTOutgoing(topic: config.stateTopic, payload: "", retain: true))
        }
    }

    /// Hands `message` to the client; QoS 0 is dropped while disconnected, QoS 1 queued by
    /// libmosquitto for the next connection.
    private func send(_ message: MQTTOutgoing) {
        guard let client else { return }
        do { try client.send(message.topic, message.payload, qos: message.qos, retain: message.retain) } catch {
            logger.debug("not published", metadata: ["topic": "\(message.topic)", "error": "\(error)"])
        }
    }

    /// Publishes the outbox's events in order, one acknowledged before the next, until it is
    /// empty or the connection goes (the next connection resumes).
    private func deliver(on client: MQTTClient, generation: Int) async {
        defer { perform(link.handle(.deliveryEnded, generation: generation)) }
        while connected, generation == link.generation, let outbox, let messages, let entry = outbox.first {
            let message = messages.event(entry)
            do {
                try await client.publish(message.topic, message.payload, qos: 1)
            } catch {
                return
            }
            outbox.delivered(entry.seq)
        }
    }

    // MARK: - The node's events

    private var currentView: NodeView {
        var v = view
        v.outboxDropped = outbox?.dropped ?? 0
        return v
    }

    private func publishState() {
        guard connected, let messages else { return }
        send(messages.state(currentView))
    }

    private func handle(_ event: NodeEvent) {
        switch event {
        case .report(let report):
            let count = report.peers.count
            if count != view.peerCount {
                view.peerCount = count
                publishState()
            }
            publish(report)
        case .link(let advertising, let discovering):
            view.advertising = advertising
            view.discovering = discovering
            publishState()
        case .health(let state, let detail):
            view.health = state
            view.healthDetail = detail
            publishState()
        case .rssiOffset(let dB):
            view.rssiOffset = dB
            publishState()
        case .regions(let changes):
            apply(changes)
        case .profile(let changes):
            guard let outbox else { return }
            var offered = false
            for case .logged(let entry) in changes.signals {
                outbox.offer(entry)
                offered = true
            }
            if offered { perform(link.handle(.offered, generation: link.generation)) }
        case .peerIdentified, .clearInterval, .zoneDistances, .peerNames, .irks, .alerts, .recording:
            break
        }
    }

    private func publish(_ report: NodeReport) {
        guard connected, let messages else { return }
        let time = clock.epoch(report.time)
        // A mobile node is no room, nor a fixed point the fleet's positioning could use.
        if settings?.role != .mobile { for message in messages.hearings(report.peers, at: time) { send(message) } }
        for publication in publishing.publications(peers: report.peers, removed: report.removed, at: report.time) {
            switch publication {
            case .report(let peer): for message in messages.reports(peer, at: time) { send(message) }
            case .compatibility(let peer): for message in messages.compatibilityReports(peer) { send(message) }
            case .gone(let peer): send(messages.gone(peer.rawValue, at: time))
            }
        }
    }

    private func apply(_ changes: RegionChanges) {
        let discovery = settings?.discovery == true
        for id in changes.removed {
            regions[id] = nil
            guard connected, let messages else { continue }
            if discovery { for m in messages.regionRemoval(id) { send(m) } } else { send(messages.region(id, nil)) }
        }
        for status in changes.defined {
            let id = status.region.identifier
            regions[id] = status.state
            guard connected, let messages else { continue }
            send(messages.region(id, status.state))
            if discovery { send(messages.regionDiscovery(id)) }
        }
        for event in changes.events {
            let state: RegionState
            switch event {
            case .determined(_, let s): state = s
            case .entered: state = .inside
            case .exited: state = .outside
            }
            let id = event.region
            guard regions[id] != nil || changes.defined.contains(where: { $0.region.identifier == id }) else { continue }
            let changed = regions[id] != state
            regions[id] = state
            if changed, connected, let messages { send(messages.region(id, state)) }
        }
    }
}

extension MQTTClient {
    func send(_ message: MQTTOutgoing) throws(MQTTError) {
        try send(message.topic, message.payload, qos: message.qos, retain: message.retain)
    }
}
