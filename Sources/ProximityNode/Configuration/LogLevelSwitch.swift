import Logging
import Synchronization

/// The daemon's log level, read by every logger its log handler made, so that a reload that
/// changes `log-level` changes it for all of them at once.
///
/// `proximityd run` bootstraps the logging system with ``handler(label:)`` of ``shared``; setting
/// ``level`` then takes effect on the next message of every logger. Reading it is one relaxed
/// atomic load, done for every message a logger is asked to log.
public final class LogLevelSwitch: Sendable {
    /// The daemon's.
    public static let shared = LogLevelSwitch(.info)

    private let index: Atomic<Int>

    public init(_ level: Logger.Level) {
        index = Atomic(Self.index(of: level))
    }

    /// The least severe level logged.
    public var level: Logger.Level {
        get { Logger.Level.allCases[index.load(ordering: .relaxed)] }
        set { index.store(Self.index(of: newValue), ordering: .relaxed) }
    }

    /// A handler that writes to standard error, as `StreamLogHandler` does, at this switch's level.
    public func handler(label: String) -> SwitchedLogHandler {
        SwitchedLogHandler(stream: .standardError(label: label), levelSwitch: self)
    }

    private static func index(of level: Logger.Level) -> Int {
        Logger.Level.allCases.firstIndex(of: level) ?? 0
    }
}

/// A `StreamLogHandler` whose level is a ``LogLevelSwitch``'s. Setting `logLevel` on one logger
/// overrides the switch for that logger alone.
public struct SwitchedLogHandler: LogHandler {
    private var stream: StreamLogHandler
    private let levelSwitch: LogLevelSwitch
    private var override: Logger.Level?

    init(stream: StreamLogHandler, levelSwitch: LogLevelSwitch) {
        self.stream = stream
        self.levelSwitch = levelSwitch
    }

    public var logLevel: Logger.Level {
        get { override ?? levelSwitch.level }
        set { override = newValue }
    }

    public var metadata: Logger.Metadata {
        get { stream.metadata }
        set { stream.metadata = newValue }
    }

    public var metadataProvider: Logger.MetadataProvider? {
        get { stream.metadataProvider }
        set { stream.metadataProvider = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { stream[metadataKey: key] }
        set { stream[metadataKey: key] = newValue }
    }

    public func log(event: LogEvent) {
        stream.log(event: event)
    }
}
