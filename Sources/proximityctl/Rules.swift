import ArgumentParser
import DBusKit
import Foundation
import ProximityAPI
import ProximityCore

/// `proximityctl rules`: the node's rules (`org.proximityd.Profile1`'s rule methods).
struct Rules: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, add, remove and test the node's rules.",
        discussion: """
            A rule is a tree (JSON here, YAML in the config file): on which triggers, when which \
            condition holds, do which actions, how often. docs/tracking.md has the grammar. Rules \
            added here are kept by the node across restarts; those of the config file change only \
            there.

            Exit status: 0 on success (for `test`: the condition holds), 1 when `test` finds it \
            does not hold, 64 for a bad argument (a rule that cannot be, with its path), 66 for a \
            rule file that cannot be read, 69 when the node cannot be reached or refuses the call.

            Examples:
              $ proximityctl rules list
                Every rule, as JSON.
              $ proximityctl rules test near-12
                Whether rule near-12's condition holds now, and why.
            """,
        subcommands: [List.self, Add.self, Remove.self, Test.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print every rule, as JSON, with its source.",
            discussion: """
                Examples:
                  $ proximityctl rules list
                    One line per rule: its identifier and its JSON.
                  $ proximityctl rules list --json
                    One JSON object: identifier -> rule.
                """)
        @OptionGroup var node: NodeOptions
        @Flag(name: .long, help: "Print one JSON object: identifier -> rule.") var json = false

        func run() async throws {
            let rules = await node.withNode("cannot read the rules") { try await $0.rules() }
            if json {
                var object: [String: Any] = [:]
                for (id, text) in rules { object[id] = try JSONSerialization.jsonObject(with: Data(text.utf8)) }
                print(try jsonText(object))
            } else {
                for (id, text) in rules.sorted(by: { $0.key < $1.key }) { print("\(id)  \(text)") }
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a rule, or redefine the one with this identifier (AddRule).",
            discussion: """
                RULE is the rule's JSON, a file holding it, or - for standard input. For example,
                near-12.json:

                  {"on": ["tracking"],
                   "when": {"all": [{"key": "a.beacon.major", "op": "eq", "value": "12"},
                                    {"key": "a.beacon.prox", "op": "within", "value": "near"}]},
                   "do": [{"signal": {"major": "{%a.beacon.major%}"}}], "frequency": "once"}

                It fires once, on a tracking event, for a beacon of major 12 near or nearer and
                heard: a silent beacon (prox 0, unknown) does not count.

                Examples:
                  $ proximityctl rules add near-12 near-12.json
                    The rule, from the file.
                  $ proximityctl rules add near-12 - < near-12.json
                    The same, from standard input.
                """)
        @OptionGroup var node: NodeOptions
        @Argument(help: "The rule's identifier.") var identifier: String
        @Argument(help: "The rule: JSON, a file, or - for standard input.") var rule: String

        func run() async throws {
            let text: String
            if rule == "-" {
                text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
            } else if !rule.trimmingCharacters(in: .whitespaces).hasPrefix("{") {
                // Not JSON: a file.
                guard let contents = FileManager.default.contents(atPath: rule) else {
                    fail("cannot read \(rule)\(FileManager.default.fileExists(atPath: rule) ? "" : ": no such file") " +
                         "(RULE is JSON, a file, or -)", status: 66)
                }
                text = String(decoding: contents, as: UTF8.self)
            } else {
                text = rule
            }
            // Checked here first, with the node's words.
            do { _ = try Rule.parse(identifier: identifier, RuleValue.json(text)) } catch {
                fail("rule \(identifier.debugDescription): \(error)", status: 64)
            }
            await node.withNode("cannot add rule \(identifier.debugDescription)") { try await $0.addRule(identifier, json: text) }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a rule added over the bus (RemoveRule).",
            discussion: """
                Example:
                  $ proximityctl rules remove near-12
                    Removes rule near-12, one added over the bus.
                """)
        @OptionGroup var node: NodeOptions
        @Argument(help: "The rule's identifier.") var identifier: String

        func run() async throws {
            await node.withNode("cannot remove rule \(identifier.debugDescription)") { try await $0.removeRule(identifier) }
        }
    }

    struct Test: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Evaluate a rule's condition against the profile now, and say why it holds or not (TestRule).",
            discussion: """
                One line per test and group, indented: true or false, the test, and the value it \
                saw. Fields of an event (event.type ...) are missing here: there is no event.

                Example:
                  $ proximityctl rules test near-12
                    Exit 0 when it holds, 1 when it does not.
                """)
        @OptionGroup var node: NodeOptions
        @Argument(help: "The rule's identifier.") var identifier: String

        func run() async throws {
            let (holds, lines) = await node.withNode("cannot test rule \(identifier.debugDescription)") {
                try await $0.testRule(identifier)
            }
            print("\(identifier): the condition \(holds ? "holds" : "does not hold")")
            for line in lines { print("  " + line) }
            if !holds { throw ExitCode(1) }
        }
    }
}
