import DBusKit
import Logging
import ProximityAPI
import ServiceLifecycle
import UnixSignals

/// Reloads the configuration (`SIGHUP`, `Node1.Reload()`): reads it again and applies it as one
/// change, or changes nothing. One reload at a time.
///
/// Applied at once: the regions and the alerts of the config file, `region-monitor`,
/// `clear-interval`, `rssi-offset`, `log-level`, `mqtt` (a changed section reconnects). The
/// others (the bus, the name, the adapter, the radio model …) need a restart: a reload that
/// changes them logs a warning and keeps the running value.
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
            throw error
        }
        await exporter.waitUntilShown(sequence)
        if next.logLevel != current.logLevel { LogLevelSwitch.shared.level = next.logLevel }
        current.logLevel = next.logLevel
        current.regions = next.regions
        current.alerts = next.alerts
        current.regionMonitor = next.regionMonitor
        current.clearInterval = next.clearInterval
        current.rssiOffset = next.rssiOffset
        current.configFile = next.configFile
        var running = next
        running.name = current.name   // a new name waits for the restart, as its warning says
        await publisher?.reconfigure(running)
        current.mqtt = next.mqtt
        logger.notice("configuration reloaded", metadata: ["regions": "\(next.regions.count)", "alerts": "\(next.alerts.count)"])
    }

    /// The settings that differ and need a restart, by their config file key.
    static func restartOnly(_ a: NodeConfiguration, _ b: NodeConfiguration) -> [String] {
        var keys: [String] = []
        if a.bus != b.bus { keys.append("bus") }
        if a.busName != b.busName { keys.append("bus-name") }
        if a.stateDirectory != b.stateDirectory { keys.append("state-dir") }
        if a.name != b.name { keys.append("name") }
        if a.serviceUUID != b.serviceUUID { keys.append("service-uuid") }
        if a.adapter != b.adapter { keys.append("adapter") }
        if a.powerOn != b.powerOn { keys.append("power-on") }
        if a.measuredPower != b.measuredPower { keys.append("measured-power") }
        if a.pathLossExponent != b.pathLossExponent { keys.append("path-loss-exponent") }
        if a.maxPeers != b.maxPeers { keys.append("max-peers") }
        if a.trackBeacons != b.trackBeacons { keys.append("beacons") }
        return keys
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
