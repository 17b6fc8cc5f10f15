import DBusKit
import ProximityCore

/// A node's profile, tracking and rules (`org.proximityd.Profile1`) and its event log
/// (`org.proximityd.EventLog1`), at ``ProximityBus/rootPath``, for clients.
extension NodeProxy {
    private typealias P1 = ProximityBus.Profile1

    /// `Attributes`.
    public func attributes() async throws -> [String: String] {
        let value = try await connection.getProperty(destination: name, path: ProximityBus.rootPath, interface: P1.interface,
                                                     name: P1.attributes, timeout: timeout)
        return Lenient.stringMap(value)
    }

    public func updateAttribute(_ key: String, _ value: String) async throws {
        try await call(P1.updateAttribute, key, value)
    }

    public func removeAttribute(_ key: String) async throws {
        try await call(P1.removeAttribute, key)
    }

    public func trackBeacon(uuid: String, major: String, minor: String, prox: UInt8, data: [String: String]) async throws {
        try await call(P1.trackBeacon, uuid, major, minor, prox, DBusEntries(data))
    }

    public func clearCurrentBeacon() async throws {
        try await call(P1.clearCurrentBeacon)
    }

    /// `AddRule` with the rule's JSON.
    public func addRule(_ identifier: String, json: String) async throws {
        try await call(P1.addRule, identifier, json)
    }

    public func removeRule(_ identifier: String) async throws {
        try await call(P1.removeRule, identifier)
    }

    /// `GetRules`: identifier → the rule's JSON (with `"source"`).
    public func rules() async throws -> [String: String] {
        try await call(P1.getRules)
    }

    /// `TestRule`: whether the rule's condition holds now, and why, one line per test.
    public func testRule(_ identifier: String) async throws -> (holds: Bool, explanation: [String]) {
        try await call(P1.testRule, identifier)
    }

    /// `GetEvents`.
    public func events(after: UInt64 = 0, since: Double = 0, limit: UInt32 = .max) async throws -> [LogEntryValue] {
        (try await call(ProximityBus.EventLog1.getEvents, after, since, limit).arrayElements ?? []).compactMap(LogEntryValue.init)
    }

    /// `Tracked`, `Cleared`, `RuleFired`, `Logged` and `Attributes` changes from now on.
    public func profileSignals() async throws -> AsyncStream<ProfileSignal> {
        let profile = try await connection.subscribe(MatchRule(sender: name, path: ProximityBus.rootPath, interface: P1.interface))
        let log = try await connection.subscribe(MatchRule(sender: name, path: ProximityBus.rootPath,
                                                           interface: ProximityBus.EventLog1.interface))
        let changes = try await connection.subscribe(MatchRule(sender: name, path: ProximityBus.rootPath, interface: .properties,
                                                               member: "PropertiesChanged", arg0: P1.interface.rawValue))
        return Self.decoded([profile, log, changes], ProfileSignal.init)
    }
}

/// An event log entry on the bus: `(tdssa{ss})`.
extension LogEntryValue {
    public init?(_ value: DBusValue) {
        guard case .structure(let f) = value.unwrapped, f.count == 5, let seq = Lenient.integer(f[0], as: UInt64.self),
              let time = f[1].double, let source = f[2].string, let type = f[3].string else { return nil }
        self.init(seq: seq, time: time, source: source, type: type, data: Lenient.stringMap(f[4]))
    }

    public var value: DBusValue {
        .structure([.uint64(seq), .double(time), .string(source), .string(type), .stringMap(data)])
    }
}

/// A profile or event log signal from its message.
extension ProfileSignal {
    public init?(_ message: DBusMessage) {
        guard let member = message.member else { return nil }
        switch (message.interface, member) {
        case (ProximityBus.Profile1.interface, ProximityBus.Profile1.tracked): self = .tracked(Lenient.stringMap(message.body.first))
        case (ProximityBus.Profile1.interface, ProximityBus.Profile1.cleared): self = .cleared
        case (ProximityBus.Profile1.interface, ProximityBus.Profile1.ruleFired):
            self = .ruleFired(rule: message.body.first?.string ?? "",
                              data: Lenient.stringMap(message.body.count > 1 ? message.body[1] : nil))
        case (ProximityBus.EventLog1.interface, ProximityBus.EventLog1.logged):
            guard let entry = LogEntryValue(.structure(message.body)) else { return nil }
            self = .logged(entry)
        case (.properties, "PropertiesChanged"):
            guard let changed = message.body.count > 1 ? Lenient.properties(message.body[1]) : nil,
                  let attributes = changed[ProximityBus.Profile1.attributes] else { return nil }
            self = .attributes(Lenient.stringMap(attributes))
        default: return nil
        }
    }
}
