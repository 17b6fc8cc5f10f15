import DBusKit
import Foundation
import Logging
import ProximityAPI
import ProximityCore

/// What a node is told at start.
public struct NodeConfiguration: Sendable {
    /// The *general* service UUID every proximityd node advertises, so nodes find each other
    /// without knowing each other. Fixed for the project; `--service-uuid` changes it for a private
    /// deployment (all nodes of a deployment must agree).
    public static var defaultServiceUUID: UUID { ProximityBus.defaultServiceUUID }
    public static var defaultBusName: BusName { ProximityBus.defaultBusName }

    public var bus: BusAddress
    public var busName: BusName
    public var serviceUUID: UUID
    public var name: String
    public var stateDirectory: URL
    /// The BlueZ adapter to use (`hci0`), `--adapter`.
    public var adapter: String
    /// Power the adapter on if it is off (`--power-on`).
    public var powerOn: Bool
    /// How many peers are identified (connected to) at once, how often and when; who waits for
    /// whose hello (``IdentificationScheduler``).
    public var identification = IdentificationScheduler.Configuration()
    /// `--clear-interval`: when given, it wins over the value saved from D-Bus for this run.
    public var clearInterval: Double?
    /// `--measured-power`: this node's RSSI at 1 m, and the one assumed for peer nodes (whose
    /// radios are alike) unless a per-peer override says otherwise. Beacons state their own.
    public var measuredPower: Int16 = -59
    /// `--path-loss-exponent`: the distance model's exponent, 2 in free space (the default, the
    /// one `ranging-bench` chose it with), 2.5–4 in rooms with walls and people.
    public var pathLossExponent: Double = 2
    /// `--rssi-offset`: dB added to every RSSI sample this node receives before ranging, for an
    /// adapter that reads high (negative) or low (positive). Applied again at a reload.
    public var rssiOffset: Double = 0
    /// `--max-peers`: the found-devices table's cap.
    public var maxPeers: Int = 1024
    /// `--no-beacons` clears it: range iBeacon, AltBeacon and Eddystone beacons too.
    public var trackBeacons = true
    /// The most addresses whose identity is remembered (`peers.json`); the least recently heard
    /// go first.
    public var maxRememberedAddresses: Int = 4096
    /// The regions of the config file (`regions:`); those added over the bus are kept in the state
    /// directory, not here.
    public var regions: [Region] = []
    /// The region monitor's defaults and limits (`region-monitor:` in the config file).
    public var regionMonitor = RegionMonitor.Configuration()
    /// The alerts of the config file (`alerts:`); those added over the bus are kept in the state
    /// directory.
    public var alerts: [Alert] = []
    /// `zones:`: where immediate and near end, metres (reloaded).
    public var zones = ZoneThresholds()
    /// `names:`: peer identifier → display name (reloaded; they win over names given over the bus).
    public var names: [PeerID: String] = [:]
    /// `tracking:`: which peers the tracker follows, its heartbeat, its custom context data.
    public var tracking = Tracker.Configuration()
    /// The rules of the config file (`rules:`); those added over the bus are kept in the state
    /// directory.
    public var rules: [Rule] = []
    /// `mqtt:`: the broker the node publishes to, and how (``MQTTPublisher``); nil: none.
    public var mqtt: MQTTSettings?
    /// `fleet-key:` and `accept-unverified:`: the trusted protocol, or the open one (no key).
    public var trust = TrustSettings()
    /// The config file this configuration was read from, if any (`--config`).
    public var configFile: String?
    /// `--log-level`: the least severe messages logged (``LogLevelSwitch`` applies it).
    public var logLevel: Logger.Level = .info

    public init(bus: BusAddress = .system, busName: BusName = defaultBusName, serviceUUID: UUID = defaultServiceUUID,
                name: String = NodeConfiguration.hostName(), stateDirectory: URL, adapter: String = "hci0", powerOn: Bool = false) {
        self.adapter = adapter
        self.powerOn = powerOn
        self.bus = bus
        self.busName = busName
        self.serviceUUID = serviceUUID
        self.name = name
        self.stateDirectory = stateDirectory
    }

    public static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "proximityd" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension UUID {
    /// The lowercase canonical form BlueZ and this project use on the bus.
    public var lowercased: String { uuidString.lowercased() }
}

/// A config file that cannot be used: every problem, one line each, as
/// `FILE:LINE:COLUMN: message`.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public var problems: [String]
    public init(problems: [String]) { self.problems = problems }
    public var description: String { problems.joined(separator: "\n") }
}

/// Reads the configuration again, as at start (the config file, then the command line over it):
/// what `SIGHUP` and `Node1.Reload()` apply.
public struct ConfigurationReloader: Sendable {
    public let read: @Sendable () throws(ConfigurationError) -> NodeConfiguration
    public init(read: @escaping @Sendable () throws(ConfigurationError) -> NodeConfiguration) { self.read = read }
}

extension NodeConfiguration {
    /// `--state-dir`, else systemd's `$STATE_DIRECTORY` (first entry), else `/var/lib/proximityd`.
    /// Always a directory URL: `URL(fileURLWithPath:)` alone asks the file system, so the same
    /// path would give a different URL before and after the directory is made (and a reload would
    /// take the state directory for changed).
    public static func stateDirectory(explicit: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let explicit { return URL(fileURLWithPath: explicit, isDirectory: true) }
        if let fromSystemd = environment["STATE_DIRECTORY"]?.split(separator: ":").first {
            return URL(fileURLWithPath: String(fromSystemd), isDirectory: true)
        }
        return URL(fileURLWithPath: "/var/lib/proximityd", isDirectory: true)
    }
}
