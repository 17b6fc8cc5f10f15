import CDBus
import Foundation
import Logging
import Synchronization

/// Where to connect.
public enum BusAddress: Sendable, Hashable, CustomStringConvertible {
    /// The system bus (`DBUS_SYSTEM_BUS_ADDRESS`, or `/run/dbus/system_bus_socket`).
    case system
    /// The session bus (`DBUS_SESSION_BUS_ADDRESS`).
    case session
    /// An explicit address such as `unix:path=/tmp/box1/bus`.
    case address(String)

    /// `system`, `session`, or a D-Bus address (which must contain `:`).
    public init(parsing text: String) throws(DBusError) {
        switch text {
        case "system": self = .system
        case "session": self = .session
        default:
            guard text.contains(":"), !text.hasPrefix(":") else {
                throw DBusError(.badAddress,
                                "'\(text)' is not 'system', 'session' or a D-Bus address such as unix:path=/run/dbus/system_bus_socket")
            }
            self = .address(text)
        }
    }

    public var description: String {
        switch self {
        case .system: "system"
        case .session: "session"
        case .address(let a): a
        }
    }
}

/// Flags for `RequestName`.
public struct RequestNameFlags: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let allowReplacement = RequestNameFlags(rawValue: 1)
    public static let replaceExisting = RequestNameFlags(rawValue: 2)
    public static let doNotQueue = RequestNameFlags(rawValue: 4)
}

public enum RequestNameReply: UInt32, Sendable {
    case primaryOwner = 1, inQueue = 2, exists = 3, alreadyOwner = 4
}

public typealias DBusSignalStream = AsyncStream<DBusMessage>

/// A connection to a message bus.
///
/// All libdbus work happens on the connection's own bus thread (see ``BusThread``); every method
/// here is safe to call from any task. Remote errors surface as ``DBusError`` with the remote error
/// name; a call on a closed connection fails with `org.freedesktop.DBus.Error.Disconnected`.
public final class DBusConnection: Sendable {
    let thread: BusThread
    let core: ConnectionCore
    /// Our unique name on the bus, such as `:1.42`.
    public let uniqueName: BusName
    public let address: BusAddress

    private init(thread: BusThread, core: ConnectionCore, uniqueName: BusName, address: BusAddress) {
        self.thread = thread
        self.core = core
        self.uniqueName = uniqueName
        self.address = address
    }

    /// Connects and registers with the bus (`Hello`). Throws with libdbus's error name and message
    /// (for example `org.freedesktop.DBus.Error.FileNotFound` for a missing socket).
    public static func connect(to address: BusAddress,
                               logger: Logger = Logger(label: "dbuskit")) async throws(DBusError) -> DBusConnection {
        dbus_threads_init_default()
        let thread = try BusThread()
        let core = ConnectionCore(thread: thread, logger: logger)
        try await thread.start(name: "dbus \(address)") {
            Result { () throws(DBusError) -> OpaquePointer in try openConnection(address) }
        }
        thread.filter = { [core] message in core.handle(message) }
        thread.endOfTurn = { [core] in
            core.flushSignalDeliveries()
            core.flushPropertyChanges()
        }
        let unique = thread.connection.flatMap { dbus_bus_get_unique_name($0) }.map { String(cString: $0) } ?? ":0.0"
        return DBusConnection(thread: thread, core: core, uniqueName: BusName(unchecked: unique), address: address)
    }

    /// Bus thread: open, authenticate, `Hello`.
    private static func openConnection(_ address: BusAddress) throws(DBusError) -> OpaquePointer {
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        func failure() -> DBusError {
            let name = error.name.map { String(cString: $0) } ?? ErrorName.failed.rawValue
            let message = error.message.map { String(cString: $0) } ?? "cannot connect to the bus"
            return DBusError((try? ErrorName(name)) ?? .failed, message)
        }
        let conn: OpaquePointer
        switch address {
        case .system, .session:
            guard let c = dbus_bus_get_private(address == .system ? DBUS_BUS_SYSTEM : DBUS_BUS_SESSION, &error) else {
                throw failure()
            }
            conn = c
        case .address(let text):
            guard let c = dbus_connection_open_private(text, &error) else { throw failure() }
            if dbus_bus_register(c, &error) == 0 {
                dbus_connection_close(c)
                dbus_connection_unref(c)
                throw failure()
            }
            conn = c
        }
        dbus_connection_set_exit_on_disconnect(conn, 0)
        return conn
    }

    // MARK: - Running things on the bus thread

    func onBus<T: Sendable>(_ body: @escaping @Sendable (ConnectionCore) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let accepted = thread.submit { [core] in
                do { continuation.resume(returning: try body(core)) } catch { continuation.resume(throwing: error) }
            }
            if !accepted { continuation.resume(throwing: DBusError.disconnected()) }
        }
    }

    // MARK: - Method calls

    /// Calls a method and returns the whole reply message.
    public func callMessage(destination: BusName?, path: ObjectPath, interface: InterfaceName?, member: MemberName,
                            _ arguments: [DBusValue] = [], timeout: Duration = .seconds(25)) async throws -> DBusMessage {
        let request = OutgoingCall(destination: destination, path: path, interface: interface, member: member,
                                   arguments: arguments, timeout: timeout)
        let box = CallBox()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                box.attach(continuation)
                let accepted = thread.submit { [core] in
                    core.startCall(request, id: box.id, unlessFinished: box) { box.complete($0) }
                }
                if !accepted { box.complete(.failure(DBusError.disconnected())) }
            }
        } onCancel: {
            box.complete(.failure(CancellationError()))
            thread.submit { [core] in core.cancelCall(box.id) }
        }
    }

    /// Calls a method and returns the reply's arguments.
    public func call(destination: BusName?, path: ObjectPath, interface: InterfaceName?, member: MemberName,
                     _ arguments: [DBusValue] = [], timeout: Duration = .seconds(25)) async throws -> [DBusValue] {
        try await callMessage(destination: destination, path: path, interface: interface, member: member,
                              arguments, timeout: timeout).body
    }

    /// Calls a method on the bus itself (`org.freedesktop.DBus`).
    public func callBus(_ member: MemberName, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await call(destination: .bus, path: "/org/freedesktop/DBus", interface: .bus, member: member, arguments)
    }

    // MARK: - Properties of remote objects

    public func getProperty(destination: BusName, path: ObjectPath, interface: InterfaceName, name: String,
                            timeout: Duration = .seconds(25)) async throws -> DBusValue {
        let reply = try await call(destination: destination, path: path, interface: .properties, member: "Get",
                                   [.string(interface.rawValue), .string(name)], timeout: timeout)
        guard let first = reply.first, case .variant(let value) = first else {
            throw DBusError(.invalidSignature, "Properties.Get returned '\(Signature(reply.map(\.type)))', expected 'v'")
        }
        return value
    }

    public func getAllProperties(destination: BusName, path: ObjectPath, interface: InterfaceName,
                                 timeout: Duration = .seconds(25)) async throws -> [String: DBusValue] {
        let reply = try await call(destination: destination, path: path, interface: .properties, member: "GetAll",
                                   [.string(interface.rawValue)], timeout: timeout)
        guard let first = reply.first, let dict = first.stringKeyedDictionary else {
            throw DBusError(.invalidSignature, "Properties.GetAll returned '\(Signature(reply.map(\.type)))', expected 'a{sv}'")
        }
        return dict.mapValues(\.unwrapped)
    }

    public func setProperty(destination: BusName, path: ObjectPath, interface: InterfaceName, name: String,
                            value: DBusValue, timeout: Duration = .seconds(25)) async throws {
        _ = try await call(destination: destination, path: path, interface: .properties, member: "Set",
                           [.string(interface.rawValue), .string(name), .variant(value)], timeout: timeout)
    }

    // MARK: - Names

    public func requestName(_ name: BusName, flags: RequestNameFlags = [.doNotQueue]) async throws -> RequestNameReply {
        let reply = try await callBus("RequestName", [.string(name.rawValue), .uint32(flags.rawValue)])
        guard case .uint32(let code)? = reply.first, let result = RequestNameReply(rawValue: code) else {
            throw DBusError(.failed, "unexpected RequestName reply \(reply)")
        }
        return result
    }

    public func releaseName(_ name: BusName) async throws {
        _ = try await callBus("ReleaseName", [.string(name.rawValue)])
    }

    /// The unique name owning `name`, or nil when nobody owns it.
    public func nameOwner(of name: BusName) async throws -> BusName? {
        do {
            let reply = try await callBus("GetNameOwner", [.string(name.rawValue)])
            return reply.first?.string.map { BusName(unchecked: $0) }
        } catch let error as DBusError where error.name == .nameHasNoOwner {
            return nil
        }
    }

    // MARK: - Signals

    /// Subscribes to signals matching `rule`. The match rule is installed on the bus before this
    /// returns, so nothing sent after the call is missed. The subscription and its match rule end
    /// when the consumer stops iterating (or the stream is dropped).
    public func subscribe(_ rule: MatchRule,
                          bufferingPolicy: DBusSignalStream.Continuation.BufferingPolicy = .unbounded) async throws -> DBusSignalStream {
        if let sender = rule.sender, !sender.isUnique, sender != .bus {
            try await trackOwner(of: sender)
        }
        let (stream, continuation) = DBusSignalStream.makeStream(bufferingPolicy: bufferingPolicy)
        let id = core.nextID()
        let accepted = thread.submit { [core] in core.addSubscription(id, rule, continuation) }
        guard accepted else { throw DBusError.disconnected() }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            self.thread.submit { [core = self.core] in core.removeSubscription(id) }
            Task { [self] in
                _ = try? await self.callBus("RemoveMatch", [.string(rule.description)])
                if let sender = rule.sender, !sender.isUnique, sender != .bus {
                    try? await self.untrackOwner(of: sender)
                }
            }
        }
        do {
            _ = try await callBus("AddMatch", [.string(rule.description)])
        } catch {
            continuation.finish()
            throw error
        }
        return stream
    }

    private func ownerRule(_ name: BusName) -> MatchRule {
        MatchRule(sender: .bus, path: "/org/freedesktop/DBus", interface: .bus, member: "NameOwnerChanged", arg0: name.rawValue)
    }

    /// Keeps the owner of a well-known name current so rules naming it as sender match locally.
    private func trackOwner(of name: BusName) async throws {
        let first = try await onBus { core in core.retainTrackedName(name.rawValue) }
        guard first else { return }
        _ = try await callBus("AddMatch", [.string(ownerRule(name).description)])
        // The reply is applied on the bus thread in arrival order with NameOwnerChanged signals.
        let request = OutgoingCall(destination: .bus, path: "/org/freedesktop/DBus", interface: .bus,
                                   member: "GetNameOwner", arguments: [.string(name.rawValue)], timeout: .seconds(25))
        let _: Void = try await withCheckedThrowingContinuation { continuation in
            let accepted = thread.submit { [core] in
                core.startCall(request, id: core.nextID()) { result in
                    if case .success(let reply) = result, let owner = reply.body.first?.string {
                        core.nameOwners[name.rawValue] = owner
                    }
                    continuation.resume()
                }
            }
            if !accepted { continuation.resume(throwing: DBusError.disconnected()) }
        }
    }

    private func untrackOwner(of name: BusName) async throws {
        let last = try await onBus { core in core.releaseTrackedName(name.rawValue) }
        if last { _ = try await callBus("RemoveMatch", [.string(ownerRule(name).description)]) }
    }

    /// Emits a signal. `arguments` must be well-formed values (checked before libdbus sees them).
    public func emitSignal(path: ObjectPath, interface: InterfaceName, member: MemberName, _ arguments: [DBusValue] = [],
                           destination: BusName? = nil) throws(DBusError) {
        guard arguments.allSatisfy({ $0.conforms(to: $0.type) && $0.hasValidStrings }) else {
            throw DBusError(.invalidArgs, "signal \(interface).\(member): a value does not match its own type or has a NUL in a string")
        }
        let accepted = thread.submit { [core] in
            core.flushPropertyChanges()
            core.sendSignal(path: path, interface: interface, member: member, arguments, destination: destination)
        }
        if !accepted { throw DBusError.disconnected() }
    }

    // MARK: - Exported objects

    /// Exports an object with `interfaces` at `path`. If an object manager sits above `path`, it
    /// emits `InterfacesAdded`. Export objects before requesting a well-known name, so nobody sees
    /// the name without them.
    public func export(_ interfaces: [DBusInterface], at path: ObjectPath) async throws -> DBusObject {
        try await onBus { core in try core.export(interfaces, at: path) }
        return DBusObject(path: path, connection: self)
    }

    /// Serves `org.freedesktop.DBus.ObjectManager` at `path` for every object exported below it.
    public func addObjectManager(at path: ObjectPath) async throws {
        _ = try await onBus { core in core.managers.insert(path) }
    }

    // MARK: - Lifecycle

    /// Whether the connection is still open.
    public var isConnected: Bool { core.state.withLock { !$0.closed } }

    /// Returns when the connection is closed, by ``close(gracePeriod:)`` or by the bus going away,
    /// or when the calling task is cancelled.
    public func waitUntilDisconnected() async {
        let id = core.nextID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let waitNow = core.state.withLock { state -> Bool in
                    if state.closed || Task.isCancelled { return false }
                    state.disconnectWaiters[id] = continuation
                    return true
                }
                if !waitNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = core.state.withLock { $0.disconnectWaiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }

    /// Closes the connection cleanly: refuses new method calls, lets calls being handled finish
    /// (up to `gracePeriod`, then answers them with an error), flushes what is queued, closes the
    /// socket, fails outstanding outgoing calls with `Disconnected` and ends every signal stream.
    public func close(gracePeriod: Duration = .seconds(2)) async {
        guard let tasks = try? await onBus({ core in core.beginClosing() }) else { return }
        if !tasks.isEmpty {
            // Whichever comes first: every handler has replied, or the grace period is over. A
            // handler that ignores cancellation cannot hold the shutdown up.
            let once = ResumeOnce()
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                once.set(continuation)
                let accepted = thread.submit { [core] in core.notifyWhenDrained { once.resume() } }
                if !accepted { once.resume() }
                let timer = Task {
                    try? await Task.sleep(for: gracePeriod)
                    once.resume()
                }
                once.onResume { timer.cancel() }
            }
            for task in tasks { task.cancel() }
        }
        _ = try? await onBus { core in core.shutdown(reason: "the connection was closed") }
    }
}

/// A handle to an exported object.
public final class DBusObject: Sendable {
    public let path: ObjectPath
    let connection: DBusConnection

    init(path: ObjectPath, connection: DBusConnection) {
        self.path = path
        self.connection = connection
    }

    /// Sets a property. A change is announced with `PropertiesChanged` at the end of the bus
    /// thread's turn, batched with the other changes of that turn, as the property's declaration
    /// says. Setting the same value again emits nothing.
    public func set(_ name: String, _ value: DBusValue, interface: InterfaceName) {
        let path = self.path
        connection.thread.submit { [core = connection.core] in
            core.setProperty(path: path, interface: interface, name: name, value: value)
        }
    }

    /// Sets several properties of one interface together: they are announced in one
    /// `PropertiesChanged`.
    public func set(_ values: [String: DBusValue], interface: InterfaceName) {
        let path = self.path
        connection.thread.submit { [core = connection.core] in
            for (name, value) in values.sorted(by: { $0.key < $1.key }) {
                core.setProperty(path: path, interface: interface, name: name, value: value)
            }
        }
    }

    /// The current value of a property, as clients see it.
    public func value(of name: String, interface: InterfaceName) async -> DBusValue? {
        let path = self.path
        return try? await connection.onBus { core in core.objects[path]?.value(interface, name) }
    }

    /// Emits a signal declared on `interface`.
    public func emit(_ signal: MemberName, interface: InterfaceName, _ arguments: [DBusValue] = []) throws(DBusError) {
        try connection.emitSignal(path: path, interface: interface, member: signal, arguments)
    }

    /// Adds an interface (announced with `InterfacesAdded`).
    public func add(_ interface: DBusInterface) async throws {
        let path = self.path
        try await connection.onBus { core in try core.export([interface], at: path) }
    }

    /// Removes an interface (announced with `InterfacesRemoved`).
    public func remove(_ interface: InterfaceName) async throws {
        let path = self.path
        try await connection.onBus { core in core.unexport(path, interfaces: [interface]) }
    }

    /// Removes the object (announced with `InterfacesRemoved`).
    public func unexport() async {
        let path = self.path
        _ = try? await connection.onBus { core in core.unexport(path, interfaces: nil) }
    }
}

/// Resumes a continuation exactly once, whoever asks first.
final class ResumeOnce: Sendable {
    private let state = Mutex<(continuation: CheckedContinuation<Void, Never>?, done: Bool,
                               hooks: [@Sendable () -> Void])>((nil, false, []))

    func set(_ continuation: CheckedContinuation<Void, Never>) {
        let resumeNow = state.withLock { s -> Bool in
            if s.done { return true }
            s.continuation = continuation
            return false
        }
        if resumeNow { continuation.resume() }
    }

    func onResume(_ hook: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { s -> Bool in
            if s.done { return true }
            s.hooks.append(hook)
            return false
        }
        if runNow { hook() }
    }

    func resume() {
        let (continuation, hooks) = state.withLock { s -> (CheckedContinuation<Void, Never>?, [@Sendable () -> Void]) in
            if s.done { return (nil, []) }
            s.done = true
            defer { s.continuation = nil; s.hooks = [] }
            return (s.continuation, s.hooks)
        }
        continuation?.resume()
        for hook in hooks { hook() }
    }
}

/// A method call on its way out.
struct OutgoingCall: Sendable {
    var destination: BusName?
    var path: ObjectPath
    var interface: InterfaceName?
    var member: MemberName
    var arguments: [DBusValue]
    var timeout: Duration

    var timeoutMilliseconds: Int32 {
        let c = timeout.components
        let ms = c.seconds * 1000 + c.attoseconds / 1_000_000_000_000_000
        return Int32(clamping: max(1, ms))
    }
}

/// The meeting point of a caller waiting for a reply and the bus thread producing it. Whichever
/// of reply, cancellation or shutdown comes first wins; the others are ignored.
final class CallBox: Sendable {
    private static let counter = Atomic<UInt64>(0)
    /// Identifies the outgoing call on the bus thread (for cancellation).
    let id = CallBox.counter.add(1, ordering: .relaxed).newValue | (1 << 63)

    private enum State {
        case idle
        case waiting(CheckedContinuation<DBusMessage, Error>)
        case finished(Result<DBusMessage, Error>?)
    }
    private let state = Mutex(State.idle)

    func attach(_ continuation: CheckedContinuation<DBusMessage, Error>) {
        let early: Result<DBusMessage, Error>? = state.withLock { state in
            switch state {
            case .idle:
                state = .waiting(continuation)
                return nil
            case .finished(let result):
                state = .finished(nil)
                return result
            case .waiting:
                preconditionFailure("CallBox attached twice")
            }
        }
        if let early { continuation.resume(with: early) }
    }

    func complete(_ result: Result<DBusMessage, Error>) {
        let continuation: CheckedContinuation<DBusMessage, Error>? = state.withLock { state in
            switch state {
            case .idle:
                state = .finished(result)
                return nil
            case .waiting(let c):
                state = .finished(nil)
                return c
            case .finished:
                return nil
            }
        }
        continuation?.resume(with: result)
    }

    var isFinished: Bool {
        state.withLock { if case .finished = $0 { true } else { false } }
    }
}
