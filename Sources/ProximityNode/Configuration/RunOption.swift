import DBusKit
import Foundation
import Logging

/// One `proximityd run` option, declared once: its long name (which is also its config file
/// key), what it takes, its range check, whether a reload applies it or it waits for a restart,
/// its help, and where its value goes in ``NodeConfiguration``. ``RunOptions`` holds the values
/// given by key: an option has no field of its own there.
///
/// Everything else is derived from ``all``: the config file's top-level option keys
/// (``ConfigFile/keys``) and how the decoder reads and checks them, ``RunOptions/overridden(by:)``
/// (the command line over the file), ``NodeConfiguration/init(commandLine:file:environment:)``,
/// the restart-only settings of ``ConfigurationReload``, and the help and checks of the `run`
/// command, whose `@Option` lines take their name, help and parsing from here. Adding an option
/// means an entry here (with its check), its setting in ``NodeConfiguration`` (its use), its
/// `@Option` line in `proximityd run`, and its row in docs/configuration.md; a test checks that
/// `run --help`, the decoder and the docs agree.
public struct RunOption: Sendable {
    /// What the option takes, on the command line and in the file.
    public enum Kind: String, Sendable {
        /// A string, checked (`bus: session`).
        case text
        /// A number; integers are taken too (`clear-interval: 5`).
        case number
        /// An integer (`max-peers: 500`).
        case integer
        /// `true` or `false` in the file; `--key` and `--no-key` on the command line.
        case flag
    }

    /// When a changed value takes effect in a running node.
    public enum Effect: String, Sendable {
        /// A reload (`SIGHUP`, `Node1.Reload()`) applies it.
        case reload
        /// A reload that changes it logs a warning and keeps the running value.
        case restart
    }

    /// The long name on the command line (`--clear-interval`) and the key in the config file.
    public let key: String
    public let kind: Kind
    /// The command line's name for the value (`<seconds>`); empty for a flag.
    public let valueName: String
    /// What `run --help` says, the default included.
    public let help: String
    public let effect: Effect
    /// The value may start with `-` (`--measured-power -70`): the command line takes the next
    /// argument as the value whatever it looks like.
    public let takesNegativeValues: Bool

    /// Checks a command-line value of the option's type and sets it in the options.
    private let takeValue: @Sendable (Any, inout RunOptions) throws(OptionProblem) -> Void
    /// Reads and checks the file's value, reporting what is wrong at its position.
    let decode: @Sendable (inout ConfigDecoder, ConfigEntry) -> Void
    /// Sets the node's setting if the options have the option; the environment gives
    /// `$STATE_DIRECTORY`.
    let apply: @Sendable (inout NodeConfiguration, RunOptions, [String: String]) -> Void
    /// Whether the setting differs between two configurations.
    let differs: @Sendable (NodeConfiguration, NodeConfiguration) -> Bool
    /// Sets the first configuration's setting to the second's.
    let keep: @Sendable (inout NodeConfiguration, NodeConfiguration) -> Void

    private init<Input, Value: Hashable & Sendable, Setting: Equatable & Sendable>(
        _ key: String, _ kind: Kind, valueName: String, _ effect: Effect, takesNegativeValues: Bool, help: String,
        setting: WritableKeyPath<NodeConfiguration, Setting> & Sendable,
        check: @escaping @Sendable (Input) throws(OptionProblem) -> Value,
        decode: @escaping @Sendable (inout ConfigDecoder, ConfigEntry) -> Value?,
        apply: @escaping @Sendable (Value, [String: String]) -> Setting
    ) {
        self.key = key
        self.kind = kind
        self.valueName = valueName
        self.help = help
        self.effect = effect
        self.takesNegativeValues = takesNegativeValues
        takeValue = { (input: Any, options: inout RunOptions) throws(OptionProblem) in
            guard let input = input as? Input else { preconditionFailure("--\(key) takes \(Input.self), not \(type(of: input))") }
            options[key: key] = try check(input)
        }
        self.decode = { decoder, entry in
            if let value = decode(&decoder, entry) { decoder.options[key: key] = value }
        }
        self.apply = { configuration, options, environment in
            if let value: Value = options[key: key] { configuration[keyPath: setting] = apply(value, environment) }
        }
        differs = { $0[keyPath: setting] != $1[keyPath: setting] }
        keep = { $0[keyPath: setting] = $1[keyPath: setting] }
    }

    /// The command line's value of this option (nil: not given), checked, set in `options`.
    /// `Input` is the type the option takes: `String`, `Double`, `Int` or `Bool` as ``kind`` says.
    public func take<Input>(_ input: Input?, into options: inout RunOptions) throws(OptionProblem) {
        guard let input else { return }
        try takeValue(input, &options)
    }

    // MARK: - The kinds

    /// A string option; `fileCheck`, when given, checks the file's value instead of `check`.
    static func text<Value: Hashable & Sendable, Setting: Equatable & Sendable>(
        _ key: String, valueName: String, _ effect: Effect, help: String,
        _ setting: WritableKeyPath<NodeConfiguration, Setting> & Sendable,
        check: @escaping @Sendable (String) throws(OptionProblem) -> Value,
        fileCheck: (@Sendable (String) throws(OptionProblem) -> Value)? = nil,
        apply: @escaping @Sendable (Value, [String: String]) -> Setting
    ) -> RunOption {
        let fileCheck = fileCheck ?? check
        return RunOption(key, .text, valueName: valueName, effect, takesNegativeValues: false, help: help,
                         setting: setting, check: check, decode: { decoder, entry in decoder.text(entry, fileCheck) }, apply: apply)
    }

    static func text<Value: Hashable & Sendable>(
        _ key: String, valueName: String, _ effect: Effect, help: String,
        _ setting: WritableKeyPath<NodeConfiguration, Value> & Sendable,
        check: @escaping @Sendable (String) throws(OptionProblem) -> Value
    ) -> RunOption {
        text(key, valueName: valueName, effect, help: help, setting, check: check, apply: { value, _ in value })
    }

    /// A number option; `expected` names the type in the file's messages (`a number of seconds`).
    static func number<Setting: Equatable & Sendable>(
        _ key: String, valueName: String, _ effect: Effect, takesNegativeValues: Bool = false, expected: String, help: String,
        _ setting: WritableKeyPath<NodeConfiguration, Setting> & Sendable,
        check: @escaping @Sendable (Double) throws(OptionProblem) -> Double,
        apply: @escaping @Sendable (Double, [String: String]) -> Setting
    ) -> RunOption {
        RunOption(key, .number, valueName: valueName, effect, takesNegativeValues: takesNegativeValues, help: help,
                  setting: setting, check: check, decode: { decoder, entry in decoder.number(entry, expected, check) }, apply: apply)
    }

    static func number(
        _ key: String, valueName: String, _ effect: Effect, takesNegativeValues: Bool = false, expected: String, help: String,
        _ setting: WritableKeyPath<NodeConfiguration, Double> & Sendable,
        check: @escaping @Sendable (Double) throws(OptionProblem) -> Double
    ) -> RunOption {
        number(key, valueName: valueName, effect, takesNegativeValues: takesNegativeValues, expected: expected, help: help,
               setting, check: check, apply: { value, _ in value })
    }

    /// An integer option; the check takes any `Int`, so that a value too large for the setting's
    /// type is reported by its range.
    static func integer<Value: Hashable & Sendable>(
        _ key: String, valueName: String, _ effect: Effect, takesNegativeValues: Bool = false, expected: String, help: String,
        _ setting: WritableKeyPath<NodeConfiguration, Value> & Sendable,
        check: @escaping @Sendable (Int) throws(OptionProblem) -> Value
    ) -> RunOption {
        RunOption(key, .integer, valueName: valueName, effect, takesNegativeValues: takesNegativeValues, help: help,
                  setting: setting, check: check,
                  decode: { decoder, entry in decoder.integer(entry, expected, check) }, apply: { value, _ in value })
    }

    /// A flag: any value is allowed.
    static func flag(
        _ key: String, _ effect: Effect, help: String,
        _ setting: WritableKeyPath<NodeConfiguration, Bool> & Sendable
    ) -> RunOption {
        RunOption(key, .flag, valueName: "", effect, takesNegativeValues: false, help: help, setting: setting,
                  check: { (value: Bool) throws(OptionProblem) in value }, decode: { decoder, entry in decoder.boolean(entry) },
                  apply: { value, _ in value })
    }
}

// MARK: - The table

extension RunOption {
    /// Every `run` option, in the order of `run --help` and of the docs.
    public static let all: [RunOption] = [
        bus, busName, stateDirectory, name, serviceUUID, adapter, powerOn, clearInterval, measuredPower, pathLossExponent,
        rssiOffset, maxPeers, beacons, logLevel,
    ]

    /// The options by key.
    static let byKey = Dictionary(uniqueKeysWithValues: all.map { ($0.key, $0) })

    public static let bus = text(
        "bus", valueName: "bus", .restart,
        help: "The bus to serve on: system, session, or a D-Bus address. Default: system.",
        \.bus, check: RunOptions.checked(bus:))

    public static let busName = text(
        "bus-name", valueName: "name", .restart,
        help: "The well-known name to own. Default: \(NodeConfiguration.defaultBusName).",
        \.busName, check: RunOptions.checked(busName:))

    /// In the file the directory must be absolute: the daemon's working directory is no place to
    /// resolve it against.
    public static let stateDirectory = text(
        "state-dir", valueName: "dir", .restart,
        help: "Where the node keeps its identity and what it has learnt. Default: $STATE_DIRECTORY, else /var/lib/proximityd.",
        \.stateDirectory, check: RunOptions.checked(stateDirectory:), fileCheck: ConfigDecoder.absolutePath,
        apply: { path, environment in NodeConfiguration.stateDirectory(explicit: path, environment: environment) })

    public static let name = text(
        "name", valueName: "name", .restart,
        help: "The node's human-readable name. Default: the host name.",
        \.name, check: RunOptions.checked(name:))

    public static let serviceUUID = text(
        "service-uuid", valueName: "uuid", .restart,
        help: "The general service UUID shared by all nodes of a deployment. Default: \(NodeConfiguration.defaultServiceUUID.lowercased).",
        \.serviceUUID, check: RunOptions.checked(serviceUUID:))

    public static let adapter = text(
        "adapter", valueName: "name", .restart,
        help: "The Bluetooth adapter to use. Default: hci0.",
        \.adapter, check: RunOptions.checked(adapter:))

    public static let powerOn = flag(
        "power-on", .restart,
        help: "Power the adapter on if it is off (--no-power-on: do not, whatever the config file says). Default: do not.",
        \.powerOn)

    /// Without it the value saved over D-Bus is used: the setting stays optional.
    public static let clearInterval = number(
        "clear-interval", valueName: "seconds", .reload, expected: "a number of seconds",
        help: "Seconds a peer stays in the found-devices table unheard (0 < s <= 3600). " +
            "Default: the value last set over D-Bus (ClearInterval), else 10.",
        \.clearInterval, check: RunOptions.checked(clearInterval:), apply: { seconds, _ in seconds })

    public static let measuredPower = integer(
        "measured-power", valueName: "dBm", .restart, takesNegativeValues: true, expected: "an integer (dBm)",
        help: "This node's RSSI at 1 m in dBm (-127...20), advertised so that peer nodes range this node with it; " +
            "also assumed for peer nodes that advertise none. Default: -59.",
        \.measuredPower, check: RunOptions.checked(measuredPower:))

    public static let pathLossExponent = number(
        "path-loss-exponent", valueName: "n", .restart, expected: "a number",
        help: "The distance model's path-loss exponent (1.5...6). Default: 2; keep it unless the site was measured over a wide range " +
            "of distances, and calibrate measured powers instead (docs/ranging.md).",
        \.pathLossExponent, check: RunOptions.checked(pathLossExponent:))

    public static let rssiOffset = number(
        "rssi-offset", valueName: "dB", .reload, takesNegativeValues: true, expected: "a number (dB)",
        help: "dB added to every RSSI sample this node receives, before ranging: positive for an adapter that reads low, " +
            "negative for one that reads high (-40...40). SIGHUP applies a new value from the config file. Default: 0.",
        \.rssiOffset, check: RunOptions.checked(rssiOffset:))

    public static let maxPeers = integer(
        "max-peers", valueName: "n", .restart, expected: "an integer",
        help: "The most peers the found-devices table holds (1...100000). Default: 1024.",
        \.maxPeers, check: RunOptions.checked(maxPeers:))

    public static let beacons = flag(
        "beacons", .restart,
        help: "Range iBeacon, AltBeacon and Eddystone beacons too (--no-beacons: nodes only). Default: beacons too.",
        \.trackBeacons)

    public static let logLevel = text(
        "log-level", valueName: "level", .reload,
        help: "trace, debug, info, notice, warning, error or critical. Default: info.",
        \.logLevel, check: RunOptions.checked(logLevel:))
}
