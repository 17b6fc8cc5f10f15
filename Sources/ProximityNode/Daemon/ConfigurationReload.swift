import DBusKit
import Logging
import ProximityAPI
import ServiceLifecycle
import UnixSignals

/// Reloads the configuration (`SIGHUP`, `Node1.Reload()`): reads it again and applies it as one
/// change, or changes nothing. One reload at a time.
///
/// Applied at once: the sections of the config file (the regions, the alerts, `region-monitor`,
/// `tracking`, `rules`, `mqtt`: a changed section reconnects) and the `run` options declared
/// ``RunOption/Effect/reload`` (`clear-interval`, `rssi-offset`, `log-level`). The others (the
/// bus, the name, the adapter, the radio model …) need a restart: a reload that changes them logs
/// a warning and keeps the running value.
public actor ConfigurationReload {
    let reloader: ConfigurationReloader?
    let engine: NodeEngine
    let exporter: BusExporter
    let publisher: MQTTPublisher?
    let logger: Logger
    /// The configuration in force.
    private(set) var current: NodeConfiguration

    public init(reloader: ConfigurationReloader?, current: NodeConfiguration, engine: NodeEngine, exporter: BusExporter,
                publisher: MQTTPublisher? = nil, logger: Logger) {
        self.reloader = reloader
        self.current = current
        self.engine = engine
        self.exporter = exporter
        self.publisher = publisher
        self.logger = logger
    }

    /// Reads and applies the configuration; throws `InvalidConfiguration` (with the
    /// `FILE:LINE:COLUMN:` lines) or `Failed`, with nothing changed.
    public func reload() async throws(DBusError) {
        guard let reloader else {
            throw DBusError(ProximityBus.Errors.failed, "this node was started without a configuration to reload")
        }
        logger.info("reloading the configuration", metadata: ["config.file": "\(current.configFile ?? "none")"])
        // What parsing the file took (its YAML tree: many small blocks) goes back to the system,
        // whether it was applied or refused.
        defer { SystemAllocator.returnFreeMemory() }
        let next: NodeConfiguration
        do { next = try reloader.read() } catch {
            for problem in error.problems { logger.error("\(problem)") }
            logger.error("the configuration was not reloaded: the running one stays")
            throw DBusError(ProximityBus.Errors.invalidConfiguration, error.description)
        }
        for key in Self.restartOnly(current, next) {
            logger.warning("\(key) changed in the configuration: it takes effect at the next restart")
        }
        let sequence: UInt64
        do { sequence = try await engine.reconfigure(next) } catch {
            logger.error("the configuration was not reloaded: \(error.message)")
            throw error.busError
        }
        await exporter.waitUntilShown(sequence)
        if next.logLevel != current.logLevel { LogLevelSwitch.shared.level = next.logLevel }
        // What runs now: the new configuration, but the settings that wait for a restart (a new
        // name among them, as its warning says).
        current = Self.applied(next, running: current)
        await publisher?.reconfigure(current)
        logger.notice("configuration reloaded", metadata: ["regions": "\(next.regions.count)", "alerts": "\(next.alerts.count)"])
    }

    /// The settings that need a restart: the `run` options declared so (``RunOption/effect``),
    /// the one list the warning and the running configuration follow. Everything else a reload
    /// applies.
    static let restartOnlySettings: [RunOption] = RunOption.all.filter { $0.effect == .restart }

    /// The settings that differ and need a restart, by their config file key.
    static func restartOnly(_ a: NodeConfiguration, _ b: NodeConfiguration) -> [String] {
        restartOnlySettings.filter { $0.differs(a, b) }.map(\.key)
    }

    /// `next` as it runs after a reload: with the restart-only settings of `running`.
    static func applied(_ next: NodeConfiguration, running: NodeConfiguration) -> NodeConfiguration {
        var applied = next
        for setting in restartOnlySettings { setting.keep(&applied, running) }
        return applied
    }
}

/// Reloads on every `SIGHUP` until shutdown (systemd's `ExecReload=` sends it).
struct ReloadService: Service {
    let reload: ConfigurationReload

    func run() async throws {
        await cancelWhenGracefulShutdown { [reload] in
            for await _ in await UnixSignalsSequence(trapping: .sighup) {
                // The outcome is logged; a signal has nobody to answer.
                try? await reload.reload()
            }
        }
    }
}
