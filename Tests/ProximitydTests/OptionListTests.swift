import Foundation
@testable import ProximityNode
import ProximityTesting
import Testing

/// The run options are spelt in three places a user reads: `proximityd run --help`, the config
/// file's keys, and docs/configuration.md's table. They must list the same keys, and the docs'
/// reload column must say what a reload really does.
@Suite("the run options: --help, the config file and the docs agree")
struct OptionListTests {
    static let sections: Set<String> = ["region-monitor", "regions", "alerts", "tracking", "rules", "mqtt"]

    /// The options `run --help` lists, by long name (`--power-on/--no-power-on` once).
    static func helpOptions() async throws -> Set<String> {
        let help = try await runCommand(BuiltProducts.path("proximityd"), ["run", "--help"])
        #expect(help.status == 0)
        var options = Set<String>()
        for line in help.stdout.split(separator: "\n") {
            let text = line.drop { $0 == " " }
            guard line.first == " ", text.hasPrefix("--") else { continue }
            options.insert(String(text.dropFirst(2).prefix { $0.isLetter || $0 == "-" }))
        }
        return options.subtracting(["config", "help", "version"])
    }

    /// docs/configuration.md's "Keys" table: each key and its reload column.
    static func documented() throws -> [String: String] {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        guard let start = text.range(of: "\n## Keys\n") else { return [:] }
        var rows: [String: String] = [:]
        for line in text[start.upperBound...].split(separator: "\n") {
            if line.hasPrefix("## ") { break }
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 5, cells[0].hasPrefix("`"), cells[0].hasSuffix("`") else { continue }
            rows[String(cells[0].dropFirst().dropLast())] = cells.last!.replacingOccurrences(of: "*", with: "")
        }
        return rows
    }

    @Test("run --help, ConfigFile.keys and docs/configuration.md list the same keys; the docs' restart rows are the restart-only settings")
    func sameKeys() async throws {
        let fileKeys = Set(ConfigFile.keys)
        #expect(fileKeys.count == ConfigFile.keys.count, "a key listed twice")
        let help = try await Self.helpOptions()
        #expect(help == fileKeys.subtracting(Self.sections), "only in --help: \(help.subtracting(fileKeys)); not in --help: \(fileKeys.subtracting(Self.sections).subtracting(help))")
        let documented = try Self.documented()
        #expect(Set(documented.keys) == fileKeys, "only in the docs: \(Set(documented.keys).subtracting(fileKeys)); undocumented: \(fileKeys.subtracting(documented.keys))")
        let restart = Set(documented.filter { $0.value == "restart" }.keys)
        #expect(restart == Set(ConfigurationReload.restartOnlySettings.map(\.key)), "the docs say restart for \(restart.sorted())")
        #expect(Set(documented.values) == ["restart", "reload"])
    }
}
