import DBusKit
import Logging

/// One local mirror of BlueZ's object tree, kept current from its signals, with a stream of typed
/// events for the node to drive identification and ranging from.
///
/// The algorithm (bleak's `BlueZManager`, plus what bleak misses):
///
/// 1. **Match rules first.** Subscribe to `NameOwnerChanged` for `org.bluez`, then to the signals
///    `org.bluez` sends (`InterfacesAdded` / `InterfacesRemoved` from its object manager,
///    `PropertiesChanged` of its objects). Nothing sent after this point can be missed.
/// 2. **Then `GetManagedObjects`**, and the snapshot becomes the mirror.
/// 3. **Signals that raced the snapshot** are sorted by the serial number of the message: one
///    sender numbers its messages in the order it sends them, and the reply carries a serial too.
///    A signal from the snapshot's owner with a higher serial was sent after the reply and is
///    applied. One with a lower serial was sent before it: bluetoothd, single-threaded, builds
///    its reply after sending it, so the snapshot already holds its effect, and it is not applied
///    again (no duplicate RSSI sample, no property going back to an older value). The one
///    exception makes the mirror safe with a server that builds its reply *before* sending
///    signals it had queued (bluez-sim does, see docs/simulator.md): an `InterfacesAdded` for an
///    interface the snapshot lacks is applied, and so are later changes and the removal of that
///    interface, so no object is ever lost.
/// 4. **Signals apply in the order they were sent.** One subscription carries every `org.bluez`
///    signal: DBusKit gives each subscription its own stream, and two streams are not ordered
///    with respect to each other, while a `PropertiesChanged` must never overtake the
///    `InterfacesAdded` of its object.
/// 5. **Owner changes.** When `org.bluez` loses its owner, the mirror is cleared (``BlueZEvent/bluezGone``);
///    when it gains one, the mirror is rebuilt from a new `GetManagedObjects`
///    (``BlueZEvent/bluezRestarted``, then the added events). A signal whose sender is not the
///    owner of the current snapshot is dropped: it comes from a bluetoothd that is gone, or from a
///    new one whose snapshot, taken after the owner change is seen, will hold its effect.
///
/// Run it with ``run()`` (a long-running service method) and consume ``events`` from one task.
/// The queries (``devices()``, ``characteristics(under:)``, …) answer from the mirror without a
/// D-Bus round trip.
public actor BlueZObjectMirror {
    public typealias Properties = [String: DBusValue]
    /// Interface name → its properties.
    public typealias Interfaces = [String: Properties]

    /// What changed, in order. Unbounded: the consumer must keep up (device events come at the
    /// rate of advertisement reports).
    public nonisolated let events: AsyncStream<BlueZEvent>
    private let sink: AsyncStream<BlueZEvent>.Continuation

    private let connection: DBusConnection
    private let service: BusName
    private let logger: Logger

    private var objects: [ObjectPath: Interfaces] = [:]
    private var state = SyncState.absent
    /// The signals received while `GetManagedObjects` is in flight.
    private var pending: [DBusMessage] = []
    /// Incremented by every resync, so a reply that arrives after a newer resync began is dropped.
    private var generation = 0
    private var synchronizedOnce = false
    private var running = false
    /// Callers waiting for a device to reach a state, re-checked whenever the mirror changes.
    private var deviceWaiters: [UInt64: (path: ObjectPath, condition: @Sendable (DeviceInfo?) -> Bool,
                                         continuation: CheckedContinuation<Bool, Never>)] = [:]
    private var nextWaiter: UInt64 = 0

    private struct Key: Hashable {
        var path: ObjectPath
        var interface: String
    }

    private enum SyncState {
        /// No owner, or no snapshot yet: signals are dropped (a snapshot taken later holds them).
        case absent
        /// `GetManagedObjects` is in flight: signals wait in ``pending``, in order.
        case syncing
        /// The mirror holds `owner`'s snapshot, taken with reply serial `snapshotSerial`.
        /// `caughtUp` once a signal sent after the reply was seen (everything older is then past);
        /// `tentative` holds the interfaces that older signals added (step 3 above).
        case live(owner: BusName, snapshotSerial: UInt32, caughtUp: Bool, tentative: Set<Key>)
    }

    /// `service` is `org.bluez` except in tests that run a BlueZ of their own under another name.
    public init(connection: DBusConnection, service: BusName = BlueZService.name,
                logger: Logger = Logger(label: "proximityd.bluez")) {
        self.connection = connection
        self.service = service
        self.logger = logger
        (events, sink) = AsyncStream.makeStream(of: BlueZEvent.self, bufferingPolicy: .unbounded)
    }

    // MARK: - Running

    /// Subscribes, synchronizes and follows BlueZ until the task is cancelled or the connection
    /// closes; then ``events`` finishes. Throws only if the subscriptions cannot be made. Call it
    /// once.
    public func run() async throws {
        precondition(!running, "BlueZObjectMirror.run() called twice")
        running = true
        defer { sink.finish() }
        let owners = try await connection.subscribe(MatchRule(
            sender: .bus, path: "/org/freedesktop/DBus", interface: .bus, member: "NameOwnerChanged",
            arg0: service.rawValue))
        let signals = try await connection.subscribe(MatchRule(sender: service))
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await message in signals { await self.receive(message) }
            }
            await resync()
            for await message in owners {
                await ownerChanged(message)
            }
            group.cancelAll()
        }
    }

    // MARK: - Queries

    /// The unique name of the bluetoothd the mirror reflects, nil while there is none.
    public var owner: BusName? {
        if case .live(let owner, _, _, _) = state { owner } else { nil }
    }

    /// Whether the mirror holds a snapshot of a running bluetoothd.
    public var isSynchronized: Bool { owner != nil }

    /// Every object with every interface and property, as `GetManagedObjects` would return it.
    public var managedObjects: [ObjectPath: Interfaces] { objects }

    public func properties(at path: ObjectPath, interface: InterfaceName) -> Properties? {
        objects[path]?[interface.rawValue]
    }

    public func adapters() -> [AdapterInfo] {
        paths(with: BlueZService.adapterInterface).map {
            AdapterInfo(path: $0, properties: objects[$0]![BlueZService.adapterInterface.rawValue]!)
        }
    }

    public func adapter(at path: ObjectPath) -> AdapterInfo? {
        properties(at: path, interface: BlueZService.adapterInterface).map { AdapterInfo(path: path, properties: $0) }
    }

    /// Devices, of one adapter or of all.
    public func devices(on adapter: ObjectPath? = nil) -> [DeviceInfo] {
        paths(with: BlueZService.deviceInterface)
            .map { DeviceInfo(path: $0, properties: objects[$0]![BlueZService.deviceInterface.rawValue]!) }
            .filter { adapter == nil || $0.adapter == adapter }
    }

    public func device(at path: ObjectPath) -> DeviceInfo? {
        properties(at: path, interface: BlueZService.deviceInterface).map { DeviceInfo(path: path, properties: $0) }
    }

    /// The remote GATT services below a device (present once `ServicesResolved`).
    public func services(under path: ObjectPath) -> [GattServiceInfo] {
        paths(with: BlueZService.gattServiceInterface, under: path).map {
            GattServiceInfo(path: $0, properties: objects[$0]![BlueZService.gattServiceInterface.rawValue]!)
        }
    }

    /// The remote GATT characteristics below a device or a service.
    public func characteristics(under path: ObjectPath) -> [GattCharacteristicInfo] {
        paths(with: BlueZService.gattCharacteristicInterface, under: path).map {
            GattCharacteristicInfo(path: $0, properties: objects[$0]![BlueZService.gattCharacteristicInterface.rawValue]!)
        }
    }

    /// The characteristic `uuid` of the service `serviceUUID` below `device`, if BlueZ resolved it.
    public func characteristic(_ uuid: String, inService serviceUUID: String, of device: ObjectPath) -> GattCharacteristicInfo? {
        let wanted = BluetoothUUID(uuid)?.full ?? uuid.lowercased()
        let wantedService = BluetoothUUID(serviceUUID)?.full ?? serviceUUID.lowercased()
        let services = Set(services(under: device).filter { $0.uuid == wantedService }.map(\.path))
        return characteristics(under: device).first { $0.uuid == wanted && $0.service.map(services.contains) == true }
    }

    private func paths(with interface: InterfaceName, under root: ObjectPath? = nil) -> [ObjectPath] {
        objects.compactMap { path, interfaces in
            guard interfaces[interface.rawValue] != nil else { return nil }
            if let root, !path.isDescendant(of: root, orEqual: false) { return nil }
            return path
        }.sorted()
    }

    // MARK: - Synchronizing

    /// Takes a snapshot from whoever owns the name now and makes it the mirror, then applies the
    /// signals that arrived meanwhile. Without an owner the mirror stays absent until
    /// `NameOwnerChanged` names one. Other failures are retried with a growing delay.
    private func resync() async {
        generation += 1
        let mine = generation
        var delay: Duration = .seconds(1)
        while !Task.isCancelled {
            state = .syncing
            pending = []
            let reply: DBusMessage
            do {
                reply = try await connection.callMessage(destination: service, path: BlueZService.objectManagerPath,
                                                         interface: .objectManager, member: "GetManagedObjects")
            } catch let error as DBusError where error.name == .serviceUnknown || error.name == .nameHasNoOwner {
                guard mine == generation else { return }
                logger.debug("BlueZ is not running", metadata: ["dbus.name": "\(service)"])
                becomeAbsent()
                return
            } catch {
                guard mine == generation else { return }
                becomeAbsent()
                if error is CancellationError || !connection.isConnected { return }
                logger.warning("GetManagedObjects failed; retrying", metadata: ["error": "\(error)", "retry.in": "\(delay)"])
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(30))
                guard mine == generation else { return }
                continue
            }
            guard mine == generation else { return }
            guard let owner = reply.sender, let snapshot = Self.decodeManagedObjects(reply.body) else {
                logger.warning("GetManagedObjects answered another type than a{oa{sa{sv}}}; retrying",
                               metadata: ["dbus.signature": "\(reply.signature)", "retry.in": "\(delay)"])
                becomeAbsent()
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(30))
                guard mine == generation else { return }
                continue
            }
            let buffered = pending
            pending = []
            install(snapshot, owner: owner, serial: reply.serial)
            for message in buffered { apply(message) }
            return
        }
    }

    private func becomeAbsent() {
        state = .absent
        pending = []
        wakeDeviceWaiters()
    }

    // MARK: - Waiting for a device's state

    /// Returns true once `condition` holds for the device at `path` (nil: the mirror has no such
    /// device), re-checked each time the mirror applies a change; false when `timeout` passes first.
    public func waitForDevice(at path: ObjectPath, timeout: Duration,
                              until condition: @escaping @Sendable (DeviceInfo?) -> Bool) async -> Bool {
        if condition(device(at: path)) { return true }
        nextWaiter += 1
        let id = nextWaiter
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask { await self.park(id, path, condition) }
            group.addTask {
                try? await Task.sleep(for: timeout)
                await self.expire(id)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            expire(id)
            return first
        }
    }

    private func park(_ id: UInt64, _ path: ObjectPath, _ condition: @escaping @Sendable (DeviceInfo?) -> Bool) async -> Bool {
        await withCheckedContinuation { continuation in
            if condition(device(at: path)) {
                continuation.resume(returning: true)
            } else {
                deviceWaiters[id] = (path, condition, continuation)
            }
        }
    }

    private func expire(_ id: UInt64) {
        deviceWaiters.removeValue(forKey: id)?.continuation.resume(returning: false)
    }

    private func wakeDeviceWaiters() {
        for (id, waiter) in deviceWaiters where waiter.condition(device(at: waiter.path)) {
            deviceWaiters[id] = nil
            waiter.continuation.resume(returning: true)
        }
    }

    private func install(_ snapshot: [ObjectPath: Interfaces], owner: BusName, serial: UInt32) {
        objects = snapshot
        state = .live(owner: owner, snapshotSerial: serial, caughtUp: false, tentative: [])
        logger.info("mirroring BlueZ", metadata: ["dbus.unique": "\(owner)", "bluez.objects": "\(snapshot.count)"])
        if synchronizedOnce { sink.yield(.bluezRestarted) }
        synchronizedOnce = true
        for adapter in adapters() { sink.yield(.adapterAdded(adapter)) }
        for device in devices() { sink.yield(.deviceAdded(device)) }
        wakeDeviceWaiters()
    }

    private func ownerChanged(_ message: DBusMessage) async {
        guard message.body.count == 3, message.body[0].string == service.rawValue,
              let old = message.body[1].string, let new = message.body[2].string else { return }
        // Owner changes of one name arrive in order, so the snapshot's owner is either still to be
        // named (a change queued before the snapshot was taken: `new` is it) or leaves in `old`.
        if let current = owner?.rawValue, old == current || (!new.isEmpty && new != current) {
            objects = [:]
            becomeAbsent()
            logger.warning("BlueZ left the bus", metadata: ["dbus.unique": "\(current)"])
            sink.yield(.bluezGone)
        }
        if !new.isEmpty && owner?.rawValue != new {
            await resync()
        }
    }

    // MARK: - Applying signals

    /// Entry point for every `org.bluez` signal, in the order the bus delivered them.
    private func receive(_ message: DBusMessage) {
        if case .syncing = state {
            pending.append(message)
            return
        }
        apply(message)
        if !deviceWaiters.isEmpty { wakeDeviceWaiters() }
    }

    private func apply(_ message: DBusMessage) {
        guard case .live(let liveOwner, let serial, var caughtUp, var tentative) = state, message.sender == liveOwner else { return }
        // Serials wrap at 2³²: compare by distance.
        let older = !caughtUp && Int32(bitPattern: message.serial &- serial) < 0
        if !older && !caughtUp {
            caughtUp = true
            tentative = []
        }
        switch (message.interface, message.member) {
        case (.objectManager?, "InterfacesAdded"?):
            guard message.body.count >= 2, let path = message.body[0].objectPath,
                  let entries = message.body[1].dictEntries else { break }
            for entry in entries {
                guard let interface = entry.key.string else { continue }
                let properties = Self.decodeProperties(entry.value)
                if older {
                    guard objects[path]?[interface] == nil else { continue }
                    tentative.insert(Key(path: path, interface: interface))
                }
                add(path, interface, properties)
            }
        case (.objectManager?, "InterfacesRemoved"?):
            guard message.body.count >= 2, let path = message.body[0].objectPath,
                  let names = message.body[1].arrayElements else { break }
            for name in names.compactMap(\.string) {
                if older {
                    guard tentative.remove(Key(path: path, interface: name)) != nil else { continue }
                }
                remove(path, name)
            }
        case (.properties?, "PropertiesChanged"?):
            guard let path = message.path, message.body.count >= 2, let interface = message.body[0].string else { break }
            if older && !tentative.contains(Key(path: path, interface: interface)) { break }
            let changed = Self.decodeProperties(message.body[1])
            let invalidated = message.body.count >= 3 ? (message.body[2].arrayElements ?? []).compactMap(\.string) : []
            update(path, interface, changed: changed, invalidated: invalidated)
        default:
            break
        }
        state = .live(owner: liveOwner, snapshotSerial: serial, caughtUp: caughtUp, tentative: tentative)
    }

    private func add(_ path: ObjectPath, _ interface: String, _ properties: Properties) {
        let existed = objects[path]?[interface] != nil
        objects[path, default: [:]][interface] = properties
        switch interface {
        case BlueZService.adapterInterface.rawValue:
            let info = AdapterInfo(path: path, properties: properties)
            sink.yield(existed ? .adapterChanged(info, changed: Set(properties.keys)) : .adapterAdded(info))
        case BlueZService.deviceInterface.rawValue:
            let info = DeviceInfo(path: path, properties: properties)
            sink.yield(existed ? .deviceChanged(info, changed: Set(properties.keys)) : .deviceAdded(info))
        default:
            break
        }
    }

    private func remove(_ path: ObjectPath, _ interface: String) {
        guard objects[path]?.removeValue(forKey: interface) != nil else { return }
        if objects[path]?.isEmpty == true { objects[path] = nil }
        switch interface {
        case BlueZService.adapterInterface.rawValue: sink.yield(.adapterRemoved(path))
        case BlueZService.deviceInterface.rawValue: sink.yield(.deviceRemoved(path))
        default: break
        }
    }

    private func update(_ path: ObjectPath, _ interface: String, changed: Properties, invalidated: [String]) {
        // Like bleak: a change for an object the mirror does not hold is dropped.
        guard objects[path]?[interface] != nil else { return }
        for (name, value) in changed { objects[path]![interface]![name] = value }
        for name in invalidated { objects[path]![interface]![name] = nil }
        let names = Set(changed.keys).union(invalidated)
        guard !names.isEmpty, let properties = objects[path]?[interface] else { return }
        switch interface {
        case BlueZService.adapterInterface.rawValue:
            sink.yield(.adapterChanged(AdapterInfo(path: path, properties: properties), changed: names))
        case BlueZService.deviceInterface.rawValue:
            sink.yield(.deviceChanged(DeviceInfo(path: path, properties: properties), changed: names))
        default:
            break
        }
    }

    // MARK: - Decoding

    /// `a{sv}`, variants unwrapped; entries with a non-string key are skipped.
    static func decodeProperties(_ value: DBusValue) -> Properties {
        var out: Properties = [:]
        for entry in value.dictEntries ?? [] {
            guard let name = entry.key.string else { continue }
            out[name] = entry.value.unwrapped
        }
        return out
    }

    /// `a{oa{sa{sv}}}`, nil if the reply has another shape.
    static func decodeManagedObjects(_ body: [DBusValue]) -> [ObjectPath: Interfaces]? {
        guard let first = body.first, case .dictionary(.objectPath, _, let entries) = first else { return nil }
        var out: [ObjectPath: Interfaces] = [:]
        for entry in entries {
            guard let path = entry.key.objectPath else { continue }
            var interfaces: Interfaces = [:]
            for i in entry.value.dictEntries ?? [] {
                guard let name = i.key.string else { continue }
                interfaces[name] = decodeProperties(i.value)
            }
            out[path] = interfaces
        }
        return out
    }
}
