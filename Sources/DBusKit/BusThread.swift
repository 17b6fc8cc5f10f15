import CDBus
import Foundation
import Synchronization

/// The one thread that owns a libdbus connection, and its main loop.
///
/// libdbus is only ever called from this thread. Other threads hand it work with ``submit(_:)``;
/// the loop drains that queue, dispatches incoming messages, runs end-of-turn hooks (the turn's
/// signal deliveries, batched `PropertiesChanged`), then sleeps in `poll(2)` on the connection's enabled watches and an
/// `eventfd(2)` used to wake it, with a timeout taken from libdbus's nearest enabled timeout. This
/// follows BlueZ's `gdbus/mainloop.c`: watches and timeouts registered through
/// `dbus_connection_set_watch_functions` / `set_timeout_functions`, `dbus_watch_get_enabled`
/// honoured, and the dispatch status re-checked after every watch is handled. There is no
/// busy-waiting: with nothing to do the thread blocks in `poll` with no timeout.
final class BusThread: @unchecked Sendable {
    /// Jobs from other threads and whether the loop is asleep in `poll` (then a job must wake it).
    private struct Inbox {
        var jobs: [@Sendable () -> Void] = []
        var sleeping = false
        var accepting = true
    }

    private let inbox = Mutex(Inbox())
    private let wakeFD: Int32
    private var thread: Thread?

    // Bus-thread state below.
    private(set) var connection: OpaquePointer?
    private var watches: [OpaquePointer] = []
    private var timeouts: [OpaquePointer: UInt64] = [:]   // DBusTimeout* -> deadline (ms, monotonic)
    private var running = true
    /// Called at the end of each loop turn, before sleeping.
    var endOfTurn: () -> Void = {}
    /// Called for every dispatched message (the connection's filter).
    var filter: (OpaquePointer) -> Bool = { _ in false }

    init() throws(DBusError) {
        let fd = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard fd >= 0 else { throw DBusError(.failed, "eventfd: \(String(cString: strerror(errno)))") }
        wakeFD = fd
    }

    deinit { close(wakeFD) }

    var isOnBusThread: Bool { Thread.current === thread }

    /// Starts the thread. `setup` runs first on it and returns the connection (or throws, and the
    /// thread ends).
    func start(name: String, setup: @escaping @Sendable () -> Result<OpaquePointer, DBusError>) async throws(DBusError) {
        let result: Result<Void, DBusError> = await withCheckedContinuation { continuation in
            let t = Thread { [self] in
                switch setup() {
                case .success(let conn):
                    self.connection = conn
                    self.installMainLoopFunctions(conn)
                    continuation.resume(returning: .success(()))
                    self.loop()
                case .failure(let error):
                    self.inbox.withLock { $0.accepting = false }
                    continuation.resume(returning: .failure(error))
                }
            }
            t.name = name
            t.stackSize = 1 << 20
            thread = t
            t.start()
        }
        try result.get()
    }

    /// Runs `job` on the bus thread. Returns false, and does not run it, once the loop has stopped
    /// accepting work (the connection is closed).
    @discardableResult
    func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        let wake: Bool? = inbox.withLock { inbox in
            guard inbox.accepting else { return nil }
            inbox.jobs.append(job)
            if inbox.sleeping {
                inbox.sleeping = false
                return true
            }
            return false
        }
        guard let wake else { return false }
        if wake { wakeUp() }
        return true
    }

    private func wakeUp() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Stops taking jobs, runs those already queued, and ends the loop after this turn. Bus thread.
    func stop() {
        inbox.withLock { $0.accepting = false }
        running = false
    }

    // MARK: libdbus main-loop integration

    private func installMainLoopFunctions(_ conn: OpaquePointer) {
        let me = Unmanaged.passUnretained(self).toOpaque()
        dbus_connection_set_watch_functions(conn, { watch, data in
            guard let watch, let data else { return 0 }
            Unmanaged<BusThread>.fromOpaque(data).takeUnretainedValue().watches.append(watch)
            return 1
        }, { watch, data in
            guard let watch, let data else { return }
            let me = Unmanaged<BusThread>.fromOpaque(data).takeUnretainedValue()
            me.watches.removeAll { $0 == watch }
        }, { _, _ in
            // Toggled: enabled state is read with dbus_watch_get_enabled on every turn.
        }, me, nil)
        dbus_connection_set_timeout_functions(conn, { timeout, data in
            guard let timeout, let data else { return 0 }
            let me = Unmanaged<BusThread>.fromOpaque(data).takeUnretainedValue()
            me.timeouts[timeout] = monotonicMilliseconds() + UInt64(max(0, dbus_timeout_get_interval(timeout)))
            return 1
        }, { timeout, data in
            guard let timeout, let data else { return }
            Unmanaged<BusThread>.fromOpaque(data).takeUnretainedValue().timeouts[timeout] = nil
        }, { timeout, data in
            // Toggled: restart the interval from now, as libdbus expects.
            guard let timeout, let data else { return }
            let me = Unmanaged<BusThread>.fromOpaque(data).takeUnretainedValue()
            me.timeouts[timeout] = monotonicMilliseconds() + UInt64(max(0, dbus_timeout_get_interval(timeout)))
        }, me, nil)
        dbus_connection_set_wakeup_main_function(conn, { data in
            guard let data else { return }
            let me = Unmanaged<BusThread>.fromOpaque(data).takeUnretainedValue()
            if !me.isOnBusThread { me.wakeUp() }
        }, me, nil)
        dbus_connection_add_filter(conn, { _, message, data in
            guard let message, let data else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
            let me = Unmanaged<BusThread>.fromOpaque(data).takeUnretainedValue()
            return me.filter(message) ? DBUS_HANDLER_RESULT_HANDLED : DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        }, me, nil)
    }

    /// Removes our functions from the connection once it is closed and before it is released, so
    /// libdbus never calls back into a loop that is gone.
    func uninstallMainLoopFunctions() {
        guard let conn = connection else { return }
        dbus_connection_set_watch_functions(conn, nil, nil, nil, nil, nil)
        dbus_connection_set_timeout_functions(conn, nil, nil, nil, nil, nil)
        dbus_connection_set_wakeup_main_function(conn, nil, nil, nil)
        watches.removeAll()
        timeouts.removeAll()
    }

    /// Messages dispatched per turn before the loop looks at its job queue again, so a flood of
    /// signals cannot starve replies and property batches.
    private let dispatchBudget = 512

    private func loop() {
        var fds: [pollfd] = []
        var fdWatches: [OpaquePointer?] = []
        while true {
            // 1. Jobs from other threads.
            let jobs = inbox.withLock { inbox -> [@Sendable () -> Void] in
                let jobs = inbox.jobs
                inbox.jobs.removeAll(keepingCapacity: true)
                return jobs
            }
            for job in jobs { job() }
            if !running { break }

            // 2. Incoming messages already read.
            var moreToDispatch = false
            if let conn = connection {
                var budget = dispatchBudget
                // A message can stop the loop (the bus hung up): then nothing more is dispatched,
                // and the connection is released below, outside libdbus's dispatch.
                while running, budget > 0, dbus_connection_get_dispatch_status(conn) == DBUS_DISPATCH_DATA_REMAINS {
                    dbus_connection_dispatch(conn)
                    budget -= 1
                }
                moreToDispatch = running && dbus_connection_get_dispatch_status(conn) == DBUS_DISPATCH_DATA_REMAINS
            }
            if !running { continue }

            // 3. End of turn: the signals dispatched in this turn go to their streams, then the
            //    batched PropertiesChanged go out.
            endOfTurn()

            // 4. Sleep until a watch, a timeout or a job.
            fds.removeAll(keepingCapacity: true)
            fdWatches.removeAll(keepingCapacity: true)
            fds.append(pollfd(fd: wakeFD, events: CDBUS_POLLIN, revents: 0))
            fdWatches.append(nil)
            for watch in watches where dbus_watch_get_enabled(watch) != 0 {
                let flags = dbus_watch_get_flags(watch)
                var events: Int16 = 0
                if flags & CDBUS_WATCH_READABLE != 0 { events |= CDBUS_POLLIN }
                if flags & CDBUS_WATCH_WRITABLE != 0 { events |= CDBUS_POLLOUT }
                fds.append(pollfd(fd: dbus_watch_get_unix_fd(watch), events: events, revents: 0))
                fdWatches.append(watch)
            }
            var timeoutMs: Int32 = -1
            let now = monotonicMilliseconds()
            for (timeout, deadline) in timeouts where dbus_timeout_get_enabled(timeout) != 0 {
                let wait = deadline > now ? Int32(clamping: deadline - now) : 0
                timeoutMs = timeoutMs < 0 ? wait : min(timeoutMs, wait)
            }
            let mustNotSleep = moreToDispatch || inbox.withLock { inbox -> Bool in
                if inbox.jobs.isEmpty {
                    inbox.sleeping = true
                    return false
                }
                return true
            }
            if mustNotSleep { timeoutMs = 0 }
            let n = poll(&fds, nfds_t(fds.count), timeoutMs)
            inbox.withLock { $0.sleeping = false }
            if n < 0 && errno != EINTR { continue }

            if fds[0].revents & CDBUS_POLLIN != 0 {
                var value: UInt64 = 0
                _ = read(wakeFD, &value, 8)
            }
            // Handle ready watches. Handling one can remove others, so check membership each time.
            for i in 1..<fds.count where fds[i].revents != 0 {
                guard let watch = fdWatches[i], watches.contains(watch), dbus_watch_get_enabled(watch) != 0 else { continue }
                var flags: UInt32 = 0
                let revents = fds[i].revents
                if revents & CDBUS_POLLIN != 0 { flags |= CDBUS_WATCH_READABLE }
                if revents & CDBUS_POLLOUT != 0 { flags |= CDBUS_WATCH_WRITABLE }
                if revents & CDBUS_POLLERR != 0 { flags |= CDBUS_WATCH_ERROR }
                if revents & CDBUS_POLLHUP != 0 { flags |= CDBUS_WATCH_HANGUP }
                dbus_watch_handle(watch, flags)
            }
            // Expired timeouts. libdbus timeouts repeat until removed or disabled.
            let after = monotonicMilliseconds()
            let expired = timeouts.filter { dbus_timeout_get_enabled($0.key) != 0 && $0.value <= after }.map(\.key)
            for timeout in expired where timeouts[timeout] != nil {
                timeouts[timeout] = after + UInt64(max(0, dbus_timeout_get_interval(timeout)))
                dbus_timeout_handle(timeout)
            }
        }
        // Jobs that raced with stop() are run so their callers are answered.
        let leftovers = inbox.withLock { inbox -> [@Sendable () -> Void] in
            inbox.accepting = false
            let jobs = inbox.jobs
            inbox.jobs.removeAll()
            return jobs
        }
        for job in leftovers { job() }
        releaseConnection()
    }

    /// Closes and releases the connection once the loop has ended, never from inside a libdbus
    /// callback (the connection may be mid-dispatch there).
    private func releaseConnection() {
        guard let conn = connection else { return }
        dbus_connection_close(conn)
        uninstallMainLoopFunctions()
        dbus_connection_unref(conn)
        connection = nil
    }
}

func monotonicMilliseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1000 + UInt64(ts.tv_nsec) / 1_000_000
}
