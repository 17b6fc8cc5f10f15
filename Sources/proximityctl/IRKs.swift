import ArgumentParser
import Foundation
import ProximityAPI
import ProximityCore
import ProximityTrust

/// `proximityctl irks`: the identity resolving keys the node recognises phones and other
/// private-address devices by (`Node1.IRKs`, `AddIRK`, `RemoveIRK`; docs/security.md, IRKs).
struct IRKs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "irks",
        abstract: "List, add and remove the IRKs the node recognises devices by.",
        discussion: """
            A phone advertises from a resolvable private address that changes every few minutes. \
            With its identity resolving key (IRK) the node recognises each of those addresses and \
            ranges the phone as one peer, irk:NAME, for regions, alerts, tracking, MQTT and the \
            fleet. Keys added here are kept by the node (settings.json, mode 0600); those of the \
            config file's irks: win and change only there. The node never shows a key again.

            Exit status: 0 on success, 64 for a bad argument or key, 69 when the node cannot be \
            reached or refuses the call.

            Examples:
              $ proximityctl irks add anna-phone --key-file anna.irk
                Recognise Anna's phone; the key file holds its 32 hexadecimal digits.
              $ proximityctl irks list
                Every IRK's name and where it was given.
            """,
        subcommands: [List.self, Add.self, Enroll.self, Remove.self])
}

extension IRKs {
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the IRKs' names (the node's IRKs property), never the keys.",
            discussion: """
                Examples:
                  $ proximityctl irks list
                    NAME, PEER and SOURCE (config or bus), one row per IRK.
                  $ proximityctl irks list --json
                    One JSON object: name to source.
                """)

        @OptionGroup var node: NodeOptions

        @Flag(name: .long, help: "Print one JSON object instead of a table.")
        var json = false

        func run() async throws {
            let irks = await node.withNode("cannot read the node's IRKs") { try await $0.properties().irks }
            if json { return print(try jsonText(irks)) }
            print(textTable(["NAME", "PEER", "SOURCE"],
                            irks.sorted { $0.key < $1.key }.map { [$0.key, PeerID.irk($0.key).rawValue, $0.value] }),
                  terminator: "")
            if irks.isEmpty { print("(no IRKs)") }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Recognise a device by its IRK (AddIRK).",
            discussion: """
                The key is 32 hexadecimal digits, most significant byte first (as ESPresense and \
                Home Assistant's Private BLE Device take it; an irk: prefix, and colons, spaces or \
                dashes between pairs are allowed), or its 16 bytes in base64 as Apple's Keychain \
                shows them (least significant first). It is read from --key-file, or from standard input, never from the \
                command line, where other users of the box could see it. A name already added is \
                given the new key.

                Examples:
                  $ proximityctl irks add anna-phone --key-file anna.irk
                    From a file.
                  $ proximityctl irks add bob-watch < bob.irk
                    From standard input.
                """)

        @OptionGroup var node: NodeOptions

        @Argument(help: ArgumentHelp("The device's name: 1 to 64 letters, digits, '-', '_' or '.'; its peer is irk:NAME.",
                                     valueName: "name"))
        var name: String

        @Option(name: .customLong("key-file"), help: ArgumentHelp("A file holding the key (else standard input).", valueName: "file"))
        var keyFile: String?

        func run() async throws {
            if let problem = PeerID.irkNameProblem(name) { fail(problem, status: 64) }
            let source = keyFile ?? "standard input"
            let data: Data
            if let keyFile {
                guard let contents = FileManager.default.contents(atPath: keyFile) else {
                    fail("--key-file: cannot read \(keyFile)", status: 64)
                }
                data = contents
            } else {
                // One line (typed or pasted at a terminal, or piped). At a terminal the key is not
                // echoed, as a password prompt does not echo one.
                let terminal = isatty(0) == 1
                var saved = termios()
                if terminal {
                    FileHandle.standardError.write(Data("the IRK of \(name) (32 hexadecimal digits, not shown): ".utf8))
                    if tcgetattr(0, &saved) == 0 {
                        var quiet = saved
                        quiet.c_lflag &= ~tcflag_t(ECHO)
                        _ = tcsetattr(0, TCSAFLUSH, &quiet)
                    }
                }
                let line = readLine(strippingNewline: true) ?? ""
                if terminal {
                    _ = tcsetattr(0, TCSAFLUSH, &saved)
                    FileHandle.standardError.write(Data("\n".utf8))
                }
                data = Data(line.prefix(4096).utf8)
            }
            let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            let key: IdentityResolvingKey
            do { key = try IdentityResolvingKey(parsing: text) } catch { fail("\(source): \(error)", status: 64) }
            let name = name, hex = Hex.text(key.bytes)
            await node.withNode("cannot add the IRK \(name)") { try await $0.addIRK(name, key: hex) }
            print("\(name) added: the node ranges its device as \(PeerID.irk(name))")
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop recognising devices by IRKs added with add (RemoveIRK).",
            discussion: """
                An IRK of the config file is removed there (exit 69 here).

                Examples:
                  $ proximityctl irks remove anna-phone
                    Anna's phone is an unknown device again at its next address.
                """)

        @OptionGroup var node: NodeOptions

        @Argument(help: ArgumentHelp("The IRKs' names.", valueName: "name"))
        var names: [String]

        func run() async throws {
            for name in names { if let problem = PeerID.irkNameProblem(name) { fail(problem, status: 64) } }
            for name in names {
                await node.withNode("cannot remove the IRK \(name)") { try await $0.removeIRK(name) }
                print("\(name) removed")
            }
        }
    }
}
