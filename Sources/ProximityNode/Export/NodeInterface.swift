import DBusKit
import Foundation
import ProximityAPI
import ProximityCore
import ProximityTrust

/// The daemon's side of `org.proximityd.Node1`: the declaration exported at `/org/proximityd`,
/// with its handlers. Names, property types and the introspection (`dbus/org.proximityd.Node1.xml`,
/// checked by a test against the running daemon) come from ProximityAPI.
///
/// Queries are answered from what the exporter last published (`GetPeers`, `GetRanging`) or
/// asked of the engine (`GetIdentities`); changes are commands to the engine, answered once saved.
enum NodeInterface {
    typealias Node1 = ProximityBus.Node1
    typealias Errors = ProximityBus.Errors

    static func declaration(_ properties: NodeProperties, commands: NodeCommands, exporter: BusExporter,
                            reload: @escaping @Sendable () async throws(DBusError) -> Void, connection: DBusConnection) -> DBusInterface {
        let stringMap = DBusType.dictionary(key: .string, value: .string)
        return DBusInterface(Node1.interface, methods: [
            DBusMethod(Node1.getPeers) { _ in exporter.published.paths },
            DBusMethod(Node1.getRanging) { _ in exporter.published.zones },
            DBusMethod(Node1.getIdentities) { _ in await commands.read { $0.identities } },
            DBusMethod(Node1.getPeer) { _, identifier in
                let peer = PeerID.canonical(identifier)
                if let problem = PeerID.formProblem(peer) { throw DBusError(Errors.invalidArguments, problem) }
                guard exporter.published.zones[peer] != nil else {
                    throw DBusError(Errors.doesNotExist, "no peer \(peer) in the table (GetRanging lists those there)")
                }
                return ProximityBus.peerPath(peer)
            },
            DBusMethod(Node1.setPeerName) { _, identifier, name in
                let peer = PeerID.canonical(identifier)
                if let problem = PeerID.formProblem(peer) ?? (name.isEmpty ? nil : PeerNames.problem(name: name)) {
                    throw DBusError(Errors.invalidArguments, problem)
                }
                try await commands.run(.setPeerName(name, peer: PeerID(peer)))
            },
            DBusMethod(Node1.addIRK) { _, name, hex in
                if let problem = PeerID.irkNameProblem(name) { throw DBusError(Errors.invalidArguments, problem) }
                let key: IdentityResolvingKey
                do throws(IRKError) { key = try IdentityResolvingKey(parsing: hex) } catch {
                    throw DBusError(Errors.invalidArguments, error.description)
                }
                try await commands.run(.addIRK(name, key: key))
            },
            DBusMethod(Node1.removeIRK) { _, name in
                if let problem = PeerID.irkNameProblem(name) { throw DBusError(Errors.invalidArguments, problem) }
                try await commands.run(.removeIRK(name))
            },
            DBusMethod(Node1.setMeasuredPower) { _, identifier, power in
                if let problem = NodeSettings.problem(identifier: identifier) ?? NodeSettings.problem(measuredPower: power) {
                    throw DBusError(Errors.invalidArguments, problem)
                }
                try await commands.run(.setMeasuredPower(power, peer: identifier))
            },
            DBusMethod(Node1.resetMeasuredPower) { _, identifier in
                if let problem = NodeSettings.problem(identifier: identifier) { throw DBusError(Errors.invalidArguments, problem) }
                try await commands.run(.resetMeasuredPower(peer: identifier))
            },
            DBusMethod(Node1.reload) { _ in try await reload() },
            DBusMethod(Node1.startRecording) { call, names in
                guard let sender = call.sender else { throw DBusError(Errors.invalidArguments, "the call has no sender") }
                let peers = try recordedPeers(names)
                let caller = try await CallerCredentials.of(sender, on: connection)
                try await commands.run(.startRecording(peers, client: sender.rawValue, uid: caller.uid, privileged: caller.privileged))
            },
            DBusMethod(Node1.stopRecording) { call in
                guard let sender = call.sender else { throw DBusError(Errors.invalidArguments, "the call has no sender") }
                try await commands.run(.stopRecording(client: sender.rawValue))
            },
        ], properties: NodeProperties.Key.allCases.map { key in
            let d = key.descriptor
            let value = properties.value(of: key)
            guard key == .clearInterval else { return DBusProperty(d.name, d.type, value, changeSignal: d.isConst ? .const : .emits) }
            return DBusProperty(d.name, d.type, value) { value in
                guard case .double(let seconds) = value, NodeSettings.clearIntervalRange.contains(seconds) else {
                    throw DBusError(Errors.invalidArguments, "ClearInterval must be a number of seconds above 0 and at most 3600")
                }
                try await commands.run(.setClearInterval(seconds))
                return .double(seconds)
            }
        }, signals: [
            DBusSignal(Node1.foundDevices, arguments: [DBusArgument("zones", stringMap)]),
            DBusSignal(Node1.peerIdentified, arguments: [DBusArgument("identifier", .string), DBusArgument("address", .string),
                                                         DBusArgument("introduced", .boolean)]),
            DBusSignal(Node1.samples, arguments: [DBusArgument("time", .double), DBusArgument("samples", Node1.samplesType),
                                                  DBusArgument("reports", Node1.reportsType)]),
        ])
    }

    /// `StartRecording`'s peers: each a peer identifier in the node's form, at most
    /// ``ProximityBus/Node1/maxRecordedPeers`` of them (a name given twice counts once).
    static func recordedPeers(_ names: [String]) throws(DBusError) -> [PeerID] {
        var seen = Set<String>()
        let unique = names.filter { seen.insert($0).inserted }
        guard unique.count <= Node1.maxRecordedPeers else {
            throw DBusError(Errors.invalidArguments, "at most \(Node1.maxRecordedPeers) peers may be recorded at once, not \(unique.count)")
        }
        for name in unique {
            if let problem = PeerID.formProblem(name) { throw DBusError(Errors.invalidArguments, problem) }
        }
        return unique.map { PeerID($0) }
    }
}

/// `Node1` on the bus: its properties as the node's link and settings change, and each recording
/// client's `Samples`, sent to it alone.
extension BusExporter {
    func showLink(advertising: Bool, discovering: Bool) {
        nodeObject?.set([NodeProperties.Key.advertising.rawValue: .boolean(advertising),
                         NodeProperties.Key.discovering.rawValue: .boolean(discovering)], interface: ProximityBus.Node1.interface)
    }

    func show(_ key: NodeProperties.Key, _ value: DBusValue) {
        nodeObject?.set(key.rawValue, value, interface: ProximityBus.Node1.interface)
    }

    /// `Node1.PeerIdentified`: a peer node's identity learnt (and saved).
    func announce(_ peer: PeerID, address: String, introduced: Bool) {
        do {
            try nodeObject?.emit(ProximityBus.Node1.peerIdentified, interface: ProximityBus.Node1.interface,
                                 [.string(peer.rawValue), .string(address), .boolean(introduced)])
        } catch {
            logger.error("cannot emit PeerIdentified", metadata: ["error": "\(error)"])
        }
    }

    /// `Node1.Samples` to each recording client, its own peers only.
    func send(_ batch: RecordingBatch) {
        for recorder in batch.recorders {
            do {
                try connection.emitSignal(path: ProximityBus.rootPath, interface: ProximityBus.Node1.interface,
                                          member: ProximityBus.Node1.samples, batch.batch(for: recorder).arguments,
                                          destination: try BusName(recorder.client))
            } catch {
                logger.error("cannot send Samples", metadata: ["dbus.destination": "\(recorder.client)", "error": "\(error)"])
            }
        }
    }
}
