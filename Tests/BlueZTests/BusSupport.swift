import BlueZ
import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import Synchronization
import Testing

// Note: BlueZSim has a type named `BlueZ`, which hides this module's name here; the tests use
// BlueZ's declarations unqualified (`BlueZService`, `Adapter`, …).

/// The RSSI every report carries at `distance` with no shadowing.
func expectedRSSI(_ scenario: Scenario, distance: Double) -> Int16 {
    Int16(scenario.radioModel.meanRSSI(distance: distance).rounded())
}

let adapterPath: ObjectPath = "/org/bluez/hci0"
let alphaDevice: ObjectPath = "/org/bluez/hci0/dev_AA_00_00_00_00_01"
let betaDevice: ObjectPath = "/org/bluez/hci0/dev_AA_00_00_00_00_02"
let generalUUID = ProximityUUIDs.defaultService


extension BlueZEvent {
    var summary: String {
        switch self {
        case .adapterAdded(let a): "adapterAdded(\(a.path))"
        case .adapterChanged(let a, let c): "adapterChanged(\(a.path), \(c.sorted()))"
        case .adapterRemoved(let p): "adapterRemoved(\(p))"
        case .deviceAdded(let d): "deviceAdded(\(d.path), rssi \(d.rssi.map(String.init) ?? "-"))"
        case .deviceChanged(let d, let c): "deviceChanged(\(d.path), \(c.sorted()), rssi \(d.rssi.map(String.init) ?? "-"))"
        case .deviceRemoved(let p): "deviceRemoved(\(p))"
        case .bluezGone: "bluezGone"
        case .bluezRestarted: "bluezRestarted"
        }
    }

    var addedDevice: DeviceInfo? { if case .deviceAdded(let d) = self { d } else { nil } }
    var changedDevice: (DeviceInfo, Set<String>)? { if case .deviceChanged(let d, let c) = self { (d, c) } else { nil } }
    var addedAdapter: AdapterInfo? { if case .adapterAdded(let a) = self { a } else { nil } }
}

/// A mirror running on its own connection, with its events logged.
struct RunningMirror: Sendable {
    let connection: DBusConnection
    let mirror: BlueZObjectMirror
    /// Every event of the mirror, in order, to wait on.
    let log: EventRecorder<BlueZEvent>
    let task: Task<Void, Error>

    static func start(on connection: DBusConnection, service: BusName = BlueZService.name) -> RunningMirror {
        let mirror = BlueZObjectMirror(connection: connection, service: service)
        let log = EventRecorder(recording: mirror.events)
        let task = Task { try await mirror.run() }
        return RunningMirror(connection: connection, mirror: mirror, log: log, task: task)
    }

    func stop() async {
        task.cancel()
        _ = try? await task.value
    }
}

/// Expects `body` to throw `expected`.
func expectThrows<E: Error & Equatable>(_ expected: E, sourceLocation: SourceLocation = #_sourceLocation,
                                        _ body: () async throws -> Void) async {
    do {
        try await body()
        Issue.record("expected \(expected), got success", sourceLocation: sourceLocation)
    } catch let error as E {
        #expect(error == expected, sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(expected), got \(error)", sourceLocation: sourceLocation)
    }
}

/// The tests that run buses, one at a time (they share two cores with the simulator's air).
@Suite(.serialized) struct BlueZBusTests {}

/// Waits for the next element of `stream`, up to `timeout`; nil if none came.
func nextElement<T: Sendable>(of stream: AsyncStream<T>, timeout: Duration = .seconds(10)) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask {
            var iterator = stream.makeAsyncIterator()
            return await iterator.next()
        }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
