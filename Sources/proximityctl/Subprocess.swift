import ChildProcess
import Foundation
import Synchronization

/// A child process of `proximityctl alerts consume` (the `--exec` command, `espeak-ng`,
/// `xdg-open`): started with `posix_spawn(3)` in a process group of its own, so that a signal
/// reaches the whole command (`/bin/sh` and what it runs), with the signal mask emptied and the
/// signals this process handles back at their defaults. Its standard input is `/dev/null`; its
/// output goes where `proximityctl`'s goes unless `stdoutToStderr`.
///
/// One thread per child waits for it (`waitpid`) and calls `onExit` with its pid and its exit
/// status, or minus the signal that killed it.
final class Subprocess: Sendable {
    let pid: Int32
    let executable: String
    /// Whether the child was reaped, shared with the thread that waits for it.
    private final class Reaped: Sendable { let mutex = Mutex(false) }
    private let reaped = Reaped()

    /// Starts `executable` (a path) with `arguments`; `environment` is added to this process's.
    init(_ executable: String, _ arguments: [String], environment: [String: String] = [:], stdoutToStderr: Bool = false,
         onExit: @escaping @Sendable (_ pid: Int32, _ status: Int32) -> Void) throws {
        self.executable = executable
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        let setup = SpawnSetup(descriptors: [.nullInput(0)] + (stdoutToStderr ? [.duplicate(2, onto: 1)] : []),
                               defaultSignals: [SIGTERM, SIGINT, SIGPIPE, SIGHUP, SIGCHLD, SIGQUIT], ownProcessGroup: true)
        let child: pid_t
        switch spawnChild(executable, arguments, environment: env, setup) {
        case .success(let started): child = started
        case .failure(let error): throw SubprocessError(executable: executable, errno: error.errorNumber)
        }
        pid = child
        let reaped = self.reaped
        let spawned = child
        let thread = Thread {
            // Waits without reaping, then reaps under the lock that signalGroup takes: the pid is
            // never signalled once it may belong to another process.
            var info = siginfo_t()
            while waitid(P_PID, id_t(spawned), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
            let code = reaped.mutex.withLock { done -> Int32 in
                var raw: Int32 = 0
                while waitpid(spawned, &raw, 0) < 0 && errno == EINTR {}
                done = true
                return (raw & 0x7F) == 0 ? (raw >> 8) & 0xFF : -(raw & 0x7F)
            }
            onExit(spawned, code)
        }
        thread.name = "child \(spawned)"
        thread.start()
    }

    /// Sends `signal` to the child's process group, while the child has not been reaped (so its
    /// pid cannot have been reused).
    func signalGroup(_ signal: Int32) {
        reaped.mutex.withLock { done in
            if !done { kill(-pid, signal) }
        }
    }

    var isRunning: Bool { reaped.mutex.withLock { !$0 } }

    /// `name` as found on PATH, or nil; a name with a slash is taken as it is, if executable.
    static func find(_ name: String) -> String? {
        if name.contains("/") { return FileManager.default.isExecutableFile(atPath: name) ? name : nil }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for dir in path.split(separator: ":") where !dir.isEmpty {
            let candidate = "\(dir)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}

struct SubprocessError: Error, CustomStringConvertible {
    let executable: String
    let errno: Int32
    var description: String { "cannot start \(executable): \(String(cString: strerror(errno)))" }
}
