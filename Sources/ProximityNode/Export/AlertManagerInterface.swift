import DBusKit
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import ProximityAPI
import ProximityCore

/// The daemon's side of `org.proximityd.AlertManager1` at `/org/proximityd`
/// (`dbus/org.proximityd.AlertManager1.xml`). Commands go to the engine, which saves them before
/// it publishes them; each answers once the bus exporter has shown the change (objects exported,
/// signals sent, `Current` set).
enum AlertManagerInterface {
    typealias Manager1 = ProximityBus.AlertManager1
    typealias Errors = ProximityBus.Errors

    static func declaration(commands: NodeCommands, connection: DBusConnection) -> DBusInterface {
        return DBusInterface(Manager1.interface, methods: [
            DBusMethod(Manager1.addAlert) { _, identifier, alert in
                let identifier = try checked(identifier)
                let values = try BusArguments.uniqueEntries(alert, "alert")
                let alert: Alert
                do { alert = try Alert(identifier: identifier, busValues: values) } catch {
                    throw DBusError(Errors.invalidArguments, "\(error)")
                }
                try await commands.run(.addAlert(alert))
            },
            DBusMethod(Manager1.removeAlert) { _, identifier in
                try await commands.run(.removeAlert(try checked(identifier)))
            },
            DBusMethod(Manager1.getAlerts) { _ in
                await commands.read { $0.alertTargetKeys }.map { ProximityBus.alertPath(alert: $0.alert, target: $0.peer.rawValue) }
            },
            DBusMethod(Manager1.getDefinitions) { _ in
                let definitions = await commands.read { $0.alertDefinitions }
                return Dictionary(definitions.map { alert, source in
                    var values = alert.busValues
                    values["Source"] = .string(source.rawValue)
                    return (alert.identifier, values)
                }) { first, _ in first }
            },
            DBusMethod(Manager1.registerStrategy) { call, path, key in
                guard let sender = call.sender else {
                    throw DBusError(Errors.invalidArguments, "RegisterStrategy needs the caller's name")
                }
                if let problem = AlertStrategyKey.problem(key) { throw DBusError(Errors.invalidArguments, "the strategy key \(problem)") }
                if NodeStep.builtInStrategies.contains(key) {
                    throw DBusError(Errors.alreadyExists, "\(key.debugDescription) is a built-in strategy; register under another key")
                }
                try await checkImplementsStrategy(connection: connection, owner: sender, path: path)
                try await commands.run(.registerStrategy(key, StrategyClient(owner: sender.rawValue, path: path.rawValue)))
            },
            DBusMethod(Manager1.unregisterStrategy) { call, path in
                guard let sender = call.sender else {
                    throw DBusError(Errors.invalidArguments, "UnregisterStrategy needs the caller's name")
                }
                try await commands.run(.unregisterStrategy(StrategyClient(owner: sender.rawValue, path: path.rawValue)))
            },
            DBusMethod(Manager1.accept) { _, path in
                try await commands.run(.accept(try await target(path, commands)))
            },
            DBusMethod(Manager1.decline) { _, path in
                try await commands.run(.decline(try await target(path, commands)))
            },
            DBusMethod(Manager1.done) { _, path in
                try await commands.run(.done(try await target(path, commands)))
            },
            DBusMethod(Manager1.setActionStatus) { _, path, text in
                let status = try actionStatus(text)
                try await commands.run(.setActionStatus(try await target(path, commands), status))
            },
            // The same by identifiers, so clients need not escape them into an object path.
            DBusMethod(Manager1.getAlert) { _, alert, peer in
                let key = try await target(alert: alert, peer: peer, commands)
                return ProximityBus.alertPath(alert: key.alert, target: key.peer.rawValue)
            },
            DBusMethod(Manager1.acceptTarget) { _, alert, peer in
                try await commands.run(.accept(try await target(alert: alert, peer: peer, commands)))
            },
            DBusMethod(Manager1.declineTarget) { _, alert, peer in
                try await commands.run(.decline(try await target(alert: alert, peer: peer, commands)))
            },
            DBusMethod(Manager1.doneTarget) { _, alert, peer in
                try await commands.run(.done(try await target(alert: alert, peer: peer, commands)))
            },
            DBusMethod(Manager1.setTargetActionStatus) { _, alert, peer, text in
                let status = try actionStatus(text)
                try await commands.run(.setActionStatus(try await target(alert: alert, peer: peer, commands), status))
            },
        ], properties: [
            DBusProperty(Manager1.current, .objectPath, .objectPath(.root)),
            DBusProperty(Manager1.strategies, .array(.string),
                         .array(element: .string, NodeStep.builtInStrategies.sorted().map { .string($0) })),
        ], signals: [
            DBusSignal(Manager1.alertReady, arguments: [DBusArgument("alert", .objectPath),
                                                        DBusArgument("content", .dictionary(key: .string, value: .variant))]),
            DBusSignal(Manager1.alertRemoved, arguments: [DBusArgument("alert", .objectPath), DBusArgument("reason", .string)]),
        ])
    }

    private static func checked(_ identifier: String) throws(DBusError) -> String {
        if let problem = Alert.problem(identifier: identifier) { throw DBusError(Errors.invalidArguments, problem) }
        return identifier
    }

    private static func actionStatus(_ text: String) throws(DBusError) -> ActionStatus {
        guard let status = ActionStatus(rawValue: text) else {
            throw DBusError(Errors.invalidArguments,
                            "status must be one of \(ActionStatus.allCases.map(\.rawValue).joined(separator: ", ")), " +
                                "not \(String(text.prefix(64)).debugDescription)")
        }
        return status
    }

    /// An alert target's key from the alert's and the peer's identifiers; the target must exist.
    private static func target(alert: String, peer: String, _ commands: NodeCommands) async throws(DBusError) -> AlertTargetKey {
        let key = AlertTargetKey(alert: try checked(alert), peer: PeerID(peer))
        guard await commands.read({ $0.alertTargets[key] != nil }) else {
            throw DBusError(Errors.doesNotExist,
                            "alert \(alert.debugDescription) has no target \(String(peer.prefix(255)).debugDescription)")
        }
        return key
    }

    /// An alert target's object path as the target's key; the target must exist.
    private static func target(_ path: ObjectPath, _ commands: NodeCommands) async throws(DBusError) -> AlertTargetKey {
        guard let (alert, peer) = ProximityBus.alertTarget(of: path),
              case let key = AlertTargetKey(alert: alert, peer: PeerID(peer)), await commands.read({ $0.alertTargets[key] != nil }) else {
            throw DBusError(Errors.doesNotExist, "no alert target at \(path)")
        }
        return key
    }

    /// Asks the caller's object for its introspection data: it must declare `AlertStrategy1` with
    /// `Evaluate(a{oa{sv}}) -> a{ob}`. The caller is the one who will be called back.
    static func checkImplementsStrategy(connection: DBusConnection, owner: BusName, path: ObjectPath) async throws(DBusError) {
        let xml: String
        do {
            xml = try await connection.call(destination: owner, path: path, interface: .introspectable, member: "Introspect",
                                            timeout: BusClients.strategyTimeout).first?.string ?? ""
        } catch {
            throw DBusError(Errors.notAStrategy, "\(path) of \(owner) cannot be introspected (\(error)); " +
                            "export an object with \(ProximityBus.AlertStrategy1.interface) there first")
        }
        guard StrategyIntrospection.declaresEvaluate(xml) else {
            throw DBusError(Errors.notAStrategy,
                            "\(path) of \(owner) does not implement \(ProximityBus.AlertStrategy1.interface) " +
                                "with Evaluate(a{oa{sv}}) -> a{ob}")
        }
    }
}

/// Reads introspection XML for `AlertStrategy1.Evaluate` with the right signature.
enum StrategyIntrospection {
    static func declaresEvaluate(_ xml: String) -> Bool {
        guard let data = xml.data(using: .utf8) else { return false }
        let reader = Reader()
        let parser = XMLParser(data: data)
        parser.delegate = reader
        _ = parser.parse()
        return reader.found
    }

    private final class Reader: NSObject, XMLParserDelegate {
        var interface: String?
        var method: String?
        var inputs: [String] = []
        var outputs: [String] = []
        var found = false

        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                    attributes: [String: String] = [:]) {
            switch name {
            case "interface": interface = attributes["name"]
            case "method" where interface == ProximityBus.AlertStrategy1.interface.rawValue:
                method = attributes["name"]
                inputs = []
                outputs = []
            case "arg" where method != nil:
                if attributes["direction"] == "out" {
                    outputs.append(attributes["type"] ?? "")
                } else {
                    inputs.append(attributes["type"] ?? "")
                }
            default: break
            }
        }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            switch name {
            case "method":
                if method == ProximityBus.AlertStrategy1.evaluate.name.rawValue,
                   inputs == [ProximityBus.AlertStrategy1.targetsType.description],
                   outputs == [ProximityBus.AlertStrategy1.verdictsType.description] {
                    found = true
                }
                method = nil
            case "interface": interface = nil
            default: break
            }
        }
    }
}
