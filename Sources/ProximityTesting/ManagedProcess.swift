import Foundation
import Synchronization

/// Why a wait in the test kit gave up.
public struct TestKitError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A child process with its output captured, and event-driven waits on its output and its exit.
///
/// Every wait takes a timeout and returns as soon as the event happens: nothing here sleeps in
/// place of waiting for something.
public final class ManagedProcess: Sendable {
    private struct State {
        var stdout = ""
        var stderr = ""
        var exitStatus: Int32?
        var waiters: [UInt64: (predicate: @Sendable (State) -> Bool, continuation: CheckedContinuation<Void, Never>)] = [:]
        var nextWaiter: UInt64 = 0
    }

    /// The captured state, shared with the pipe and exit handlers.
    private final class Shared: Sendable {
        let mutex = Mutex(State())
    }
    private let shared = Shared()
    private let process: Process
    private let stdinPipe: Pipe?
    public let executable: String
    public let arguments: [String]

    public var pid: Int32 { process.processIdentifier }

    /// Starts `executable` with `arguments`. `environment` entries are added to (or override) this
    /// process's environment.
    /// With `keepStdinOpen`, the child's standard input is a pipe whose write end this object holds
    /// open: the child sees end of file when this process exits, however it exits.
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                currentDirectory: String? = nil, keepStdinOpen: Bool = false) throws {
        self.executable = executable
        self.arguments = arguments
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        process.environment = env
        if let currentDirectory { process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        if keepStdinOpen {
            let input = Pipe()
            process.standardInput = input
            self.stdinPipe = input
        } else {
            process.standardInput = FileHandle.nullDevice
            self.stdinPipe = nil
        }
        self.process = process
        let shared = self.shared
        out.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty { handle.readabilityHandler = nil; return }
            ManagedProcess.append(shared, String(decoding: data, as: UTF8.self), toStdout: true)
        }
        err.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty { handle.readabilityHandler = nil; return }
            ManagedProcess.append(shared, String(decoding: data, as: UTF8.self), toStdout: false)
        }
        process.terminationHandler = { p in
            // Drain what is left in the pipes before announcing the exit.
            let restOut = out.fileHandleForReading.readDataToEndOfFileSafely()
            let restErr = err.fileHandleForReading.readDataToEndOfFileSafely()
            out.fileHandleForReading.readabilityHandler = nil
            err.fileHandleForReading.readabilityHandler = nil
            let ready = shared.mutex.withLock { s -> [CheckedContinuation<Void, Never>] in
                s.stdout += String(decoding: restOut, as: UTF8.self)
                s.stderr += String(decoding: restErr, as: UTF8.self)
                s.exitStatus = p.terminationReason == .uncaughtSignal ? -p.terminationStatus : p.terminationStatus
                return ManagedProcess.takeSatisfied(&s)
            }
            for c in ready { c.resume() }
        }
        // Threads of the Swift runtime may block signals such as SIGTERM, and a child inherits its
        // parent thread's mask: start it with none blocked, as a shell would.
        var none = sigset_t()
        var saved = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, &saved)
        defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
        try process.run()
    }

    private static func append(_ shared: Shared, _ text: String, toStdout: Bool) {
        let ready = shared.mutex.withLock { s -> [CheckedContinuation<Void, Never>] in
            if toStdout { s.stdout += text } else { s.stderr += text }
            return takeSatisfied(&s)
        }
        for c in ready { c.resume() }
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
            throw TestKitError("\(executable) did not print '\(text)' within \(timeout); exit=\(String(describing: exitStatus))\nstdout: \(stdout)\nstderr: \(stderr)")
        }
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

    public func signal(_ signal: Int32) {
        if isRunning { kill(process.processIdentifier, signal) }
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
        if isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

extension FileHandle {
    func readDataToEndOfFileSafely() -> Data {
        (try? readToEnd()) ?? Data()
    }
}

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
