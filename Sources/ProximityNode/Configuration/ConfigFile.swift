import DBusKit
import Foundation
import ProximityTrust
import Logging
import ProximityCore

/// The daemon's config file (`proximityd run --config FILE`, by default
/// `/etc/proximityd/proximityd.yaml` when it exists), as read: the `run` options it sets, the
/// region monitor's settings, the regions, the alerts, the tracker's settings and the rules.
/// Format and keys: `docs/configuration.md`.
///
/// Reading is strict and reports every problem at once, one line each, as
/// `FILE:LINE:COLUMN: message` (1-based, pointing at the offending key or value): YAML syntax,
/// bytes that are not UTF-8, unknown keys (with the nearest known key when it is close), duplicate
/// keys, wrong types, values out of range, duplicate region, alert and rule identifiers, matchers
/// that cannot be, alert parts that cannot be or do not go together, rules that cannot be.
/// An empty file, or one with only comments, is a valid empty config.
public struct ConfigFile: Sendable, Hashable {
    /// Where `proximityd run` and `proximityd check-config` look when given no file.
    public static let defaultPath = "/etc/proximityd/proximityd.yaml"
    /// The largest file read, bytes, refused before it is parsed: about 50 000 regions fit; more
    /// belong over D-Bus (`StartMonitoring`). ``ConfigLimits`` bounds what is inside.
    public static let maxSize = ConfigLimits.maxSize

    /// The top-level keys: the `run` options' long names (``RunOption/all``), then the sections.
    public static let keys = RunOption.all.map(\.key) + sections
    /// The sections: the top-level keys that are not `run` options. A reload applies them all.
    public static let sections = ["names", "zones", "region-monitor", "regions", "alerts", "tracking", "rules", "mqtt", "fleet-key",
                                  "previous-fleet-key", "accept-unverified", "irks"]
    /// The keys of `mqtt:` (`docs/mqtt.md`).
    public static let mqttKeys = [
        "broker", "ca-file", "cert-file", "key-file", "username", "password-file", "client-id", "prefix", "keepalive",
        "report-interval", "report-moved", "hearings", "compat", "room", "role", "discovery", "discovery-prefix", "outbox-size",
        "reconnect-max", "allow-plaintext",
    ]
    /// The keys of `zones:`.
    public static let zonesKeys = ["immediate", "near"]
    /// The keys of `region-monitor:`.
    public static let regionMonitorKeys = ["exit-period", "max-regions", "restore-limit"]
    /// The keys of an item of `regions:` (the keys of `match:` are ``RegionMatcher/Key/configName``).
    public static let regionKeys = ["identifier", "match"]
    /// The keys of an item of `alerts:`: `identifier`, then the parts' ``Alert/Key/configName``s
    /// (the keys of its `match:` are ``RegionMatcher/Key/configName``, but for `within` and `exit-period`).
    public static let alertKeys = ["identifier"] + Alert.Key.allCases.map(\.configName)
    /// The most alerts a file may define.
    public static let maxAlerts = 1000
    /// The keys of `tracking:` (the keys of its `match:` are ``RegionMatcher/Key/configName``, but
    /// for `within` and `exit-period`).
    public static let trackingKeys = ["match", "heartbeat", "context-data"]
    /// The keys of an item of `rules:`: `identifier`, then ``Rule/keys`` (what is under them is
    /// checked by ``Rule/parse(identifier:_:)``).
    public static let ruleKeys = ["identifier"] + Rule.keys
    /// The most rules a file may define: as many as the rules engine holds.
    public static let maxRules = RuleEngine.maxRules

    /// The file it was read from, as given.
    public var path: String
    /// The `run` options the file sets; nil where it does not.
    public var options: RunOptions
    /// `region-monitor:`, with the defaults for what the file leaves out.
    public var regionMonitor: RegionMonitor.Configuration
    /// `regions:`, in the file's order, each with source ``RegionSource/config``.
    public var regions: [Region]
    /// `alerts:`, in the file's order.
    public var alerts: [Alert]
    /// `zones:`: where immediate and near end, metres.
    public var zones: ZoneThresholds
    /// `names:`: peer identifier → display name.
    public var names: [PeerID: String]
    /// `tracking:`, with the defaults for what the file leaves out.
    public var tracking: Tracker.Configuration
    /// `rules:`, in the file's order.
    public var rules: [Rule]
    /// `mqtt:`; nil when the file has none.
    public var mqtt: MQTTSettings?
    /// `fleet-key:` (its key read and checked) and `accept-unverified:`.
    public var trust = TrustSettings()

    public init(path: String, options: RunOptions = RunOptions(), names: [PeerID: String] = [:], zones: ZoneThresholds = .init(),
                regionMonitor: RegionMonitor.Configuration = .init(),
                regions: [Region] = [], alerts: [Alert] = [], tracking: Tracker.Configuration = .init(), rules: [Rule] = [],
                mqtt: MQTTSettings? = nil) {
        self.path = path
        self.options = options
        self.regionMonitor = regionMonitor
        self.regions = regions
        self.alerts = alerts
        self.tracking = tracking
        self.zones = zones
        self.names = names
        self.rules = rules
        self.mqtt = mqtt
    }

    /// Reads and parses the file at `path`.
    public static func load(path: String) throws(ConfigurationError) -> ConfigFile {
        var mode: mode_t = 0
        let bytes = try contents(ofFile: path, mode: &mode)
        return try parse(bytes, path: path, mode: mode)
    }

    /// The file's bytes, or one problem, `FILE: cannot read: reason`, when it cannot be read
    /// (missing, not allowed, a directory, larger than ``maxSize``).
    public static func contents(ofFile path: String) throws(ConfigurationError) -> [UInt8] {
        var mode: mode_t = 0
        return try contents(ofFile: path, mode: &mode)
    }

    /// The file's bytes, and its permission bits in `mode`.
    static func contents(ofFile path: String, mode: inout mode_t) throws(ConfigurationError) -> [UInt8] {
        func failure(_ reason: String) -> ConfigurationError {
            ConfigurationError(problems: ["\(path): cannot read: \(reason)"])
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw failure(String(cString: strerror(errno))) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw failure(String(cString: strerror(errno))) }
        guard (info.st_mode & S_IFMT) != S_IFDIR else { throw failure(String(cString: strerror(EISDIR))) }
        mode = info.st_mode & 0o777
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw failure(String(cString: strerror(errno)))
            }
            if n == 0 { return bytes }
            bytes += chunk[0 ..< n]
            if bytes.count > maxSize { throw failure("larger than \(maxSize >> 20) MiB") }
        }
    }

    /// Parses a config file's text; `path` names the file in the problems.
    public static func parse(_ text: String, path: String) throws(ConfigurationError) -> ConfigFile {
        try parse(Array(text.utf8), path: path)
    }

    /// Parses a config file's bytes; `path` names the file in the problems, which come in the
    /// order of the file.
    /// `mode`: the file's permission bits, when it was read from disk (a file readable by group or
    /// others may not hold inline IRKs).
    public static func parse(_ bytes: [UInt8], path: String, mode: mode_t? = nil) throws(ConfigurationError) -> ConfigFile {
        let (root, yamlProblems) = ConfigYAML.parse(bytes)
        var decoder = ConfigDecoder()
        if yamlProblems.isEmpty || root != nil {
            decoder.decode(root)
        }
        // The fleet key's file, read and checked now: check-config and a reload say what is wrong
        // with it before the node would run on it.
        var keyFileLines: [String] = []
        /// A key file read, or its problems reported at `position` (as `what`) and its own lines.
        func key(_ path: String, _ what: String, at position: ConfigPosition?) -> FleetKey? {
            do throws(FleetKeyFile.Problem) { return try FleetKeyFile.load(path: path) } catch {
                switch error {
                case .file(let message): decoder.report(position, "\(what): \(message)")
                case .content(let problem):
                    decoder.report(position, "\(what): \(path) is not a fleet key (below)")
                    keyFileLines.append("\(path):\(problem.line):\(problem.column): \(problem.message)")
                }
                return nil
            }
        }
        if let keyFile = decoder.fleetKeyFile {
            decoder.trust.key = key(keyFile, "fleet-key", at: decoder.fleetKeyPosition)
        }
        if let previous = decoder.previousKeyFile, let old = key(previous.file, "previous-fleet-key.file", at: previous.position) {
            if decoder.fleetKeyFile == nil {
                decoder.report(previous.position,
                               "previous-fleet-key: needs fleet-key: (the new key); without one the node speaks the open protocol")
            } else if old == decoder.trust.key {
                decoder.report(previous.position, "previous-fleet-key: \(previous.file) holds the same key as fleet-key:")
            } else {
                decoder.trust.previousKey = .init(key: old, until: previous.until)
            }
        }
        if let irkFile = decoder.irkFile {
            keyFileLines += readIRKFile(irkFile, into: &decoder)
        }
        decoder.checkSecrets(file: path, mode: mode)
        let problems = inFileOrder(yamlProblems + decoder.problems)
        guard problems.isEmpty else {
            throw ConfigurationError(problems: problems.map { $0.line(file: path) } + keyFileLines)
        }
        var file = ConfigFile(path: path, options: decoder.options, names: decoder.names, zones: decoder.zones,
                              regionMonitor: decoder.regionMonitor, regions: decoder.regions, alerts: decoder.alerts,
                              tracking: decoder.tracking, rules: decoder.rules, mqtt: decoder.mqtt)
        file.trust = decoder.trust
        return file
    }
}

extension ConfigFile {
    /// `problems` in the order of the file (those without a position first), keeping the order of
    /// those at one position.
    static func inFileOrder(_ problems: [ConfigProblem]) -> [ConfigProblem] {
        problems.enumerated().sorted {
            let a = $0.element.position ?? ConfigPosition(line: 0, column: 0), b = $1.element.position ?? ConfigPosition(line: 0, column: 0)
            return a != b ? a < b : $0.offset < $1.offset
        }.map(\.element)
    }

    /// Reads `irks: FILE` into `decoder.trust`: the file's own problems as `FILE:LINE:COLUMN`
    /// lines (returned), the file's access problems at the config's `irks:` value.
    static func readIRKFile(_ path: String, into decoder: inout ConfigDecoder) -> [String] {
        let text: String
        do { text = try SecretFile.read(path: path, maxSize: IRKFile.maxSize, what: "an IRK") } catch {
            decoder.report(decoder.irkFilePosition, "irks: \(error.description)")
            return []
        }
        let (root, yamlProblems) = ConfigYAML.parse(Array(text.utf8))
        var fileDecoder = ConfigDecoder()
        if let root, !root.isNull {
            decoder.trust.irks = fileDecoder.irkMapping(root, path: "irks") ?? [:]
        }
        let problems = inFileOrder(yamlProblems + fileDecoder.problems)
        guard !problems.isEmpty else { return [] }
        decoder.report(decoder.irkFilePosition, "irks: \(path) is not an IRK file (below)")
        return problems.map { $0.line(file: path) }
    }
}

extension NodeConfiguration {
    /// The configuration of a node given `commandLine` and the config file `file`: each option
    /// from the command line if it was given there, else from the file, else its default. The
    /// clear interval stays nil when neither gives it (the value saved over D-Bus comes next).
    /// `environment` supplies `$STATE_DIRECTORY`.
    public init(commandLine: RunOptions, file: ConfigFile?,
                environment: [String: String] = ProcessInfo.processInfo.environment) {
        let options = (file?.options ?? RunOptions()).overridden(by: commandLine)
        // The defaults, then each option given (RunOption.all).
        self.init(name: options[RunOption.name] ?? NodeConfiguration.hostName(),
                  stateDirectory: NodeConfiguration.stateDirectory(explicit: nil, environment: environment))
        for option in RunOption.all { option.apply(&self, options, environment) }
        if let file {
            zones = file.zones
            names = file.names
            regions = file.regions
            regionMonitor = file.regionMonitor
            alerts = file.alerts
            tracking = file.tracking
            rules = file.rules
            mqtt = file.mqtt
            trust = file.trust
            configFile = file.path
        }
    }
}

extension ConfigurationReloader {
    /// Reads the config file and applies `commandLine` over it, the same way at start and at
    /// every reload: `--config FILE` (`explicitPath`) must exist; without it `defaultPath` is read
    /// if a file is there at that moment, and otherwise the node runs on the command line and the
    /// defaults alone.
    public init(explicitPath: String?, defaultPath: String = ConfigFile.defaultPath, commandLine: RunOptions,
                environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.init { () throws(ConfigurationError) -> NodeConfiguration in
            let file: ConfigFile?
            if let explicitPath {
                file = try ConfigFile.load(path: explicitPath)
            } else if FileManager.default.fileExists(atPath: defaultPath) {
                file = try ConfigFile.load(path: defaultPath)
            } else {
                file = nil
            }
            return NodeConfiguration(commandLine: commandLine, file: file, environment: environment)
        }
    }
}
