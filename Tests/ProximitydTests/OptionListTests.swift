import Foundation
@testable import ProximityNode
import ProximityTesting
import Testing

/// The run options are declared once (RunOption), and shown in three places a user reads:
/// `proximityd run --help`, the config file's keys, and docs/configuration.md's table. They must
/// list the same keys, `run --help` must say what the declarations say, and the docs' reload
/// column must say what a reload really does.
@Suite("the run options: --help, the config file and the docs agree")
struct OptionListTests {
    static let sections = Set(ConfigFile.sections)

    static func help() async throws -> String {
        let help = try await runCommand(BuiltProducts.path("proximityd"), ["run", "--help"])
        #expect(help.status == 0)
        return help.stdout
    }

    /// The options `run --help` lists, by long name (`--power-on/--no-power-on` once), in its order.
    static func helpOptions(_ help: String) -> [String] {
        var options: [String] = []
        for line in help.split(separator: "\n") {
            let text = line.drop { $0 == " " }
            guard line.first == " ", text.hasPrefix("--") else { continue }
            options.append(String(text.dropFirst(2).prefix { $0.isLetter || $0 == "-" }))
        }
        return options.filter { !["config", "help", "version"].contains($0) }
    }

    /// `text` with every run of white space one space: the help as it reads, however it is wrapped.
    static func words(_ text: String) -> String {
        text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    /// docs/configuration.md's "Keys" table: each key and its reload column, in its order.
    static func documentedRows() throws -> [(key: String, reload: String)] {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        guard let start = text.range(of: "\n## Keys\n") else { return [] }
        var rows: [(key: String, reload: String)] = []
        for line in text[start.upperBound...].split(separator: "\n") {
            if line.hasPrefix("## ") { break }
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 5, cells[0].hasPrefix("`"), cells[0].hasSuffix("`") else { continue }
            rows.append((String(cells[0].dropFirst().dropLast()), cells.last!.replacingOccurrences(of: "*", with: "")))
        }
        return rows
    }

    @Test("run --help, the decoder's keys and docs/configuration.md list the same keys; the docs' reload column is each option's declared effect")
    func sameKeys() async throws {
        let fileKeys = Set(ConfigFile.keys)
        #expect(fileKeys.count == ConfigFile.keys.count, "a key listed twice")
        // The decoder takes exactly these keys: each is known, and a near miss is refused.
        #expect(throws: ConfigurationError.self) { try ConfigFile.parse("bus-nme: x\n", path: "f.yaml") }
        let helpOrder = Self.helpOptions(try await Self.help())
        let help = Set(helpOrder)
        #expect(help == fileKeys.subtracting(Self.sections), "only in --help: \(help.subtracting(fileKeys)); not in --help: \(fileKeys.subtracting(Self.sections).subtracting(help))")
        #expect(helpOrder == RunOption.all.map(\.key), "--help's order is not the table's")
        let rows = try Self.documentedRows()
        #expect(rows.map(\.key) == ConfigFile.keys, "the docs' order is not the reader's")
        let documented = Dictionary(rows, uniquingKeysWith: { first, _ in first })
        #expect(Set(documented.keys) == fileKeys, "only in the docs: \(Set(documented.keys).subtracting(fileKeys)); undocumented: \(fileKeys.subtracting(documented.keys))")
        for option in RunOption.all {
            #expect(documented[option.key] == option.effect.rawValue, "the docs say \(documented[option.key] ?? "nothing") for \(option.key)")
        }
        for section in Self.sections {
            #expect(documented[section] == "reload", "the docs say \(documented[section] ?? "nothing") for \(section)")
        }
        let restart = Set(documented.filter { $0.value == "restart" }.keys)
        #expect(restart == Set(ConfigurationReload.restartOnlySettings.map(\.key)), "the docs say restart for \(restart.sorted())")
        #expect(Set(documented.values) == ["restart", "reload"])
    }

    @Test("run --help shows each option as declared: its name, its value's name and its help")
    func helpAsDeclared() async throws {
        let help = Self.words(try await Self.help())
        for option in RunOption.all {
            let usage = option.kind == .flag ? "--\(option.key)/--no-\(option.key)" : "--\(option.key) <\(option.valueName)>"
            #expect(help.contains(" \(usage) \(Self.words(option.help))"), "--\(option.key) is not shown as declared")
        }
    }

    @Test("run checks each option with its declaration: a bad value is refused before anything starts")
    func commandLineChecks() async throws {
        let proximityd = BuiltProducts.path("proximityd")
        var options = RunOptions()
        let problem: OptionProblem
        do {
            try RunOption.maxPeers.take(0, into: &options)
            Issue.record("--max-peers took 0")
            return
        } catch {
            problem = error
        }
        let result = try await runCommand(proximityd, ["run", "--max-peers", "0"])
        #expect(result.status == 64 && result.stderr.contains("--max-peers: \(problem.message)"), "\(result.stderr)")
    }
}
