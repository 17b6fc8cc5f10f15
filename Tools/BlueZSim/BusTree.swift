import DBusKit
import Logging
import Synchronization

/// An interface as the simulator declares it: members, and the *specs* of its properties. Which
/// properties exist at a given moment is decided by the values given with it, because BlueZ
/// properties come and go (`RSSI` exists only while a device is in range of a discovery, `Name`
/// only once a name was heard, a characteristic's `Value` only after a read).
struct InterfaceTemplate: Sendable {
    struct PropertySpec: Sendable {
        var name: String
        var type: DBusType
        var setter: DBusProperty.Setter?
        init(_ name: String, _ type: DBusType, setter: DBusProperty.Setter? = nil) {
            self.name = name
            self.type = type
            self.setter = setter
        }
    }

    var name: InterfaceName
    var methods: [DBusMethod] = []
    var properties: [PropertySpec] = []
    var signals: [DBusSignal] = []

    /// The DBusKit declaration: every property of the interface, with its value in `values` or,
    /// for one that does not exist right now, a placeholder.
    ///
    /// DBusKit cannot make a declared property disappear, and re-declaring an interface to add or
    /// drop one would make the object vanish for a moment (a `Connect` in that moment would get
    /// `UnknownObject`). So the object always declares them all; what exists is what the tree
    /// says in `GetManagedObjects`, `InterfacesAdded` and `PropertiesChanged` (a property that
    /// disappears is announced as invalidated), which is what BlueZ clients read. Only a direct
    /// `Properties.Get`/`GetAll` still shows a property BlueZ would omit (docs/simulator.md).
    ///
    /// Every property is declared `EmitsChangedSignal=false` to DBusKit: the tree sends
    /// `PropertiesChanged` itself, because BlueZ announces a report even when the value is
    /// unchanged, and DBusKit only announces changes.
    func declaration(_ values: [String: DBusValue]) -> DBusInterface {
        let declared: [DBusProperty] = properties.map { spec in
            let value = values[spec.name] ?? Self.placeholder(spec.type)
            if let setter = spec.setter {
                return DBusProperty(spec.name, spec.type, value, changeSignal: .none, setter: setter)
            }
            return DBusProperty(spec.name, spec.type, value, changeSignal: .none)
        }
        return DBusInterface(name, methods: methods, properties: declared, signals: signals)
    }

    /// The zero of a property type, for a property that does not exist yet.
    static func placeholder(_ type: DBusType) -> DBusValue {
        switch type {
        case .byte: .byte(0)
        case .boolean: .boolean(false)
        case .int16: .int16(0)
        case .uint16: .uint16(0)
        case .int32: .int32(0)
        case .uint32: .uint32(0)
        case .int64: .int64(0)
        case .uint64: .uint64(0)
        case .double: .double(0)
        case .string: .string("")
        case .objectPath: .objectPath(.root)
        case .signature: .signature(.empty)
        case .array(let element): .array(element: element, [])
        case .dictionary(let key, let value): .dictionary(key: key, value: value, [])
        case .variant: .variant(.string(""))
        case .structure(let fields): .structure(fields.map(placeholder))
        case .unixFD: .unixFD(UnixFD(borrowing: -1))
        }
    }

    /// `a{sv}` of `values` in declaration order.
    func dictionary(_ values: [String: DBusValue]) -> DBusValue {
        let entries = properties.compactMap { spec in
            values[spec.name].map { DBusValue.DictEntry(.string(spec.name), .variant($0)) }
        }
        return .dictionary(key: .string, value: .variant, entries)
    }
}

/// The objects one "bluetoothd" serves on one box bus, with BlueZ's announcement rules.
///
/// The tree keeps a mirror of what clients should see (paths, interfaces, property values) and a
/// queue of bus operations that one consumer (``run()``) applies in order. Callers (the air
/// actor) change the mirror synchronously and never wait for the bus.
///
/// It serves `org.freedesktop.DBus.ObjectManager` at `/` itself, from the mirror, and sends
/// `InterfacesAdded`, `InterfacesRemoved` and `PropertiesChanged` itself. Property changes made
/// before the consumer gets to them are merged into one `PropertiesChanged` per object and
/// interface, as gdbus does in one main-loop iteration; a forced announcement (one advertising
/// report under a discovery filter) always gets its own.
public final class BusTree: Sendable {
    public let connection: DBusConnection
    private let logger: Logger

    private struct InterfaceRecord {
        var template: InterfaceTemplate
        var values: [String: DBusValue]
    }

    private struct ObjectRecord {
        var order: [InterfaceName] = []
        var interfaces: [InterfaceName: InterfaceRecord] = [:]
    }

    private struct ChangeKey: Hashable {
        var path: ObjectPath
        var interface: InterfaceName
    }

    private enum Op {
        case add(ObjectPath, [DBusInterface], announcement: DBusValue, newObject: Bool)
        case remove(ObjectPath, [InterfaceName], wholeObject: Bool, announced: [String])
        case change(Change)
        case signal(ObjectPath, InterfaceName, MemberName, [DBusValue])
        case barrier(CheckedContinuation<Void, Never>)
    }

    private struct Change {
        var path: ObjectPath
        var template: InterfaceTemplate
        var changed: [String: DBusValue]
        var invalidated: Set<String>
    }

    private struct State {
        var objects: [ObjectPath: ObjectRecord] = [:]
        var queue: [Op] = []
        var changeIndex: [ChangeKey: Int] = [:]
        var closed = false
    }

    private let state = Mutex(State())
    private let wakeStream: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation

    /// Interfaces gdbus lists on every object in `GetManagedObjects` and `InterfacesAdded`.
    private static let standardOnEveryObject: [InterfaceName] = [.introspectable, .properties]

    init(connection: DBusConnection, logger: Logger) {
        self.connection = connection
        self.logger = logger
        (wakeStream, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    // MARK: - The mirror

    func exists(_ path: ObjectPath) -> Bool { state.withLock { $0.objects[path] != nil } }

    func hasInterface(_ path: ObjectPath, _ interface: InterfaceName) -> Bool {
        state.withLock { $0.objects[path]?.interfaces[interface] != nil }
    }

    func value(_ path: ObjectPath, _ interface: InterfaceName, _ name: String) -> DBusValue? {
        state.withLock { $0.objects[path]?.interfaces[interface]?.values[name] }
    }

    /// Paths at or below `path`.
    func paths(under path: ObjectPath) -> [ObjectPath] {
        state.withLock { s in s.objects.keys.filter { $0.isDescendant(of: path) }.sorted() }
    }

    /// `GetManagedObjects`: every object, parents first.
    func managedObjects() -> DBusValue {
        let entries: [DBusValue.DictEntry] = state.withLock { s in
            s.objects.keys.sorted().map { path in
                let record = s.objects[path]!
                var interfaces: [DBusValue.DictEntry] = [
                    .init(.string(InterfaceName.introspectable.rawValue), .vardict([:])),
                ]
                for name in record.order {
                    let i = record.interfaces[name]!
                    interfaces.append(.init(.string(name.rawValue), i.template.dictionary(i.values)))
                }
                interfaces.append(.init(.string(InterfaceName.properties.rawValue), .vardict([:])))
                return .init(.objectPath(path), .dictionary(key: .string, value: .dictionary(key: .string, value: .variant), interfaces))
            }
        }
        return .dictionary(key: .objectPath, value: .dictionary(key: .string, value: .dictionary(key: .string, value: .variant)),
                           entries)
    }

    // MARK: - Changes

    /// Adds interfaces at `path` (a new object, or more interfaces on an existing one), announced
    /// with `InterfacesAdded`. Add a parent before its children.
    func add(_ path: ObjectPath, _ interfaces: [(InterfaceTemplate, [String: DBusValue])]) {
        enqueue { s in
            var record = s.objects[path] ?? ObjectRecord()
            let newObject = s.objects[path] == nil
            var declarations: [DBusInterface] = []
            var announced: [DBusValue.DictEntry] = []
            if newObject {
                announced.append(.init(.string(InterfaceName.introspectable.rawValue), .vardict([:])))
            }
            for (template, values) in interfaces where record.interfaces[template.name] == nil {
                record.order.append(template.name)
                record.interfaces[template.name] = InterfaceRecord(template: template, values: values)
                declarations.append(template.declaration(values))
                announced.append(.init(.string(template.name.rawValue), template.dictionary(values)))
            }
            if newObject {
                announced.append(.init(.string(InterfaceName.properties.rawValue), .vardict([:])))
            }
            s.objects[path] = record
            stopMerging(&s)
            guard !declarations.isEmpty else { return nil }
            return .add(path, declarations,
                        announcement: .dictionary(key: .string, value: .dictionary(key: .string, value: .variant), announced),
                        newObject: newObject)
        }
    }

    /// Removes interfaces (or, with nil, the whole object), announced with `InterfacesRemoved`.
    func remove(_ path: ObjectPath, interfaces: [InterfaceName]? = nil) {
        enqueue { s in
            guard var record = s.objects[path] else { return nil }
            let removing = (interfaces ?? record.order).filter { record.interfaces[$0] != nil }
            guard !removing.isEmpty else { return nil }
            for name in removing { record.interfaces[name] = nil }
            record.order.removeAll { removing.contains($0) }
            let whole = record.order.isEmpty
            s.objects[path] = whole ? nil : record
            stopMerging(&s)
            var announced = removing.map(\.rawValue)
            if whole {
                announced = [InterfaceName.introspectable.rawValue] + announced + [InterfaceName.properties.rawValue]
            }
            return .remove(path, removing, wholeObject: whole, announced: announced)
        }
    }

    /// Removes `path` and everything below it, children first.
    func removeSubtree(_ path: ObjectPath) {
        for p in paths(under: path).reversed() { remove(p) }
    }

    /// Sets and clears properties of one interface. A property set to its current value is
    /// announced again only if named in `force` (BlueZ re-announces RSSI with a discovery filter set).
    /// Cleared properties disappear and are announced as invalidated.
    func update(_ path: ObjectPath, _ interface: InterfaceName, set: [String: DBusValue] = [:], clear: [String] = [],
                force: Set<String> = []) {
        enqueue { s in
            guard var record = s.objects[path], var i = record.interfaces[interface] else { return nil }
            var changed: [String: DBusValue] = [:]
            var invalidated: Set<String> = []
            for (name, value) in set where i.template.properties.contains(where: { $0.name == name }) {
                if force.contains(name) || i.values[name] != value {
                    changed[name] = value
                    i.values[name] = value
                }
            }
            for name in clear where i.values[name] != nil && set[name] == nil {
                i.values[name] = nil
                invalidated.insert(name)
            }
            guard !changed.isEmpty || !invalidated.isEmpty else { return nil }
            record.interfaces[interface] = i
            s.objects[path] = record
            let key = ChangeKey(path: path, interface: interface)
            // A forced announcement is one report: it is never merged with another.
            if !force.isEmpty {
                s.changeIndex[key] = nil
                return .change(Change(path: path, template: i.template, changed: changed, invalidated: invalidated))
            }
            if let index = s.changeIndex[key], case .change(var pending) = s.queue[index] {
                for (name, value) in changed {
                    pending.changed[name] = value
                    pending.invalidated.remove(name)
                }
                for name in invalidated {
                    pending.changed[name] = nil
                    pending.invalidated.insert(name)
                }
                s.queue[index] = .change(pending)
                return nil
            }
            s.changeIndex[key] = s.queue.count
            return .change(Change(path: path, template: i.template, changed: changed, invalidated: invalidated))
        }
    }

    /// Makes the next ``update(_:_:set:clear:force:)`` of this interface a `PropertiesChanged` of
    /// its own instead of merging into the pending one (a value that flips and flips back, like
    /// `Connected` on an aborted connection, is announced twice).
    func seal(_ path: ObjectPath, _ interface: InterfaceName) {
        state.withLock { s in s.changeIndex[ChangeKey(path: path, interface: interface)] = nil }
    }

    /// Emits a signal in order with the other changes.
    func emit(_ path: ObjectPath, _ interface: InterfaceName, _ member: MemberName, _ arguments: [DBusValue]) {
        enqueue { s in
            stopMerging(&s)
            return .signal(path, interface, member, arguments)
        }
    }

    /// Returns once everything queued so far is on the bus.
    func sync() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let queued = state.withLock { s -> Bool in
                if s.closed { return false }
                s.queue.append(.barrier(c))
                return true
            }
            if queued { wake.yield() } else { c.resume() }
        }
    }

    /// Forgets the mirror and stops the consumer (the connection is being closed: "bluetoothd"
    /// exits, and its objects vanish with its name, unannounced).
    func close() {
        let barriers = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.closed = true
            s.objects.removeAll()
            s.changeIndex.removeAll()
            let waiting = s.queue.compactMap { op -> CheckedContinuation<Void, Never>? in
                if case .barrier(let c) = op { return c } else { return nil }
            }
            s.queue.removeAll()
            return waiting
        }
        for c in barriers { c.resume() }
        wake.finish()
    }

    private func enqueue(_ body: (inout State) -> Op?) {
        let queued = state.withLock { s -> Bool in
            guard !s.closed, let op = body(&s) else { return false }
            s.queue.append(op)
            return true
        }
        if queued { wake.yield() }
    }

    /// After an added or removed object (or a signal), later property changes must not be merged
    /// into changes queued before it: that would announce them before it (`ServicesResolved`
    /// before the services).
    private func stopMerging(_ s: inout State) {
        s.changeIndex.removeAll(keepingCapacity: true)
    }

    // MARK: - The consumer

    /// `org.freedesktop.DBus.ObjectManager` at `/`, answered from the mirror.
    func objectManagerInterface() -> DBusInterface {
        DBusInterface(.objectManager, methods: [
            DBusMethod("GetManagedObjects", outputs: [DBusArgument("objects", .dictionary(
                key: .objectPath, value: .dictionary(key: .string, value: .dictionary(key: .string, value: .variant))))]) { [weak self] _ in
                guard let self else { throw BlueZError.failed("the service is shutting down") }
                return [self.managedObjects()]
            },
        ], signals: [
            DBusSignal("InterfacesAdded", arguments: [
                DBusArgument("object", .objectPath),
                DBusArgument("interfaces", .dictionary(key: .string, value: .dictionary(key: .string, value: .variant))),
            ]),
            DBusSignal("InterfacesRemoved", arguments: [
                DBusArgument("object", .objectPath), DBusArgument("interfaces", .array(.string)),
            ]),
        ])
    }

    /// Applies the queue until ``close()``.
    func run() async {
        var handles: [ObjectPath: DBusObject] = [:]
        for await _ in wakeStream {
            while true {
                let ops = state.withLock { s -> [Op] in
                    let ops = s.queue
                    s.queue.removeAll(keepingCapacity: true)
                    s.changeIndex.removeAll(keepingCapacity: true)
                    return ops
                }
                if ops.isEmpty { break }
                for op in ops { await apply(op, &handles) }
            }
        }
        // Closed: release anyone still waiting.
        let barriers = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            let waiting = s.queue.compactMap { op -> CheckedContinuation<Void, Never>? in
                if case .barrier(let c) = op { return c } else { return nil }
            }
            s.queue.removeAll()
            return waiting
        }
        for c in barriers { c.resume() }
    }

    private func apply(_ op: Op, _ handles: inout [ObjectPath: DBusObject]) async {
        do {
            switch op {
            case .add(let path, let declarations, let announcement, let newObject):
                if newObject || handles[path] == nil {
                    handles[path] = try await connection.export(declarations, at: path)
                } else {
                    for d in declarations { try await handles[path]!.add(d) }
                }
                try connection.emitSignal(path: .root, interface: .objectManager, member: "InterfacesAdded",
                                          [.objectPath(path), announcement])
            case .remove(let path, let interfaces, let whole, let announced):
                if let handle = handles[path] {
                    if whole {
                        await handle.unexport()
                        handles[path] = nil
                    } else {
                        for i in interfaces { try await handle.remove(i) }
                    }
                }
                try connection.emitSignal(path: .root, interface: .objectManager, member: "InterfacesRemoved",
                                          [.objectPath(path), .strings(announced)])
            case .change(let change):
                guard let handle = handles[change.path] else { return }
                if !change.changed.isEmpty {
                    handle.set(change.changed, interface: change.template.name)
                }
                try connection.emitSignal(path: change.path, interface: .properties, member: "PropertiesChanged", [
                    .string(change.template.name.rawValue),
                    change.template.dictionary(change.changed),
                    .strings(change.invalidated.sorted()),
                ])
            case .signal(let path, let interface, let member, let arguments):
                try connection.emitSignal(path: path, interface: interface, member: member, arguments)
            case .barrier(let c):
                c.resume()
            }
        } catch {
            logger.debug("bus operation failed", metadata: ["error": "\(error)"])
        }
    }
}
