import CMosquitto
import Foundation
import Synchronization

/// An error of libmosquitto: the function that returned it, its code and libmosquitto's words.
public struct MQTTError: Error, CustomStringConvertible, Sendable, Hashable {
    public let function: String
    public let code: Int32
    public let message: String

    init(_ function: String, _ code: Int32) {
        self.function = function
        self.code = code
        message = String(cString: mosquitto_strerror(code))
    }

    init(_ function: String, message: String) {
        self.function = function
        code = -1
        self.message = message
    }

    public var description: String { "\(function): \(message)" }

    /// An acknowledgement awaited when the connection went.
    public static let connectionLost = MQTTError("publish", message: "the connection to the broker was lost before the acknowledgement")
    /// The client was disconnected (``MQTTClient/disconnect()``).
    public static let closed = MQTTError("publish", message: "the client was disconnected")
}

/// One message received on a subscription.
public struct MQTTMessage: Sendable, Hashable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: Int
    public var retain: Bool

    public var string: String { String(decoding: payload, as: UTF8.self) }
}

/// What happened to the connection. The client reconnects by itself (backing off between the
/// `reconnectDelay` bounds) until ``MQTTClient/disconnect()``.
public enum MQTTConnectionEvent: Sendable, Hashable {
    /// The broker accepted the connection (CONNACK 0).
    case connected
    /// The broker refused it: the CONNACK code and libmosquitto's words for it (e.g. 5, "not
    /// authorised"). libmosquitto tries again after the reconnect delay.
    case refused(code: Int32, reason: String)
    /// The connection was lost (code ≠ 0) or closed by ``MQTTClient/disconnect()`` (code 0).
    case disconnected(code: Int32, reason: String)

    /// A TLS handshake that failed: most often the broker's certificate is not signed by the CA
    /// the client trusts, or not for the host it connects to (the reason says which).
    public var isTLSFailure: Bool {
        if case .disconnected(let code, _) = self { code == CMOSQ_ERR_TLS } else { false }
    }
}

/// How to reach the broker and who to be there.
public struct MQTTOptions: Sendable {
    public struct Will: Sendable, Hashable {
        public var topic: String
        public var payload: [UInt8]
        public var qos: Int
        public var retain: Bool
        public init(topic: String, payload: String, qos: Int = 1, retain: Bool = true) {
            self.topic = topic
            self.payload = Array(payload.utf8)
            self.qos = qos
            self.retain = retain
        }
    }

    public struct TLS: Sendable, Hashable {
        /// PEM file of the CA that signed the broker's certificate …
        public var caFile: String?
        /// … or a directory of hashed CA certificates (`/etc/ssl/certs`, the system's).
        public var caPath: String?
        /// PEM files of a client certificate and its key, when the broker asks for one.
        public var certificateFile: String?
        public var keyFile: String?
        public init(caFile: String? = nil, caPath: String? = nil, certificateFile: String? = nil, keyFile: String? = nil) {
            self.caFile = caFile
            self.caPath = caPath
            self.certificateFile = certificateFile
            self.keyFile = keyFile
        }
    }

    public var host: String
    public var port: Int
    public var clientID: String
    /// Seconds between PINGREQs when nothing else is sent (the broker drops a client silent for
    /// 1.5 times this, and publishes its will).
    public var keepalive: Int
    public var cleanSession: Bool
    public var username: String?
    public var password: String?
    public var will: Will?
    public var tls: TLS?
    /// Seconds before a reconnect, doubled after each attempt that fails up to the second bound,
    /// and back to the first after a successful connection.
    public var reconnectDelay: ClosedRange<Int>

    public init(host: String = "localhost", port: Int = 1883, clientID: String, keepalive: Int = 30, cleanSession: Bool = true,
                username: String? = nil, password: String? = nil, will: Will? = nil, tls: TLS? = nil,
                reconnectDelay: ClosedRange<Int> = 1...60) {
        self.host = host
        self.port = port
        self.clientID = clientID
        self.keepalive = keepalive
        self.cleanSession = cleanSession
        self.username = username
        self.password = password
        self.will = will
        self.tls = tls
        self.reconnectDelay = reconnectDelay
    }
}

/// `mosquitto_lib_init`, once per process, and the lock that keeps libmosquitto's set-up calls
/// (`mosquitto_new`, `mosquitto_connect_async`, `mosquitto_reconnect_async`) one at a time in a
/// process: clients that connected at the same moment in one process were seen never to connect
/// (the test suite, under load); these calls are rare and cheap, so they are not worth the risk.
enum MosquittoLibrary {
    static let initialised: Bool = {
        mosquitto_lib_init()
        return true
    }()
    static let setUp = NSLock()
}

/// Owns one client handle: `mosquitto_new` in, `mosquitto_destroy` out. The callbacks' context
/// lives as long as the handle; the network thread is stopped before the handle goes.
final class MosquittoHandle: @unchecked Sendable {
    let pointer: OpaquePointer
    let context: CallbackBox

    init(clientID: String, cleanSession: Bool, context: CallbackBox) throws(MQTTError) {
        _ = MosquittoLibrary.initialised
        let made = MosquittoLibrary.setUp.withLock { mosquitto_new(clientID, cleanSession, Unmanaged.passUnretained(context).toOpaque()) }
        guard let pointer = made else {
            throw MQTTError("mosquitto_new", message: "cannot create a client (\(String(cString: strerror(errno))))")
        }
        self.pointer = pointer
        self.context = context
    }

    deinit { mosquitto_destroy(pointer) }
}

/// What libmosquitto's callbacks (on its network thread) hand to the async side.
///
/// Only the acknowledgements somebody awaits are kept: a message id is *expected* from the moment
/// ``MQTTClient/publish(_:_:qos:retain:)`` has handed its message over until its PUBACK comes. An
/// acknowledgement nobody expects (a fire-and-forget ``MQTTClient/send(_:_:qos:retain:)``, QoS 0
/// included) goes into a short list of recent ones, in case its `publish` has not yet said it
/// expects it (libmosquitto may answer before `mosquitto_publish` returns); the list holds the
/// last ``recentLimit``, far fewer than the 65 535 messages before an id comes round again, so
/// none is ever taken for a later message that reuses its id.
final class CallbackBox: Sendable {
    static let recentLimit = 1024

    struct State {
        /// Ids handed over by `publish` whose acknowledgement has not come.
        var expected: Set<Int32> = []
        /// Acknowledgements nobody expected (yet), the newest last.
        var recent: [Int32] = []
        /// Of the expected, the ones awaited now, and the ones acknowledged before their waiter came.
        var waiting: [Int32: CheckedContinuation<Void, any Error>] = [:]
        var done: Set<Int32> = []
        var closed = false
        /// Increases each time the connection goes: a message id from before never completes.
        var epoch: UInt64 = 0
    }
    let state = Mutex(State())
    /// Whether the current connection reached CONNACK 0 (resets the back-off).
    let connectedOnce = Atomic<Bool>(false)
    /// Whether libmosquitto called `on_disconnect` for the current attempt: a TLS handshake that
    /// fails in the loop returns an error without it, and the network thread reports it then.
    let disconnectSeen = Atomic<Bool>(false)
    /// libmosquitto's last error line in the current attempt (OpenSSL's reason for a failed
    /// handshake: `certificate verify failed`), added to the reason of a failure.
    let libraryError = Mutex<String?>(nil)
    let events: AsyncStream<MQTTConnectionEvent>.Continuation
    let messages: AsyncStream<MQTTMessage>.Continuation

    init(events: AsyncStream<MQTTConnectionEvent>.Continuation, messages: AsyncStream<MQTTMessage>.Continuation) {
        self.events = events
        self.messages = messages
    }

    /// `mid`, handed over just now, will be awaited (it may be acknowledged already).
    func expect(_ mid: Int32) {
        state.withLock { s in
            if let i = s.recent.lastIndex(of: mid) {
                s.recent.remove(at: i)
                s.done.insert(mid)
            } else {
                s.expected.insert(mid)
            }
        }
    }

    func completed(_ mid: Int32) {
        let waiter = state.withLock { s -> CheckedContinuation<Void, any Error>? in
            guard s.expected.remove(mid) != nil else {
                s.recent.append(mid)
                if s.recent.count > Self.recentLimit { s.recent.removeFirst(s.recent.count - Self.recentLimit / 2) }
                return nil
            }
            if let c = s.waiting.removeValue(forKey: mid) { return c }
            s.done.insert(mid)
            return nil
        }
        waiter?.resume()
    }

    var epoch: UInt64 { state.withLock { $0.epoch } }

    /// Waits for `mid`'s acknowledgement (or returns at once if it came already); `epoch`: the
    /// connection it was sent on.
    func wait(for mid: Int32, epoch: UInt64) async throws {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
            let now = state.withLock { s -> Result<Void, MQTTError>? in
                if s.closed { return .failure(MQTTError.closed) }
                if s.epoch != epoch { return .failure(MQTTError.connectionLost) }
                if s.done.remove(mid) != nil { return .success(()) }
                s.waiting[mid] = c
                return nil
            }
            if let now { c.resume(with: now) }
        }
    }

    /// The connection went: every acknowledgement still awaited fails (libmosquitto may still
    /// deliver the message after a reconnect; the caller decides whether to send it again).
    func connectionLost() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, any Error>] in
            defer { s.waiting = [:]; s.done = []; s.expected = []; s.recent = []; s.epoch += 1 }
            return Array(s.waiting.values)
        }
        for w in waiters { w.resume(throwing: MQTTError.connectionLost) }
    }

    func close() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, any Error>] in
            s.closed = true
            defer { s.waiting = [:] }
            return Array(s.waiting.values)
        }
        for w in waiters { w.resume(throwing: MQTTError.closed) }
        events.finish()
        messages.finish()
    }
}

/// The network thread: the one thread that runs libmosquitto's loop for a handle
/// (`mosquitto_connect_async`, `mosquitto_reconnect_async`, and a `poll(2)` loop around
/// `mosquitto_loop_read`/`_write`/`_misc`), connecting,
/// reconnecting after a back-off, until ``stop()``. Other threads only publish and subscribe,
/// which libmosquitto allows with `mosquitto_threaded_set` (it wakes the loop through its own
/// socket pair).
final class NetworkThread: @unchecked Sendable {
    private let handle: MosquittoHandle
    private let options: MQTTOptions
    private let box: CallbackBox
    /// Set by ``stop()``; the wake-up for a back-off wait.
    private let stopping = Atomic<Bool>(false)
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private var thread: Thread?
    /// An `eventfd(2)` the loop polls: other threads write it after queueing a message.
    let wakeFD = cmosq_wakefd()

    init(handle: MosquittoHandle, options: MQTTOptions, box: CallbackBox) {
        self.handle = handle
        self.options = options
        self.box = box
    }

    func start() {
        let thread = Thread { [self] in
            run()
            finished.signal()
        }
        thread.name = "mqtt \(options.host):\(options.port)"
        thread.stackSize = 1 << 20
        self.thread = thread
        thread.start()
    }

    /// Connect, loop until the connection fails, wait, again; the wait doubles after every
    /// attempt that did not reach CONNACK 0, from the lower bound of `reconnectDelay` to its upper.
    private func run() {
        let m = handle.pointer
        var delay = Double(options.reconnectDelay.lowerBound)
        var first = true
        while !stopping.load(ordering: .acquiring) {
            box.disconnectSeen.store(false, ordering: .releasing)
            box.libraryError.withLock { $0 = nil }
            let rc = MosquittoLibrary.setUp.withLock {
                first
                    ? mosquitto_connect_async(m, options.host, Int32(options.port), Int32(options.keepalive))
                    : mosquitto_reconnect_async(m)
            }
            first = false
            if rc == CMOSQ_ERR_SUCCESS {
                box.connectedOnce.store(false, ordering: .releasing)
                let ended = serve(m)
                if stopping.load(ordering: .acquiring) { break }
                if box.connectedOnce.load(ordering: .acquiring) { delay = Double(options.reconnectDelay.lowerBound) }
                // Ended without on_disconnect (a TLS handshake that failed in the loop): said here.
                if !box.disconnectSeen.load(ordering: .acquiring) {
                    box.events.yield(.disconnected(code: ended.code, reason: reason(ended.code, errno: ended.errno)))
                }
            } else {
                box.events.yield(.disconnected(code: rc, reason: reason(rc, errno: errno)))
            }
            box.connectionLost()
            if wake.wait(timeout: .now() + delay) == .success { break }
            delay = min(delay * 2, Double(options.reconnectDelay.upperBound))
        }
        // Stopping: say goodbye (no will), let the DISCONNECT out, close.
        mosquitto_disconnect(m)
        for _ in 0 ..< 4 where mosquitto_want_write(m) && mosquitto_socket(m) >= 0 { _ = mosquitto_loop_write(m, 1) }
    }

    /// One connection: `poll(2)` on its socket and on ``wakeFD`` (written by other threads when
    /// they queue a message), then `mosquitto_loop_read`, `mosquitto_loop_write` and
    /// `mosquitto_loop_misc` (keepalive), until one of them fails (libmosquitto has then closed
    /// the socket and called `on_disconnect`) or ``stop()``. Not `mosquitto_loop`, whose
    /// `select(2)` cannot watch a descriptor numbered 1024 or more, as a busy process has.
    /// Returns the libmosquitto error that ended the connection (and `errno` for `MOSQ_ERR_ERRNO`).
    private func serve(_ m: OpaquePointer) -> (code: Int32, errno: Int32) {
        while !stopping.load(ordering: .acquiring) {
            let sock = mosquitto_socket(m)
            guard sock >= 0 else { return (CMOSQ_ERR_CONN_LOST, 0) }
            var fds = [
                pollfd(fd: sock, events: Int16(POLLIN) | (mosquitto_want_write(m) ? Int16(POLLOUT) : 0), revents: 0),
                pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&fds, 2, 250)
            if ready < 0, errno != EINTR { return (CMOSQ_ERR_ERRNO, errno) }
            if fds[1].revents & Int16(POLLIN) != 0 {
                var count: UInt64 = 0
                _ = read(wakeFD, &count, 8)
            }
            if fds[0].revents & Int16(POLLIN | POLLERR | POLLHUP) != 0 {
                let rc = mosquitto_loop_read(m, 1)
                guard rc == CMOSQ_ERR_SUCCESS else { return (rc, errno) }
            }
            if mosquitto_socket(m) >= 0, mosquitto_want_write(m) {
                let rc = mosquitto_loop_write(m, 1)
                guard rc == CMOSQ_ERR_SUCCESS else { return (rc, errno) }
            }
            guard mosquitto_socket(m) >= 0 else { return (CMOSQ_ERR_CONN_LOST, 0) }
            let rc = mosquitto_loop_misc(m)
            guard rc == CMOSQ_ERR_SUCCESS else { return (rc, errno) }
        }
        return (CMOSQ_ERR_SUCCESS, 0)
    }

    /// What `code` means, with libmosquitto's own line about it when it logged one (OpenSSL's
    /// reason for a failed handshake).
    private func reason(_ code: Int32, errno: Int32) -> String {
        let text = code == CMOSQ_ERR_ERRNO ? String(cString: strerror(errno)) : String(cString: mosquitto_strerror(code))
        guard let detail = box.libraryError.withLock({ $0 }) else { return text }
        return "\(text) (\(detail))"
    }

    /// Wakes the loop: a message was queued for it to write.
    func poke() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    deinit { close(wakeFD) }

    /// Ends the loop and waits for the thread. Idempotent.
    func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        wake.signal()
        poke()
        if thread != nil { finished.wait() }
    }
}

/// An MQTT 3.1.1 client on libmosquitto, with a network thread of its own
/// (``NetworkThread``) that connects, and reconnects with a back-off, until ``disconnect()``.
/// Connection events and received messages are async sequences; `publish` and `subscribe` return
/// once the broker has acknowledged (QoS 1).
public final class MQTTClient: Sendable {
    private let handle: MosquittoHandle
    private let box: CallbackBox
    private let options: MQTTOptions
    private let network: NetworkThread
    private let started = Atomic<Bool>(false)
    /// Connection events, in order.
    public let events: AsyncStream<MQTTConnectionEvent>
    /// Messages of the subscriptions, in order.
    public let messages: AsyncStream<MQTTMessage>

    public init(_ options: MQTTOptions) throws(MQTTError) {
        self.options = options
        let (events, eventsIn) = AsyncStream<MQTTConnectionEvent>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let (messages, messagesIn) = AsyncStream<MQTTMessage>.makeStream(bufferingPolicy: .bufferingNewest(65536))
        self.events = events
        self.messages = messages
        box = CallbackBox(events: eventsIn, messages: messagesIn)
        handle = try MosquittoHandle(clientID: options.clientID, cleanSession: options.cleanSession, context: box)
        network = NetworkThread(handle: handle, options: options, box: box)
        try configure()
    }

    deinit { disconnect() }

    private static func box(_ context: UnsafeMutableRawPointer?) -> CallbackBox {
        Unmanaged<CallbackBox>.fromOpaque(context!).takeUnretainedValue()
    }

    private func check(_ function: String, _ rc: Int32) throws(MQTTError) {
        if rc != CMOSQ_ERR_SUCCESS { throw MQTTError(function, rc) }
    }

    private func configure() throws(MQTTError) {
        let m = handle.pointer
        try check("mosquitto_threaded_set", mosquitto_threaded_set(m, true))
        try check("mosquitto_int_option", mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, CMOSQ_PROTOCOL_V311))
        mosquitto_connect_callback_set(m) { _, context, rc in
            let box = MQTTClient.box(context)
            if rc == 0 {
                box.connectedOnce.store(true, ordering: .releasing)
                box.events.yield(.connected)
            } else {
                box.events.yield(.refused(code: rc, reason: String(cString: mosquitto_connack_string(rc))))
            }
        }
        mosquitto_disconnect_callback_set(m) { _, context, rc in
            let box = MQTTClient.box(context)
            box.disconnectSeen.store(true, ordering: .releasing)
            box.connectionLost()
            box.events.yield(.disconnected(code: rc, reason: rc == 0 ? "closed" : String(cString: mosquitto_strerror(rc))))
        }
        mosquitto_log_callback_set(m) { _, context, level, line in
            guard level == CMOSQ_LOG_ERR, let line else { return }
            MQTTClient.box(context).libraryError.withLock { $0 = String(cString: line) }
        }
        mosquitto_publish_callback_set(m) { _, context, mid in MQTTClient.box(context).completed(mid) }
        mosquitto_subscribe_callback_set(m) { _, context, mid, _, _ in MQTTClient.box(context).completed(mid) }
        mosquitto_message_callback_set(m) { _, context, message in
            guard let message else { return }
            let m = message.pointee
            let bytes = m.payloadlen > 0 && m.payload != nil
                ? Array(UnsafeRawBufferPointer(start: m.payload, count: Int(m.payloadlen))) : []
            MQTTClient.box(context).messages.yield(MQTTMessage(topic: String(cString: m.topic), payload: bytes, qos: Int(m.qos),
                                                               retain: m.retain))
        }
        if options.username != nil || options.password != nil {
            try check("mosquitto_username_pw_set", mosquitto_username_pw_set(m, options.username, options.password))
        }
        if let will = options.will {
            try check("mosquitto_will_set", will.payload.withUnsafeBytes {
                mosquitto_will_set(m, will.topic, Int32(will.payload.count), $0.baseAddress, Int32(will.qos), will.retain)
            })
        }
        if let tls = options.tls {
            try check("mosquitto_tls_set", mosquitto_tls_set(m, tls.caFile, tls.caPath, tls.certificateFile, tls.keyFile, nil))
        }
    }

    /// Starts the network thread, which connects (and reconnects, backing off) until
    /// ``disconnect()``. Watch ``events`` for `.connected`. A second call does nothing.
    public func connect() {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        network.start()
    }

    private func handOver(_ topic: String, _ payload: [UInt8], qos: Int, retain: Bool) throws(MQTTError) -> Int32 {
        var mid: Int32 = 0
        let rc = payload.withUnsafeBytes {
            mosquitto_publish(handle.pointer, &mid, topic, Int32(payload.count), $0.baseAddress, Int32(qos), retain)
        }
        try check("mosquitto_publish", rc)
        network.poke()
        return mid
    }

    /// Hands a message to libmosquitto (`mosquitto_publish`) and returns at once, its
    /// acknowledgement not awaited: messages sent one after the other go out in that order. QoS 0
    /// while the connection is down fails with `MOSQ_ERR_NO_CONN`; QoS 1 is queued by
    /// libmosquitto and sent on the next connection.
    public func send(_ topic: String, _ payload: [UInt8], qos: Int = 1, retain: Bool = false) throws(MQTTError) {
        _ = try handOver(topic, payload, qos: qos, retain: retain)
    }

    public func send(_ topic: String, _ payload: String, qos: Int = 1, retain: Bool = false) throws(MQTTError) {
        try send(topic, Array(payload.utf8), qos: qos, retain: retain)
    }

    /// Publishes and, with QoS 1 or 2, returns once the broker acknowledged it; throws
    /// ``MQTTError/connectionLost`` if the connection went first (libmosquitto may still deliver
    /// it after reconnecting) and ``MQTTError/closed`` after ``disconnect()``.
    public func publish(_ topic: String, _ payload: [UInt8], qos: Int = 1, retain: Bool = false) async throws {
        guard qos > 0 else { return try send(topic, payload, qos: qos, retain: retain) }
        let epoch = box.epoch
        let mid = try handOver(topic, payload, qos: qos, retain: retain)
        box.expect(mid)
        try await box.wait(for: mid, epoch: epoch)
    }

    public func publish(_ topic: String, _ payload: String, qos: Int = 1, retain: Bool = false) async throws {
        try await publish(topic, Array(payload.utf8), qos: qos, retain: retain)
    }

    /// Subscribes (`mosquitto_subscribe`) and returns once the broker acknowledged it; the
    /// messages come on ``messages``. Subscriptions do not outlive a connection (clean session):
    /// subscribe again after each `.connected`.
    public func subscribe(_ pattern: String, qos: Int = 1) async throws {
        var mid: Int32 = 0
        let epoch = box.epoch
        try check("mosquitto_subscribe", mosquitto_subscribe(handle.pointer, &mid, pattern, Int32(qos)))
        network.poke()
        box.expect(mid)
        try await box.wait(for: mid, epoch: epoch)
    }

    /// Disconnects cleanly (DISCONNECT: the broker does not publish the will), stops the network
    /// thread and ends the streams; waiting publishes throw ``MQTTError/closed``. Once is enough;
    /// a second call does nothing.
    public func disconnect() {
        network.stop()
        box.close()
    }
}
