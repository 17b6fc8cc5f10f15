import DBusKit
import ProximityAPI
import ProximityCore

/// The daemon's side of `org.proximityd.Profile1` and `org.proximityd.EventLog1` at
/// `/org/proximityd` (`dbus/org.proximityd.Profile1.xml`, `EventLog1.xml`). Commands go to the
/// engine, which saves them before it publishes them; each answers once the exporter has shown
/// the change (`Attributes` set, the signals sent).
enum ProfileInterface {
    typealias P1 = ProximityBus.Profile1
    typealias Errors = ProximityBus.Errors

    static func declaration(commands: NodeCommands, attributes: [String: String]) -> DBusInterface {
        @Sendable func run(_ command: NodeCommand) async throws(DBusError) -> [DBusValue] {
            try await commands.run(command)
            return []
        }
        return DBusInterface(P1.interface, methods: [
            DBusMethod(P1.updateAttribute, inputs: [DBusArgument("key", .string), DBusArgument("value", .string)]) { call in
                let key = try key(call.arguments[0])
                let value = call.arguments[1].string ?? ""
                if let problem = Profile.problem(value: value) { throw DBusError(Errors.invalidArguments, problem) }
                return try await run(.updateAttribute(key, value))
            },
            DBusMethod(P1.removeAttribute, inputs: [DBusArgument("key", .string)]) { call in
                try await run(.removeAttribute(try key(call.arguments[0])))
            },
            DBusMethod(P1.trackBeacon, inputs: [DBusArgument("uuid", .string), DBusArgument("major", .string), DBusArgument("minor", .string),
                                               DBusArgument("prox", .byte), DBusArgument("data", .dictionary(key: .string, value: .string))]) { call in
                let texts = call.arguments[0...2].map { $0.string ?? "" }
                for (name, text) in zip(["uuid", "major", "minor"], texts) where text.utf8.count > 255 {
                    throw DBusError(Errors.invalidArguments, "\(name) is longer than 255 bytes")
                }
                guard case .byte(let prox) = call.arguments[3], prox <= 3 else {
                    throw DBusError(Errors.invalidArguments, "prox must be 0 (unknown), 1 (immediate), 2 (near) or 3 (far), not \(call.arguments[3])")
                }
                var data: [String: String] = [:]
                for entry in call.arguments[4].dictEntries ?? [] {
                    let k = entry.key.string ?? "", v = entry.value.string ?? ""
                    if let problem = Profile.problem(key: k) ?? Profile.problem(value: v) { throw DBusError(Errors.invalidArguments, "data: \(problem)") }
                    guard data.updateValue(v, forKey: k) == nil else {
                        throw DBusError(Errors.invalidArguments, "data: \(k.debugDescription) is given twice")
                    }
                }
                guard data.count <= 64 else { throw DBusError(Errors.invalidArguments, "data has more than 64 entries") }
                return try await run(.trackBeacon(uuid: texts[0], major: texts[1], minor: texts[2], prox: Int(prox), data: data))
            },
            DBusMethod(P1.clearCurrentBeacon) { _ in try await run(.clearCurrentBeacon) },
            DBusMethod(P1.addRule, inputs: [DBusArgument("identifier", .string), DBusArgument("rule", .string)]) { call in
                let identifier = call.arguments[0].string ?? ""
                if let problem = Rule.problem(identifier: identifier) { throw DBusError(Errors.invalidArguments, problem) }
                let text = call.arguments[1].string ?? ""
                guard text.utf8.count <= 65_536 else { throw DBusError(Errors.invalidArguments, "the rule is longer than 64 KiB") }
                let rule: Rule
                do { rule = try Rule.parse(identifier: identifier, RuleValue.json(text)) } catch {
                    throw DBusError(Errors.invalidArguments, "rule \(identifier.debugDescription): \(error)")
                }
                return try await run(.addRule(rule))
            },
            DBusMethod(P1.removeRule, inputs: [DBusArgument("identifier", .string)]) { call in
                try await run(.removeRule(call.arguments[0].string ?? ""))
            },
            DBusMethod(P1.getRules, outputs: [DBusArgument("rules", .dictionary(key: .string, value: .string))]) { _ in
                [.stringMap(await commands.read { $0.ruleDefinitions })]
            },
            DBusMethod(P1.testRule, inputs: [DBusArgument("identifier", .string)],
                       outputs: [DBusArgument("holds", .boolean), DBusArgument("explanation", .array(.string))]) { call in
                let identifier = call.arguments[0].string ?? ""
                let (holds, lines) = try await commands.read { step in Result { () throws(NodeRefusal) in try step.testRule(identifier) } }
                return [.boolean(holds), .array(element: .string, lines.map { .string($0) })]
            },
        ], properties: [
            DBusProperty(P1.attributes, .dictionary(key: .string, value: .string), .stringMap(attributes)),
        ], signals: [
            DBusSignal(P1.tracked, arguments: [DBusArgument("contextdata", .dictionary(key: .string, value: .string))]),
            DBusSignal(P1.cleared),
            DBusSignal(P1.ruleFired, arguments: [DBusArgument("rule", .string), DBusArgument("data", .dictionary(key: .string, value: .string))]),
        ])
    }

    static func eventLog(engine: NodeEngine) -> DBusInterface {
        typealias L1 = ProximityBus.EventLog1
        return DBusInterface(L1.interface, methods: [
            DBusMethod(L1.getEvents, inputs: [DBusArgument("after", .uint64), DBusArgument("since", .double), DBusArgument("limit", .uint32)],
                       outputs: [DBusArgument("events", .array(L1.entryType))]) { call in
                guard case .uint64(let after) = call.arguments[0], case .double(let since) = call.arguments[1], since.isFinite,
                      case .uint32(let limit) = call.arguments[2] else {
                    throw DBusError(Errors.invalidArguments, "since must be a finite number of seconds since the Unix epoch")
                }
                // 0, or more than a page: a page (10,000).
                let entries = await engine.loggedEvents(after: after, since: since, limit: limit == 0 ? 10_000 : Int(min(limit, 10_000)))
                return [.array(element: L1.entryType, entries.map(\.value))]
            },
        ], signals: [
            DBusSignal(L1.logged, arguments: [DBusArgument("seq", .uint64), DBusArgument("time", .double), DBusArgument("source", .string),
                                              DBusArgument("type", .string), DBusArgument("data", .dictionary(key: .string, value: .string))]),
        ])
    }

    private static func key(_ value: DBusValue) throws(DBusError) -> String {
        let key = value.string ?? ""
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
                case .ruleFired(let rule, let data): try nodeObject?.emit(P1.ruleFired, interface: P1.interface, [.string(rule), .stringMap(data)])
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
