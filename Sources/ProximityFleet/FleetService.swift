import Foundation
import Logging
import MQTTKit
import ProximityCore
import ProximityMQTT

/// What the fleet service is told at start (`proximity-fleet`'s options; docs/fleet.md).
public struct FleetConfiguration: Sendable {
    /// How to reach the broker; the will (`<prefix>/status offline`) is set by the service.
    public var broker: MQTTOptions
    /// The nodes' topic root: their prefixes are `<root>/<node name>` (the nodes' default).
    public var root = "proximityd"
    /// This service's topics start with it.
    public var prefix = "proximity-fleet"
    public var discovery = true
    public var discoveryPrefix = "homeassistant"
    /// Which rule decides the rooms: the fleet's own (``RoomDecider``), or a baseline.
    public var rule: RoomRuleKind = .fleet
    public var decider = RoomDecider.Configuration()
    /// The devices tracked (peer identifiers); nil: every device a node reports.
    public var track: Set<String>?
    /// The live table (`<prefix>/table`) goes out at most this often, seconds, and 2 s more for
    /// every 500 devices it holds (a fleet of 10 000 devices: every 42 s); a room change goes out
    /// at once.
    public var tableInterval = 2.0
    /// A device's attributes (its distances) go out with each room change, and at most this often
    /// otherwise, seconds.
    public var attributesInterval = 10.0
    /// The floor plan (`--plan`): devices that nodes in it hear get a position, and their room is
    /// the room holding it; nil: rooms by the nearest node only, as without positioning.
    public var plan: FloorPlan?
    /// With a plan, what the reports of nodes not in it do (`--outside-nodes`); without one, every
    /// node's reports are taken.
    public var outsideNodes: OutsideNodes = .ignore
    /// The positioning's settings (the grid filter's defaults).
    public var positioner = GridPositioner.Configuration()
    /// The map's views (`--http`): shown the plan and, once a second, the state; none without a map.
    public var views: FleetViews?

    public init(broker: MQTTOptions) { self.broker = broker }

    func makeRule() -> any RoomRule {
        switch rule {
        case .fleet: RoomDecider(configuration: decider)
        case .nearest: NearestInRange(timeout: decider.awayAfter)
        case .bermuda: BermudaRule()
        }
    }
}

/// With a floor plan, what the fleet service does with the reports of nodes not in the plan
/// (`proximity-fleet run --outside-nodes`; docs/fleet.md, Floor plan and positions).
public enum OutsideNodes: String, Sendable, Hashable, CaseIterable {
    /// Ignored, for rooms, positions, the calibration, the table, Home Assistant and the map; each
    /// such node is logged once. Only the plan's nodes count (a trusted fleet: docs/mqtt.md).
    case ignore
    /// Taken for rooms: a device only they hear gets the rule's nearest-node room, without a
    /// position (issue 24's fallback, for a plan that covers part of a site).
    case nearest
}

/// The fleet service: subscribes to every node's distance reports and availability on the broker,
/// decides each tracked device's room with a ``RoomRule``, and publishes it (retained), with Home
/// Assistant `device_tracker` discovery whose availability is this service's own. After a restart
/// it takes back each device's room from its own retained messages before deciding anything.
///
/// With a floor plan (``FleetConfiguration/plan``), a device that nodes in the plan hear is placed
/// on it (``FleetPositions``, once a second) and its room is the room holding its position, with
/// hysteresis (`home` when it is in none); not_home is the rule's, as without a plan. The reports of
/// nodes not in the plan are ignored (each such node logged once), or, with
/// ``OutsideNodes/nearest``, give a device only they hear the rule's nearest-node room.
///
/// Topics (`P` = `proximity-fleet`): `P/status` (`online`/`offline`, retained, the will);
/// `P/devices/<device>/room` (the node's name, or `not_home`; retained);
/// `P/devices/<device>/attributes` (JSON: room, the distance from each node and its age; retained);
/// `P/devices/<device>/position` (with a plan: ``FleetPosition``, retained);
/// `P/table` (every device, JSON, retained: what `proximityctl fleet` shows).
public actor FleetService {
    let configuration: FleetConfiguration
    let logger: Logger
    let now: @Sendable () -> Double
    private var rule: any RoomRule
    private var client: MQTTClient?
    private var connected = false
    /// The room each device was last published with (restored from the retained messages too).
    private var published: [String: String] = [:]
    private var discovered: Set<String> = []
    /// The devices' display names and kinds, as the nodes last reported them.
    private var names: [String: String] = [:]
    private var nodeDevices: Set<String> = []
    private var since: [String: Double] = [:]
    private var dirty = false
    private var lastTable = -Double.infinity
    /// When each device's attributes last went out, and the devices reported since.
    private var attributesSent: [String: Double] = [:]
    private var reported: Set<String> = []
    private var lastProblem: String?
    /// The nodes whose retained state says they move (`role: mobile`): their reports make no room.
    private var mobile: Set<String> = []
    /// With a plan: the hearings and each device's estimator.
    private var positions: FleetPositions?
    /// With a plan: each drifting node's reason, as last logged.
    private var drift: [String: String] = [:]
    /// The room each placed device's position gives (a room's name, or `home` in none); a device
    /// not in it has the rule's room.
    private var placed: [String: String] = [:]
    /// The position each device was last published with.
    private var lastPosition: [String: FleetPosition] = [:]
    /// Nodes not in the plan already logged as such (since they last were in it).
    private var outsidePlan: Set<String> = []
    /// With a plan: when each device was first reported since it was last not_home.
    private var firstHeard: [String: Double] = [:]
    /// When each node last sent anything, and its last retained status (for the map's node health).
    private var nodeSeen: [String: Double] = [:]
    private var nodeStatus: [String: String] = [:]
    /// The calibration as last published (the map shows its nodes' fit).
    private var lastCalibration: FleetCalibrationPayload?

    /// With a plan, a device new to the fleet is placed only after this long, seconds, and gets
    /// a nearest-node room only if no node in the plan has heard it by then: the nodes that hear
    /// a device report it within a second or two of each other, and a device placed on the first
    /// report, or a device in the plan's rooms that a node outside the plan happened to report
    /// first, should not show a wrong room for a second.
    public static let fallbackDelay = 2.0

    public init(_ configuration: FleetConfiguration, logger: Logger,
                now: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        self.configuration = configuration
        self.logger = logger
        self.now = now
        rule = configuration.makeRule()
        positions = configuration.plan.map {
            FleetPositions(plan: $0, staleAfter: configuration.decider.staleAfter, configuration: configuration.positioner)
        }
        configuration.views?.show(plan: configuration.plan)
    }

    /// The room of a device placed on the plan but in none of its rooms: home, as Home Assistant's
    /// `device_tracker` reads it.
    public static let homeOutsideRooms = "home"

    /// Replaces the floor plan (a reload): the positions start afresh on the new one at the next
    /// tick; the rooms they give are published as they change. Without a plan at start, none is
    /// taken (the discovery would change).
    public func replacePlan(_ plan: FloorPlan) {
        guard positions != nil else {
            logger.warning("the service started without --plan: the floor plan is not taken")
            return
        }
        let before = Set(positions?.plan.nodes.map(\.name) ?? [])
        let after = Set(plan.nodes.map(\.name))
        positions?.replace(plan: plan)
        outsidePlan.subtract(after)
        if configuration.outsideNodes == .ignore {
            // A node taken out of the plan: its reports stop counting now, its readings with them.
            let t = now()
            for node in before.subtracting(after).sorted() {
                positions?.forget(node: node)
                apply(rule.forget(node: node, at: t))
                nodeSeen[node] = nil
                if outsidePlan.insert(node).inserted {
                    logger.notice("node no longer in the floor plan: its reports are ignored (--outside-nodes nearest takes them for nearest-node rooms)",
                                  metadata: ["node": "\(node)"])
                }
            }
        }
        lastCalibration = nil
        configuration.views?.show(plan: plan)
        logger.notice("floor plan reloaded", metadata: ["floors": "\(plan.floors.count)", "nodes": "\(plan.nodes.count)",
                                                        "rooms": "\(plan.rooms.count)"])
    }

    var topics: FleetTopics { FleetTopics(prefix: configuration.prefix) }

    /// Runs until the task is cancelled: connects (reconnecting with back-off), and ticks the
    /// rule once a second. At the end says `offline` and disconnects.
    public func run() async throws {
        var options = configuration.broker
        options.will = .init(topic: topics.status, payload: "offline", qos: 1, retain: true)
        let client = try MQTTClient(options)
        self.client = client
        let events = Task { [weak self] in for await e in client.events { await self?.connection(e) } }
        let messages = Task { [weak self] in for await m in client.messages { await self?.received(m) } }
        logger.info("connecting to the MQTT broker", metadata: ["mqtt.broker": "\(options.host):\(options.port)",
                                                               "rule": "\(configuration.rule.rawValue)"])
        if let plan = configuration.plan {
            logger.info("floor plan", metadata: ["floors": "\(plan.floors.count)", "nodes": "\(plan.nodes.count)", "rooms": "\(plan.rooms.count)",
                                                 "cells": "\(positions?.grid.count ?? 0)"])
        }
        client.connect()
        while !Task.isCancelled {
            do { try await Task.sleep(for: .seconds(1)) } catch { break }
            tick()
        }
        // Not in this (cancelled) task: saying offline waits for the broker's acknowledgement.
        await Task { await self.finish(events: events, messages: messages) }.value
    }

    private func finish(events: Task<Void, Never>, messages: Task<Void, Never>) async {
        guard let client else { return }
        if connected {
            let topic = topics.status
            await withTaskGroup(of: Void.self) { group in
                group.addTask { try? await client.publish(topic, "offline", qos: 1, retain: true) }
                group.addTask { try? await Task.sleep(for: .seconds(2)) }
                await group.next()
                group.cancelAll()
            }
        }
        client.disconnect()
        events.cancel()
        messages.cancel()
        configuration.views?.finish()
        logger.info("stopped")
    }

    private func send(_ topic: String, _ payload: String, retain: Bool = true) {
        guard let client else { return }
        do { try client.send(topic, payload, qos: 1, retain: retain) } catch {
            logger.debug("not published", metadata: ["topic": "\(topic)", "error": "\(error)"])
        }
    }

    private func connection(_ event: MQTTConnectionEvent) {
        switch event {
        case .connected:
            connected = true
            lastProblem = nil
            logger.notice("connected to the MQTT broker")
            send(topics.status, "online")
            discovered = []
            // Its own retained rooms first: the broker sends them right after that subscription's
            // acknowledgement, before it even takes the next subscription, so a restart takes its
            // rooms back before any node's report can decide one afresh.
            // Then the nodes' retained states (their roles), before any report.
            let patterns = ["\(configuration.prefix)/devices/+/room", "\(configuration.root)/+/state", "\(configuration.root)/+/status",
                            "\(configuration.root)/+/peers/+"]
                + (configuration.discovery ? ["\(configuration.discoveryPrefix)/status"] : [])
            Task { [client] in
                for pattern in patterns { try? await client?.subscribe(pattern) }
            }
            for device in published.keys.sorted() { discover(device) }
            dirty = true
        case .refused(let code, let reason):
            problem("the MQTT broker refused the connection: \(reason)\(code == 4 || code == 5 ? " (check --username and --password-file)" : ""); retrying with back-off")
        case .disconnected(_, let reason):
            if connected {
                logger.warning("lost the connection to the MQTT broker: reconnecting with back-off", metadata: ["reason": "\(reason)"])
            } else if lastProblem?.hasPrefix("the MQTT broker refused") != true {
                let hint = event.isTLSFailure ? " (check --ca-file: the CA that signed the broker's certificate, and the host in --broker)" : ""
                problem("cannot reach the MQTT broker: \(reason)\(hint); retrying with back-off")
            }
            connected = false
        }
    }

    private func problem(_ message: String) {
        if message == lastProblem { logger.debug("\(message)") } else { logger.error("\(message)"); lastProblem = message }
    }

    private func received(_ message: MQTTMessage) {
        let levels = message.topic.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        let t = now()
        if message.topic == "\(configuration.discoveryPrefix)/status" {
            if message.string == "online" {
                discovered = []
                for device in published.keys.sorted() { discover(device) }
            }
            return
        }
        let root = configuration.root.split(separator: "/").count
        let own = configuration.prefix.split(separator: "/").count
        if message.topic.hasPrefix(configuration.prefix + "/devices/"), levels.count == own + 3, levels.last == "room" {
            // Our own retained room, from before a restart: taken back unless already decided.
            let device = MQTTTopic.name(levels[own + 1])
            guard published[device] == nil, !message.payload.isEmpty else { return }
            let room = message.string == "not_home" ? nil : message.string
            rule.restore(device: device, room: room, at: t)
            published[device] = message.string
            logger.info("room taken back from the broker", metadata: ["device": "\(device)", "room": "\(message.string)"])
            discover(device)
            return
        }
        guard message.topic.hasPrefix(configuration.root + "/"), levels.count > root else { return }
        let node = MQTTTopic.name(levels[root])
        let taken = takes(node)
        if !message.payload.isEmpty, taken { nodeSeen[node] = t }
        if levels.count == root + 2, levels[root + 1] == "state" {
            // A mobile node (a cart, a bag) is never a room: its reports are dropped, now and on.
            guard let state = MQTTJSON.decode(NodeStatePayload.self, from: message.payload) else { return }
            positions?.learn(node: node, identity: state.id)
            // Kept for a node whose reports are not taken too: a reload may add it to the plan.
            if state.isMobile, mobile.insert(node).inserted {
                positions?.forget(node: node)
                apply(rule.forget(node: node, at: t))
                if taken { logger.info("node is mobile: its reports make no room", metadata: ["node": "\(node)"]) }
            } else if !state.isMobile, mobile.remove(node) != nil, taken {
                logger.info("node is fixed again: its reports make rooms", metadata: ["node": "\(node)"])
            }
            return
        }
        if levels.count == root + 2, levels[root + 1] == "status" {
            if !message.payload.isEmpty { nodeStatus[node] = String(message.string.prefix(16)) }
            if message.string == "offline", taken {
                positions?.forget(node: node)
                apply(rule.forget(node: node, at: t))
                logger.info("node offline: its reports are dropped", metadata: ["node": "\(node)"])
            }
            return
        }
        guard levels.count == root + 3, levels[root + 1] == "peers", !mobile.contains(node) else { return }
        guard taken else {
            // With a plan, only its nodes count: anyone else who can publish under the root is
            // not taken for a node of the fleet.
            if outsidePlan.insert(node).inserted {
                logger.notice("node not in the floor plan: its reports are ignored (add it to the plan, or --outside-nodes nearest gives the devices only it hears nearest-node rooms)",
                              metadata: ["node": "\(node)"])
            }
            return
        }
        let device = MQTTTopic.name(levels[root + 2])
        if let track = configuration.track, !track.contains(device) { return }
        guard let report = MQTTJSON.decode(PeerReport.self, from: message.payload) else { return }
        if positions != nil {
            // Before the rule sees it: a device a node in the plan hears waits for its position.
            positions?.hear(device: device, node: node, report: report, at: t)
            if positions?.isPlanNode(node) == false, outsidePlan.insert(node).inserted {
                logger.info("node not in the floor plan: the devices only it hears get nearest-node rooms", metadata: ["node": "\(node)"])
            }
        }
        guard let distance = report.distance, distance.isFinite, distance > 0 else { return }
        if positions != nil, firstHeard[device] == nil { firstHeard[device] = t }
        learn(device, name: report.name, kind: report.kind)
        apply(rule.observe(device: device, node: node, distance: distance, at: t))
        reported.insert(device)
        dirty = true
    }

    /// Whether `node`'s reports are taken: every node's without a plan, only the plan's nodes' with
    /// one (unless ``OutsideNodes/nearest``).
    private func takes(_ node: String) -> Bool {
        guard let positions, configuration.outsideNodes == .ignore else { return true }
        return positions.isPlanNode(node)
    }

    /// A device's name and kind from a report: a change of either is discovered again (once the
    /// device has a room), so Home Assistant shows the new name.
    private func learn(_ device: String, name: String?, kind: String?) {
        var changed = false
        if let name, !name.isEmpty, names[device] != name {
            names[device] = name
            changed = true
        }
        if kind == PeerKind.node.rawValue, nodeDevices.insert(device).inserted { changed = true }
        guard changed else { return }
        dirty = true
        if discovered.remove(device) != nil { discover(device) }
    }

    private func tick() {
        let t = now()
        apply(rule.tick(at: t))
        if positions != nil { place(at: t) }
        let devices = rule.devices.count
        if dirty, t - lastTable >= configuration.tableInterval * (1 + Double(devices / 500)) {
            publishTable(at: t)
        }
        if let views = configuration.views { show(views, at: t) }
        guard connected else { return }
        for device in reported where t - (attributesSent[device] ?? -.infinity) >= configuration.attributesInterval {
            send(topics.attributes(device), attributes(device, at: t))
            attributesSent[device] = t
            reported.remove(device)
        }
    }

    private func apply(_ decisions: [RoomDecision]) {
        for decision in decisions {
            let device = decision.device
            if positions != nil {
                // With a plan, rooms are decided at the tick (``place(at:)``): from the position,
                // or the rule's for a device no node in the plan hears. not_home is the rule's, at
                // once, and the position goes with it.
                guard decision.room == nil else { continue }
                positions?.forget(device: device)
                // Deleted even when this run did not publish it: one from before a restart.
                unplace(device, always: true)
                firstHeard[device] = nil
            }
            let room = decision.room ?? "not_home"
            since[device] = decision.at
            publish(device, room: room, from: decision.previous ?? "not_home", reason: decision.reason.rawValue, at: decision.at)
        }
    }

    private func publish(_ device: String, room: String, from previous: String, reason: String, at t: Double) {
        guard published[device] != room else { return }
        logger.info("room", metadata: ["device": "\(device)", "room": "\(room)", "from": "\(previous)", "reason": "\(reason)"])
        published[device] = room
        discover(device)
        send(topics.room(device), room)
        send(topics.attributes(device), attributes(device, at: t))
        attributesSent[device] = t
        dirty = true
    }

    // MARK: - Positions (with a plan)

    /// Each device a node in the plan hears: its position (published when it changes
    /// meaningfully), and its room from it. A placed device that only nodes outside the plan still
    /// hear goes back to the rule's room; one nobody hears keeps its room until the rule's not_home.
    private func place(at t: Double) {
        guard var positions else { return }
        let fitted = positions.calibration.lastFit
        let estimates = positions.step(at: t)
        self.positions = positions
        if positions.calibration.lastFit != fitted { calibrated(positions, at: t) }
        for device in estimates.keys.sorted() {
            // Not home for the rule (nobody hears it near): no room, and no position either.
            guard rule.room(of: device) != nil, let estimate = estimates[device] else { continue }
            // New to the fleet: placed once the nodes that hear it had their chance to report (they
            // report within a second or two of each other). Placed on the first node's report
            // alone, it would stand for a second in that node's room.
            guard placed[device] != nil || t - (firstHeard[device] ?? -.infinity) >= Self.fallbackDelay else { continue }
            let position = positions.payload(estimate, at: t)
            placed[device] = position.room ?? Self.homeOutsideRooms
            if FleetPositions.isMeaningful(position, since: lastPosition[device]) {
                lastPosition[device] = position
                send(topics.position(device), MQTTJSON.encode(position))
                reported.insert(device)
                dirty = true
            }
            change(device, to: placed[device]!, reason: "position", at: t)
        }
        for device in placed.keys.sorted() where estimates[device] == nil {
            // Heard by nodes outside the plan only: the nearest of them, as without a plan.
            let outside = rule.readings(of: device).contains { !positions.isPlanNode($0.node) && $0.age(at: t) < configuration.decider.staleAfter }
            guard outside || rule.room(of: device) == nil else { continue }
            unplace(device)
            change(device, to: rule.room(of: device) ?? "not_home", reason: outside ? "outside-plan" : "away", at: t)
        }
        // Devices no node in the plan hears: the rule's room, once the plan's nodes had their chance.
        for device in rule.devices where placed[device] == nil {
            guard let room = rule.room(of: device), !positions.isPlaced(device, at: t),
                  t - (firstHeard[device] ?? -.infinity) >= Self.fallbackDelay else { continue }
            change(device, to: room, reason: "outside-plan", at: t)
        }
        // Devices the rule forgot without a room (never heard near): nothing more to wait for.
        if firstHeard.count > placed.count {
            let known = Set(rule.devices)
            firstHeard = firstHeard.filter { known.contains($0.key) }
        }
    }

    /// A new calibration fit: published (retained), and each node whose drift changed logged.
    private func calibrated(_ positions: FleetPositions, at t: Double) {
        guard let payload = positions.calibrationPayload(epoch: t) else { return }
        lastCalibration = payload
        send(topics.calibration, MQTTJSON.encode(payload))
        logger.info("calibration fitted", metadata: ["path-loss-exponent": "\(payload.exponent)", "rms": "\(payload.rms)",
                                                      "pairs": "\(payload.pairs.count)"])
        for node in payload.nodes where drift[node.name] != node.drift {
            drift[node.name] = node.drift
            if let reason = node.drift {
                logger.warning("node drifting: \(reason)", metadata: ["node": "\(node.name)"])
            } else {
                logger.notice("node no longer drifting", metadata: ["node": "\(node.name)"])
            }
        }
    }

    private func change(_ device: String, to room: String, reason: String, at t: Double) {
        guard published[device] != room else { return }
        since[device] = t
        publish(device, room: room, from: published[device] ?? "not_home", reason: reason, at: t)
    }

    /// The device is no longer placed: its position is deleted from the broker.
    private func unplace(_ device: String, always: Bool = false) {
        placed[device] = nil
        if lastPosition.removeValue(forKey: device) != nil || always {
            send(topics.position(device), "")
            dirty = true
        }
    }

    private func attributes(_ device: String, at t: Double) -> String {
        var distances: [String: Double] = [:]
        var ages: [String: Double] = [:]
        for r in rule.readings(of: device) {
            distances[r.node] = MQTTRounding.metres(r.distance)
            ages[r.node] = MQTTRounding.tenths(r.age(at: t))
        }
        return MQTTJSON.encode(FleetAttributes(room: published[device] ?? "not_home", distances: distances, ages: ages,
                                               since: since[device] ?? t, rule: rule.name,
                                               position: placed[device] != nil ? lastPosition[device] : nil))
    }

    private func publishTable(at t: Double) {
        guard connected else { return }
        dirty = false
        lastTable = t
        send(topics.table, MQTTJSON.encode(table(at: t)))
    }

    /// Every device: its room, the nodes' readings and its position.
    private func table(at t: Double) -> FleetTable {
        var rows: [FleetTable.Device] = []
        for device in Set(rule.devices).union(published.keys).sorted() {
            let readings = rule.readings(of: device).map {
                FleetTable.Reading(node: $0.node, distance: MQTTRounding.metres($0.distance), age: MQTTRounding.tenths($0.age(at: t)))
            }
            rows.append(FleetTable.Device(id: device, name: names[device], room: published[device] ?? "not_home", readings: readings,
                                          position: placed[device] != nil ? lastPosition[device] : nil))
        }
        return FleetTable(time: t, rule: rule.name, devices: rows)
    }

    /// The map's state: the table, and every node's health (those of the plan, and every node
    /// heard from).
    private func show(_ views: FleetViews, at t: Double) {
        var reports: [String: Int] = [:]
        for device in rule.devices {
            for reading in rule.readings(of: device) where reading.age(at: t) < configuration.decider.staleAfter {
                reports[reading.node, default: 0] += 1
            }
        }
        let calibration = positions != nil ? lastCalibration : nil
        let fitted = Dictionary((calibration?.nodes ?? []).map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        let names = Set(nodeSeen.keys).union(positions?.plan.nodes.map(\.name) ?? [])
        let nodes = names.sorted().map { name in
            FleetNodeHealth(name: name, inPlan: positions?.isPlanNode(name) ?? false, status: nodeStatus[name], mobile: mobile.contains(name),
                            lastHeard: nodeSeen[name].map(MQTTRounding.milliseconds), devices: reports[name] ?? 0,
                            rxOffset: fitted[name]?.rxOffset, txPower: fitted[name]?.txPower, residual: fitted[name]?.residual,
                            drift: fitted[name]?.drift)
        }
        views.show(devices: table(at: t),
                   nodes: FleetNodes(time: MQTTRounding.milliseconds(t), exponent: calibration?.exponent, rms: calibration?.rms, nodes: nodes))
    }

    /// Home Assistant `device_tracker` discovery for `device`, once per connection; with a floor
    /// plan also its room `sensor`, on the same Home Assistant device.
    private func discover(_ device: String) {
        guard configuration.discovery, connected, !discovered.contains(device) else { return }
        discovered.insert(device)
        let object = "proximity_fleet_\(MQTTTopic.objectID(device))"
        // The device's only entity, so named after the device (name null): "Anna's badge", not
        // "<id> <id>". A tracked node is its own node's device, not a second one.
        let name = names[device] ?? device
        let owner: DiscoveryConfig.Device = nodeDevices.contains(device)
            ? .node(identity: device, name: name)
            : .init(identifiers: [object], name: name, manufacturer: "proximityd", model: "tracked device")
        var config = DiscoveryConfig(name: nil, uniqueID: object, stateTopic: topics.room(device), device: owner,
                                     origin: .init(name: "proximity-fleet"))
        config.objectID = object
        config.jsonAttributesTopic = topics.attributes(device)
        config.payloadHome = "home"
        config.payloadNotHome = "not_home"
        config.sourceType = "bluetooth_le"
        config.setAvailability(topics.status)
        send("\(configuration.discoveryPrefix)/device_tracker/\(object)/config", MQTTJSON.encode(config))
        guard positions != nil else { return }
        // The room as a sensor: a device_tracker shows a room only as its state, and automations
        // and history want the room by name.
        var sensor = DiscoveryConfig(name: "Room", uniqueID: "\(object)_room", stateTopic: topics.room(device), device: owner,
                                     origin: .init(name: "proximity-fleet"))
        sensor.objectID = "\(object)_room"
        sensor.icon = "mdi:floor-plan"
        sensor.setAvailability(topics.status)
        send(Self.roomSensorTopic(discoveryPrefix: configuration.discoveryPrefix, device: device), MQTTJSON.encode(sensor))
    }

    /// Where a device's room sensor is discovered: `<discovery-prefix>/sensor/proximity_fleet_<device>/room/config`.
    public static func roomSensorTopic(discoveryPrefix: String, device: String) -> String {
        "\(discoveryPrefix)/sensor/proximity_fleet_\(MQTTTopic.objectID(device))/room/config"
    }
}

