import DBusKit
import ProximityCore

/// A node's alert engine (`org.proximityd.AlertManager1` at ``ProximityBus/rootPath``) and its
/// `Alert1` objects, for clients.
extension NodeProxy {
    private typealias Manager1 = ProximityBus.AlertManager1

    /// `AddAlert`: adds the alert, or replaces the one with its identifier.
    public func addAlert(_ alert: Alert) async throws {
        try await call(Manager1.addAlert, alert.identifier, DBusVardict(alert.busValues))
    }

    /// `RemoveAlert`.
    public func removeAlert(_ identifier: String) async throws {
        try await call(Manager1.removeAlert, identifier)
    }

    /// `GetAlerts`: every alert's targets.
    public func alertPaths() async throws -> [ObjectPath] {
        try await call(Manager1.getAlerts)
    }

    /// `GetDefinitions`: identifier → the alert's `a{sv}` (with `Source`: `config` or `bus`).
    public func alertDefinitions() async throws -> [String: [String: DBusValue]] {
        try await call(Manager1.getDefinitions).mapValues { $0.mapValues(\.unwrapped) }
    }

    /// `Accept`, `Decline`, `Done` of the alert on offer (or, for `Done`, in progress).
    public func accept(_ alert: ObjectPath) async throws { try await call(Manager1.accept, alert) }
    public func decline(_ alert: ObjectPath) async throws { try await call(Manager1.decline, alert) }
    public func done(_ alert: ObjectPath) async throws { try await call(Manager1.done, alert) }

    /// `SetActionStatus`.
    public func setActionStatus(_ alert: ObjectPath, _ status: ActionStatus) async throws {
        try await call(Manager1.setActionStatus, alert, status.rawValue)
    }

    /// `RegisterStrategy`: the object at `path` on this connection decides the alerts naming `key`.
    public func registerStrategy(_ path: ObjectPath, key: String) async throws {
        try await call(Manager1.registerStrategy, path, key)
    }

    /// `UnregisterStrategy`.
    public func unregisterStrategy(_ path: ObjectPath) async throws {
        try await call(Manager1.unregisterStrategy, path)
    }

    /// `Current`: the alert offered or in progress, nil when none.
    public func currentAlert() async throws -> ObjectPath? {
        let value = try await connection.getProperty(destination: name, path: ProximityBus.rootPath, interface: Manager1.interface,
                                                     name: Manager1.current, timeout: timeout)
        guard let path = value.unwrapped.objectPath, path != .root else { return nil }
        return path
    }

    /// Every alert target with its properties, from one `GetManagedObjects`, by path.
    public func alertProperties() async throws -> [ObjectPath: AlertProperties] {
        var out: [ObjectPath: AlertProperties] = [:]
        for entry in try await managedObjects().body.first?.dictEntries ?? [] {
            guard let path = entry.key.objectPath, path.isDescendant(of: ProximityBus.alertsPath, orEqual: false) else { continue }
            for interface in entry.value.dictEntries ?? [] where interface.key.string == ProximityBus.Alert1.interface.rawValue {
                out[path] = AlertProperties(Lenient.properties(interface.value))
            }
        }
        return out
    }

    /// `AlertReady`, `AlertRemoved` and the `Alert1` objects' property changes from now on,
    /// decoded; ends when the connection closes.
    public func alertSignals() async throws -> AsyncStream<AlertSignal> {
        let manager = try await connection.subscribe(MatchRule(sender: name, interface: Manager1.interface))
        let changes = try await connection.subscribe(MatchRule(sender: name, pathNamespace: ProximityBus.alertsPath,
                                                               interface: .properties, member: "PropertiesChanged"))
        return Self.decoded([manager, changes], AlertSignal.init)
    }
}

extension NodeProxy {
    /// The signals of several subscriptions as one stream, each decoded by `decode` (nil: skipped);
    /// ends when the first subscription ends (the connection closed).
    static func decoded<Signal: Sendable>(_ streams: [DBusSignalStream],
                                          _ decode: @escaping @Sendable (DBusMessage) -> Signal?) -> AsyncStream<Signal> {
        AsyncStream { continuation in
            let task = Task {
                await withTaskGroup(of: Void.self) { group in
                    for stream in streams {
                        group.addTask {
                            for await message in stream {
                                if let signal = decode(message) { continuation.yield(signal) }
                            }
                        }
                    }
                    await group.next()
                    group.cancelAll()
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

/// One alert signal: an offer, a removal, or an `Alert1` object's changed properties.
public enum AlertSignal: Sendable, Hashable {
    /// `AlertReady`: the alert and its content (`AlertProperties.offer(distance:)`'s keys).
    case ready(ObjectPath, [String: DBusValue])
    /// `AlertRemoved`, with the reason (`not-detected`, `condition-not-valid`, `alert-removed`,
    /// `status-forced`).
    case removed(ObjectPath, reason: String)
    /// `PropertiesChanged` on an `Alert1` object.
    case changed(ObjectPath, [String: DBusValue])

    public var path: ObjectPath {
        switch self {
        case .ready(let p, _), .removed(let p, _), .changed(let p, _): p
        }
    }

    public init?(_ message: DBusMessage) {
        guard let member = message.member else { return nil }
        if message.interface == ProximityBus.AlertManager1.interface {
            guard let path = message.body.first?.objectPath else { return nil }
            switch member {
            case ProximityBus.AlertManager1.alertReady:
                self = .ready(path, Lenient.properties(message.body.count > 1 ? message.body[1] : nil))
            case ProximityBus.AlertManager1.alertRemoved:
                self = .removed(path, reason: message.body.count > 1 ? message.body[1].string ?? "" : "")
            default: return nil
            }
        } else if message.interface == .properties, member.rawValue == "PropertiesChanged", let path = message.path,
                  message.body.first?.string == ProximityBus.Alert1.interface.rawValue {
            self = .changed(path, Lenient.properties(message.body.count > 1 ? message.body[1] : nil))
        } else {
            return nil
        }
    }
}
