import Foundation
import Logging
import MQTTKit
import ProximityCore
import ProximityMQTT

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

    /// Runs until the task is cancelled: connects, and ticks the step once a second (or at each
    /// element of `ticks`, a test's clock).
    public func run(ticks: AsyncStream<Void>? = nil) async throws {
        var options = broker
        options.will = .init(topic: topics.status, payload: "offline", qos: 1, retain: true)
        let client = try MQTTClient(options)
        self.client = client
        let events = Task { [weak self] in for await e in client.events { await self?.connection(e) } }
        let messages = Task { [weak self] in for await m in client.messages { await self?.received(m) } }
        logger.info("connecting to the MQTT broker", metadata: ["mqtt.broker": "\(options.host):\(options.port)",
                                                               "rule": "\(configuration.rule.rawValue)"])
        if let plan = configuration.plan {
            logger.info("floor plan", metadata: ["floors": "\(plan.floors.count)", "nodes": "\(plan.nodes.count)", "rooms": "\(plan.rooms.count)",
                                                 "cells": "\(step.positions?.grid.count ?? 0)"])
        }
        client.connect()
        if let ticks {
            for await _ in ticks { carryOut(step.tick(at: now())) }
        } else {
            while !Task.isCancelled {
                do { try await Task.sleep(for: .seconds(1)) } catch { break }
                carryOut(step.tick(at: now()))
            }
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
