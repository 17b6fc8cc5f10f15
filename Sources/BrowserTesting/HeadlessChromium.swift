import ChildProcess
import Foundation
import ProximityTesting
import Synchronization

/// Debian's Chromium (the package `chromium`), headless, driven through the Chrome DevTools
/// Protocol on its descriptors 3 and 4 (`--remote-debugging-pipe`): it reads commands on 3 and
/// writes replies and events on 4, each message a JSON object ended by a NUL byte.
///
/// Started with `posix_spawn(3)` as ``ManagedProcess`` starts its children, with a fresh profile
/// directory (also its TMPDIR, where it puts its singleton socket) that is removed once the
/// browser and every process it started exited. One plain thread reads the replies, the
/// events and standard error with `poll(2)` (standard error is kept to its last 64 KiB, for the
/// error messages: Chromium writes harmless D-Bus complaints there all the time); another waits
/// for the browser's exit. Every command waits for its reply, bounded by a timeout; when the
/// browser exits, every command and wait still open fails at once with its exit status.
public final class HeadlessChromium: Sendable {
    let connection: DevToolsConnection
    /// The pages' viewport, in CSS pixels (and a screenshot's size).
    public let width: Int, height: Int
    /// The browser's process id.
    public var pid: Int32 { connection.pid }

    /// The browser's path, or nil when none is installed (tests then fail with a clear message
    /// naming the Debian package `chromium`).
    public static func executable() -> String? {
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium") { return "/usr/bin/chromium" }
        let found = resolveExecutable("chromium")
        return FileManager.default.isExecutableFile(atPath: found) ? found : nil
    }

    /// Starts the browser with a window of `width` × `height` pixels, on about:blank; each page's
    /// viewport, and so its screenshots, is that size too. Returns at once: the first command
    /// waits for the browser to be ready.
    public init(width: Int = 1280, height: Int = 900) throws {
        self.width = width
        self.height = height
        guard let executable = Self.executable() else {
            throw TestKitError("no Chromium: /usr/bin/chromium is missing and there is no chromium on PATH " +
                "(install the Debian package `chromium`)")
        }
        let profile = FileManager.default.temporaryDirectory.appendingPathComponent("proximity-chromium-\(UUID().uuidString.prefix(8))")
        // Chromium's own temporary files inside the profile, so that they go with it even when it
        // is killed.
        let temporary = profile.appendingPathComponent("tmp")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        var arguments = ["--headless", "--disable-gpu", "--remote-debugging-pipe", "--user-data-dir=\(profile.path)",
                         "--window-size=\(width),\(height)", "--no-first-run", "--no-default-browser-check",
                         "--disable-dev-shm-usage", "about:blank"]
        // Chromium's sandbox refuses to run as root.
        if geteuid() == 0 { arguments.insert("--no-sandbox", at: 1) }

        // Every descriptor is made close-on-exec atomically, so no child another thread spawns
        // meanwhile inherits one (ManagedProcess's lock is not needed). The command channel is a
        // socket pair rather than a pipe so that a write after the browser died fails with EPIPE
        // (MSG_NOSIGNAL) instead of raising SIGPIPE in the tests' process; Chromium only reads and
        // writes its ends.
        var opened: [Int32] = []
        func closeOpened() { for fd in opened { Glibc.close(fd) } }
        func socketPair() throws -> (ours: Int32, theirs: Int32) {
            var fds: [Int32] = [-1, -1]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
                throw TestKitError("socketpair: \(String(cString: strerror(errno)))")
            }
            opened += fds
            // The child's ends go to descriptors 3 and 4 with dup2, which clears close-on-exec
            // only when the descriptor changes: so they must not already be 3 or 4.
            let high = fcntl(fds[1], F_DUPFD_CLOEXEC, 10)
            guard high >= 0 else { throw TestKitError("fcntl: \(String(cString: strerror(errno)))") }
            opened.append(high)
            return (fds[0], high)
        }
        let commands: (ours: Int32, theirs: Int32)
        let replies: (ours: Int32, theirs: Int32)
        let errors: (ours: Int32, theirs: Int32)
        let devNull = Glibc.open("/dev/null", O_RDONLY | O_CLOEXEC)
        do {
            guard devNull >= 0 else { throw TestKitError("/dev/null: \(String(cString: strerror(errno)))") }
            opened.append(devNull)
            commands = try socketPair()
            replies = try socketPair()
            // Standard output and error (Glibc has no pipe2 for Swift, and pipe() then FD_CLOEXEC
            // would leave a moment for another thread's child to inherit the write end).
            errors = try socketPair()
        } catch {
            closeOpened()
            try? FileManager.default.removeItem(at: profile)
            throw error
        }

        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = temporary.path
        // Under the test kit's spawn lock: a ManagedProcess starting meanwhile has pipes not yet
        // close-on-exec, which the browser must not inherit.
        spawnLock.lock()
        let spawned = spawnChild(executable, arguments, environment: environment, SpawnSetup(descriptors: [
            .duplicate(devNull, onto: 0), .duplicate(errors.theirs, onto: 1), .duplicate(errors.theirs, onto: 2),
            .duplicate(commands.theirs, onto: 3), .duplicate(replies.theirs, onto: 4)]))
        spawnLock.unlock()
        // Only our ends stay open here.
        for fd in opened where fd != commands.ours && fd != replies.ours && fd != errors.ours { Glibc.close(fd) }
        let child: pid_t
        do { child = try spawned.get() } catch {
            Glibc.close(commands.ours)
            Glibc.close(replies.ours)
            Glibc.close(errors.ours)
            try? FileManager.default.removeItem(at: profile)
            throw TestKitError("cannot start \(executable): \(error)")
        }

        let connection = DevToolsConnection(pid: child, commandFD: commands.ours, profile: profile)
        self.connection = connection
        let (replyFD, stderrFD, childPID) = (replies.ours, errors.ours, child)
        let reader = Thread { connection.pump(replies: replyFD, stderr: stderrFD) }
        reader.name = "chromium \(childPID)"
        reader.start()
        let reaper = Thread {
            // Waits for the exit without reaping: until DevToolsConnection.reaped() does, under the lock
            // that signal() takes, the pid cannot be reused.
            var info = siginfo_t()
            while waitid(P_PID, id_t(childPID), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
            connection.reaped()
        }
        reaper.name = "chromium \(childPID) exit"
        reaper.start()
    }

    /// Opens a new tab on `url` and attaches to it (Target.createTarget, Target.attachToTarget
    /// flatten:true, then Page.enable and Runtime.enable), returning once the load event fired
    /// (Page.loadEventFired for that session), within `timeout`.
    ///
    /// The tab is created on about:blank and sent to `url` with Page.navigate once its events are
    /// enabled: a tab created on `url` may have loaded before Page.enable, and its load event
    /// would never come. Only a load event after the navigation's commit (its main frame's
    /// Page.frameNavigated with a new loader) counts. Its viewport is set to the browser's `width`
    /// × `height` first (Emulation.setDeviceMetricsOverride): headless Chromium keeps part of the
    /// window's height for toolbars it does not draw (613 of 700 pixels).
    public func open(_ url: String, timeout: Duration = .seconds(30)) async throws -> BrowserPage {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        func left() -> Duration { max(.zero, clock.now.duration(to: deadline)) }
        let target = try await connection.command("Target.createTarget", ["url": "about:blank"], timeout: left())
        guard let targetID = target.object["targetId"] as? String else {
            throw TestKitError("Target.createTarget: no targetId in \(target.object)")
        }
        let attached = try await connection.command("Target.attachToTarget", ["targetId": targetID, "flatten": true], timeout: left())
        guard let session = attached.object["sessionId"] as? String else {
            throw TestKitError("Target.attachToTarget: no sessionId in \(attached.object)")
        }
        _ = try await connection.command("Page.enable", session: session, timeout: left())
        _ = try await connection.command("Runtime.enable", session: session, timeout: left())
        _ = try await connection.command("Emulation.setDeviceMetricsOverride",
                                         ["width": width, "height": height, "deviceScaleFactor": 1, "mobile": false],
                                         session: session, timeout: left())
        let tree = try await connection.command("Page.getFrameTree", session: session, timeout: left())
        let frame = (tree.object["frameTree"] as? [String: Any])?["frame"] as? [String: Any]
        guard let frameID = frame?["id"] as? String else { throw TestKitError("Page.getFrameTree: no main frame in \(tree.object)") }
        let blankLoader = frame?["loaderId"] as? String

        let navigated = Flag()
        let loaded = connection.register(.event { message in
            guard message.object["sessionId"] as? String == session else { return false }
            switch message.object["method"] as? String {
            case "Page.frameNavigated":
                let frame = (message.object["params"] as? [String: Any])?["frame"] as? [String: Any]
                if frame?["id"] as? String == frameID && frame?["loaderId"] as? String != blankLoader { navigated.set() }
                return false
            case "Page.loadEventFired":
                return navigated.isSet
            default:
                return false
            }
        })
        defer { connection.forget(loaded) }
        let navigation = try await connection.command("Page.navigate", ["url": url], session: session, timeout: left())
        if let failure = navigation.object["errorText"] as? String, !failure.isEmpty {
            throw TestKitError("open \(url): \(failure)")
        }
        _ = try await connection.wait(for: loaded, timeout: left(), "the load event of \(url)")
        return BrowserPage(browser: self, session: session)
    }

    /// Browser.close, then waits for the process to exit (SIGKILL after a timeout); removes the
    /// profile directory (once every process of the browser's has exited). If it was never
    /// closed, deinit kills the browser (SIGKILL), and the profile directory is removed once it
    /// exited.
    public func close() async {
        _ = try? await connection.command("Browser.close", timeout: .seconds(5))
        if (try? await connection.wait(for: connection.register(.exit), timeout: .seconds(10), "the exit")) == nil {
            connection.signal(SIGKILL)
            _ = try? await connection.wait(for: connection.register(.exit), timeout: .seconds(10), "the exit")
        }
    }

    deinit {
        connection.signal(SIGKILL)
        // Nothing can send any more: every page holds its browser.
        Glibc.close(connection.commandFD)
    }
}

/// A tab of a ``HeadlessChromium``, attached with its own DevTools session. It keeps its browser
/// alive.
public struct BrowserPage: Sendable {
    let browser: HeadlessChromium
    let session: String

    /// Runtime.evaluate with returnByValue and awaitPromise: the expression's value decoded as T
    /// (via JSONSerialization of the `result.value` then JSONDecoder; undefined is null). A thrown
    /// JS exception becomes a TestKitError with its text (exceptionDetails).
    public func evaluate<T: Decodable & Sendable>(_ expression: String, as: T.Type = T.self,
                                                   timeout: Duration = .seconds(30)) async throws -> T {
        let shown = expression.count > 200 ? expression.prefix(200) + "…" : Substring(expression)
        return try await evaluate(expression, named: "evaluate \(shown)", timeout: timeout)
    }

    /// ``evaluate(_:as:timeout:)``, its errors starting with `name`.
    private func evaluate<T: Decodable & Sendable>(_ expression: String, named name: String, timeout: Duration) async throws -> T {
        let reply = try await browser.connection.command(
            "Runtime.evaluate", ["expression": expression, "returnByValue": true, "awaitPromise": true],
            session: session, timeout: timeout, for: name)
        if let details = reply.object["exceptionDetails"] as? [String: Any] {
            let exception = details["exception"] as? [String: Any]
            let text = exception?["description"] as? String ?? (exception?["value"]).map { "\($0)" }
                ?? details["text"] as? String ?? "\(details)"
            throw TestKitError("\(name): \(text)")
        }
        let result = reply.object["result"] as? [String: Any] ?? [:]
        if let unserializable = result["unserializableValue"] as? String {
            throw TestKitError("\(name): \(unserializable) has no JSON value")
        }
        let json = try JSONSerialization.data(withJSONObject: result["value"] ?? NSNull(), options: .fragmentsAllowed)
        do {
            return try JSONDecoder().decode(T.self, from: json)
        } catch {
            throw TestKitError("\(name): \(String(decoding: json.prefix(500), as: UTF8.self)) is not a \(T.self): \(error)")
        }
    }

    /// Waits until the JS boolean `condition` is true, without polling from Swift: evaluates a
    /// Promise in the page that checks the condition on every animation frame and on every DOM
    /// mutation (MutationObserver on document, subtree/attributes/childList/characterData) and
    /// resolves when it holds, or rejects after `timeout` (setTimeout in the page); a rejection
    /// becomes a TestKitError naming the condition. Returns after the condition held. A condition
    /// that throws counts as false (its last error is in the rejection).
    public func waitUntil(_ condition: String, timeout: Duration = .seconds(30)) async throws {
        let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        let script = """
            new Promise((resolve, reject) => {
              let lastError = null;
              const holds = () => {
                try { return Boolean(
            \(condition)
                ); } catch (e) { lastError = e; return false; }
              };
              if (holds()) { resolve(true); return; }
              let done = false, frame = 0;
              const observer = new MutationObserver(() => check());
              const timer = setTimeout(() => {
                finish();
                reject(new Error("not true within \(milliseconds) ms" + (lastError ? " (it last threw " + lastError + ")" : "")));
              }, \(milliseconds));
              function finish() { done = true; observer.disconnect(); clearTimeout(timer); cancelAnimationFrame(frame); }
              function check() { if (!done && holds()) { finish(); resolve(true); } }
              function onFrame() { check(); if (!done) frame = requestAnimationFrame(onFrame); }
              observer.observe(document, { subtree: true, attributes: true, childList: true, characterData: true });
              frame = requestAnimationFrame(onFrame);
            })
            """
        // The page's own timeout comes first; this one only if the page is stuck.
        let _: Bool = try await evaluate(script, named: "waitUntil `\(condition)`", timeout: timeout + .seconds(5))
    }

    /// Page.captureScreenshot as PNG bytes.
    public func screenshot() async throws -> Data {
        let reply = try await browser.connection.command("Page.captureScreenshot", ["format": "png"], session: session,
                                                         timeout: .seconds(30))
        guard let base64 = reply.object["data"] as? String, let png = Data(base64Encoded: base64) else {
            throw TestKitError("Page.captureScreenshot: no PNG data in the reply")
        }
        return png
    }
}

/// A flag set once, read by a stateful event predicate.
private final class Flag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}

/// The DevTools connection: replies matched to their commands by id, events to their waiters,
/// standard error's tail, and the browser's exit. Shared with the reader and exit threads (which
/// do not hold the HeadlessChromium, so that its deinit runs).
final class DevToolsConnection: Sendable {
    /// One message from the browser: its JSON object, made once by the reader thread and only read
    /// after, never changed.
    struct Message: @unchecked Sendable {
        let object: [String: Any]
    }

    /// What a slot waits for: the reply to the command of its id, an event, or the browser's exit
    /// (and its profile directory's removal).
    enum Awaited {
        case reply
        case event(@Sendable (Message) -> Bool)
        case exit
    }

    private struct Slot {
        var awaited: Awaited
        var continuation: CheckedContinuation<Message, any Error>?
        var outcome: Result<Message, any Error>?
    }

    private struct State {
        var slots: [Int: Slot] = [:]
        var nextID = 0
        var stderrTail: [UInt8] = []
        var exitStatus: Int32?
        var repliesClosed = false
        /// Standard error reached end of file: every process of the browser's has exited.
        var stderrClosed = false
        /// Set once the browser exited and its replies were all read: every command and event
        /// wait fails with it.
        var ended: TestKitError?
        var removingProfile = false
        var profileRemoved = false
    }

    private static let stderrLimit = 64 * 1024
    private let state = Mutex(State())
    /// Held while a message is written, so that two are never interleaved.
    private let writing = Mutex(())
    let pid: Int32
    let commandFD: Int32
    let profile: URL

    init(pid: Int32, commandFD: Int32, profile: URL) {
        self.pid = pid
        self.commandFD = commandFD
        self.profile = profile
    }

    /// A slot for `awaited`, to be taken by ``wait(for:timeout:_:)`` (or ``forget(_:)``). What it
    /// waits for may come before the wait: the slot keeps it.
    func register(_ awaited: Awaited) -> Int {
        state.withLock { s in
            s.nextID += 1
            var slot = Slot(awaited: awaited)
            switch awaited {
            case .reply, .event: if let ended = s.ended { slot.outcome = .failure(ended) }
            case .exit: if s.profileRemoved { slot.outcome = .success(Message(object: [:])) }
            }
            s.slots[s.nextID] = slot
            return s.nextID
        }
    }

    func forget(_ key: Int) {
        let left = state.withLock { $0.slots.removeValue(forKey: key)?.continuation }
        left?.resume(throwing: CancellationError())
    }

    /// Waits for the slot `key` to be resolved, at most `timeout`; `what` names it in the error.
    func wait(for key: Int, timeout: Duration, _ what: String) async throws -> Message {
        defer { forget(key) }
        return try await withThrowingTaskGroup(of: Message?.self) { group in
            group.addTask {
                try await withCheckedThrowingContinuation { (c: CheckedContinuation<Message, any Error>) in
                    let outcome = self.state.withLock { s -> Result<Message, any Error>? in
                        guard var slot = s.slots[key] else { return .failure(TestKitError("\(what): not awaited")) }
                        if let outcome = slot.outcome {
                            s.slots[key] = nil
                            return outcome
                        }
                        slot.continuation = c
                        s.slots[key] = slot
                        return nil
                    }
                    if let outcome { c.resume(with: outcome) }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                let error: any Error = Task.isCancelled
                    ? CancellationError()
                    : TestKitError("Chromium: no \(what) within \(timeout)\(self.stderrLines())")
                let c = self.state.withLock { s -> CheckedContinuation<Message, any Error>? in
                    guard var slot = s.slots[key], slot.outcome == nil else { return nil }
                    if let c = slot.continuation {
                        s.slots[key] = nil
                        return c
                    }
                    slot.outcome = .failure(error)
                    s.slots[key] = slot
                    return nil
                }
                c?.resume(throwing: error)
                return nil
            }
            while let result = try await group.next() {
                if let message = result {
                    group.cancelAll()
                    return message
                }
            }
            throw TestKitError("\(what): not awaited")
        }
    }

    /// Sends a command and waits for its reply: its `result`, or a TestKitError with its `error`.
    /// `purpose` is added to a timeout's message.
    func command(_ method: String, _ params: [String: Any] = [:], session: String? = nil,
                 timeout: Duration, for purpose: String? = nil) async throws -> Message {
        let id = register(.reply)
        var envelope: [String: Any] = ["id": id, "method": method, "params": params]
        if let session { envelope["sessionId"] = session }
        do {
            var bytes = [UInt8](try JSONSerialization.data(withJSONObject: envelope))
            bytes.append(0)
            if state.withLock({ $0.ended == nil }) { try write(bytes) }
        } catch {
            forget(id)
            throw TestKitError("cannot send \(method) to Chromium: \(error)\(stderrLines())")
        }
        let reply = try await wait(for: id, timeout: timeout, "reply to \(method)" + (purpose.map { " (\($0))" } ?? ""))
        if let error = reply.object["error"] as? [String: Any] {
            throw TestKitError("\(method): \(error["message"] as? String ?? "\(error)")")
        }
        return Message(object: reply.object["result"] as? [String: Any] ?? [:])
    }

    private func write(_ bytes: [UInt8]) throws {
        try writing.withLock { _ in
            var done = 0
            while done < bytes.count {
                let n = bytes[done...].withUnsafeBytes { send(commandFD, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw TestKitError(String(cString: strerror(errno)))
                }
                done += n
            }
        }
    }

    /// Sends `signal` while the browser has not been reaped (so its pid cannot have been reused).
    func signal(_ signal: Int32) {
        state.withLock { s in
            if s.exitStatus == nil { kill(pid, signal) }
        }
    }

    /// The last lines of standard error, without the D-Bus complaints, for an error message.
    func stderrLines(_ count: Int = 12) -> String {
        let tail = state.withLock { String(decoding: $0.stderrTail, as: UTF8.self) }
        let lines = tail.split(separator: "\n").filter { !$0.contains(":ERROR:dbus/") }.suffix(count)
        return lines.isEmpty ? "" : "\nChromium's standard error ends:\n" + lines.joined(separator: "\n")
    }

    /// Reads the replies and events, and standard error, until both reach end of file. Runs on
    /// the reader thread.
    func pump(replies: Int32, stderr: Int32) {
        var open = [replies, stderr]
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var pending: [UInt8] = []
        var scanned = 0
        while !open.isEmpty {
            var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            if poll(&fds, nfds_t(fds.count), -1) < 0 {
                if errno == EINTR { continue }
                break
            }
            var stillOpen: [Int32] = []
            for (i, fd) in open.enumerated() {
                guard fds[i].revents != 0 else { stillOpen.append(fd); continue }
                let n = read(fd, &buffer, buffer.count)
                if n > 0 {
                    stillOpen.append(fd)
                    if fd == stderr {
                        state.withLock { s in
                            s.stderrTail += buffer[0..<n]
                            if s.stderrTail.count > Self.stderrLimit { s.stderrTail.removeFirst(s.stderrTail.count - Self.stderrLimit) }
                        }
                        continue
                    }
                    pending += buffer[0..<n]
                    var start = 0
                    while let end = pending[scanned...].firstIndex(of: 0) {
                        if let object = try? JSONSerialization.jsonObject(with: Data(pending[start..<end])) as? [String: Any] {
                            dispatch(Message(object: object))
                        }
                        start = end + 1
                        scanned = start
                    }
                    pending.removeFirst(start)
                    scanned = pending.count
                } else if n < 0 && (errno == EINTR || errno == EAGAIN) {
                    stillOpen.append(fd)
                } else {
                    close(fd)
                    if fd == stderr {
                        let gone = state.withLock { s -> Bool in
                            s.stderrClosed = true
                            return s.exitStatus != nil
                        }
                        if gone { removeProfile() }
                    } else {
                        let end = state.withLock { s -> Bool in
                            s.repliesClosed = true
                            return s.exitStatus != nil
                        }
                        if end { self.end() }
                    }
                }
            }
            open = stillOpen
        }
    }

    /// Resumes the command or the event waits `message` answers.
    private func dispatch(_ message: Message) {
        let ready = state.withLock { s -> [CheckedContinuation<Message, any Error>] in
            var ready: [CheckedContinuation<Message, any Error>] = []
            func resolve(_ key: Int) {
                guard var slot = s.slots[key] else { return }
                if let c = slot.continuation {
                    s.slots[key] = nil
                    ready.append(c)
                } else {
                    slot.outcome = .success(message)
                    s.slots[key] = slot
                }
            }
            if let id = (message.object["id"] as? NSNumber)?.intValue {
                if let slot = s.slots[id], case .reply = slot.awaited, slot.outcome == nil { resolve(id) }
            } else {
                for (key, slot) in s.slots where slot.outcome == nil {
                    if case .event(let matches) = slot.awaited, matches(message) { resolve(key) }
                }
            }
            return ready
        }
        for c in ready { c.resume(returning: message) }
    }

    /// The browser exited: reaps it. Runs on the exit thread.
    func reaped() {
        let end = state.withLock { s -> Bool in
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
            // Exit status, or minus the signal that killed it.
            s.exitStatus = (raw & 0x7F) == 0 ? (raw >> 8) & 0xFF : -(raw & 0x7F)
            return s.repliesClosed
        }
        if end { self.end() }
        if state.withLock({ $0.stderrClosed }) { removeProfile() }
    }

    /// The browser exited and its last replies were read: every command and event wait still open
    /// fails, and so will every later one.
    private func end() {
        let status = state.withLock { $0.exitStatus } ?? 0
        let how = status < 0 ? "was killed by signal \(-status)" : "exited with status \(status)"
        let error = TestKitError("Chromium \(how)\(stderrLines())")
        let failed = state.withLock { s -> [CheckedContinuation<Message, any Error>] in
            s.ended = error
            var failed: [CheckedContinuation<Message, any Error>] = []
            for (key, var slot) in s.slots where slot.outcome == nil {
                if case .exit = slot.awaited { continue }
                if let c = slot.continuation {
                    s.slots[key] = nil
                    failed.append(c)
                } else {
                    slot.outcome = .failure(error)
                    s.slots[key] = slot
                }
            }
            return failed
        }
        for c in failed { c.resume(throwing: error) }
    }

    /// The browser was reaped, and all its processes have exited (they share its standard error):
    /// removes the profile directory, and the waits for the exit end. Runs once, on whichever of
    /// the reader and exit threads sees the last of the two.
    private func removeProfile() {
        let first = state.withLock { s -> Bool in
            defer { s.removingProfile = true }
            return !s.removingProfile
        }
        guard first else { return }
        try? FileManager.default.removeItem(at: profile)
        let exited = Message(object: [:])
        let ready = state.withLock { s -> [CheckedContinuation<Message, any Error>] in
            s.profileRemoved = true
            var ready: [CheckedContinuation<Message, any Error>] = []
            for (key, var slot) in s.slots where slot.outcome == nil {
                guard case .exit = slot.awaited else { continue }
                if let c = slot.continuation {
                    s.slots[key] = nil
                    ready.append(c)
                } else {
                    slot.outcome = .success(exited)
                    s.slots[key] = slot
                }
            }
            return ready
        }
        for c in ready { c.resume(returning: exited) }
    }
}
