import DBusKit
import ProximityAPI
import ProximityCore

/// The alerts on the bus: one `Alert1` object per alert and target, kept in step with the
/// engine's picture; `AlertManager1`'s `Current` and `Strategies`, and its signals.
extension BusExporter {
    typealias Alert1 = ProximityBus.Alert1

    /// Applies one step of the alert engine: objects exported or updated (so an `AlertReady`
    /// names an object that is there), then the signals in order, then the objects gone, then
    /// `Current`.
    func show(_ changes: AlertChanges) async {
        for (key, properties) in changes.targets.sorted(by: { $0.key < $1.key }) {
            if let existing = alertObjects[key] {
                let changed = properties.changes(since: existing.properties)
                if !changed.isEmpty { existing.object.set(changed, interface: Alert1.interface) }
                alertObjects[key]!.properties = properties
            } else {
                do {
                    let object = try await connection.export([AlertInterface.declaration(properties)], at: properties.path)
                    alertObjects[key] = (object, properties)
                } catch {
                    logger.error("cannot export an alert", metadata: ["dbus.path": "\(properties.path)", "error": "\(error)"])
                }
            }
        }
        for notice in changes.notices {
            do {
                switch notice {
                case .ready(let key, let distance):
                    let path = Self.path(key)
                    let content = changes.targets[key]?.offer(distance: distance) ?? [:]
                    try nodeObject?.emit(Manager1.alertReady, interface: Manager1.interface, [.objectPath(path), .variantMap(content)])
                case .removed(let key, let reason):
                    try nodeObject?.emit(Manager1.alertRemoved, interface: Manager1.interface,
                                         [.objectPath(Self.path(key)), .string(reason)])
                }
            } catch {
                logger.error("cannot emit an alert signal", metadata: ["error": "\(error)"])
            }
        }
        for key in alertObjects.keys.sorted() where changes.targets[key] == nil {
            if let gone = alertObjects.removeValue(forKey: key) { await gone.object.unexport() }
        }
        let current = changes.current.map(Self.path) ?? .root
        if current != shownCurrent {
            shownCurrent = current
            nodeObject?.set(Manager1.current, .objectPath(current), interface: Manager1.interface)
        }
        if changes.strategies != shownStrategies {
            shownStrategies = changes.strategies
            nodeObject?.set(Manager1.strategies, .array(element: .string, changes.strategies.map { .string($0) }),
                            interface: Manager1.interface)
        }
        shown(changes.sequence)
    }

    static func path(_ key: AlertTargetKey) -> ObjectPath { ProximityBus.alertPath(alert: key.alert, target: key.peer.rawValue) }
}

/// The daemon's side of `org.proximityd.Alert1` (`dbus/org.proximityd.Alert1.xml`).
enum AlertInterface {
    static func declaration(_ properties: AlertProperties) -> DBusInterface {
        DBusInterface(ProximityBus.Alert1.interface, properties: AlertProperties.Key.allCases.map { key in
            let d = key.descriptor
            return DBusProperty(d.name, d.type, properties.value(of: key), changeSignal: d.isConst ? .const : .emits)
        })
    }
}
