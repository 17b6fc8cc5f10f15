import CDBus
import Logging
import Synchronization

/// The state of one connection that lives on its bus thread: outgoing calls awaiting replies,
/// signal subscriptions, exported objects and their properties, object managers.
///
/// Every method runs on the bus thread (callers go through ``BusThread/submit(_:)``); nothing here
/// is locked except ``state``, which other threads read to learn whether the connection is closed.
final class ConnectionCore: @unchecked Sendable {
    struct SharedState {
        var closed = false
        var disconnectWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }

    let state = Mutex(SharedState())
    let thread: BusThread
    let logger: Logger
    let marshaller = Marshaller()
    private let idCounter = Atomic<UInt64>(0)

    // Outgoing calls.
    private var pendingCalls: [UInt64: (pending: OpaquePointer, context: PendingContext)] = [:]

    // Signal subscriptions and the owners of the well-known names they name as sender.
    private struct Subscription {
        var rule: MatchRule
        var continuation: DBusSignalStream.Continuation
    }
    private var subscriptions: [UInt64: Subscription] = [:]
    /// Signals decoded during this loop turn, in dispatch order, yielded together at the end of the
    /// turn (``flushSignalDeliveries()``): one wake-up of a consumer per turn, not per signal.
    private var deliveries: [(continuation: DBusSignalStream.Continuation, message: DBusMessage)] = []
    var nameOwners: [String: String] = [:]
    private var trackedNames: [String: Int] = [:]

    // Exported objects.
    var objects: [ObjectPath: ExportedObjectState] = [:]
    var managers: Set<ObjectPath> = []
    private struct ChangeKey: Hashable { var path: ObjectPath; var interface: InterfaceName }
    private var changeOrder: [ChangeKey] = []
    private var changes: [ChangeKey: (changed: [String: DBusValue], invalidated: Set<String>)] = [:]

    // Incoming method calls being handled.
    private struct InFlight {
        var message: MessageRef
        var task: Task<Void, Never>?
    }
    private var inFlight: [UInt64: InFlight] = [:]
    private var closing = false
    private var isShutDown = false
    private var drainWaiters: [() -> Void] = []

    init(thread: BusThread, logger: Logger) {
        self.thread = thread
        self.logger = logger
    }

    func nextID() -> UInt64 { idCounter.add(1, ordering: .relaxed).newValue }

    private var connection: OpaquePointer? { isShutDown ? nil : thread.connection }

    // MARK: - Outgoing calls

    final class PendingContext {
        let core: ConnectionCore
        let id: UInt64
        let completion: (Result<DBusMessage, Error>) -> Void
        init(core: ConnectionCore, id: UInt64, completion: @escaping (Result<DBusMessage, Error>) -> Void) {
            self.core = core
            self.id = id
            self.completion = completion
        }
    }

    /// Sends a method call; `completion` runs on the bus thread with the reply, a remote error, a
    /// timeout (`NoReply`) or `Disconnected`.
    func startCall(_ call: OutgoingCall, id: UInt64, unlessFinished box: CallBox? = nil,
                   completion: @escaping (Result<DBusMessage, Error>) -> Void) {
        if let box, box.isFinished { return }
        guard let conn = connection else {
            completion(.failure(DBusError.disconnected()))
            return
        }
        let made = call.path.rawValue.withCString { path in
            call.member.rawValue.withCString { member in
                withOptionalCString(call.destination?.rawValue) { destination in
                    withOptionalCString(call.interface?.rawValue) { interface in
                        dbus_message_new_method_call(destination, path, interface, member)
                    }
                }
            }
        }
        guard let message = made else {
            completion(.failure(DBusError(.noMemory, "cannot allocate a message")))
            return
        }
        defer { dbus_message_unref(message) }
        guard call.arguments.allSatisfy({ $0.conforms(to: $0.type) }),
              marshaller.appendBody(call.arguments, to: message) else {
            completion(.failure(DBusError(.invalidArgs,
                                          "call \(call.member): an argument does not match its own type or has a NUL in a string")))
            return
        }
        var pending: OpaquePointer? = nil
        guard dbus_connection_send_with_reply(conn, message, &pending, call.timeoutMilliseconds) != 0 else {
            completion(.failure(DBusError(.noMemory, "cannot queue the call")))
            return
        }
        guard let pending else {
            // libdbus gives no pending call when the connection is already disconnected.
            completion(.failure(DBusError.disconnected()))
            return
        }
        let context = PendingContext(core: self, id: id, completion: completion)
        pendingCalls[id] = (pending, context)
        dbus_pending_call_set_notify(pending, { pending, data in
            guard let pending, let data else { return }
            let context = Unmanaged<PendingContext>.fromOpaque(data).takeUnretainedValue()
            context.core.completePending(pending, context)
        }, Unmanaged.passRetained(context).toOpaque(), { data in
            guard let data else { return }
            Unmanaged<PendingContext>.fromOpaque(data).release()
        })
    }

    private func completePending(_ pending: OpaquePointer, _ context: PendingContext) {
        guard pendingCalls.removeValue(forKey: context.id) != nil else { return }
        let reply = dbus_pending_call_steal_reply(pending)
        dbus_pending_call_unref(pending)
        guard let reply else {
            context.completion(.failure(DBusError(.noReply, "no reply")))
            return
        }
        let message = DBusMessage(reply, marshaller: marshaller)
        dbus_message_unref(reply)
        if let error = message.error {
            context.completion(.failure(error))
        } else {
            context.completion(.success(message))
        }
    }

    func cancelCall(_ id: UInt64) {
        guard let entry = pendingCalls.removeValue(forKey: id) else { return }
        dbus_pending_call_cancel(entry.pending)
        dbus_pending_call_unref(entry.pending)
        entry.context.completion(.failure(CancellationError()))
    }

    // MARK: - Signals

    func addSubscription(_ id: UInt64, _ rule: MatchRule, _ continuation: DBusSignalStream.Continuation) {
        if isShutDown {
            continuation.finish()
            return
        }
        subscriptions[id] = Subscription(rule: rule, continuation: continuation)
    }

    func removeSubscription(_ id: UInt64) {
        subscriptions[id] = nil
    }

    /// Returns true for the first subscription naming `name`.
    func retainTrackedName(_ name: String) -> Bool {
        trackedNames[name, default: 0] += 1
        return trackedNames[name] == 1
    }

    /// Returns true when the last subscription naming `name` went away.
    func releaseTrackedName(_ name: String) -> Bool {
        guard let count = trackedNames[name] else { return false }
        if count <= 1 {
            trackedNames[name] = nil
            nameOwners[name] = nil
            return true
        }
        trackedNames[name] = count - 1
        return false
    }

    /// Yields the signals decoded during this loop turn to their streams, in dispatch order. Runs at
    /// the end of every turn and on shutdown, before the streams are finished. Bus thread.
    func flushSignalDeliveries() {
        guard !deliveries.isEmpty else { return }
        // `yield` only buffers the element or resumes the waiting consumer's task; it never runs
        // code of ours, so the array cannot change while it is walked.
        for delivery in deliveries { delivery.continuation.yield(delivery.message) }
        deliveries.removeAll(keepingCapacity: true)
    }

    func sendSignal(path: ObjectPath, interface: InterfaceName, member: MemberName, _ arguments: [DBusValue],
                    destination: BusName? = nil) {
        guard let conn = connection else { return }
        let made = path.rawValue.withCString { p in
            interface.rawValue.withCString { i in
                member.rawValue.withCString { m in dbus_message_new_signal(p, i, m) }
            }
        }
        guard let message = made else { return }
        defer { dbus_message_unref(message) }
        if let destination { _ = destination.rawValue.withCString { dbus_message_set_destination(message, $0) } }
        guard marshaller.appendBody(arguments, to: message) else {
            logger.error("dropped signal with malformed arguments", metadata: ["dbus.member": "\(interface).\(member)"])
            return
        }
        dbus_connection_send(conn, message, nil)
    }

    // MARK: - Incoming messages

    /// The connection's filter. Returns true when the message was handled.
    func handle(_ message: OpaquePointer) -> Bool {
        switch dbus_message_get_type(message) {
        case CDBUS_MESSAGE_TYPE_SIGNAL:
            if dbus_message_is_signal(message, "org.freedesktop.DBus.Local", "Disconnected") != 0 {
                shutdown(reason: "the bus closed the connection")
                return true
            }
            if subscriptions.isEmpty && trackedNames.isEmpty { return true }
            let decoded = DBusMessage(message, marshaller: marshaller)
            if decoded.sender == .bus, decoded.member == "NameOwnerChanged", decoded.interface == .bus,
               decoded.body.count == 3, let name = decoded.body[0].string, trackedNames[name] != nil {
                let newOwner = decoded.body[2].string ?? ""
                nameOwners[name] = newOwner.isEmpty ? nil : newOwner
            }
            for subscription in subscriptions.values {
                let owner = subscription.rule.sender.flatMap { nameOwners[$0.rawValue] }
                if subscription.rule.matches(decoded, senderOwner: owner) {
                    deliveries.append((subscription.continuation, decoded))
                }
            }
            return true
        case CDBUS_MESSAGE_TYPE_METHOD_CALL:
            handleMethodCall(message)
            return true
        default:
            // Replies that match no pending call (cancelled, timed out): nothing to do.
            return true
        }
    }

    // MARK: - Method calls to our objects

    private func reply(to call: OpaquePointer, _ values: [DBusValue]) {
        guard let conn = connection, dbus_message_get_no_reply(call) == 0 else { return }
        guard let reply = dbus_message_new_method_return(call) else { return }
        defer { dbus_message_unref(reply) }
        guard marshaller.appendBody(values, to: reply) else {
            replyError(to: call, DBusError(.failed, "the reply could not be encoded"))
            return
        }
        dbus_connection_send(conn, reply, nil)
    }

    private func replyError(to call: OpaquePointer, _ error: DBusError) {
        guard let conn = connection, dbus_message_get_no_reply(call) == 0 else { return }
        let message = cappedErrorMessage(error.message)
        let made = error.name.rawValue.withCString { name in
            message.withCString { text in dbus_message_new_error(call, name, text) }
        }
        guard let reply = made else { return }
        dbus_connection_send(conn, reply, nil)
        dbus_message_unref(reply)
    }

    private func handleMethodCall(_ message: OpaquePointer) {
        let call = DBusMessage(message, marshaller: marshaller, limits: .methodCall)
        guard let path = call.path, let member = call.member else { return }
        if call.exceededLimits {
            let limits = DBusReceiveLimits.methodCall
            return replyError(to: message, DBusError(.limitsExceeded,
                "The call's arguments hold more than \(limits.maxValues) values or \(limits.maxStringBytes) bytes of strings " +
                    "and byte arrays."))
        }
        if closing || isShutDown {
            replyError(to: message, DBusError(.failed, "the service is shutting down"))
            return
        }
        // The interface is optional in a method call (dispatch is then by member): a call without
        // one goes to a standard member unless the object has a method of that name.
        let bare = call.interface == nil && objects[path]?.method(member) == nil
        switch (call.interface, member.rawValue) {
        case (.introspectable?, "Introspect"), (nil, "Introspect"):
            guard call.signature.isEmpty else { return replyInvalidArgs(message, call, expected: .empty, interface: .introspectable) }
            guard let xml = introspect(path) else { return replyError(to: message, unknownObject(path)) }
            reply(to: message, [.string(xml)])
        case (nil, "Get") where bare, (.properties?, "Get"):
            guard call.hasSignature("ss") else { return replyInvalidArgs(message, call, expected: "ss", interface: .properties) }
            propertiesGet(message, path, call.body[0].string ?? "", call.body[1].string ?? "")
        case (nil, "GetAll") where bare, (.properties?, "GetAll"):
            guard call.hasSignature("s") else { return replyInvalidArgs(message, call, expected: "s", interface: .properties) }
            propertiesGetAll(message, path, call.body[0].string ?? "")
        case (nil, "Set") where bare, (.properties?, "Set"):
            guard call.hasSignature("ssv") else { return replyInvalidArgs(message, call, expected: "ssv", interface: .properties) }
            propertiesSet(message, call, path, call.body[0].string ?? "", call.body[1].string ?? "", call.body[2].unwrapped)
        case (.objectManager?, "GetManagedObjects") where managers.contains(path),
             (nil, "GetManagedObjects") where managers.contains(path) && bare:
            guard call.signature.isEmpty else { return replyInvalidArgs(message, call, expected: .empty, interface: .objectManager) }
            reply(to: message, [managedObjects(under: path)])
        // With the Peer interface named, libdbus answers before our filter runs, at any path; these
        // are the same members called without an interface.
        case (nil, "Ping") where bare:
            guard call.signature.isEmpty else { return replyInvalidArgs(message, call, expected: .empty, interface: .peer) }
            reply(to: message, [])
        case (nil, "GetMachineId") where bare:
            guard call.signature.isEmpty else { return replyInvalidArgs(message, call, expected: .empty, interface: .peer) }
            replyMachineID(message)
        default:
            userMethod(message, call, path, member)
        }
    }

    private func unknownObject(_ path: ObjectPath) -> DBusError {
        DBusError(.unknownObject, "Unknown object '\(path)'.")
    }

    /// `interface`: the standard interface that answers, for a call that named none.
    private func replyInvalidArgs(_ message: OpaquePointer, _ call: DBusMessage, expected: Signature,
                                  interface: InterfaceName? = nil) {
        let name = [(call.interface ?? interface)?.rawValue, call.member?.rawValue].compactMap { $0 }.joined(separator: ".")
        replyError(to: message, DBusError(.invalidArgs,
            "Invalid arguments '\(call.signature)' to call \(name)(), expecting '\(expected)'."))
    }

    /// `Peer.GetMachineId`: libdbus's machine ID, or the error libdbus gives when it has none.
    /// `dbus_try_get_local_machine_id`, not `dbus_get_local_machine_id`: on a machine without a
    /// machine ID the latter reports a failed check, which aborts the process by default.
    private func replyMachineID(_ message: OpaquePointer) {
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        guard let id = dbus_try_get_local_machine_id(&error) else {
            let name = error.name.map { String(cString: $0) }.flatMap { try? ErrorName($0) } ?? .failed
            let text = error.message.map { String(cString: $0) } ?? "cannot read the machine ID"
            return replyError(to: message, DBusError(name, text))
        }
        defer { dbus_free(id) }
        reply(to: message, [.string(String(cString: id))])
    }

    /// The interfaces every known path serves (``introspect(_:)`` lists them).
    private static let standardInterfaces: [InterfaceName] = [.introspectable, .properties, .peer, .objectManager]

    private static func isStandardInterface(_ name: String) -> Bool {
        standardInterfaces.contains { $0.rawValue == name }
    }

    private func userMethod(_ message: OpaquePointer, _ call: DBusMessage, _ path: ObjectPath, _ member: MemberName) {
        let standard = Self.standardInterfaces
        guard let object = objects[path] else {
            if let interface = call.interface, standard.contains(interface), introspect(path) != nil {
                return replyError(to: message, DBusError(.unknownMethod, "Unknown method '\(member)' on interface '\(interface)'."))
            }
            return replyError(to: message, unknownObject(path))
        }
        let found: (DBusInterface, DBusMethod)?
        if let interfaceName = call.interface {
            guard let interface = object.interface(interfaceName) else {
                if standard.contains(interfaceName) {
                    return replyError(to: message, DBusError(.unknownMethod, "Unknown method '\(member)' on interface '\(interfaceName)'."))
                }
                return replyError(to: message, DBusError(.unknownInterface, "Unknown interface '\(interfaceName)'."))
            }
            found = interface.method(member).map { (interface, $0) }
        } else {
            found = object.interfaces.lazy.compactMap { i in i.method(member).map { (i, $0) } }.first
        }
        guard let (interface, method) = found else {
            let on = call.interface.map { "on interface '\($0)'" } ?? "on any interface"
            return replyError(to: message, DBusError(.unknownMethod, "Unknown method '\(member)' \(on)."))
        }
        let expected = method.inputSignature
        guard call.signature.rawValue == expected.rawValue else {
            return replyError(to: message, DBusError(.invalidArgs,
                "Invalid arguments '\(call.signature)' to call \(interface.name).\(member)(), expecting '\(expected)'."))
        }
        let invocation = DBusMethodCall(sender: call.sender, path: path, interface: interface.name, member: member,
                                        arguments: call.body)
        let outputTypes = method.outputs.map(\.type)
        let handler = method.handler
        runInFlight(message) { () async -> Result<[DBusValue], DBusError> in
            do {
                let values = try await handler(invocation)
                guard values.count == outputTypes.count,
                      zip(values, outputTypes).allSatisfy({ $0.conforms(to: $1) && $0.hasValidStrings }) else {
                    return .failure(DBusError(.failed,
                        "internal error: \(interface.name).\(member) produced '\(Signature(values.map(\.type)))', " +
                            "declared '\(Signature(outputTypes))'"))
                }
                return .success(values)
            } catch {
                return .failure(ConnectionCore.dbusError(from: error))
            }
        }
    }

    static func dbusError(from error: Error) -> DBusError {
        if let convertible = error as? DBusErrorConvertible { return convertible.dbusError }
        if error is CancellationError { return DBusError(.failed, "the call was cancelled: the service is shutting down") }
        return DBusError(.failed, String(describing: error))
    }

    /// Runs an async handler for an incoming call and replies when it finishes.
    private func runInFlight(_ message: OpaquePointer,
                             _ body: @escaping @Sendable () async -> Result<[DBusValue], DBusError>,
                             then: (@Sendable (ConnectionCore, [DBusValue]) -> Void)? = nil) {
        let id = nextID()
        inFlight[id] = InFlight(message: MessageRef(retaining: message), task: nil)
        let thread = self.thread
        let task = Task { [self] in
            let result = await body()
            thread.submit { [self] in
                guard let entry = inFlight.removeValue(forKey: id) else { return }
                defer { if inFlight.isEmpty { runDrainWaiters() } }
                switch result {
                case .success(let values):
                    then?(self, values)
                    reply(to: entry.message.pointer, then == nil ? values : [])
                case .failure(let error):
                    replyError(to: entry.message.pointer, error)
                }
            }
        }
        inFlight[id]?.task = task
    }

    // MARK: - org.freedesktop.DBus.Properties

    private func lookUpInterface(_ message: OpaquePointer, _ path: ObjectPath, _ name: String) -> (ExportedObjectState, DBusInterface)? {
        guard let object = objects[path] else {
            replyError(to: message, unknownObject(path))
            return nil
        }
        guard let interfaceName = try? InterfaceName(name), let interface = object.interface(interfaceName) else {
            replyError(to: message, DBusError(.unknownInterface, "Unknown interface '\(echoed(name))'."))
            return nil
        }
        return (object, interface)
    }

    private func propertiesGet(_ message: OpaquePointer, _ path: ObjectPath, _ interfaceName: String, _ name: String) {
        // The standard interfaces have no properties (GetAll returns {} for them).
        if Self.isStandardInterface(interfaceName), introspect(path) != nil {
            return replyError(to: message, DBusError(.unknownProperty,
                                                     "Unknown property '\(echoed(name))' on interface '\(echoed(interfaceName))'."))
        }
        guard let (object, interface) = lookUpInterface(message, path, interfaceName) else { return }
        guard interface.property(name) != nil, let value = object.value(interface.name, name) else {
            return replyError(to: message, DBusError(.unknownProperty,
                                                     "Unknown property '\(echoed(name))' on interface '\(echoed(interfaceName))'."))
        }
        reply(to: message, [.variant(value)])
    }

    private func propertiesGetAll(_ message: OpaquePointer, _ path: ObjectPath, _ interfaceName: String) {
        if Self.isStandardInterface(interfaceName), introspect(path) != nil {
            reply(to: message, [.vardict([:])])
            return
        }
        guard let (object, interface) = lookUpInterface(message, path, interfaceName) else { return }
        reply(to: message, [object.allProperties(interface.name)])
    }

    private func propertiesSet(_ message: OpaquePointer, _ call: DBusMessage, _ path: ObjectPath,
                               _ interfaceName: String, _ name: String, _ value: DBusValue) {
        guard let (_, interface) = lookUpInterface(message, path, interfaceName) else { return }
        guard let property = interface.property(name) else {
            return replyError(to: message, DBusError(.unknownProperty,
                                                     "Unknown property '\(echoed(name))' on interface '\(echoed(interfaceName))'."))
        }
        guard property.access == .readWrite, let setter = property.setter else {
            return replyError(to: message, DBusError(.propertyReadOnly, "Property '\(echoed(name))' is not writable."))
        }
        guard value.conforms(to: property.type) else {
            return replyError(to: message, DBusError(.invalidArgs,
                "Invalid type '\(value.type)' for property '\(echoed(name))', expecting '\(property.type)'."))
        }
        let interfaceID = interface.name
        runInFlight(message, { () async -> Result<[DBusValue], DBusError> in
            do {
                let stored = try await setter(value)
                guard stored.conforms(to: property.type) else {
                    return .failure(DBusError(.failed, "internal error: setter for '\(name)' returned '\(stored.type)'"))
                }
                return .success([stored])
            } catch {
                return .failure(ConnectionCore.dbusError(from: error))
            }
        }, then: { core, stored in
            core.setProperty(path: path, interface: interfaceID, name: name, value: stored[0])
        })
    }

    /// Stores a property value and queues its change announcement. Bus thread.
    func setProperty(path: ObjectPath, interface: InterfaceName, name: String, value: DBusValue) {
        guard var object = objects[path], let declaration = object.interface(interface)?.property(name) else {
            logger.warning("set of an unknown property ignored",
                           metadata: ["dbus.path": "\(path)", "dbus.property": "\(interface).\(name)"])
            return
        }
        guard value.conforms(to: declaration.type) else {
            logger.error("set of a property with a value of the wrong type ignored",
                         metadata: ["dbus.property": "\(interface).\(name)", "dbus.type": "\(value.type)"])
            return
        }
        if object.values[interface]?[name] == value { return }
        object.values[interface, default: [:]][name] = value
        objects[path] = object
        let key = ChangeKey(path: path, interface: interface)
        switch declaration.changeSignal {
        case .emits:
            if changes[key] == nil { changeOrder.append(key); changes[key] = ([:], []) }
            changes[key]!.changed[name] = value
        case .invalidates:
            if changes[key] == nil { changeOrder.append(key); changes[key] = ([:], []) }
            changes[key]!.invalidated.insert(name)
        case .const, .none:
            break
        }
    }

    /// Sends the `PropertiesChanged` batched during this loop turn. Bus thread.
    func flushPropertyChanges() {
        guard !changeOrder.isEmpty else { return }
        let order = changeOrder
        let batch = changes
        changeOrder.removeAll(keepingCapacity: true)
        changes.removeAll(keepingCapacity: true)
        for key in order {
            guard let change = batch[key], objects[key.path]?.interface(key.interface) != nil else { continue }
            sendSignal(path: key.path, interface: .properties, member: "PropertiesChanged", [
                .string(key.interface.rawValue),
                .vardict(change.changed),
                .strings(change.invalidated.sorted()),
            ])
        }
    }

    // MARK: - Export and ObjectManager

    func export(_ interfaces: [DBusInterface], at path: ObjectPath) throws(DBusError) {
        guard !isShutDown else { throw DBusError.disconnected() }
        var object = objects[path] ?? ExportedObjectState()
        for interface in interfaces {
            guard object.interface(interface.name) == nil else {
                throw DBusError(.failed, "interface \(interface.name) is already exported at \(path)")
            }
            object.interfaces.append(interface)
            object.values[interface.name] = Dictionary(uniqueKeysWithValues: interface.properties.map { ($0.name, $0.initialValue) })
        }
        objects[path] = object
        if let manager = manager(above: path) {
            flushPropertyChanges()
            var added: [DBusValue.DictEntry] = []
            for interface in interfaces {
                added.append(.init(.string(interface.name.rawValue), object.allProperties(interface.name)))
            }
            sendSignal(path: manager, interface: .objectManager, member: "InterfacesAdded", [
                .objectPath(path),
                .dictionary(key: .string, value: .dictionary(key: .string, value: .variant), added),
            ])
        }
    }

    /// Removes some interfaces of an object, or the whole object (`interfaces` nil).
    func unexport(_ path: ObjectPath, interfaces: [InterfaceName]?) {
        guard var object = objects[path] else { return }
        let removing = interfaces ?? object.interfaces.map(\.name)
        let removed = removing.filter { object.interface($0) != nil }
        guard !removed.isEmpty else { return }
        flushPropertyChanges()
        object.interfaces.removeAll { removed.contains($0.name) }
        for name in removed { object.values[name] = nil }
        objects[path] = object.interfaces.isEmpty ? nil : object
        if let manager = manager(above: path) {
            sendSignal(path: manager, interface: .objectManager, member: "InterfacesRemoved", [
                .objectPath(path), .strings(removed.map(\.rawValue)),
            ])
        }
    }

    /// The nearest object manager strictly above `path`.
    private func manager(above path: ObjectPath) -> ObjectPath? {
        var current = path.parent
        while let candidate = current {
            if managers.contains(candidate) { return candidate }
            current = candidate.parent
        }
        return nil
    }

    private func managedObjects(under manager: ObjectPath) -> DBusValue {
        let entries = objects.keys.filter { $0.isDescendant(of: manager, orEqual: false) }.sorted().map { path in
            DBusValue.DictEntry(.objectPath(path), objects[path]!.allInterfaces())
        }
        return .dictionary(key: .objectPath, value: .dictionary(key: .string, value: .dictionary(key: .string, value: .variant)), entries)
    }

    /// Introspection XML for `path`, or nil if nothing is exported at or below it.
    func introspect(_ path: ObjectPath) -> String? {
        var children = Set<String>()
        let prefixCount = path.rawValue == "/" ? 1 : path.rawValue.count + 1
        for other in Set(objects.keys).union(managers) where other.isDescendant(of: path, orEqual: false) {
            let rest = other.rawValue.dropFirst(prefixCount)
            children.insert(String(rest.prefix { $0 != "/" }))
        }
        let object = objects[path]
        guard object != nil || managers.contains(path) || !children.isEmpty || path == .root else { return nil }
        var xml = StandardInterfaces.doctype + "<node>\n"
        for interface in object?.interfaces ?? [] { xml += interface.introspectionXML() }
        xml += StandardInterfaces.introspectable.introspectionXML()
        xml += StandardInterfaces.peer.introspectionXML()
        xml += StandardInterfaces.properties.introspectionXML()
        if managers.contains(path) { xml += StandardInterfaces.objectManager.introspectionXML() }
        for child in children.sorted() { xml += " <node name=\"\(child)\"/>\n" }
        xml += "</node>\n"
        return xml
    }

    // MARK: - Shutdown

    /// Runs `body` once no incoming call is being handled (at once if none is).
    func notifyWhenDrained(_ body: @escaping () -> Void) {
        if inFlight.isEmpty { body() } else { drainWaiters.append(body) }
    }

    private func runDrainWaiters() {
        let waiters = drainWaiters
        drainWaiters.removeAll()
        for waiter in waiters { waiter() }
    }

    /// Refuses new incoming calls from now on; returns the handlers still running.
    func beginClosing() -> [Task<Void, Never>] {
        closing = true
        return inFlight.values.compactMap(\.task)
    }

    /// Answers what is left, fails outstanding calls, ends the streams and stops the bus thread,
    /// which then closes and releases the connection. Idempotent.
    func shutdown(reason: String) {
        guard !isShutDown else { return }
        for entry in inFlight.values {
            entry.task?.cancel()
            replyError(to: entry.message.pointer, DBusError(.failed, "the service is shutting down"))
        }
        inFlight.removeAll()
        runDrainWaiters()
        flushPropertyChanges()
        let conn = thread.connection
        if let conn { dbus_connection_flush(conn) }
        isShutDown = true
        let calls = pendingCalls
        pendingCalls.removeAll()
        for entry in calls.values {
            dbus_pending_call_cancel(entry.pending)
            dbus_pending_call_unref(entry.pending)
            entry.context.completion(.failure(DBusError.disconnected(reason)))
        }
        flushSignalDeliveries()
        let streams = subscriptions.values.map(\.continuation)
        subscriptions.removeAll()
        for stream in streams { stream.finish() }
        thread.filter = { _ in true }
        thread.endOfTurn = {}
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.closed = true
            defer { state.disconnectWaiters.removeAll() }
            return Array(state.disconnectWaiters.values)
        }
        for waiter in waiters { waiter.resume() }
        thread.stop()
    }
}

/// An exported object's interfaces and current property values. Bus thread.
struct ExportedObjectState {
    var interfaces: [DBusInterface] = []
    var values: [InterfaceName: [String: DBusValue]] = [:]

    func interface(_ name: InterfaceName) -> DBusInterface? { interfaces.first { $0.name == name } }

    func method(_ member: MemberName) -> DBusMethod? {
        interfaces.lazy.compactMap { $0.method(member) }.first
    }

    func value(_ interface: InterfaceName, _ name: String) -> DBusValue? { values[interface]?[name] }

    /// `a{sv}` of one interface's properties, in declaration order.
    func allProperties(_ interface: InterfaceName) -> DBusValue {
        let declared = self.interface(interface)?.properties ?? []
        let entries = declared.compactMap { p in
            values[interface]?[p.name].map { DBusValue.DictEntry(.string(p.name), .variant($0)) }
        }
        return .dictionary(key: .string, value: .variant, entries)
    }

    /// `a{sa{sv}}` of all interfaces.
    func allInterfaces() -> DBusValue {
        .dictionary(key: .string, value: .dictionary(key: .string, value: .variant),
                    interfaces.map { .init(.string($0.name.rawValue), allProperties($0.name)) })
    }
}

func withOptionalCString<R>(_ s: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let s else { return body(nil) }
    return s.withCString { body($0) }
}


/// The most of a caller's string an error message repeats: `Properties.Get` and `GetAll` take
/// names of any length (a D-Bus string may be 128 MiB), and an error must not echo them whole.
let maxEchoedLength = 128
/// The longest error message sent, whatever a handler wrote.
let maxErrorMessageLength = 1024

/// `text` as an error message may quote it: at most ``maxEchoedLength`` characters, then "…".
func echoed(_ text: some StringProtocol) -> String {
    text.count <= maxEchoedLength ? String(text) : String(text.prefix(maxEchoedLength)) + "…"
}

/// `message`, cut to at most ``maxErrorMessageLength`` characters in all, the note of how much was
/// left out included.
func cappedErrorMessage(_ message: String) -> String {
    guard message.count > maxErrorMessageLength else { return message }
    // The note, "… (N more characters)", takes at most 32 characters for any message a D-Bus
    // string can hold (N below 10⁹).
    let kept = maxErrorMessageLength - 32
    return message.prefix(kept) + "… (\(message.count - kept) more characters)"
}
