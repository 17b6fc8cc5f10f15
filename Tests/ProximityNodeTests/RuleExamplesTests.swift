import Foundation
import ProximityCore
@testable import ProximityNode
import Testing

/// Every example rule of the docs and the example config, read from the files themselves (the
/// busctl `AddRule` lines, the JSON and YAML blocks, the config file's `rules:`), parsed by the
/// node's own readers and run against the profile of a present near beacon and of one that went
/// silent (prox 0). Each example must say what it means: its verdicts are listed here, by
/// identifier, so an example added or changed without its meaning fails.
@Suite struct RuleExamplesTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The files whose example rules are checked, the `rules add` help included.
    static let files = ["README.md", "docs/tracking.md", "docs/configuration.md", "docs/dbus-api.md", "docs/alerts.md", "docs/regions.md",
                        "docs/mqtt.md", "docs/fleet.md", "docs/proximityctl.md", "dbus/proximityd.yaml.example",
                        "Sources/proximityctl/Rules.swift"]

    enum Meaning: Equatable, CustomStringConvertible {
        /// Whether it fires on a tracking event for a near beacon (prox 2) and for a silent one (prox 0).
        case fires(near: Bool, silent: Bool)
        /// Shown as refused.
        case refused
        var description: String {
            switch self {
            case .fires(let near, let silent): "fires near: \(near), silent: \(silent)"
            case .refused: "refused"
            }
        }
    }

    /// What each example means. Unnamed blocks are named by file, kind and order.
    static let meanings: [String: Meaning] = [
        // A beacon of major 12 near or nearer, and known.
        "near-12": .fires(near: true, silent: false),
        "docs/tracking.md yaml 1": .fires(near: true, silent: false),
        "docs/tracking.md json 1": .fires(near: true, silent: false),
        "docs/dbus-api.md json 1": .fires(near: true, silent: false),
        // Major 12 and immediate, or near for a user whose name starts with "a" (the profile has no user).
        "docs/tracking.md yaml 2": .fires(near: false, silent: false),
        // On a clear, or a region's entry: not on a tracking event.
        "goodbye": .fires(near: false, silent: false),
        "welcome-offer": .fires(near: false, silent: false),
        // `le near`, shown refused.
        "bad": .refused,
    ]

    static let beacon = ["a.beacon.uuid": "f7826da6-4fa2-4e98-8024-bc5b71e0893e", "a.beacon.major": "12", "a.beacon.minor": "7"]

    /// Whether `rule` fires on the tracking event of a beacon with this prox.
    static func fires(_ rule: Rule, prox: String) -> Bool {
        var attributes = beacon
        attributes["a.beacon.prox"] = prox
        let event = RuleEvent(trigger: .tracking, fields: attributes.merging(["type": "tracked"]) { a, _ in a })
        var engine = RuleEngine()
        engine.add(rule)
        return !engine.evaluate(event, profile: Profile(attributes), at: 0).isEmpty
    }

    /// An example as found: its name, and the rule or why it was refused.
    struct Example {
        var name: String
        var file: String
        var rule: Result<Rule, any Error>
    }

    static func fenced(_ text: String, _ language: String) -> [String] {
        var blocks: [String] = []
        var current: [Substring]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```\(language)" { current = [] }
            else if current != nil, line == "```" { blocks.append(current!.joined(separator: "\n")); current = nil }
            else { current?.append(line) }
        }
        return blocks
    }

    static func yamlRules(_ yaml: String, file: String) throws -> [Example] {
        let config = try ConfigFile.parse(yaml, path: file)
        return config.rules.map { Example(name: $0.identifier, file: file, rule: .success($0)) }
    }

    static func examples() throws -> [Example] {
        var out: [Example] = []
        for file in files {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            // busctl … AddRule ss ID 'JSON', proximityctl rules add ID 'JSON'
            for line in text.split(separator: "\n") {
                guard let marker = line.range(of: "AddRule ss ") ?? line.range(of: "rules add ") else { continue }
                let rest = line[marker.upperBound...]
                guard let space = rest.firstIndex(of: " "), rest[rest.index(after: space)...].hasPrefix("'"), rest.hasSuffix("'") else { continue }
                let name = String(rest[..<space])
                let json = String(rest[rest.index(space, offsetBy: 2)..<rest.index(before: rest.endIndex)])
                out.append(Example(name: name, file: file, rule: Result { try Rule.parse(identifier: name, RuleValue.json(json)) }))
            }
            // JSON blocks of a rule's tree
            for (i, json) in fenced(text, "json").filter({ $0.contains("\"when\"") }).enumerated() {
                let name = "\(file) json \(i + 1)"
                out.append(Example(name: name, file: file, rule: Result { try Rule.parse(identifier: "r", RuleValue.json(json)) }))
            }
            // YAML: a config file's rules, or a rule's tree (or its when:) on its own
            var yamls = fenced(text, "yaml")
            if file.hasSuffix(".example") {
                let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
                if let start = lines.firstIndex(of: "#rules:") {
                    yamls = [lines[start...].prefix { $0.hasPrefix("#") }.map { $0.dropFirst() }.joined(separator: "\n")]
                }
            }
            var unnamed = 0
            for yaml in yamls {
                let lines = yaml.split(separator: "\n")
                if lines.contains("rules:") {
                    out += try yamlRules(yaml, file: file)
                } else if lines.contains(where: { $0.hasPrefix("when:") }) {
                    unnamed += 1
                    var wrapped = "rules:\n  - identifier: r\n" + lines.map { "    " + $0 }.joined(separator: "\n") + "\n"
                    if !lines.contains(where: { $0.hasPrefix("do:") }) { wrapped += "    do: [{log: {}}]\n" }
                    let name = "\(file) yaml \(unnamed)"
                    out += try yamlRules(wrapped, file: file).map { Example(name: name, file: $0.file, rule: $0.rule) }
                }
            }
        }
        return out
    }

    @Test("every example rule of the docs and the example config does what its text says, for a near beacon and a silent one")
    func examples() throws {
        let found = try Self.examples()
        #expect(found.count >= 10, "\(found.map(\.name))")
        for example in found {
            guard let meaning = Self.meanings[example.name] else {
                Issue.record("\(example.file): the example \(example.name) says nothing of its meaning: add it to RuleExamplesTests.meanings")
                continue
            }
            let actual: Meaning
            switch example.rule {
            case .success(let rule): actual = .fires(near: Self.fires(rule, prox: "2"), silent: Self.fires(rule, prox: "0"))
            case .failure: actual = .refused
            }
            #expect(actual == meaning, "\(example.file): \(example.name)")
        }
        let unused = Set(Self.meanings.keys).subtracting(found.map(\.name))
        #expect(unused.isEmpty, "meanings of examples no longer in the files: \(unused.sorted())")
    }
}
