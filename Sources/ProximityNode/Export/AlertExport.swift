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
        for (path, properties) in changes.targets.sorted(by: { $0.key < $1.key }) {
            if let existing = alertObjects[path] {
                let changed = properties.changes(since: existing.properties)
                if !changed.isEmpty { existing.object.set(changed, interface: Alert1.interface) }
                alertObjects[path]!.properties = properties
            } else {
                do {
                    let object = try await connection.export([AlertInterface.declaration(properties)], at: path)
                    alertObjects[path] = (object, properties)
                } catch {
                    logger.error("cannot export an alert", metadata: ["dbus.path": "\(path)", "error": "\(error)"])
                }
            }
        }
        for signal in changes.signals {
            do {
                switch signal {
                case .ready(let path, let content):
                    try nodeObject?.emit(Manager1.alertReady, interface: Manager1.interface, [.objectPath(path), .variantMap(content)])
                case .removed(let path, let reason):
                    try nodeObject?.emit(Manager1.alertRemoved, interface: Manager1.interface, [.objectPath(path), .string(reason)])
                case .changed:
                    break
                }
            } catch {
                logger.error("cannot emit an alert signal", metadata: ["dbus.path": "\(signal.path)", "error": "\(error)"])
            }
        }
        for path in alertObjects.keys.sorted() where changes.targets[path] == nil {
            if let gone = alertObjects.removeValue(forKey: path) { await gone.object.unexport() }
        }
        let current = changes.current ?? .root
        if current != shownCurrent {
            shownCurrent = current
            nodeObject?.set(Manager1.current, .objectPath(current), interface: Manager1.interface)
        }
        if changes.strategies != shownStrategies {
            shownStrategies = changes.strategies
            nodeObject?.set(Manager1.strategies, .array(element: .string, changes.strategies.map { .string($0) }), interface: Manager1.interface)
        }
        shown(changes.sequence)
    }
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
