import Foundation
import ProximityTesting
import Testing

/// Issue 23, item 8: every `--help` page of proximityctl, proximityd and proximity-fleet has at
/// least one example, and every command reports an error the same way.
///
/// An example is a line of the page that starts with `  $ ` and the command line (a line ending in
/// ` \` goes on on the next); the lines under it say what it does. The examples are walked from the
/// root's SUBCOMMANDS section down, and each example's options are checked against the help of
/// the command it runs.
@Suite("--help: an example on every page; one error style")
struct HelpExamplesTests {
    static let products = ["proximityctl", "proximityd", "proximity-fleet"]

    /// One help page: the command's words (`["proximityctl", "regions", "add"]`) and its text.
    struct Page {
        var path: [String]
        var text: String
        var name: String { path.joined(separator: " ") }
    }

    /// The subcommands a page lists, by name.
    static func subcommands(_ help: String) -> [String] {
        var names: [String] = []
        var inSection = false
        for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "SUBCOMMANDS:" { inSection = true; continue }
            guard inSection else { continue }
            if line.isEmpty || line.hasPrefix("  See ") { break }
            // "  list                    List the …"; a wrapped description is indented further.
            guard line.hasPrefix("  "), line.dropFirst(2).first?.isLetter == true else { continue }
            names.append(String(line.dropFirst(2).prefix { !$0.isWhitespace }))
        }
        return names
    }

    /// Every page of `product`, the root first.
    static func pages(_ product: String) async throws -> [Page] {
        var pages: [Page] = []
        var queue: [[String]] = [[product]]
        while !queue.isEmpty {
            let path = queue.removeFirst()
            let result = try await runCommand(BuiltProducts.path(product), Array(path.dropFirst()) + ["--help"])
            #expect(result.status == 0 && result.stderr.isEmpty, "\(path): \(result)")
            pages.append(Page(path: path, text: result.stdout))
            queue += subcommands(result.stdout).map { path + [$0] }
        }
        return pages
    }

    /// The page's examples: each command line, its continued lines joined.
    static func examples(_ help: String) -> [String] {
        var examples: [String] = []
        var current: String?
        for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
            if let partial = current {
                current = partial + " " + line.trimmingCharacters(in: .whitespaces)
            } else if line.hasPrefix("  $ ") {
                current = String(line.dropFirst(4))
            } else {
                continue
            }
            if current!.hasSuffix(" \\") {
                current!.removeLast(2)
            } else {
                examples.append(current!)
                current = nil
            }
        }
        return examples
    }

    /// The options a page lists (`--json`, `-H`, `--host`, `--no-power-on`, …).
    static func options(_ help: String) -> Set<String> {
        var options: Set<String> = []
        for line in help.split(separator: "\n") where line.hasPrefix("  -") {
            // "  -H, --host <[user@]host[:port]>  The …": the names end at the description's column.
            let names = line.dropFirst(2)
            let column = names.range(of: "  ").map { names[..<$0.lowerBound] } ?? names
            for word in column.split(separator: " ") where word.hasPrefix("-") {
                for name in word.split(separator: "/") { options.insert(String(name.prefix { $0 != "," })) }
            }
        }
        return options
    }

    @Test("every page of the three commands has an example of itself, whose options it lists", arguments: products)
    func everyPageHasAnExample(_ product: String) async throws {
        let pages = try await Self.pages(product)
        #expect(pages.count > 1, "\(product): \(pages.map(\.name))")
        for page in pages {
            let examples = Self.examples(page.text)
            #expect(examples.contains { $0 == page.name || $0.hasPrefix(page.name + " ") },
                    "\(page.name) --help has no example of itself (a line starting \"  $ \(page.name)\"):\n\(page.text)")
            for example in examples {
                // The command it runs: the longest page whose words start the example.
                let words = example.split(separator: " ").map(String.init)
                guard let target = pages.filter({ words.starts(with: $0.path) }).max(by: { $0.path.count < $1.path.count }) else {
                    Issue.record("\(page.name): the example \"\(example)\" runs none of \(product)'s commands")
                    continue
                }
                let known = Self.options(target.text)
                // Its options, up to the end of the command (&&, |, ;).
                for word in words.dropFirst(target.path.count).prefix(while: { !["&&", "|", ";", "<", ">"].contains($0) }) where word.hasPrefix("-") && word != "-" {
                    let option = String(word.prefix { $0 != "=" })
                    #expect(known.contains(option), "\(page.name): the example \"\(example)\" gives \(option), which \(target.name) --help does not list")
                }
            }
        }
    }

    /// The man pages are made from these pages by swift-argument-parser's generate-manual, which
    /// drops every character that is not ASCII ("proximity-fleet --broker … runs it" became
    /// "--broker  runs it"), and a line wider than 80 columns is wrapped in --help at a space, an
    /// example's command cut in two. So: ASCII only, and under "Examples:" every line is an
    /// example (`  $ `), its continuation after ` \`, or what it does, indented.
    @Test("issue 34: every page is ASCII, and no example is wrapped", arguments: products)
    func asciiAndUnwrapped(_ product: String) async throws {
        for page in try await Self.pages(product) {
            for line in page.text.split(separator: "\n") where line.unicodeScalars.contains(where: { !$0.isASCII }) {
                Issue.record("\(page.name) --help: not ASCII (the man page would lose it): \(line)")
            }
            var inExamples = false
            for line in page.text.split(separator: "\n", omittingEmptySubsequences: false) {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed == "Examples:" || trimmed == "Example:" { inExamples = true; continue }
                guard inExamples else { continue }
                if line.isEmpty { inExamples = false; continue }
                #expect(line.hasPrefix("  ") && line.range(of: #"\S {3,}\S"#, options: .regularExpression) == nil,
                        "\(page.name) --help: an example wrapped or joined: \"\(line)\"")
            }
        }
    }

    @Test("a bad argument: COMMAND: error: MESSAGE and the help to read, on standard error; exit 64")
    func oneErrorStyle() async throws {
        let cases: [(product: String, arguments: [String], error: String, help: String)] = [
            ("proximityctl", ["status", "--bogus"], "proximityctl: error: Unknown option '--bogus'. Did you mean '--bus'?",
             "See 'proximityctl status --help'."),
            ("proximityctl", ["regions", "add"], "proximityctl: error: Missing expected argument '<id>'", "See 'proximityctl regions add --help'."),
            ("proximityctl", ["nope"], "proximityctl: error: Unexpected argument 'nope'", "See 'proximityctl --help'."),
            ("proximityctl", ["watch", "--interval", "0"], "proximityctl: error: --interval: must be between 0.1 and 60 seconds",
             "See 'proximityctl watch --help'."),
            ("proximityd", ["run", "--bogus"], "proximityd: error: Unknown option '--bogus'. Did you mean '--bus'?", "See 'proximityd run --help'."),
            ("proximityd", ["check-config", "a", "b"], "proximityd: error: Unexpected argument 'b'", "See 'proximityd check-config --help'."),
            ("proximity-fleet", [], "proximity-fleet: error: Missing expected argument '--broker <url>'", "See 'proximity-fleet --help'."),
            ("proximity-fleet", ["--broker", "mqtt://localhost", "--log-level", "loud"], "proximity-fleet: error: --log-level: not a level: loud",
             "See 'proximity-fleet run --help'."),
            ("proximity-fleet", ["--broker", "mqtt://localhost", "--outside-nodes", "nearest"],
             "proximity-fleet: error: --outside-nodes nearest: only with --plan (without a plan every node's reports make rooms)",
             "See 'proximity-fleet run --help'."),
            ("proximity-fleet", ["--broker", "mqtt://localhost", "--plan", "p.yaml", "--outside-nodes", "all"],
             "proximity-fleet: error: The value 'all' is invalid for '--outside-nodes <policy>'. Please provide one of 'ignore' and 'nearest'.",
             "See 'proximity-fleet run --help'."),
            ("proximity-fleet", ["replay", "--plan", "p.yaml"], "proximity-fleet: error: Missing expected argument '<trace.csv>'",
             "See 'proximity-fleet replay --help'."),
            ("proximity-fleet", ["--broker", "mqtt://localhost", "--keepalive", "2"],
             "proximity-fleet: error: --keepalive: must be in 5...3600 seconds, not 2", "See 'proximity-fleet run --help'."),
        ]
        for (product, arguments, error, help) in cases {
            let result = try await runCommand(BuiltProducts.path(product), arguments)
            #expect(result.status == 64, "\(product) \(arguments): \(result)")
            #expect(result.stderr == "\(error)\n\(help)\n", "\(product) \(arguments): \(result)")
            #expect(result.stdout.isEmpty, "\(product) \(arguments): \(result)")
        }
        // Help and the version still go to standard output, exit 0.
        for product in Self.products {
            let version = try await runCommand(BuiltProducts.path(product), ["--version"])
            #expect(version.status == 0 && !version.stdout.isEmpty && version.stderr.isEmpty, "\(product): \(version)")
        }
    }
}
