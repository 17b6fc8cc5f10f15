import DBusKit
import ProximityAPI

/// The daemon's side of `org.proximityd.EventLog1` at `/org/proximityd`
/// (`dbus/org.proximityd.EventLog1.xml`): the durable log read back; its `Logged` signals go out
/// with the profile's step (the exporter's part in `ProfileInterface.swift`).
enum EventLogInterface {
    typealias Errors = ProximityBus.Errors

    static func declaration(engine: NodeEngine) -> DBusInterface {
        typealias L1 = ProximityBus.EventLog1
        return DBusInterface(L1.interface, methods: [
            DBusMethod(L1.getEvents) { _, after, since, limit in
                guard since.isFinite else {
                    throw DBusError(Errors.invalidArguments, "since must be a finite number of seconds since the Unix epoch")
                }
                // 0, or more than a page: a page (10,000).
                let entries = await engine.loggedEvents(after: after, since: since, limit: limit == 0 ? 10_000 : Int(min(limit, 10_000)))
                return .array(element: L1.entryType, entries.map(\.value))
            },
        ], signals: [
            DBusSignal(L1.logged, arguments: [DBusArgument("seq", .uint64), DBusArgument("time", .double), DBusArgument("source", .string),
                                              DBusArgument("type", .string),
                                              DBusArgument("data", .dictionary(key: .string, value: .string))]),
        ])
    }
}
