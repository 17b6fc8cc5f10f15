import DBusKit
import ProximityAPI
import ProximityCore

/// The regions on the bus: one `Region1` object per monitored region, its `State` and `Peers`
/// kept in step, and its signals.
extension BusExporter {
    typealias Region1 = ProximityBus.Region1

    /// Applies one step's region changes in order: objects removed, objects exported or updated,
    /// then for each event its property change and signal (`StateDetermined` before `Entered` or
    /// `Exited`), then `Ranged` and `Peers`.
    func show(_ changes: RegionChanges) async {
        for id in changes.removed {
            if let gone = regionObjects.removeValue(forKey: id) { await gone.object.unexport() }
        }
        for status in changes.defined {
            let id = status.region.identifier
            var properties = regionObjects[id]?.properties ?? RegionProperties(identifier: id)
            let old = properties
            properties.matcher = status.region.matcher.busValues
            properties.source = status.region.source.rawValue
            properties.state = status.state.rawValue
            if let existing = regionObjects[id] {
                let changed = properties.changes(since: old)
                if !changed.isEmpty { existing.object.set(changed, interface: Region1.interface) }
                regionObjects[id]!.properties = properties
            } else {
                do {
                    let object = try await connection.export([RegionInterface.declaration(properties)], at: properties.path)
                    regionObjects[id] = (object, properties)
                } catch {
                    logger.error("cannot export a region", metadata: ["region": "\(id)", "error": "\(error)"])
                }
            }
        }
        for event in changes.events {
            guard let object = regionObjects[event.region]?.object else { continue }
            do {
                switch event {
                case .determined(let id, let state):
                    if regionObjects[id]!.properties.state != state.rawValue {
                        regionObjects[id]!.properties.state = state.rawValue
                        object.set(RegionProperties.Key.state.rawValue, .string(state.rawValue), interface: Region1.interface)
                    }
                    try object.emit(Region1.stateDetermined, interface: Region1.interface, [.string(state.rawValue)])
                case .entered:
                    try object.emit(Region1.entered, interface: Region1.interface)
                case .exited:
                    try object.emit(Region1.exited, interface: Region1.interface)
                }
            } catch {
                logger.error("cannot emit a region signal", metadata: ["region": "\(event.region)", "error": "\(error)"])
            }
        }
        if let ranging = changes.ranging {
            var present: [String: [String]] = [:]
            for r in ranging {
                present[r.region] = r.peers.map(\.identifier.rawValue).sorted()
                guard let object = regionObjects[r.region]?.object else { continue }
                let peers = r.peers.map { DBusValue.structure([.string($0.identifier.rawValue), .string($0.proximity.rawValue),
                                                               .double($0.distance), .int16($0.rssi)]) }
                do {
                    try object.emit(Region1.ranged, interface: Region1.interface,
                                    [.array(element: .structure([.string, .string, .double, .int16]), peers)])
                } catch {
                    logger.error("cannot emit Ranged", metadata: ["region": "\(r.region)", "error": "\(error)"])
                }
            }
            for (id, entry) in regionObjects {
                let peers = present[id] ?? []
                guard entry.properties.peers != peers else { continue }
                regionObjects[id]!.properties.peers = peers
                entry.object.set(RegionProperties.Key.peers.rawValue, .array(element: .string, peers.map { .string($0) }),
                                 interface: Region1.interface)
            }
        }
        shown(changes.sequence)
    }
}

/// The daemon's side of `org.proximityd.Region1` (`dbus/org.proximityd.Region1.xml`).
enum RegionInterface {
    static func declaration(_ properties: RegionProperties) -> DBusInterface {
        DBusInterface(ProximityBus.Region1.interface, properties: RegionProperties.Key.allCases.map { key in
            let d = key.descriptor
            return DBusProperty(d.name, d.type, properties.value(of: key), changeSignal: d.isConst ? .const : .emits)
        }, signals: [
            DBusSignal(ProximityBus.Region1.entered),
            DBusSignal(ProximityBus.Region1.exited),
            DBusSignal(ProximityBus.Region1.stateDetermined, arguments: [DBusArgument("state", .string)]),
            DBusSignal(ProximityBus.Region1.ranged, arguments: [DBusArgument("peers", ProximityBus.Region1.rangedType)]),
        ])
    }
}
