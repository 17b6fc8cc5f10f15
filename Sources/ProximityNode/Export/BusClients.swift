import DBusKit
import ProximityAPI
import ProximityCore

/// The calls the node makes to its clients on the bus, for the step: it asks strategy clients
/// (`AlertStrategy1.Evaluate`), tells them they were dropped (`Release`), and watches clients
/// leave the bus. Each answers with the command to feed back.
struct BusClients: NodeClients {
    let connection: DBusConnection

    /// How long a strategy client has to answer `Evaluate`.
    static let strategyTimeout: Duration = .seconds(2)

    /// Asks a strategy client about its targets: its verdicts, or why it is dropped.
    func ask(_ question: StrategyQuestion, time: NodeTime) async -> NodeCommand {
        var request: [ObjectPath: [String: DBusValue]] = [:]
        for (key, state, parameters) in question.targets {
            request[ProximityBus.alertPath(alert: key.alert, target: key.peer.rawValue)] = [
                "Alert": .string(key.alert), "Target": .string(key.peer.rawValue),
                "Detected": .boolean(state.detected), "Proximity": .string(state.proximity.rawValue),
                "Distance": .double(state.distance.isFinite ? state.distance : -1),
                "Range": .string(parameters.range.rawValue), "Comparison": .string(parameters.comparison.rawValue),
                "ActionStatus": .string(state.actionStatus.rawValue),
                "LastSeen": .uint64(state.lastDetected.isFinite ? time.epochMicroseconds(state.lastDetected) : 0),
            ]
        }
        do {
            let (owner, path) = try Self.address(question.client)
            let reply = try await connection.call(ProximityBus.AlertStrategy1.evaluate, destination: owner, path: path, request,
                                                  timeout: Self.strategyTimeout)
            var verdicts: [AlertTargetKey: Bool] = [:]
            for (path, verdict) in reply {
                guard let (alert, peer) = ProximityBus.alertTarget(of: path) else { continue }
                verdicts[AlertTargetKey(alert: alert, peer: PeerID(peer))] = verdict
            }
            return .strategyAnswered(question.key, generation: question.generation, verdicts)
        } catch {
            return .strategyFailed(question.key, generation: question.generation, because: "its Evaluate failed: \(error)")
        }
    }

    /// Tells a strategy client it was dropped; its answer does not matter.
    func release(_ client: StrategyClient) async {
        guard let (owner, path) = try? Self.address(client) else { return }
        _ = try? await connection.call(ProximityBus.AlertStrategy1.release, destination: owner, path: path, timeout: .seconds(1))
    }

    /// Returns once `client` (a unique name: never used again) has left the bus, at once if it
    /// already has or cannot be watched.
    func watch(_ client: String) async -> NodeCommand {
        guard let name = try? BusName(client) else { return .clientLeft(client, because: "its name is not a bus name") }
        let changes: DBusSignalStream
        do {
            changes = try await connection.subscribe(MatchRule(sender: .bus, interface: .bus, member: "NameOwnerChanged", arg0: client))
        } catch {
            return .clientLeft(client, because: "cannot watch its client: \(error)")
        }
        // It may have left before the subscription was in place.
        if (try? await connection.nameOwner(of: name)) == nil { return .clientLeft(client, because: "its client left the bus") }
        for await message in changes where message.body.count == 3 && message.body[2].string == "" {
            break
        }
        return .clientLeft(client, because: "its client left the bus")
    }

    static func address(_ client: StrategyClient) throws -> (BusName, ObjectPath) {
        (try BusName(client.owner), try ObjectPath(client.path))
    }
}
