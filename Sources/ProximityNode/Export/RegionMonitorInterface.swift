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
            DBusMethod(Monitor1.startMonitoring) { _, identifier, matcher in
                let identifier = try checked(identifier)
                let values = try BusArguments.uniqueEntries(matcher, "matcher")
                let parts: RegionMatcher
                do { parts = try RegionMatcher(busValues: values) } catch { throw DBusError(Errors.invalidArguments, "\(error)") }
                try await commands.run(.startMonitoring(Region(identifier: identifier, matcher: parts, source: .bus)))
            },
            DBusMethod(Monitor1.stopMonitoring) { _, identifier in try await commands.run(.stopMonitoring(try checked(identifier))) },
            DBusMethod(Monitor1.stopMonitoringAll) { _ in try await commands.run(.stopMonitoringAll) },
            DBusMethod(Monitor1.requestState) { _, identifier in
                let outcome = try await commands.run(.requestState(try checked(identifier)))
                return (outcome.regionState ?? .unknown).rawValue
            },
            DBusMethod(Monitor1.getMonitoredRegions) { _ in await commands.read { $0.monitoredRegions }.map(ProximityBus.regionPath) },
            DBusMethod(Monitor1.getRegion) { _, identifier in
                let identifier = try checked(identifier)
                guard await commands.read({ $0.monitoredRegions.contains(identifier) }) else {
                    throw DBusError(Errors.doesNotExist, "no region \(identifier.debugDescription) is monitored")
                }
                return ProximityBus.regionPath(identifier)
            },
        ])
    }

    private static func checked(_ identifier: String) throws(DBusError) -> String {
        if let problem = Region.problem(identifier: identifier) { throw DBusError(Errors.invalidArguments, problem) }
        return identifier
    }
}
