import Foundation
import Logging
@testable import ProximityNode
import Testing

/// Each `run` option is declared once (RunOption); the config file's keys, the decoder, the merge
/// and the restart-only settings follow from the declaration.
@Suite("the run options' table drives the file, the merge and the reload")
struct RunOptionTableTests {
    @Test("the file's top-level keys are the options' keys, in the table's order, then the sections")
    func keys() {
        let keys = RunOption.all.map(\.key)
        #expect(Set(keys).count == keys.count, "a key declared twice")
        #expect(ConfigFile.keys == keys + ConfigFile.sections)
        #expect(Set(keys).isDisjoint(with: ConfigFile.sections))
        #expect(RunOption.all.allSatisfy { ($0.kind == .flag) == $0.valueName.isEmpty }, "a value name for every option but the flags")
        #expect(RunOption.all.filter(\.takesNegativeValues).map(\.key) == ["measured-power", "rssi-offset"])
    }

    @Test("the decoder reads every option by its declaration: a value of the wrong type is reported at it, by the key",
          arguments: RunOption.all.map(\.key))
    func decoderReadsEveryOption(key: String) throws {
        let problems = brokenProblems("\(key): [1]\n")
        let expected = switch RunOption.byKey[key]!.kind {
        case .text: "must be a string"
        case .flag: "must be true or false"
        case .number, .integer: "must be "
        }
        #expect(problems.count == 1 && problems.first?.hasPrefix("f.yaml:1:\(key.count + 3): \(key): \(expected)") == true, "\(problems)")
    }

    @Test("a value out of range is refused in the same words on the command line and in the file",
          arguments: RunOption.all.filter { $0.kind != .flag }.map(\.key))
    func sameCheck(key: String) throws {
        let option = try #require(RunOption.byKey[key])
        var options = RunOptions()
        let (yaml, problem): (String, OptionProblem?)
        switch option.kind {
        case .text:
            yaml = "\"\""
            problem = catching { () throws(OptionProblem) in try option.take("", into: &options) }
        case .number:
            yaml = "1000000000"
            problem = catching { () throws(OptionProblem) in try option.take(1e9, into: &options) }
        case .integer:
            yaml = "1000000000"
            problem = catching { () throws(OptionProblem) in try option.take(1_000_000_000, into: &options) }
        case .flag:
            return
        }
        let message = try #require(problem?.message, "--\(key) took a bad value")
        #expect(options == RunOptions())
        #expect(brokenProblems("\(key): \(yaml)\n") == ["f.yaml:1:\(key.count + 3): \(key): \(message)"])
    }

    @Test("the merge and the node's configuration follow the table: the command line wins, option by option")
    func mergeAndApply() throws {
        let file = try ConfigFile.parse("""
            name: from-file
            max-peers: 10
            rssi-offset: 3
            log-level: debug
            beacons: false
            """, path: "f.yaml")
        var commandLine = RunOptions()
        try RunOption.maxPeers.take(20, into: &commandLine)
        try RunOption.clearInterval.take(5.0, into: &commandLine)
        try RunOption.beacons.take(true, into: &commandLine)
        let merged = file.options.overridden(by: commandLine)
        #expect(merged[RunOption.name] == "from-file" && merged[RunOption.maxPeers] == 20 && merged[RunOption.rssiOffset] == 3.0
                    && merged[RunOption.clearInterval] == 5.0)
        #expect(merged[RunOption.logLevel] == Logger.Level.debug && merged[RunOption.beacons] == true && !merged.has(RunOption.bus))
        let configuration = NodeConfiguration(commandLine: commandLine, file: file, environment: ["STATE_DIRECTORY": "/srv/state"])
        #expect(configuration.name == "from-file" && configuration.maxPeers == 20 && configuration.rssiOffset == 3)
        #expect(configuration.clearInterval == 5 && configuration.logLevel == .debug && configuration.trackBeacons)
        #expect(configuration.stateDirectory.path == "/srv/state" && configuration.bus == .system && configuration.adapter == "hci0")
    }

    @Test("the restart-only settings are the options declared so, and only those")
    func restartOnly() {
        #expect(ConfigurationReload.restartOnlySettings.map(\.key) == [
            "bus", "bus-name", "state-dir", "name", "service-uuid", "adapter", "power-on", "measured-power",
            "path-loss-exponent", "max-peers", "beacons",
        ])
        #expect(RunOption.all.filter { $0.effect == .reload }.map(\.key) == ["clear-interval", "rssi-offset", "log-level"])
    }

    func brokenProblems(_ text: String) -> [String] {
        do {
            _ = try ConfigFile.parse(text, path: "f.yaml")
            return []
        } catch {
            return error.problems
        }
    }

    func catching(_ body: () throws(OptionProblem) -> Void) -> OptionProblem? {
        do {
            try body()
            return nil
        } catch {
            return error
        }
    }
}
