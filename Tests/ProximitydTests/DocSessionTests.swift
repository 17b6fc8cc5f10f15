import Foundation
import ProximityTesting
import Testing

/// Issue 23, item 8: the documentation's shell sessions run as printed, against bluez-sim.
@Suite("docs: the comparer and the extractor of sessions")
struct DocSessionComparerTests {
    @Test("identifiers, addresses, times and fractional numbers match any of their kind")
    func tolerance() {
        #expect(DocOutput.matches(expected: [#"a{ss} 1 "f713b801-f018-4592-851d-722230701152" "near""#],
                                  actual: "a{ss} 1 \"5511aa44-e3b6-4320-9be5-1f6b201378f7\" \"near\"\n"))
        #expect(DocOutput.matches(expected: [#"ao 1 "/org/proximityd/peers/f713b801_2df018_2d4592_2d851d_2d722230701152""#],
                                  actual: "ao 1 \"/org/proximityd/peers/_35511aa44_2de3b6_2d4320_2d9be5_2d1f6b201378f7\"\n"))
        #expect(DocOutput.matches(expected: ["Call failed: :1.5 is not recording"], actual: "Call failed: :1.123 is not recording\n"))
        #expect(DocOutput.matches(expected: [#"s "02:00:00:00:00:01" d 1.52"#], actual: "s \"02:AB:00:00:00:07\" d 0.5\n"))
        #expect(DocOutput.matches(expected: ["2026-11-23T15:00:00.123Z fleet entered"], actual: "2027-01-02T01:02:03.456Z fleet entered\n"))
        #expect(DocOutput.matches(expected: ["bus unix:path=/tmp/box1/bus"], actual: "bus unix:path=/tmp/proximityd-box-x/bus,guid=0a1b\n"))
        #expect(DocOutput.matches(expected: ["a … b"], actual: "a anything at all b"))
        #expect(DocOutput.matches(expected: ["first", "...", "last"], actual: "first\nlast\n"))
        #expect(DocOutput.matches(expected: ["first", "…", "last"], actual: "first\n2\n3\nlast\n"))
        #expect(DocOutput.matches(expected: [], actual: "\n"))
    }

    @Test("a wrong word, a wrong integer, a missing or extra line, or a literal that is not a token fails")
    func mismatches() {
        #expect(!DocOutput.matches(expected: [#"s "inside""#], actual: "s \"outside\"\n"))
        #expect(!DocOutput.matches(expected: ["Call failed: matcher: Major needs UUID"],
                                   actual: "Call failed: matcher: Minor needs Major\n"))
        #expect(!DocOutput.matches(expected: [#"ao 1 "/org/proximityd/regions/fleet""#],
                                   actual: "ao 2 \"/org/proximityd/regions/fleet\" \"/org/proximityd/regions/visitor\"\n"))
        #expect(!DocOutput.matches(expected: [#"s "inside""#, #"as 1 "x""#], actual: "s \"inside\"\n"))
        #expect(!DocOutput.matches(expected: [#"s "inside""#], actual: "s \"inside\"\nextra\n"))
        #expect(!DocOutput.matches(expected: [], actual: "Call failed: no\n"))
        #expect(!DocOutput.matches(expected: ["65"], actual: "0\n"))
        // A decimal is not an integer, a UUID not an arbitrary word, and `…` stays on its line.
        #expect(!DocOutput.matches(expected: ["d 1.5"], actual: "d 2\n"))
        #expect(!DocOutput.matches(expected: [#"s "f713b801-f018-4592-851d-722230701152""#], actual: "s \"box1\"\n"))
        #expect(!DocOutput.matches(expected: ["a … b"], actual: "a x\nb\n"))
        #expect(!DocOutput.matches(expected: ["first", "...", "last"], actual: "first\nmiddle\n"))
    }

    @Test("sessions: console blocks only, commands, continued lines, outputs, cat FILE, background jobs")
    func extractor() throws {
        let markdown = """
            ```sh
            $ not run
            ```
            text
            ```console
            $ cat a.yaml
            seed: 5

            $ long \\
                continued
            out 1
            out 2
            $ job &
            ```
            ````console
            $ echo $K
            ````
            """
        let commands = try DocSession.commands(in: markdown)
        #expect(commands.map(\.line) == [6, 9, 13, 16])
        #expect(commands[0].shownFile == "a.yaml" && commands[0].expected == ["seed: 5"])
        #expect(commands[1].text == "long \\\n    continued" && commands[1].expected == ["out 1", "out 2"])
        #expect(commands[2].isBackground && !commands[1].isBackground && commands[2].expected.isEmpty)
        #expect(commands[3].text == "echo $K" && commands[3].shownFile == nil)
        #expect(throws: TestKitError.self) { try DocSession.commands(in: "```console\noutput first\n```\n") }
        #expect(throws: TestKitError.self) { try DocSession.commands(in: "```console\n$ x\n") }
    }

    @Test("the runner names the document, the line and the command, with expected and actual output")
    func failureReport() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("doc-session-self-\(UUID().uuidString.prefix(8)).md")
        try """
            ```console
            $ X=inside
            $ sleep 600 &
            $ echo "s \\"$X\\""
            s "outside"
            ```
            """.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let failure = try await DocSessionRunner(document: file, name: "self.md").run()
        let report = try #require(failure)
        #expect(report.hasPrefix("self.md:4: $ echo"), "\(report)")
        #expect(report.contains("expected:\n    s \"outside\"\nactual (exit 0):\n    s \"inside\""), "\(report)")
    }
}

@Suite("docs: every session runs as printed on bluez-sim", .serialized)
struct DocSessionTests {
    /// The documents that must hold sessions.
    static let required = ["docs/regions.md", "docs/alerts.md", "docs/tracking.md", "docs/dbus-api.md"]

    /// Every Markdown document of docs/ and the README, relative to the repository; only those
    /// named in `PROXIMITYD_DOCS` (comma-separated) if it is set, to try one document while
    /// editing it.
    static var documents: [String] {
        let docs = (try? FileManager.default.contentsOfDirectory(atPath: repositoryRoot.appendingPathComponent("docs").path)) ?? []
        let all = ["README.md"] + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/\($0)" }
        guard let only = ProcessInfo.processInfo.environment["PROXIMITYD_DOCS"] else { return all }
        return all.filter { only.split(separator: ",").map(String.init).contains($0) }
    }

    @Test("the documents that must have sessions have them")
    func coverage() throws {
        for document in Self.required {
            let text = try String(contentsOf: repositoryRoot.appendingPathComponent(document), encoding: .utf8)
            #expect(try !DocSession.commands(in: text).isEmpty, "\(document) has no ```\(DocSession.marker) session")
        }
    }

    @Test("each document's sessions", arguments: documents)
    func sessions(_ document: String) async throws {
        let failure = try await DocSessionRunner(document: repositoryRoot.appendingPathComponent(document), name: document).run()
        #expect(failure == nil, "\(failure ?? "")")
    }

    /// The access rules are stated once, in dbus-api.md's Access section; every method the policy
    /// lets everyone call is listed there under its interface, and every method listed there is
    /// one the policy allows.
    @Test("dbus-api.md's Access lists exactly the methods dbus/org.proximityd.conf lets everyone call")
    func accessRules() throws {
        let conf = try String(contentsOf: repositoryRoot.appendingPathComponent("dbus/org.proximityd.conf"), encoding: .utf8)
        let api = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/dbus-api.md"), encoding: .utf8)
        let defaultPolicy = try #require(conf.components(separatedBy: "<policy context=\"default\">").dropFirst().first?
            .components(separatedBy: "</policy>").first)
        // <allow send_destination_prefix="org.proximityd" send_interface="org.proximityd.Node1" send_member="GetPeers"/>
        var allowed: Set<String> = []
        for element in defaultPolicy.components(separatedBy: "<allow").dropFirst() {
            let attributes = element.components(separatedBy: "/>")[0]
            func value(_ name: String) -> String? {
                attributes.components(separatedBy: "\(name)=\"").dropFirst().first?.components(separatedBy: "\"").first
            }
            if let interface = value("send_interface"), interface.hasPrefix("org.proximityd."), let member = value("send_member") {
                allowed.insert("\(interface).\(member)")
            }
        }
        #expect(allowed.count >= 10, "\(allowed)")
        let access = try #require(api.components(separatedBy: "\n## Access\n").dropFirst().first)
        let mayCall = try #require(access.components(separatedBy: "may call:\n").dropFirst().first?.components(separatedBy: "\n\n").first)
        var listed: Set<String> = []
        for bullet in mayCall.components(separatedBy: "\n  - ").dropFirst() {
            // "`org.proximityd.Node1.GetPeers`, `GetPeer`, … and `StartRecording` and `StopRecording`: …"
            // The methods come before a parenthesis or ", and with `Properties`" (properties follow).
            let methods = bullet.components(separatedBy: ":")[0].components(separatedBy: "(")[0].components(separatedBy: ", and with")[0]
            let names = methods.components(separatedBy: "`").enumerated()
                .filter { $0.offset % 2 == 1 }.map(\.element)
            guard let first = names.first, first.hasPrefix("org.proximityd.") else { continue }
            let interface = first.split(separator: ".").dropLast().joined(separator: ".")
            listed.insert(first)
            for member in names.dropFirst() where !member.contains(".") { listed.insert("\(interface).\(member)") }
        }
        #expect(listed == allowed, "listed, not allowed: \(listed.subtracting(allowed).sorted()); allowed, not listed: \(allowed.subtracting(listed).sorted())")
    }

    /// The README's commands are the demos and the test suite: running them here would run this
    /// test inside itself, so the check is that CI runs the very commands the README gives.
    @Test("CI runs the commands of the README's first block (the demos once each, the tests)")
    func readmeCommandsInCI() throws {
        let readme = try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let ci = try String(contentsOf: repositoryRoot.appendingPathComponent(".ci/run"), encoding: .utf8)
        let ciCommands = Set(ci.split(separator: "\n").map { $0.split(separator: "#")[0].trimmingCharacters(in: .whitespaces) })
        let block = try #require(readme.components(separatedBy: "```sh\n").dropFirst().first?.components(separatedBy: "```").first)
        let commands = block.split(separator: "\n").map { $0.split(separator: "#")[0].trimmingCharacters(in: .whitespaces) }
        #expect(commands.count >= 3, "\(commands)")
        for command in commands {
            // The demos run until Ctrl-C; CI runs each with --once, which the README describes.
            let run = command.hasPrefix("scripts/demo.sh") ? command + " --once" : command
            #expect(ciCommands.contains(run), "README gives `\(command)`; .ci/run does not run `\(run)`")
            if run != command {
                let described = readme.contains("`\(run)`")
                #expect(described, "the README does not describe `\(run)`")
            }
        }
    }
}
