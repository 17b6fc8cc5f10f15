import BlueZ
import DBusKit
import ProximityTesting
import Synchronization
import Testing

/// A scripted `org.bluez` stand-in: serves `GetManagedObjects` at `/` from a table and sends
/// the ObjectManager and Properties signals a test tells it to, so the mirror's handling of
/// signals that race the snapshot can be pinned down exactly.
final class FakeBlueZ: Sendable {
    typealias Tree = [ObjectPath: [String: [String: DBusValue]]]
    let connection: DBusConnection
    private let tree: Mutex<Tree>
    /// Runs inside `GetManagedObjects`: `before` ahead of taking the snapshot (its signals are
    /// reflected in the reply, as with bluetoothd), `after` once it is taken (its signals are not,
    /// as with a server that builds its reply before sending queued signals).
    typealias Hook = @Sendable (FakeBlueZ) async throws -> Void
    private let hooks: Mutex<(before: Hook?, after: Hook?)>

    private init(connection: DBusConnection, tree: Tree) {
        self.connection = connection
        self.tree = Mutex(tree)
        self.hooks = Mutex((nil, nil))
    }

    static func start(on bus: PrivateBus, name: BusName, tree: Tree, before: Hook? = nil, after: Hook? = nil) async throws -> FakeBlueZ {
        let fake = FakeBlueZ(connection: try await bus.connect(), tree: tree)
        fake.hooks.withLock { $0 = (before, after) }
        _ = try await fake.connection.export([DBusInterface(.objectManager, methods: [
            DBusMethod("GetManagedObjects", outputs: [DBusArgument("objects", Self.treeType)]) { [weak fake] _ in
                guard let fake else { return [] }
                let (before, after) = fake.hooks.withLock { h in
                    defer { h = (nil, nil) }  // once: a resync sees a quiet server
                    return h
                }
                try await before?(fake)
                let snapshot = fake.tree.withLock { $0 }
                try await after?(fake)
                return [Self.encode(snapshot)]
            },
        ], signals: [
            DBusSignal("InterfacesAdded", arguments: [DBusArgument("object", .objectPath),
                                                      DBusArgument("interfaces", .dictionary(key: .string, value: .dictionary(key: .string, value: .variant)))]),
            DBusSignal("InterfacesRemoved", arguments: [DBusArgument("object", .objectPath), DBusArgument("interfaces", .array(.string))]),
        ])], at: .root)
        _ = try await fake.connection.requestName(name)
        return fake
    }

    static let treeType = DBusType.dictionary(key: .objectPath, value: .dictionary(key: .string, value: .dictionary(key: .string, value: .variant)))

    static func encode(_ tree: Tree) -> DBusValue {
        .dictionary(key: .objectPath, value: .dictionary(key: .string, value: .dictionary(key: .string, value: .variant)),
                    tree.sorted { $0.key < $1.key }.map { path, interfaces in
                        .init(.objectPath(path), interfacesValue(interfaces))
                    })
    }

    static func interfacesValue(_ interfaces: [String: [String: DBusValue]]) -> DBusValue {
        .dictionary(key: .string, value: .dictionary(key: .string, value: .variant),
                    interfaces.sorted { $0.key < $1.key }.map { .init(.string($0.key), .vardict($0.value)) })
    }

    /// Changes the table and announces it.
    func add(_ path: ObjectPath, _ interfaces: [String: [String: DBusValue]], announce: Bool = true) throws {
        tree.withLock { t in for (i, p) in interfaces { t[path, default: [:]][i] = p } }
        if announce {
            try connection.emitSignal(path: .root, interface: .objectManager, member: "InterfacesAdded",
                                      [.objectPath(path), Self.interfacesValue(interfaces)])
        }
    }

    func remove(_ path: ObjectPath, _ interfaces: [String], announce: Bool = true) throws {
        tree.withLock { t in
            for i in interfaces { t[path]?[i] = nil }
            if t[path]?.isEmpty == true { t[path] = nil }
        }
        if announce {
            try connection.emitSignal(path: .root, interface: .objectManager, member: "InterfacesRemoved",
                                      [.objectPath(path), .strings(interfaces)])
        }
    }

    func change(_ path: ObjectPath, _ interface: String, _ changed: [String: DBusValue], invalidated: [String] = [],
                announce: Bool = true) throws {
        tree.withLock { t in
            for (k, v) in changed { t[path]?[interface]?[k] = v }
            for k in invalidated { t[path]?[interface]?[k] = nil }
        }
        if announce {
            try connection.emitSignal(path: path, interface: .properties, member: "PropertiesChanged",
                                      [.string(interface), .vardict(changed), .strings(invalidated)])
        }
    }

    var current: Tree { tree.withLock { $0 } }
}

extension BlueZBusTests {
    /// The snapshot and the signals around it, with a scripted BlueZ.
    @Suite struct MirrorOrderingTests {
        static let service: BusName = "org.test.bluez"
        static let adapter: ObjectPath = "/org/bluez/hci0"
        static func device(_ n: Int) -> ObjectPath { try! ObjectPath("/org/bluez/hci0/dev_C0_00_00_00_00_0\(n)") }
        static let deviceInterface = BlueZService.deviceInterface.rawValue

        static func deviceProperties(_ n: Int, rssi: Int16) -> [String: [String: DBusValue]] {
            [deviceInterface: ["Address": .string("C0:00:00:00:00:0\(n)"), "RSSI": .int16(rssi),
                               "Adapter": .objectPath(adapter), "Connected": .boolean(false)]]
        }

        static let initialTree: FakeBlueZ.Tree = [
            "/org/bluez": ["org.bluez.AgentManager1": [:]],
            adapter: [BlueZService.adapterInterface.rawValue: ["Address": .string("AA:00:00:00:00:01"), "Powered": .boolean(true)]],
            device(1): deviceProperties(1, rssi: -50),
        ]

        /// Signals sent before the reply are already in it (bluetoothd's order): they are not
        /// applied again, so no stale value and no duplicate sample; signals after it are.
        @Test func signalsBeforeTheReplyAreInTheSnapshot() async throws {
            let bus = try await PrivateBus.start(name: "fake-bluez")
            let fake = try await FakeBlueZ.start(on: bus, name: Self.service, tree: Self.initialTree, before: { fake in
                try fake.change(Self.device(1), Self.deviceInterface, ["RSSI": .int16(-60)])
                try fake.add(Self.device(2), Self.deviceProperties(2, rssi: -70))
                try fake.change(Self.device(1), Self.deviceInterface, ["RSSI": .int16(-55)])
                try fake.remove(Self.device(2), [Self.deviceInterface])
                try fake.add(Self.device(2), Self.deviceProperties(2, rssi: -71))
            })
            let running = RunningMirror.start(on: try await bus.connect(), service: Self.service)
            try await running.log.require("the snapshot's devices") { $0.addedDevice?.path == Self.device(2) }
            try fake.change(Self.device(1), Self.deviceInterface, ["RSSI": .int16(-80)])
            try await running.log.require("the change after the reply") { $0.changedDevice?.0.rssi == -80 }

            let events = running.log.events
            #expect(events.map(\.summary) == [
                "adapterAdded(/org/bluez/hci0)",
                "deviceAdded(/org/bluez/hci0/dev_C0_00_00_00_00_01, rssi -55)",
                "deviceAdded(/org/bluez/hci0/dev_C0_00_00_00_00_02, rssi -71)",
                "deviceChanged(/org/bluez/hci0/dev_C0_00_00_00_00_01, [\"RSSI\"], rssi -80)",
            ])
            #expect(await running.mirror.managedObjects == fake.current)
            #expect(await running.mirror.owner == fake.connection.uniqueName)
            await running.stop()
            await running.connection.close()
            await fake.connection.close()
            await bus.stop()
        }

        /// A server that builds its reply before sending signals it had queued (bluez-sim can):
        /// objects it adds then are not lost, nor the changes and removal of those objects.
        @Test func objectsAddedAfterTheSnapshotWasBuiltAreKept() async throws {
            let bus = try await PrivateBus.start(name: "fake-bluez")
            let fake = try await FakeBlueZ.start(on: bus, name: Self.service, tree: Self.initialTree, after: { fake in
                try fake.add(Self.device(3), Self.deviceProperties(3, rssi: -40))
                try fake.change(Self.device(3), Self.deviceInterface, ["RSSI": .int16(-41), "Connected": .boolean(true)])
                try fake.add(Self.device(4), Self.deviceProperties(4, rssi: -90))
                try fake.remove(Self.device(4), [Self.deviceInterface])
            })
            let running = RunningMirror.start(on: try await bus.connect(), service: Self.service)
            try await running.log.require("the device added after the snapshot") { $0.addedDevice?.path == Self.device(3) }
            try fake.change(Self.device(1), Self.deviceInterface, ["RSSI": .int16(-80)])
            try await running.log.require("the change after the reply") { $0.changedDevice?.0.rssi == -80 }

            #expect(running.log.events.map(\.summary) == [
                "adapterAdded(/org/bluez/hci0)",
                "deviceAdded(/org/bluez/hci0/dev_C0_00_00_00_00_01, rssi -50)",
                "deviceAdded(/org/bluez/hci0/dev_C0_00_00_00_00_03, rssi -40)",
                "deviceChanged(/org/bluez/hci0/dev_C0_00_00_00_00_03, [\"Connected\", \"RSSI\"], rssi -41)",
                "deviceAdded(/org/bluez/hci0/dev_C0_00_00_00_00_04, rssi -90)",
                "deviceRemoved(/org/bluez/hci0/dev_C0_00_00_00_00_04)",
                "deviceChanged(/org/bluez/hci0/dev_C0_00_00_00_00_01, [\"RSSI\"], rssi -80)",
            ])
            #expect(await running.mirror.managedObjects == fake.current)
            let d3 = try #require(await running.mirror.device(at: Self.device(3)))
            #expect(d3.connected)
            await running.stop()
            await running.connection.close()
            await fake.connection.close()
            await bus.stop()
        }

        /// No BlueZ at first; one appears, leaves, and another takes the name: the mirror follows
        /// each owner and never keeps a departed one's objects.
        @Test func followsTheOwner() async throws {
            let bus = try await PrivateBus.start(name: "fake-bluez")
            let running = RunningMirror.start(on: try await bus.connect(), service: Self.service)
            let first = try await FakeBlueZ.start(on: bus, name: Self.service, tree: Self.initialTree)
            try await running.log.require("the first BlueZ's device") { $0.addedDevice?.path == Self.device(1) }
            #expect(await running.mirror.owner == first.connection.uniqueName)

            await first.connection.close()
            try await running.log.require("bluezGone") { $0 == .bluezGone }
            #expect(await running.mirror.managedObjects.isEmpty)
            #expect(await running.mirror.owner == nil)

            var tree = Self.initialTree
            tree[Self.device(1)] = nil
            tree[Self.device(5)] = Self.deviceProperties(5, rssi: -66)
            let before = running.log.count
            let second = try await FakeBlueZ.start(on: bus, name: Self.service, tree: tree)
            try await running.log.require("the second BlueZ's device", from: before) { $0.addedDevice?.path == Self.device(5) }
            #expect(running.log.events.dropFirst(before).map(\.summary) == [
                "bluezRestarted",
                "adapterAdded(/org/bluez/hci0)",
                "deviceAdded(/org/bluez/hci0/dev_C0_00_00_00_00_05, rssi -66)",
            ])
            #expect(await running.mirror.owner == second.connection.uniqueName)
            #expect(await running.mirror.managedObjects == tree)
            #expect(running.log.events.first == .adapterAdded(AdapterInfo(path: Self.adapter, properties: Self.initialTree[Self.adapter]![BlueZService.adapterInterface.rawValue]!)))
            await running.stop()
            await running.connection.close()
            await second.connection.close()
            await bus.stop()
        }
    }
}
