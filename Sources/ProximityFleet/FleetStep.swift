import Foundation
import Logging
import ProximityCore
import ProximityMQTT

/// What ``FleetStep`` asks its executor to do, in order.
public enum FleetEffect: Sendable, Hashable {
    /// Publish on the broker, QoS 1; retained unless said otherwise.
    case publish(topic: String, payload: String, retain: Bool)
    /// Subscribe to these topic filters, in order (the broker sends each one's retained
    /// messages before it takes the next).
    case subscribe([String])
    case log(FleetLogLine)
    /// The map's state, once a second (with `--http`).
    case show(devices: FleetTable, nodes: FleetNodes, status: FleetStatus)
    /// The map's floor plan, at start and at each reload.
    case showPlan(FloorPlan?)
}

/// A line for the service's log.
public struct FleetLogLine: Sendable, Hashable, CustomStringConvertible {
    public var level: Logger.Level
    public var message: String
    public var metadata: [String: String]

    public init(_ level: Logger.Level, _ message: String, _ metadata: [String: String] = [:]) {
        self.level = level
        self.message = message
        self.metadata = metadata
    }

    public var description: String {
        "\(level) \(message) " + metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    }
}

/// The broker connection as the step needs to know it.
public enum FleetConnection: Sendable, Hashable {
    case connected
    /// The broker refused the connection (libmosquitto's code and reason).
    case refused(code: Int, reason: String)
    /// The connection ended, or could not be made; `tls` when the TLS handshake failed.
    case disconnected(reason: String, tls: Bool)
}

/// The fleet service as one pure step (docs/fleet.md): every device's room rule, its position on
/// the floor plan and the calibration, the nodes' health and what was published. It takes the
/// broker's messages (``FleetMessage``), the connection's changes, plan reloads and a tick once a
/// second, each with the time, and returns what to do (``FleetEffect``): publications (rooms,
/// positions, attributes, the table, the calibration, Home Assistant discovery), subscriptions,
/// log lines and the map's state. ``FleetService`` carries them out over MQTT; `proximity-fleet
/// replay` drives the same step with the reports a node would have published, so live and
/// replay cannot differ.
public struct FleetStep: Sendable {
    public let configuration: FleetConfiguration
    private var rule: any RoomRule
    private var connected = false
    /// The room each device was last published with (restored from the retained messages too).
    private var published: [String: String] = [:]
    private var discovered: Set<String> = []
    /// Each room's devices as last published (`<prefix>/rooms/<room>`), and the rooms whose
    /// entities were discovered on this connection.
    private var occupancy: [String: FleetRoomOccupancy] = [:]
    private var roomsDiscovered: Set<String> = []
    /// Something the rooms' occupancy rests on changed (a room, a name, a node, the connection):
    /// worked out again at the next tick, not at every one.
    private var occupancyDirty = true
    /// The devices' display names and kinds, as the nodes last reported them.
    private var names: [String: String] = [:]
    /// What each node's last report of a device said of its proof with the fleet's key (a node's
    /// `verified`), device → node → verified.
    private var verifiedBy: [String: [String: Bool]] = [:]
    private var nodeDevices: Set<String> = []
    /// The identities of the nodes whose retained state says they stay where they are: boxes, not
    /// occupants of a room.
    private var fixedNodes: Set<String> = []
    private var since: [String: Double] = [:]
    private var dirty = false
    private var lastTable = -Double.infinity
    /// When each device's attributes last went out, and the devices reported since.
    private var attributesSent: [String: Double] = [:]
    private var reported: Set<String> = []
    private var lastProblem: String?
    /// The nodes whose retained state says they move (`role: mobile`): their reports make no room.
    private var mobile: Set<String> = []
    /// With a plan: the hearings, each device's estimator and the calibration.
    public private(set) var positions: FleetPositions?
    /// With a plan: each drifting node's reason, as logged when it started drifting.
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
    /// The broker connection as the map shows it: its state, since when, and why it is down.
    private var broker = FleetStatus.Broker(state: "connecting", since: 0)
    private var started = false
    /// When the newest node report or hearing arrived.
    private var newestReport: Double?
    /// How many node reports and hearings it has taken, and when it last ticked.
    public private(set) var reportsTaken = 0
    public private(set) var lastTick: Double?

    /// With a plan, a device new to the fleet is placed only after this long, seconds, and gets
    /// a nearest-node room only if no node in the plan has heard it by then: the nodes that hear
    /// a device report it within a second or two of each other, and a device placed on the first
    /// report, or a device in the plan's rooms that a node outside the plan happened to report
    /// first, should not show a wrong room for a second.
    public static let fallbackDelay = 2.0
    /// The room of a device placed on the plan but in none of its rooms: home, as Home Assistant's
    /// `device_tracker` reads it.
    public static let homeOutsideRooms = "home"

    public init(_ configuration: FleetConfiguration) {
        self.configuration = configuration
        rule = configuration.makeRule()
        positions = configuration.plan.map {
            FleetPositions(plan: $0, staleAfter: configuration.decider.staleAfter, configuration: configuration.positioner,
                           estimator: configuration.estimator)
        }
    }

    var topics: FleetTopics { FleetTopics(prefix: configuration.prefix) }

    // MARK: - Inputs

    /// The broker connection changed, at `t`.
    public mutating func connection(_ change: FleetConnection, at t: Double) -> [FleetEffect] {
        switch change {
        case .connected:
            broker = .init(state: "connected", since: MQTTRounding.milliseconds(t))
            connected = true
            lastProblem = nil
            var effects: [FleetEffect] = [.log(.init(.notice, "connected to the MQTT broker", ["broker": configuration.broker])),
                                          publish(topics.status, "online")]
            discovered = []
            roomsDiscovered = []
            // A broker that restarted without persistence lost every retained message: what this
            // run published goes out again (the rooms' occupancy at the next tick).
            effects += republish()
            occupancy = [:]
            occupancyDirty = true
            // Its own retained rooms first: the broker sends them right after that subscription's
            // acknowledgement, before it even takes the next subscription, so a restart takes its
            // rooms back before any node's report can decide one afresh.
            // Then the nodes' retained states (their roles), before any report.
            effects.append(.subscribe(["\(configuration.prefix)/devices/+/room", "\(configuration.root)/+/state",
                                       "\(configuration.root)/+/status", "\(configuration.root)/+/peers/+",
                                       "\(configuration.root)/+/\(NodeTopics.hearingsLevel)"]
                                      + (configuration.discovery ? ["\(configuration.discoveryPrefix)/status"] : [])))
            dirty = true
            return effects
        case .refused(let code, let reason):
            if broker.state != "down" { broker = .init(state: "down", since: MQTTRounding.milliseconds(t), reason: reason) }
            return problem("the MQTT broker at \(configuration.broker) refused the connection: " +
                           "\(reason)\(code == 4 || code == 5 ? " (check --username and --password-file)" : ""); retrying with back-off")
        case .disconnected(let reason, let tls):
            if broker.state != "down" { broker = .init(state: "down", since: MQTTRounding.milliseconds(t), reason: reason) }
            defer { connected = false }
            if connected {
                return [.log(.init(.warning,
                                   "lost the connection to the MQTT broker at \(configuration.broker): reconnecting with back-off",
                                   ["reason": reason]))]
            } else if lastProblem?.hasPrefix("the MQTT broker at \(configuration.broker) refused") != true {
                let hint = tls ? " (check --ca-file: the CA that signed the broker's certificate, and the host in --broker)" : ""
                return problem("cannot reach the MQTT broker at \(configuration.broker): \(reason)\(hint); retrying with back-off")
            }
            return []
        }
    }

    private mutating func problem(_ message: String) -> [FleetEffect] {
        defer { lastProblem = message }
        return [.log(.init(message == lastProblem ? .debug : .error, message))]
    }

    /// A message from the broker, arrived at `t`.
    public mutating func receive(_ message: FleetMessage, at t: Double) -> [FleetEffect] {
        var effects: [FleetEffect] = []
        if let node = message.node, takes(node), isNews(message) {
            if nodeSeen.updateValue(t, forKey: node) == nil { occupancyDirty = true }   // a new room, without a plan
        }
        switch message {
        case .homeAssistant(let online):
            guard online else { return [] }
            discovered = []
            roomsDiscovered = []
            for device in published.keys.sorted() { effects += discover(device) }
            for room in occupancy.keys.sorted() { effects += discoverRoom(room) }
        case .ownRoom(let device, let room):
            // Our own retained room, from before a restart: taken back unless already decided.
            guard published[device] == nil, !room.isEmpty, !isPlanNode(device: device) else { return [] }
            rule.restore(device: device, room: room == "not_home" ? nil : room, at: t)
            published[device] = room
            occupancyDirty = true
            effects.append(.log(.init(.info, "room taken back from the broker", ["device": device, "room": room])))
            effects += discover(device)
        case .nodeState(let node, let state):
            // A mobile node (a cart, a bag) is never a room: its reports are dropped, now and on.
            guard let state else { return [] }
            positions?.learn(node: node, identity: state.id)
            let changed = state.isMobile ? fixedNodes.remove(state.id.lowercased()) != nil
                : fixedNodes.insert(state.id.lowercased()).inserted
            if changed { occupancyDirty = true }
            // Kept for a node whose reports are not taken too: a reload may add it to the plan.
            if state.isMobile != mobile.contains(node) { occupancyDirty = true }
            if state.isMobile, mobile.insert(node).inserted {
                positions?.forget(node: node)
                effects += apply(rule.forget(node: node, at: t))
                if takes(node) { effects.append(.log(.init(.info, "node is mobile: its reports make no room", ["node": node]))) }
            } else if !state.isMobile, mobile.remove(node) != nil, takes(node) {
                effects.append(.log(.init(.info, "node is fixed again: its reports make rooms", ["node": node])))
            }
        case .nodeStatus(let node, let status):
            if !status.isEmpty { nodeStatus[node] = status }
            if status == "offline", takes(node) {
                positions?.forget(node: node)
                effects += apply(rule.forget(node: node, at: t))
                effects.append(.log(.init(.info, "node offline: its reports are dropped", ["node": node])))
            }
        case .report(let node, let device, let report):
            reportsTaken += 1
            if report != nil, takes(node) { newestReport = t }
            effects += hear(node: node, device: device, report: report, at: t)
        case .hearings(let node, let batch):
            reportsTaken += 1
            if batch != nil, takes(node) { newestReport = t }
            // The positions' only: the rooms' rule and a device's presence rest on the reports.
            guard let batch, !mobile.contains(node), takes(node), var positions else { break }
            let tracked = Dictionary(batch.devices.map { ($0.id, follows($0.id)) }, uniquingKeysWith: { a, _ in a })
            self.positions = nil   // the only copy while it changes
            positions.hear(node: node, seconds: batch.devices, at: t) { tracked[$0] ?? false }
            self.positions = positions
        case .nodeActivity:
            break
        }
        return effects
    }

    /// Whether `message` says something (a deleted retained message, or one that is not a
    /// payload of its kind, does not count as hearing from its node).
    private func isNews(_ message: FleetMessage) -> Bool {
        switch message {
        case .nodeState(_, let state): state != nil
        case .nodeStatus(_, let status): !status.isEmpty
        case .report(_, _, let report): report != nil
        case .hearings(_, let batch): batch != nil
        case .nodeActivity: true
        case .ownRoom, .homeAssistant: false
        }
    }

    private mutating func hear(node: String, device: String, report: PeerReport?, at t: Double) -> [FleetEffect] {
        guard !mobile.contains(node) else { return [] }
        guard takes(node) else {
            // With a plan, only its nodes count: anyone else who can publish under the root is
            // not taken for a node of the fleet.
            guard outsidePlan.insert(node).inserted else { return [] }
            return [.log(.init(.notice, "node not in the floor plan: its reports are ignored (add it to the plan, " +
                               "or --outside-nodes nearest gives the devices only it hears nearest-node rooms)",
                               ["node": node]))]
        }
        guard let report else { return [] }
        var effects: [FleetEffect] = []
        // The plan's own nodes are nodes, not devices: their hearings of each other feed the
        // calibration only, unless --track names them (by identity or by name).
        let follow = follows(device)
        if positions != nil {
            // Before the rule sees it: a device a node in the plan hears waits for its position.
            positions?.hear(device: device, node: node, report: report, at: t, place: follow)
            if positions?.isPlanNode(node) == false, outsidePlan.insert(node).inserted {
                effects.append(.log(.init(.info, "node not in the floor plan: the devices only it hears get nearest-node rooms",
                                          ["node": node])))
            }
        }
        guard follow else { return effects }
        guard let distance = report.distance, distance.isFinite, distance > 0 else { return effects }
        if positions != nil, firstHeard[device] == nil { firstHeard[device] = t }
        effects += learn(device, name: report.name, kind: report.kind)
        if let verified = report.verified { verifiedBy[device, default: [:]][node] = verified }
        effects += apply(rule.observe(device: device, node: node, distance: distance, at: t))
        reported.insert(device)
        dirty = true
        return effects
    }

    /// Whether `device` is tracked: every device but the plan's nodes, or those `--track` names
    /// (a node by its identity or its name).
    private func follows(_ device: String) -> Bool {
        let planNode = isPlanNode(device: device)
        return configuration.track.map { $0.contains(device) || (planNode && $0.contains(positions?.nodeName(of: device) ?? "")) }
            ?? !planNode
    }

    /// Whether `device` is one of the plan's nodes (by the identity its state gave).
    private func isPlanNode(device: String) -> Bool {
        guard let positions, let name = positions.nodeName(of: device) else { return false }
        return positions.isPlanNode(name)
    }

    /// Whether `node`'s reports are taken: every node's without a plan, only the plan's nodes' with
    /// one (unless ``OutsideNodes/nearest``).
    private func takes(_ node: String) -> Bool {
        guard let positions, configuration.outsideNodes == .ignore else { return true }
        return positions.isPlanNode(node)
    }

    /// A device's name and kind from a report: a change of either is discovered again (once the
    /// device has a room), so Home Assistant shows the new name.
    private mutating func learn(_ device: String, name: String?, kind: String?) -> [FleetEffect] {
        var changed = false
        if let name, !name.isEmpty, names[device] != name {
            names[device] = name
            occupancyDirty = true
            changed = true
        }
        if kind == PeerKind.node.rawValue, nodeDevices.insert(device).inserted { changed = true }
        guard changed else { return [] }
        dirty = true
        guard discovered.remove(device) != nil else { return [] }
        return discover(device)
    }

    /// Replaces the floor plan (a reload): the positions start afresh on the new one at the next
    /// tick; the rooms they give are published as they change. Without a plan at start, none is
    /// taken (the discovery would change).
    public mutating func replacePlan(_ plan: FloorPlan, at t: Double) -> [FleetEffect] {
        guard positions != nil else { return [.log(.init(.warning, "the service started without --plan: the floor plan is not taken"))] }
        var effects: [FleetEffect] = []
        let before = Set(positions?.plan.nodes.map(\.name) ?? [])
        let after = Set(plan.nodes.map(\.name))
        positions?.replace(plan: plan)
        occupancyDirty = true
        outsidePlan.subtract(after)
        if configuration.outsideNodes == .ignore {
            // A node taken out of the plan: its reports stop counting now, its readings with them.
            for node in before.subtracting(after).sorted() {
                positions?.forget(node: node)
                effects += apply(rule.forget(node: node, at: t))
                nodeSeen[node] = nil
                if outsidePlan.insert(node).inserted {
                    effects.append(.log(.init(.notice, "node no longer in the floor plan: its reports are ignored " +
                                              "(--outside-nodes nearest takes them for nearest-node rooms)",
                                              ["node": node])))
                }
            }
        }
        lastCalibration = nil
        if configuration.views != nil { effects.append(.showPlan(plan)) }
        effects.append(.log(.init(.notice, "floor plan reloaded", ["floors": "\(plan.floors.count)", "nodes": "\(plan.nodes.count)",
                                                                   "rooms": "\(plan.rooms.count)"])))
        return effects
    }

    /// Once a second: the rule's time-driven changes, the positions and their rooms, the table,
    /// the attributes and the map.
    public mutating func tick(at t: Double) -> [FleetEffect] {
        lastTick = t
        if !started {
            started = true
            if broker.state == "connecting" { broker.since = MQTTRounding.milliseconds(t) }
        }
        var effects = apply(rule.tick(at: t))
        if positions != nil { effects += place(at: t) }
        let devices = rule.devices.count
        if dirty, connected, t - lastTable >= configuration.tableInterval * (1 + Double(devices / 500)) {
            dirty = false
            lastTable = t
            effects.append(publish(topics.table, MQTTJSON.encode(table(at: t))))
        }
        if configuration.views != nil { effects.append(show(at: t)) }
        guard connected else { return effects }
        effects += occupied()
        for device in reported.sorted() where t - (attributesSent[device] ?? -.infinity) >= configuration.attributesInterval {
            effects.append(publish(topics.attributes(device), attributes(device, at: t)))
            attributesSent[device] = t
            reported.remove(device)
        }
        return effects
    }

    // MARK: - Rooms

    private mutating func apply(_ decisions: [RoomDecision]) -> [FleetEffect] {
        var effects: [FleetEffect] = []
        for decision in decisions {
            let device = decision.device
            if positions != nil {
                // With a plan, rooms are decided at the tick (``place(at:)``): from the position,
                // or the rule's for a device no node in the plan hears. not_home is the rule's, at
                // once, and the position goes with it.
                guard decision.room == nil else { continue }
                positions?.forget(device: device)
                // Deleted even when this run did not publish it: one from before a restart.
                effects += unplace(device, always: true)
                firstHeard[device] = nil
            }
            since[device] = decision.at
            effects += publish(device, room: decision.room ?? "not_home", from: decision.previous ?? "not_home",
                               reason: decision.reason.rawValue, at: decision.at)
        }
        return effects
    }

    private mutating func publish(_ device: String, room: String, from previous: String, reason: String, at t: Double) -> [FleetEffect] {
        guard published[device] != room else { return [] }
        published[device] = room
        occupancyDirty = true
        attributesSent[device] = t
        dirty = true
        return [.log(.init(.info, "room", ["device": device, "room": room, "from": previous, "reason": reason]))] + discover(device)
            + [publish(topics.room(device), room), publish(topics.attributes(device), attributes(device, at: t))]
    }

    private mutating func change(_ device: String, to room: String, reason: String, at t: Double) -> [FleetEffect] {
        guard published[device] != room else { return [] }
        since[device] = t
        return publish(device, room: room, from: published[device] ?? "not_home", reason: reason, at: t)
    }

    // MARK: - Positions (with a plan)

    /// Each device a node in the plan hears: its position (published when it changes
    /// meaningfully), and its room from it. A placed device that only nodes outside the plan still
    /// hear goes back to the rule's room; one nobody hears keeps its room until the rule's not_home.
    private mutating func place(at t: Double) -> [FleetEffect] {
        guard var positions else { return [] }
        self.positions = nil   // the only copy while it changes: every belief is changed in place
        var effects: [FleetEffect] = []
        let fitted = positions.calibration.lastFit
        let estimates = positions.step(at: t)
        self.positions = positions
        if positions.calibration.lastFit != fitted { effects += calibrated(positions, at: t) }
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
                effects.append(publish(topics.position(device), MQTTJSON.encode(position)))
                reported.insert(device)
                dirty = true
            }
            effects += change(device, to: placed[device]!, reason: "position", at: t)
        }
        for device in placed.keys.sorted() where estimates[device] == nil {
            // Heard by nodes outside the plan only: the nearest of them, as without a plan.
            let outside = rule.readings(of: device).contains {
                !positions.isPlanNode($0.node) && $0.age(at: t) < configuration.decider.staleAfter
            }
            guard outside || rule.room(of: device) == nil else { continue }
            effects += unplace(device)
            effects += change(device, to: rule.room(of: device) ?? "not_home", reason: outside ? "outside-plan" : "away", at: t)
        }
        // Devices no node in the plan hears: the rule's room, once the plan's nodes had their chance.
        for device in rule.devices where placed[device] == nil {
            guard let room = rule.room(of: device), !positions.isPlaced(device, at: t),
                  t - (firstHeard[device] ?? -.infinity) >= Self.fallbackDelay else { continue }
            effects += change(device, to: room, reason: "outside-plan", at: t)
        }
        // Devices the rule forgot without a room (never heard near): nothing more to wait for.
        if firstHeard.count > placed.count {
            let known = Set(rule.devices)
            firstHeard = firstHeard.filter { known.contains($0.key) }
        }
        return effects
    }

    /// A new calibration fit: published (retained), and each node whose drift changed logged.
    private mutating func calibrated(_ positions: FleetPositions, at t: Double) -> [FleetEffect] {
        guard let payload = positions.calibrationPayload(epoch: t) else { return [] }
        lastCalibration = payload
        var effects: [FleetEffect] = [
            publish(topics.calibration, MQTTJSON.encode(payload)),
            .log(.init(.info, "calibration fitted", ["path-loss-exponent": "\(payload.exponent)", "rms": "\(payload.rms)",
                                                     "pairs": "\(payload.pairs.count)"])),
        ]
        // Once when a node starts drifting and once when it stops: not again at every fit whose
        // figures moved a little.
        for node in payload.nodes where (drift[node.name] != nil) != (node.drift != nil) {
            drift[node.name] = node.drift
            if let reason = node.drift {
                effects.append(.log(.init(.warning, "node drifting: \(reason)", ["node": node.name])))
            } else {
                effects.append(.log(.init(.notice, "node no longer drifting", ["node": node.name])))
            }
        }
        return effects
    }

    /// The device is no longer placed: its position is deleted from the broker.
    private mutating func unplace(_ device: String, always: Bool = false) -> [FleetEffect] {
        placed[device] = nil
        guard lastPosition.removeValue(forKey: device) != nil || always else { return [] }
        dirty = true
        return [publish(topics.position(device), "")]
    }

    // MARK: - What goes out

    private func publish(_ topic: String, _ payload: String, retain: Bool = true) -> FleetEffect {
        .publish(topic: topic, payload: payload, retain: retain)
    }

    /// Whether `device` is a member of the fleet as the nodes that hear it now say: true when
    /// every one of them that said proved it with the fleet's key, false when one says it did
    /// not, nil when none said (a beacon, a phone, nodes of an open fleet too old to say).
    func verified(_ device: String) -> Bool? {
        guard let said = verifiedBy[device] else { return nil }
        let now = rule.readings(of: device).compactMap { said[$0.node] }
        return now.isEmpty ? nil : !now.contains(false)
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
                                               position: placed[device] != nil ? lastPosition[device] : nil, verified: verified(device)))
    }

    /// Every device: its room, the nodes' readings and its position.
    public func table(at t: Double) -> FleetTable {
        var rows: [FleetTable.Device] = []
        for device in Set(rule.devices).union(published.keys).sorted() {
            let readings = rule.readings(of: device).map {
                FleetTable.Reading(node: $0.node, distance: MQTTRounding.metres($0.distance), age: MQTTRounding.tenths($0.age(at: t)))
            }
            rows.append(FleetTable.Device(id: device, name: names[device], room: published[device] ?? "not_home", readings: readings,
                                          position: placed[device] != nil ? lastPosition[device] : nil,
                                          since: since[device].map(MQTTRounding.milliseconds), verified: verified(device)))
        }
        return FleetTable(time: t, rule: rule.name, devices: rows)
    }

    /// The map's state: the table, and every node's health (those of the plan, and every node
    /// heard from).
    private func show(at t: Double) -> FleetEffect {
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
            FleetNodeHealth(name: name, inPlan: positions?.isPlanNode(name) ?? false, status: nodeStatus[name],
                            mobile: mobile.contains(name),
                            lastHeard: nodeSeen[name].map(MQTTRounding.milliseconds), devices: reports[name] ?? 0,
                            rxOffset: fitted[name]?.rxOffset, txPower: fitted[name]?.txPower, residual: fitted[name]?.residual,
                            drift: fitted[name]?.drift)
        }
        let devices = table(at: t)
        let age = newestReport.map { MQTTRounding.tenths(max(0, t - $0)) }
        let stale = !devices.devices.isEmpty && (age ?? .infinity) > FleetStatus.staleAfter
        let status = FleetStatus(time: MQTTRounding.milliseconds(t), live: broker.state == "connected" && !stale, broker: broker,
                                 nodes: .init(online: nodes.filter { $0.status == "online" }.count, total: nodes.count),
                                 newestReport: newestReport.map(MQTTRounding.milliseconds), newestReportAge: age)
        return .show(devices: devices,
                     nodes: FleetNodes(time: MQTTRounding.milliseconds(t), exponent: calibration?.exponent, rms: calibration?.rms,
                                       nodes: nodes),
                     status: status)
    }

    /// Home Assistant `device_tracker` discovery for `device`, once per connection; with a floor
    /// plan also its room `sensor`, on the same Home Assistant device.
    private mutating func discover(_ device: String) -> [FleetEffect] {
        guard configuration.discovery, connected, !discovered.contains(device) else { return [] }
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
        config.setEntityID(.deviceTracker, object)
        config.jsonAttributesTopic = topics.attributes(device)
        config.payloadHome = "home"
        config.payloadNotHome = "not_home"
        config.sourceType = "bluetooth_le"
        config.setAvailability(topics.status)
        var effects = [publish(DiscoveryConfig.topic(prefix: configuration.discoveryPrefix, .deviceTracker, object: object),
                               MQTTJSON.encode(config))]
        guard positions != nil else { return effects }
        // The room as a sensor: a device_tracker shows a room only as its state, and automations
        // and history want the room by name.
        var sensor = DiscoveryConfig(name: "Room", uniqueID: "\(object)_room", stateTopic: topics.room(device), device: owner,
                                     origin: .init(name: "proximity-fleet"))
        sensor.setEntityID(.sensor, "\(object)_room")
        sensor.icon = "mdi:floor-plan"
        sensor.setAvailability(topics.status)
        effects.append(publish(Self.roomSensorTopic(discoveryPrefix: configuration.discoveryPrefix, device: device),
                               MQTTJSON.encode(sensor)))
        return effects
    }

    // MARK: - Rooms' occupancy

    /// The rooms whose occupancy is published: the plan's rooms, or without a plan the nodes that
    /// make rooms (fixed, taken, heard from); and any room a device was given.
    private var rooms: Set<String> {
        var rooms = Set(published.values).subtracting(["not_home", Self.homeOutsideRooms])
        if let positions {
            rooms.formUnion(positions.plan.rooms.map(\.name))
        } else {
            rooms.formUnion(nodeSeen.keys.filter { !mobile.contains($0) && takes($0) })
        }
        return rooms
    }

    /// Each room whose devices changed (every room after a new connection): its occupancy,
    /// retained, and its entities' discovery once per connection. The boxes themselves (fixed
    /// nodes, tracked without a plan) are not occupants; a mobile node is.
    private mutating func occupied() -> [FleetEffect] {
        guard occupancyDirty else { return [] }
        occupancyDirty = false
        var inRoom: [String: [String]] = [:]
        for (device, room) in published where !fixedNodes.contains(device.lowercased()) { inRoom[room, default: []].append(device) }
        var effects: [FleetEffect] = []
        for room in rooms.sorted() {
            let devices = (inRoom[room] ?? []).sorted()
            let now = FleetRoomOccupancy(room: room, devices: devices, names: devices.map { names[$0] ?? $0 })
            guard occupancy[room] != now else { continue }
            occupancy[room] = now
            effects += discoverRoom(room)
            effects.append(publish(topics.occupancy(room), MQTTJSON.encode(now)))
        }
        return effects
    }

    /// Home Assistant discovery of a room's entities, on the fleet service's device: an
    /// occupancy `binary_sensor` (on while a tracked device is in it) and a `sensor` of how many,
    /// with their names as attributes. Once per connection.
    private mutating func discoverRoom(_ room: String) -> [FleetEffect] {
        guard configuration.discovery, connected, roomsDiscovered.insert(room).inserted else { return [] }
        let object = "proximity_fleet_room_\(MQTTTopic.objectID(room))"
        var occupied = DiscoveryConfig(name: "\(room) occupancy", uniqueID: "\(object)_occupancy", stateTopic: topics.occupancy(room),
                                       device: .fleet, origin: .init(name: "proximity-fleet"))
        occupied.setEntityID(.binarySensor, "proximity_fleet_\(room)_occupancy")
        occupied.deviceClass = "occupancy"
        occupied.valueTemplate = "{{ 'ON' if value_json.count > 0 else 'OFF' }}"
        occupied.setAvailability(topics.status)
        var count = DiscoveryConfig(name: "\(room) devices", uniqueID: "\(object)_devices", stateTopic: topics.occupancy(room),
                                    device: .fleet, origin: .init(name: "proximity-fleet"))
        count.setEntityID(.sensor, "proximity_fleet_\(room)_devices")
        count.valueTemplate = "{{ value_json.count }}"
        count.stateClass = "measurement"
        count.icon = "mdi:account-multiple"
        count.jsonAttributesTopic = topics.occupancy(room)
        count.setAvailability(topics.status)
        let prefix = configuration.discoveryPrefix
        return [publish(DiscoveryConfig.topic(prefix: prefix, .binarySensor, node: object, object: "occupancy"), MQTTJSON.encode(occupied)),
                publish(DiscoveryConfig.topic(prefix: prefix, .sensor, node: object, object: "devices"), MQTTJSON.encode(count))]
    }

    /// What this run published and keeps retained, again: each device's room, attributes and
    /// position, and the calibration (after a broker restart that lost them).
    private mutating func republish() -> [FleetEffect] {
        guard !published.isEmpty || lastCalibration != nil else { return [] }
        var effects: [FleetEffect] = []
        let t = lastTick ?? 0
        for device in published.keys.sorted() {
            effects += discover(device)
            effects.append(publish(topics.room(device), published[device]!))
            effects.append(publish(topics.attributes(device), attributes(device, at: t)))
            if let position = lastPosition[device] { effects.append(publish(topics.position(device), MQTTJSON.encode(position))) }
        }
        if let lastCalibration { effects.append(publish(topics.calibration, MQTTJSON.encode(lastCalibration))) }
        return effects
    }

    /// Where a device's room sensor is discovered: `<discovery-prefix>/sensor/proximity_fleet_<device>/room/config`.
    public static func roomSensorTopic(discoveryPrefix: String, device: String) -> String {
        DiscoveryConfig.topic(prefix: discoveryPrefix, .sensor, node: "proximity_fleet_\(MQTTTopic.objectID(device))", object: "room")
    }
}
