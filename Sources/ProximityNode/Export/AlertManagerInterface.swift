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
            DBusMethod(Manager1.addAlert, DBusIn("identifier", String.self), DBusIn("alert", DBusVardict.self)) { _, identifier, alert in
                let identifier = try checked(identifier)
                let values = try BusArguments.uniqueEntries(alert, "alert")
                let alert: Alert
                do { alert = try Alert(identifier: identifier, busValues: values) } catch {
                    throw DBusError(Errors.invalidArguments, "\(error)")
                }
                return try await commands.reply(.addAlert(alert))
            },
            DBusMethod(Manager1.removeAlert, DBusIn("identifier", String.self)) { _, identifier in
                try await commands.reply(.removeAlert(try checked(identifier)))
            },
            DBusMethod(Manager1.getAlerts, outputs: [DBusArgument("alerts", .array(.objectPath))]) { _ in
                [.array(element: .objectPath, await commands.read { $0.alertTargetKeys }
                    .map { .objectPath(ProximityBus.alertPath(alert: $0.alert, target: $0.peer.rawValue)) })]
            },
            DBusMethod(Manager1.getDefinitions,
                       outputs: [DBusArgument("alerts",
                                              .dictionary(key: .string, value: .dictionary(key: .string, value: .variant)))]) { _ in
                let definitions = await commands.read { $0.alertDefinitions }
                return [.dictionary(key: .string, value: .dictionary(key: .string, value: .variant), definitions.map { alert, source in
                    var values = alert.busValues
                    values["Source"] = .string(source.rawValue)
                    return .init(.string(alert.identifier), .variantMap(values))
                })]
            },
            DBusMethod(Manager1.registerStrategy, DBusIn("strategy", ObjectPath.self), DBusIn("key", String.self)) { call, path, key in
                guard let sender = call.sender else {
                    throw DBusError(Errors.invalidArguments, "RegisterStrategy needs the caller's name")
                }
                if let problem = AlertStrategyKey.problem(key) { throw DBusError(Errors.invalidArguments, "the strategy key \(problem)") }
                if NodeStep.builtInStrategies.contains(key) {
                    throw DBusError(Errors.alreadyExists, "\(key.debugDescription) is a built-in strategy; register under another key")
                }
                try await checkImplementsStrategy(connection: connection, owner: sender, path: path)
                return try await commands.reply(.registerStrategy(key, StrategyClient(owner: sender.rawValue, path: path.rawValue)))
            },
            DBusMethod(Manager1.unregisterStrategy, DBusIn("strategy", ObjectPath.self)) { call, path in
                guard let sender = call.sender else {
                    throw DBusError(Errors.invalidArguments, "UnregisterStrategy needs the caller's name")
                }
                return try await commands.reply(.unregisterStrategy(StrategyClient(owner: sender.rawValue, path: path.rawValue)))
            },
            DBusMethod(Manager1.accept, DBusIn("alert", ObjectPath.self)) { _, path in
                try await commands.reply(.accept(try await target(path, commands)))
            },
            DBusMethod(Manager1.decline, DBusIn("alert", ObjectPath.self)) { _, path in
                try await commands.reply(.decline(try await target(path, commands)))
            },
            DBusMethod(Manager1.done, DBusIn("alert", ObjectPath.self)) { _, path in
                try await commands.reply(.done(try await target(path, commands)))
            },
            DBusMethod(Manager1.setActionStatus, DBusIn("alert", ObjectPath.self), DBusIn("status", String.self)) { _, path, text in
                let status = try actionStatus(text)
                return try await commands.reply(.setActionStatus(try await target(path, commands), status))
            },
            // The same by identifiers, so clients need not escape them into an object path.
            DBusMethod(Manager1.getAlert, DBusIn("alert", String.self), DBusIn("target", String.self),
                       outputs: [DBusArgument("object", .objectPath)]) { _, alert, peer in
                let key = try await target(alert: alert, peer: peer, commands)
                return [.objectPath(ProximityBus.alertPath(alert: key.alert, target: key.peer.rawValue))]
            },
            DBusMethod(Manager1.acceptTarget, DBusIn("alert", String.self), DBusIn("target", String.self)) { _, alert, peer in
                try await commands.reply(.accept(try await target(alert: alert, peer: peer, commands)))
            },
            DBusMethod(Manager1.declineTarget, DBusIn("alert", String.self), DBusIn("target", String.self)) { _, alert, peer in
                try await commands.reply(.decline(try await target(alert: alert, peer: peer, commands)))
            },
            DBusMethod(Manager1.doneTarget, DBusIn("alert", String.self), DBusIn("target", String.self)) { _, alert, peer in
                try await commands.reply(.done(try await target(alert: alert, peer: peer, commands)))
            },
            DBusMethod(Manager1.setTargetActionStatus, DBusIn("alert", String.self), DBusIn("target", String.self),
                       DBusIn("status", String.self)) { _, alert, peer, text in
                let status = try actionStatus(text)
                return try await commands.reply(.setActionStatus(try await target(alert: alert, peer: peer, commands), status))
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
                if method == ProximityBus.AlertStrategy1.evaluate.rawValue,
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
