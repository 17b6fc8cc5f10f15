import DBusKit
import ProximityAPI
import ProximityCore

/// The daemon's side of `org.proximityd.RegionMonitor1` at `/org/proximityd`
/// (`dbus/org.proximityd.RegionMonitor1.xml`). Commands go to the engine, which saves them
/// before it publishes them; each answers once the bus exporter has shown the change (the region
/// object exported or removed, its signals sent).
enum RegionMonitorInterface {
    typealias Monitor1 = ProximityBus.RegionMonitor1
    typealias Errors = ProximityBus.Errors

    static func declaration(commands: NodeCommands) -> DBusInterface {
        DBusInterface(Monitor1.interface, methods: [
            DBusMethod(Monitor1.startMonitoring, inputs: [DBusArgument("identifier", .string),
                                                         DBusArgument("matcher", .dictionary(key: .string, value: .variant))]) { call in
                let identifier = try identifier(call.arguments[0])
                let values = try BusArguments.uniqueEntries(call.arguments[1], "matcher")
                let matcher: RegionMatcher
                do { matcher = try RegionMatcher(busValues: values) } catch {
                    throw DBusError(Errors.invalidArguments, "\(error)")
                }
                try await commands.run(.startMonitoring(Region(identifier: identifier, matcher: matcher, source: .bus)))
                return []
            },
            DBusMethod(Monitor1.stopMonitoring, inputs: [DBusArgument("identifier", .string)]) { call in
                try await commands.run(.stopMonitoring(try identifier(call.arguments[0])))
                return []
            },
            DBusMethod(Monitor1.stopMonitoringAll) { _ in
                try await commands.run(.stopMonitoringAll)
                return []
            },
            DBusMethod(Monitor1.requestState, inputs: [DBusArgument("identifier", .string)],
                       outputs: [DBusArgument("state", .string)]) { call in
                let outcome = try await commands.run(.requestState(try identifier(call.arguments[0])))
                return [.string((outcome.regionState ?? .unknown).rawValue)]
            },
            DBusMethod(Monitor1.getMonitoredRegions, outputs: [DBusArgument("regions", .array(.objectPath))]) { _ in
                [.array(element: .objectPath, await commands.read { $0.monitoredRegions }.map { .objectPath(ProximityBus.regionPath($0)) })]
            },
        ])
    }

    private static func identifier(_ value: DBusValue) throws(DBusError) -> String {
        let identifier = value.string ?? ""
        if let problem = Region.problem(identifier: identifier) { throw DBusError(Errors.invalidArguments, problem) }
        return identifier
    }
}
