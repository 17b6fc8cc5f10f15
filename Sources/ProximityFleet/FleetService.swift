import Foundation
import Logging
import MQTTKit
import ProximityCore
import ProximityMQTT
import Synchronization

/// The fleet service (`proximity-fleet run`, docs/fleet.md): the executor of ``FleetStep``. It
/// connects to the broker (reconnecting with back-off), parses each message once
/// (``FleetMessage``), feeds the step the messages, the connection's changes, plan reloads and a
/// tick once a second, each with the time, and carries out what the step returns: publications,
/// subscriptions, log lines and the map's state. At the end it says `offline` and disconnects.
///
/// Topics (`P` = `proximity-fleet`): `P/status` (`online`/`offline`, retained, the will);
/// `P/devices/<device>/room` (the node's name, or `not_home`; retained);
/// `P/devices/<device>/attributes` (JSON: room, the distance from each node and its age; retained);
/// `P/devices/<device>/position` (with a plan: ``FleetPosition``, retained);
/// `P/table` (every device, JSON, retained: what `proximityctl fleet` shows);
/// `P/calibration` (with a plan, after each fit).
public actor FleetService {
    let broker: MQTTOptions
    let logger: Logger
    let now: @Sendable () -> Double
    private var step: FleetStep
    private var client: MQTTClient?
    private var connected = false

    public init(_ configuration: FleetConfiguration, broker: MQTTOptions, logger: Logger,
                now: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        self.broker = broker
        self.logger = logger
        self.now = now
        step = FleetStep(configuration)
        if let views = configuration.views { views.show(plan: configuration.plan) }
    }

    var configuration: FleetConfiguration { step.configuration }
    var topics: FleetTopics { FleetTopics(prefix: configuration.prefix) }

    /// Replaces the floor plan (a reload, SIGHUP): ``FleetStep/replacePlan(_:at:)``.
    public func replacePlan(_ plan: FloorPlan) {
        carryOut(step.replacePlan(plan, at: now()))
    }

    /// A value read from the step (the map, tests).
    public func read<T: Sendable>(_ value: (FleetStep) -> T) -> T { value(step) }

    /// Runs until the task is cancelled: makes sure no other service with its topics is online
    /// (``claim(_:)``), connects, and ticks the step once a second (or at each element of
    /// `ticks`, a test's clock). Throws ``FleetServiceConflict`` when another one is.
    public func run(ticks: AsyncStream<Void>? = nil) async throws {
        var options = broker
        options.will = .init(topic: topics.status, payload: "offline", qos: 1, retain: true)
        let client = try MQTTClient(options)
        self.client = client
        let events = Task { [weak self] in for await e in client.events { await self?.connection(e) } }
        let messages = Task { [weak self] in for await m in client.messages { await self?.received(m) } }
        logger.info("connecting to the MQTT broker", metadata: ["mqtt.broker": "\(configuration.broker)",
                                                               "rule": "\(configuration.rule.rawValue)"])
        if let plan = configuration.plan {
            logger.info("floor plan", metadata: ["floors": "\(plan.floors.count)", "nodes": "\(plan.nodes.count)",
                                                 "rooms": "\(plan.rooms.count)", "cells": "\(step.positions?.grid.count ?? 0)"])
        }
        // The ticks go on while it waits to claim the topics (the map shows the broker connecting).
        // A claim the probe could not finish (its connection went, the broker restarting as the
        // service starts) is made again; only another service online ends the run.
        let claiming = Task { [weak self] in
            while let self, !Task.isCancelled {
                do {
                    if try await self.claim(options) {
                        client.connect()
                        return
                    }
                } catch let conflict as FleetServiceConflict {
                    await self.refuse(conflict)
                    return
                } catch {
                    // Cancelled, or the probe's calls failed with its connection: again, unless cancelled.
                }
                // Not at once: a broker that drops each connection must not see a new one in a loop.
                try? await Task.sleep(for: .seconds(1))
            }
        }
        if let ticks {
            for await _ in ticks {
                if conflict != nil { break }
                carryOut(step.tick(at: now()))
            }
        } else {
            while !Task.isCancelled, conflict == nil {
                do { try await Task.sleep(for: .seconds(1)) } catch { break }
                carryOut(step.tick(at: now()))
            }
        }
        claiming.cancel()
        // Not in this (cancelled) task: saying offline waits for the broker's acknowledgement.
        await Task { await self.finish(events: events, messages: messages) }.value
        if let conflict { throw conflict }
    }

    private var conflict: FleetServiceConflict?

    private func refuse(_ conflict: FleetServiceConflict) {
        self.conflict = conflict
    }

    /// Whether this service may take its topics: a probe connection (its own client id, no will)
    /// reads the retained `<prefix>/status`. `online` is another service, live or dead: a dead
    /// one's will turns it `offline` within 1.5 keepalives, so it waits that long (and 5 s) for
    /// that, and throws ``FleetServiceConflict`` if it stays online. Connecting with the same
    /// client id would knock the running one off the broker instead, and the two would take turns.
    /// Problems reaching the broker are the step's to log, as for the service's own connection.
    /// True when the topics are free; false when the probe lost its connection before it knew.
    private func claim(_ options: MQTTOptions) async throws -> Bool {
        var probeOptions = options
        probeOptions.clientID = "\(options.clientID)-claim-\(getpid())"
        probeOptions.will = nil
        let probe = try MQTTClient(probeOptions)
        defer { probe.disconnect() }
        probe.connect()
        for await event in probe.events {
            if case .connected = event { break }
            switch event {
            case .refused(let code, let reason): carryOut(step.connection(.refused(code: Int(code), reason: reason), at: now()))
            case .disconnected(_, let reason): carryOut(step.connection(.disconnected(reason: reason, tls: event.isTLSFailure), at: now()))
            case .connected: break
            }
        }
        try Task.checkCancellation()
        // The broker sends a subscription's retained message before it takes the next request:
        // the marker, published after both subscriptions, comes after the status, if any.
        let marker = "\(configuration.prefix)/claim/\(UUID().uuidString.lowercased())"
        try await probe.subscribe(topics.status)
        try await probe.subscribe(marker)
        try await probe.publish(marker, "claim", qos: 1)
        let status = topics.status, broker = configuration.broker
        let grace = Double(options.keepalive) * 1.5 + 5
        let logger = self.logger
        // What the marker found: the status online, and still online at the end of the grace.
        let heldOnline = ClaimState()
        let free = try await withThrowingTaskGroup(of: Bool?.self) { group in
            group.addTask {
                var online = false
                var marked = false
                for await message in probe.messages {
                    if message.topic == status { online = message.string == "online" }
                    if message.topic == marker {
                        marked = true
                        if online {
                            logger.warning("another proximity-fleet is online on this broker: waiting for it to say offline",
                                           metadata: ["topic": "\(status)", "broker": "\(broker)", "seconds": "\(Int(grace))"])
                        }
                    }
                    if marked { heldOnline.online.withLock { $0 = online } }
                    if marked, !online { return true }
                }
                return nil   // the probe was disconnected
            }
            group.addTask {
                try await Task.sleep(for: .seconds(grace))
                // Online all along is another service; never marked is a probe that lost its way.
                return heldOnline.online.withLock { $0 } ? false : nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        switch free {
        case true?: return true
        case false?: throw FleetServiceConflict(broker: broker, topic: status, waited: grace)
        case nil: return false
        }
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

    private func connection(_ event: MQTTConnectionEvent) {
        switch event {
        case .connected:
            connected = true
            carryOut(step.connection(.connected, at: now()))
        case .refused(let code, let reason):
            carryOut(step.connection(.refused(code: Int(code), reason: reason), at: now()))
        case .disconnected(_, let reason):
            connected = false
            carryOut(step.connection(.disconnected(reason: reason, tls: event.isTLSFailure), at: now()))
        }
    }

    private func received(_ message: MQTTMessage) {
        guard let parsed = FleetMessage.parse(topic: message.topic, payload: message.payload, root: configuration.root,
                                              prefix: configuration.prefix, discoveryPrefix: configuration.discoveryPrefix) else { return }
        carryOut(step.receive(parsed, at: now()))
    }

    /// Carries out the step's effects, in order.
    private func carryOut(_ effects: [FleetEffect]) {
        for effect in effects {
            switch effect {
            case .publish(let topic, let payload, let retain):
                guard let client else { continue }
                do { try client.send(topic, payload, qos: 1, retain: retain) } catch {
                    logger.debug("not published", metadata: ["topic": "\(topic)", "error": "\(error)"])
                }
            case .subscribe(let patterns):
                Task { [client] in
                    for pattern in patterns { try? await client?.subscribe(pattern) }
                }
            case .log(let line):
                logger.log(level: line.level, "\(line.message)", metadata: line.metadata.mapValues { .string($0) })
            case .show(let devices, let nodes, let status):
                configuration.views?.show(devices: devices, nodes: nodes, status: status)
            case .showPlan(let plan):
                configuration.views?.show(plan: plan)
            }
        }
    }
}

/// What a claim's reader saw after its marker, for its timeout: the status online.
private final class ClaimState: Sendable {
    let online = Mutex(false)
}

/// Another fleet service with the same topics is online on the broker (``FleetService/run(ticks:)``).
public struct FleetServiceConflict: Error, CustomStringConvertible, Sendable {
    public var broker: String
    public var topic: String
    public var waited: Double

    public var description: String {
        "another proximity-fleet is online on \(broker): \(topic) has said online for \(Int(waited)) s " +
            "(a stopped or crashed one says offline sooner). Stop it first, or give this one its own --prefix and --client-id"
    }
}
