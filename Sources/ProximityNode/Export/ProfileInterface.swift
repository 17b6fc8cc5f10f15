import DBusKit
import ProximityAPI
import ProximityCore

/// The daemon's side of `org.proximityd.Profile1` at `/org/proximityd`
/// (`dbus/org.proximityd.Profile1.xml`). Commands go to the
/// engine, which saves them before it publishes them; each answers once the exporter has shown
/// the change (`Attributes` set, the signals sent).
enum ProfileInterface {
    typealias P1 = ProximityBus.Profile1
    typealias Errors = ProximityBus.Errors

    static func declaration(commands: NodeCommands, attributes: [String: String]) -> DBusInterface {
        return DBusInterface(P1.interface, methods: [
            DBusMethod(P1.updateAttribute) { _, key, value in
                let key = try checked(key)
                if let problem = Profile.problem(value: value) { throw DBusError(Errors.invalidArguments, problem) }
                try await commands.run(.updateAttribute(key, value))
            },
            DBusMethod(P1.removeAttribute) { _, key in
                try await commands.run(.removeAttribute(try checked(key)))
            },
            DBusMethod(P1.trackBeacon) { _, uuid, major, minor, prox, entries in
                for (name, text) in [("uuid", uuid), ("major", major), ("minor", minor)] where text.utf8.count > 255 {
                    throw DBusError(Errors.invalidArguments, "\(name) is longer than 255 bytes")
                }
                guard prox <= 3 else {
                    throw DBusError(Errors.invalidArguments, "prox must be 0 (unknown), 1 (immediate), 2 (near) or 3 (far), not \(prox)")
                }
                for (k, v) in entries.entries {
                    if let problem = Profile.problem(key: k) ?? Profile.problem(value: v) {
                        throw DBusError(Errors.invalidArguments, "data: \(problem)")
                    }
                }
                if let k = entries.repeatedKey { throw DBusError(Errors.invalidArguments, "data: \(k.debugDescription) is given twice") }
                guard entries.entries.count <= 64 else { throw DBusError(Errors.invalidArguments, "data has more than 64 entries") }
                try await commands.run(.trackBeacon(uuid: uuid, major: major, minor: minor, prox: Int(prox),
                                                             data: entries.dictionary))
            },
            DBusMethod(P1.clearCurrentBeacon) { _ in try await commands.run(.clearCurrentBeacon) },
            DBusMethod(P1.addRule) { _, identifier, text in
                if let problem = Rule.problem(identifier: identifier) { throw DBusError(Errors.invalidArguments, problem) }
                guard text.utf8.count <= 65_536 else { throw DBusError(Errors.invalidArguments, "the rule is longer than 64 KiB") }
                let rule: Rule
                do { rule = try Rule.parse(identifier: identifier, RuleValue.json(text)) } catch {
                    throw DBusError(Errors.invalidArguments, "rule \(identifier.debugDescription): \(error)")
                }
                try await commands.run(.addRule(rule))
            },
            DBusMethod(P1.removeRule) { _, identifier in
                try await commands.run(.removeRule(identifier))
            },
            DBusMethod(P1.getRules) { _ in
                await commands.read { $0.ruleDefinitions }
            },
            DBusMethod(P1.testRule) { _, identifier in
                try await commands.read { step in Result { () throws(NodeRefusal) in try step.testRule(identifier) } }
            },
        ], properties: [
            DBusProperty(P1.attributes, .dictionary(key: .string, value: .string), .stringMap(attributes)),
        ], signals: [
            DBusSignal(P1.tracked, arguments: [DBusArgument("contextdata", .dictionary(key: .string, value: .string))]),
            DBusSignal(P1.cleared),
            DBusSignal(P1.ruleFired, arguments: [DBusArgument("rule", .string),
                                                 DBusArgument("data", .dictionary(key: .string, value: .string))]),
        ])
    }

    private static func checked(_ key: String) throws(DBusError) -> String {
        if let problem = Profile.problem(key: key) { throw DBusError(Errors.invalidArguments, problem) }
        return key
    }
}

/// The profile on the bus: `Attributes`, and the step's signals in order.
extension BusExporter {
    func show(_ changes: ProfileChanges) {
        typealias P1 = ProximityBus.Profile1
        if let attributes = changes.attributes {
            nodeObject?.set(P1.attributes, .stringMap(attributes), interface: P1.interface)
        }
        for signal in changes.signals {
            do {
                switch signal {
                case .tracked(let data): try nodeObject?.emit(P1.tracked, interface: P1.interface, [.stringMap(data)])
                case .cleared: try nodeObject?.emit(P1.cleared, interface: P1.interface)
                case .ruleFired(let rule, let data):
                    try nodeObject?.emit(P1.ruleFired, interface: P1.interface, [.string(rule), .stringMap(data)])
                case .logged(let entry):
                    guard case .structure(let fields) = entry.value else { continue }
                    try nodeObject?.emit(ProximityBus.EventLog1.logged, interface: ProximityBus.EventLog1.interface, fields)
                case .attributes: break
                }
            } catch {
                logger.error("cannot emit a profile signal", metadata: ["error": "\(error)"])
            }
        }
        shown(changes.sequence)
    }
}
