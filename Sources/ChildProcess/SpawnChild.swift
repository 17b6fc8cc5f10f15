import Glibc

/// What a child started by ``spawnChild(_:_:environment:_:)`` gets besides its arguments and
/// environment: its descriptors, the signals put back at their defaults, and its process group.
public struct SpawnSetup: Sendable, Hashable {
    /// One descriptor of the child's.
    public enum Descriptor: Sendable, Hashable {
        /// The parent's descriptor on the child's (`posix_spawn_file_actions_adddup2`; the
        /// parent's must not already be the child's, whose close-on-exec flag would then stay).
        case duplicate(Int32, onto: Int32)
        /// `/dev/null`, read-only, on the child's descriptor (`posix_spawn_file_actions_addopen`).
        case nullInput(Int32)
    }

    public var descriptors: [Descriptor]
    /// Signals at their defaults in the child (`posix_spawnattr_setsigdefault`): those the parent
    /// handles or ignores. The child's signal mask is always emptied.
    public var defaultSignals: [Int32]
    /// A process group of its own (`posix_spawnattr_setpgroup`), so that a signal to the group
    /// reaches what the child runs (a shell's commands).
    public var ownProcessGroup: Bool

    public init(descriptors: [Descriptor], defaultSignals: [Int32] = [SIGTERM, SIGINT, SIGPIPE, SIGHUP, SIGCHLD],
                ownProcessGroup: Bool = false) {
        self.descriptors = descriptors
        self.defaultSignals = defaultSignals
        self.ownProcessGroup = ownProcessGroup
    }
}

/// `posix_spawn(3)`'s error number, and what it means.
public struct SpawnError: Error, Sendable, Hashable, CustomStringConvertible {
    public let errorNumber: Int32
    public var description: String { String(cString: strerror(errorNumber)) }
}

/// Starts `executable` (a path) with `posix_spawn(3)` as a shell would: the signal mask emptied,
/// `setup`'s signals at their defaults, its descriptors in place, and exactly `environment`.
/// Returns the child's pid; the caller waits for it.
public func spawnChild(_ executable: String, _ arguments: [String], environment: [String: String],
                       _ setup: SpawnSetup) -> Result<pid_t, SpawnError> {
    let actions = SpawnFileActions()
    for descriptor in setup.descriptors {
        switch descriptor {
        case .duplicate(let ours, let theirs): posix_spawn_file_actions_adddup2(&actions.value, ours, theirs)
        case .nullInput(let theirs): posix_spawn_file_actions_addopen(&actions.value, theirs, "/dev/null", O_RDONLY, 0)
        }
    }
    let attributes = SpawnAttributes()
    var emptyMask = sigset_t()
    sigemptyset(&emptyMask)
    posix_spawnattr_setsigmask(&attributes.value, &emptyMask)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for signal in setup.defaultSignals { sigaddset(&defaults, signal) }
    posix_spawnattr_setsigdefault(&attributes.value, &defaults)
    var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
    if setup.ownProcessGroup {
        posix_spawnattr_setpgroup(&attributes.value, 0)
        flags |= POSIX_SPAWN_SETPGROUP
    }
    posix_spawnattr_setflags(&attributes.value, Int16(flags))

    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer {
        for p in argv { free(p) }
        for p in envp { free(p) }
    }
    var child: pid_t = 0
    let status = posix_spawn(&child, executable, &actions.value, &attributes.value, argv, envp)
    return status == 0 ? .success(child) : .failure(SpawnError(errorNumber: status))
}

/// A `posix_spawn_file_actions_t`, from `posix_spawn_file_actions_init` to `_destroy`.
final class SpawnFileActions {
    var value = posix_spawn_file_actions_t()
    init() { posix_spawn_file_actions_init(&value) }
    deinit { posix_spawn_file_actions_destroy(&value) }
}

/// A `posix_spawnattr_t`, from `posix_spawnattr_init` to `_destroy`.
final class SpawnAttributes {
    var value = posix_spawnattr_t()
    init() { posix_spawnattr_init(&value) }
    deinit { posix_spawnattr_destroy(&value) }
}
