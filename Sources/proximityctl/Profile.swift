import ArgumentParser
import DBusKit
import Foundation
import ProximityAPI
import ProximityCore

/// `proximityctl profile`, `track`, `clear`: the node's profile and beacon tracking
/// (`org.proximityd.Profile1`).
struct ProfileCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "profile",
        abstract: "Show and change the node's profile (a.beacon.major, a.beacon.prox, ...).",
        discussion: """
            The profile holds named text values: the tracker's (a.beacon.uuid, a.beacon.major, \
            a.beacon.minor, a.beacon.prox with prox 0 unknown, 1 immediate, 2 near, 3 far) and \
            the ones clients and rules set. Rules test them; see docs/tracking.md.

            Exit status: 0 on success, 64 for a bad argument, 69 when the node cannot be reached \
            or refuses the call.

            Examples:
              $ proximityctl profile
                Every attribute (the same as profile show).
              $ proximityctl profile set a.user albert
                Sets a.user, for the rules to test.
            """,
        subcommands: [Show.self, Set.self, Unset.self],
        defaultSubcommand: Show.self)

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the attributes, sorted by key.",
            discussion: """
                Examples:
                  $ proximityctl profile show
                    One line per attribute: key and value.
                  $ proximityctl profile show --json
                    One JSON object: key -> value.
                """)
        @OptionGroup var node: NodeOptions
        @Flag(name: .long, help: "Print one JSON object instead of lines.") var json = false

        func run() async throws {
            let attributes = await node.withNode("cannot read the profile") { try await $0.attributes() }
            if json {
                print(try jsonText(attributes))
            } else {
                let width = attributes.keys.map(\.count).max() ?? 0
                for (key, value) in attributes.sorted(by: { $0.key < $1.key }) {
                    print(key.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + value)
                }
            }
        }
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set an attribute (UpdateAttribute).",
            discussion: """
                Example:
                  $ proximityctl profile set a.user albert
                    Sets a.user to albert, for rules to test.
                """)
        @OptionGroup var node: NodeOptions
        @Argument(help: "The attribute's key.") var key: String
        @Argument(help: "Its value.") var value: String

        func validate() throws {
            if let problem = Profile.problem(key: key) ?? Profile.problem(value: value) { throw ValidationError(problem) }
        }

        func run() async throws {
            await node.withNode("cannot set \(key)") { try await $0.updateAttribute(key, value) }
        }
    }

    struct Unset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove an attribute (RemoveAttribute).",
            discussion: """
                Example:
                  $ proximityctl profile unset a.user
                    Removes a.user (exit 69 when there is none).
                """)
        @OptionGroup var node: NodeOptions
        @Argument(help: "The attribute's key.") var key: String

        func validate() throws {
            if let problem = Profile.problem(key: key) { throw ValidationError(problem) }
        }

        func run() async throws {
            await node.withNode("cannot remove \(key)") { try await $0.removeAttribute(key) }
        }
    }
}

/// `proximityctl track`: a manual `TrackBeacon`.
struct Track: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Track a beacon by hand (TrackBeacon), as an app does when it sees one itself.",
        discussion: """
            Sets a.beacon.uuid, a.beacon.major, a.beacon.minor and a.beacon.prox (an empty value \
            removes its attribute), and sends a tracking event with them and the KEY=VALUE context \
            data; rules on tracking see it. PROX is the zone, by name or by the number that \
            a.beacon.prox holds: unknown 0, immediate 1, near 2, far 3.

            Example:
              $ proximityctl track f7826da6-4fa2-4e98-8024-bc5b71e0893e 12 7 near \\
                  site=museum
                Beacon 12/7 near, with site=museum in the tracking event.
            """)
    @OptionGroup var node: NodeOptions
    @Argument(help: "The beacon's UUID (\"\" for none).") var uuid: String
    @Argument(help: "Its major (\"\" for none).") var major: String
    @Argument(help: "Its minor (\"\" for none).") var minor: String
    @Argument(help: ArgumentHelp("immediate, near, far or unknown; or 1, 2, 3 or 0.", valueName: "prox")) var prox: String
    @Argument(help: "Context data, KEY=VALUE each.") var data: [String] = []

    /// The zones by name, as the numbers `TrackBeacon` takes (docs/tracking.md).
    static let zones: [String: UInt8] = ["unknown": 0, "immediate": 1, "near": 2, "far": 3]

    /// PROX as `TrackBeacon`'s `y`: a zone's name in any case, or 0 to 3.
    static func number(_ prox: String) -> UInt8? {
        if let n = zones[prox.lowercased()] { return n }
        guard let n = UInt8(prox), n <= 3 else { return nil }
        return n
    }

    func validate() throws {
        guard Self.number(prox) != nil else {
            throw ValidationError("prox must be immediate, near, far or unknown, or 0 (unknown), 1 (immediate), 2 (near) or 3 (far), " +
                "not \(prox.debugDescription)")
        }
        for item in data where !item.contains("=") { throw ValidationError("context data must be KEY=VALUE, not \(item.debugDescription)") }
    }

    func run() async throws {
        var context: [String: String] = [:]
        for item in data {
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            context[String(parts[0])] = String(parts[1])
        }
        let prox = Self.number(prox)!
        await node.withNode("cannot track the beacon") {
            try await $0.trackBeacon(uuid: uuid, major: major, minor: minor, prox: prox, data: context)
        }
    }
}

/// `proximityctl clear`: `ClearCurrentBeacon`.
struct Clear: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Clear the current beacon (ClearCurrentBeacon): its attributes are removed.",
        discussion: """
            Example:
              $ proximityctl clear
                Removes a.beacon.uuid, a.beacon.major, a.beacon.minor and a.beacon.prox.
            """)
    @OptionGroup var node: NodeOptions

    func run() async throws {
        await node.withNode("cannot clear the current beacon") { try await $0.clearCurrentBeacon() }
    }
}

func jsonText(_ object: Any) throws -> String {
    let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
    return String(decoding: data, as: UTF8.self)
}

/// Rows under a header, each column but the last padded to its widest cell and two spaces.
func textTable(_ header: [String], _ rows: [[String]]) -> String {
    let all = [header] + rows
    let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
    return all.map { row in
        row.indices.map { column in
            column == row.count - 1 ? row[column] : row[column] + String(repeating: " ", count: widths[column] - row[column].count + 2)
        }.joined()
    }.joined(separator: "\n") + "\n"
}
