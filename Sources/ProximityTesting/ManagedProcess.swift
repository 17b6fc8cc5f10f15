import ChildProcess
import Foundation
import Synchronization

/// Why a wait in the test kit gave up.
public struct TestKitError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A child process with its output captured, and event-driven waits on its output and its exit.
///
/// Started with `posix_spawn(3)` (signal mask emptied and SIGTERM, SIGINT and SIGPIPE reset to
/// their defaults in the child, as a shell would), not Foundation's `Process`: one plain thread
/// per child reads its pipes with `poll(2)` until both close, then reaps it with `waitpid(2)`. No
/// dispatch sources are involved. Every wait takes a timeout and returns as soon as the event
/// happens: nothing here sleeps in place of waiting for something.
public final class ManagedProcess: Sendable {
    private struct State {
        var stdout = ""
        var stderr = ""
        var exitStatus: Int32?
        var waiters: [UInt64: (predicate: @Sendable (State) -> Bool, continuation: CheckedContinuation<Void, Never>)] = [:]
        var nextWaiter: UInt64 = 0
    }

    /// The captured state, shared with the reader thread.
    private final class Shared: Sendable {
        let mutex = Mutex(State())
    }
    private let shared = Shared()
    /// The write end of the child's standard input, held open while this object lives
    /// (`keepStdinOpen`); closed by the kernel when this process exits, however it exits.
    private let stdinWriteFD: Int32
    public let pid: Int32
    public let executable: String
    public let arguments: [String]

    /// With `keepStdinOpen`, the child's standard input is a pipe whose write end this object holds
    /// open: the child sees end of file when this process exits.
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                keepStdinOpen: Bool = false) throws {
        self.executable = executable
        self.arguments = arguments
        // Pipes are made and the child spawned under one lock, so no other child of ours can
        // inherit this one's pipe ends between pipe() and FD_CLOEXEC.
        spawnLock.lock()
        defer { spawnLock.unlock() }

        func makePipe() throws -> (read: Int32, write: Int32) {
            var fds: [Int32] = [-1, -1]
            guard pipe(&fds) == 0 else { throw TestKitError("pipe: \(String(cString: strerror(errno)))") }
            _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
            _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
            return (fds[0], fds[1])
        }
        let out = try makePipe()
        let err = try makePipe()
        let input: (read: Int32, write: Int32)
        if keepStdinOpen {
            input = try makePipe()
        } else {
            input = (open("/dev/null", O_RDONLY | O_CLOEXEC), -1)
        }

        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        let spawned = spawnChild(executable, arguments, environment: env,
                                 SpawnSetup(descriptors: [.duplicate(input.read, onto: 0), .duplicate(out.write, onto: 1),
                                                          .duplicate(err.write, onto: 2)]))
        close(out.write)
        close(err.write)
        close(input.read)
        let child: pid_t
        do { child = try spawned.get() } catch {
            close(out.read)
            close(err.read)
            if input.write >= 0 { close(input.write) }
            throw TestKitError("cannot start \(executable): \(error)")
        }
        self.pid = child
        self.stdinWriteFD = input.write
        let childPID = child

        let shared = self.shared
        let reader = Thread {
            ManagedProcess.pump(stdout: out.read, stderr: err.read, into: shared)
            var raw: Int32 = 0
            while waitpid(childPID, &raw, 0) < 0 && errno == EINTR {}
            // Exit status, or minus the signal that killed it.
            let exit: Int32 = (raw & 0x7F) == 0 ? (raw >> 8) & 0xFF : -(raw & 0x7F)
            let ready = shared.mutex.withLock { s -> [CheckedContinuation<Void, Never>] in
                s.exitStatus = exit
                return ManagedProcess.takeSatisfied(&s)
            }
            for c in ready { c.resume() }
        }
        reader.name = "child \(child)"
        reader.start()
    }

    /// Reads both pipes until both reach end of file. Runs on the child's reader thread.
    private static func pump(stdout: Int32, stderr: Int32, into shared: Shared) {
        var open: [(fd: Int32, isStdout: Bool)] = [(stdout, true), (stderr, false)]
        var buffer = [UInt8](repeating: 0, count: 65536)
        // A read can end inside a UTF-8 sequence: its first bytes wait here for the rest.
        var pending: [Bool: [UInt8]] = [true: [], false: []]
        while !open.isEmpty {
            var fds = open.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            if poll(&fds, nfds_t(fds.count), -1) < 0 {
                if errno == EINTR { continue }
                break
            }
            var stillOpen: [(fd: Int32, isStdout: Bool)] = []
            for (i, entry) in open.enumerated() {
                guard fds[i].revents != 0 else { stillOpen.append(entry); continue }
                let n = read(entry.fd, &buffer, buffer.count)
                if n > 0 {
                    var bytes = pending[entry.isStdout]! + buffer[0..<n]
                    let complete = completeUTF8Prefix(bytes)
                    pending[entry.isStdout] = Array(bytes[complete...])
                    bytes.removeSubrange(complete...)
                    let text = String(decoding: bytes, as: UTF8.self)
                    let ready = shared.mutex.withLock { s -> [CheckedContinuation<Void, Never>] in
                        if entry.isStdout { s.stdout += text } else { s.stderr += text }
                        return takeSatisfied(&s)
                    }
                    for c in ready { c.resume() }
                    stillOpen.append(entry)
                } else if n < 0 && (errno == EINTR || errno == EAGAIN) {
                    stillOpen.append(entry)
                } else {
                    close(entry.fd)
                    if let rest = pending[entry.isStdout], !rest.isEmpty {
                        let text = String(decoding: rest, as: UTF8.self)
                        shared.mutex.withLock { s in if entry.isStdout { s.stdout += text } else { s.stderr += text } }
                    }
                }
            }
            open = stillOpen
        }
    }

    /// The length of the longest prefix of `bytes` that does not end inside a UTF-8 sequence.
    static func completeUTF8Prefix(_ bytes: [UInt8]) -> Int {
        // Look back at most three bytes for the lead byte of the last sequence.
        var i = bytes.count - 1
        while i >= 0 && i >= bytes.count - 4 {
            let b = bytes[i]
            if b & 0xC0 != 0x80 {
                let length = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1
                return bytes.count - i < length ? i : bytes.count
            }
            i -= 1
        }
        return bytes.count
    }

    private static func takeSatisfied(_ s: inout State) -> [CheckedContinuation<Void, Never>] {
        var ready: [CheckedContinuation<Void, Never>] = []
        for (id, waiter) in s.waiters where waiter.predicate(s) {
            ready.append(waiter.continuation)
            s.waiters[id] = nil
        }
        return ready
    }

    public var stdout: String { shared.mutex.withLock { $0.stdout } }
    public var stderr: String { shared.mutex.withLock { $0.stderr } }
    public var exitStatus: Int32? { shared.mutex.withLock { $0.exitStatus } }
    public var isRunning: Bool { exitStatus == nil }

    /// Waits until `predicate` holds on the captured state, or the process exits, or the timeout.
    private func wait(timeout: Duration, _ predicate: @escaping @Sendable (State) -> Bool) async -> Bool {
        let id = shared.mutex.withLock { s -> UInt64 in s.nextWaiter += 1; return s.nextWaiter }
        let satisfiedOrExited: @Sendable (State) -> Bool = { predicate($0) || $0.exitStatus != nil }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    let now = self.shared.mutex.withLock { s -> Bool in
                        if satisfiedOrExited(s) { return true }
                        s.waiters[id] = (satisfiedOrExited, c)
                        return false
                    }
                    if now { c.resume() }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                let c = self.shared.mutex.withLock { $0.waiters.removeValue(forKey: id)?.continuation }
                c?.resume()
            }
            await group.next()
            group.cancelAll()
            let c = self.shared.mutex.withLock { $0.waiters.removeValue(forKey: id)?.continuation }
            c?.resume()
            await group.waitForAll()
        }
        return shared.mutex.withLock { predicate($0) }
    }

    /// Waits until standard output (or error, with `inStderr`) contains `text`.
    public func waitForOutput(containing text: String, inStderr: Bool = false, timeout: Duration = .seconds(10)) async throws {
        let found = await wait(timeout: timeout) { s in (inStderr ? s.stderr : s.stdout).contains(text) }
        if !found {
            throw TestKitError("\(executable) did not print '\(text)' within \(timeout); exit=\(String(describing: exitStatus))\nstdout: " +
                "\(stdout)\nstderr: \(stderr)")
        }
    }

    /// Waits until `predicate` holds on standard output (or error, with `inStderr`), the process
    /// exits, or the timeout; returns whether it holds.
    @discardableResult
    public func waitForOutput(inStderr: Bool = false, timeout: Duration = .seconds(10),
                              where predicate: @escaping @Sendable (String) -> Bool) async -> Bool {
        await wait(timeout: timeout) { s in predicate(inStderr ? s.stderr : s.stdout) }
    }

    /// Waits for the process to exit and returns its status (negative: killed by that signal).
    @discardableResult
    public func waitForExit(timeout: Duration = .seconds(10)) async throws -> Int32 {
        _ = await wait(timeout: timeout) { $0.exitStatus != nil }
        guard let status = exitStatus else {
            throw TestKitError("\(executable) did not exit within \(timeout)\nstdout: \(stdout)\nstderr: \(stderr)")
        }
        return status
    }

    /// Sends `signal` while the child has not been reaped (so its pid cannot have been reused).
    public func signal(_ signal: Int32) {
        shared.mutex.withLock { s in
            if s.exitStatus == nil { kill(pid, signal) }
        }
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`.
    public func stop(grace: Duration = .seconds(5)) async {
        guard isRunning else { return }
        signal(SIGTERM)
        if (try? await waitForExit(timeout: grace)) == nil {
            signal(SIGKILL)
            _ = try? await waitForExit(timeout: .seconds(5))
        }
    }

    deinit {
        signal(SIGKILL)
        if stdinWriteFD >= 0 { close(stdinWriteFD) }
    }
}

/// Held from making a child's pipes to spawning it (pipe(2), then FD_CLOEXEC), so that no other
/// child of the test kit inherits them meanwhile. Every module of the test kit that spawns holds it
/// (the browser layer too).
public let spawnLock = NSLock()

/// The result of a command run to completion.
public struct CommandResult: Sendable, CustomStringConvertible {
    public let status: Int32
    public let stdout: String
    public let stderr: String
    public var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }
}

/// Runs a command to completion (or kills it at `timeout`).
public func runCommand(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                       timeout: Duration = .seconds(30)) async throws -> CommandResult {
    let process = try ManagedProcess(resolveExecutable(executable), arguments, environment: environment)
    do {
        let status = try await process.waitForExit(timeout: timeout)
        return CommandResult(status: status, stdout: process.stdout, stderr: process.stderr)
    } catch {
        process.signal(SIGKILL)
        throw error
    }
}

/// `name` as found on PATH (or as is, if it contains a slash).
public func resolveExecutable(_ name: String) -> String {
    if name.contains("/") { return name }
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    for dir in path.split(separator: ":") {
        let candidate = "\(dir)/\(name)"
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    return "/usr/bin/\(name)"
}
