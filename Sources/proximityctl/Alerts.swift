import ArgumentParser
import DBusKit
import Foundation
import ProximityAPI
import ProximityCore

/// `proximityctl alerts`: the node's alert engine (`org.proximityd.AlertManager1` and its
/// `Alert1` objects), and `consume`, the reference alert client.
struct Alerts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, add, remove and follow the node's alerts; accept, decline and close them; show them as notifications.",
        discussion: """
            An alert has content (title, description, text to speech, thumbnail, action, URL, URI) \
            and targets: each peer its matcher matches is one target, with its own action status \
            (waitingForAction, inProgress, done). The node offers one alert at a time, the closest \
            ready target first (AlertReady); the client that shows it accepts it (inProgress) and \
            marks it done when the user closes it; the node takes an offer or an action back when \
            its target leaves or its condition fails (AlertRemoved).

            ALERT arguments are an alert target's object path, or ALERT-ID/TARGET-ID as \
            `alerts list` shows them.

            Exit status: 0 on success, 64 for a bad argument (for `add`, a definition that cannot \
            be, in the node's words), 66 for a --json file that cannot be read, 69 when the node \
            cannot be reached, refuses the call (NotOffered, DoesNotExist, NotPermitted, ...), or \
            leaves the bus; `consume` also exits 69 when no notification server is there.

            Examples:
              $ proximityctl alerts list
                The alerts' targets; * marks the one on offer or in progress.
              $ proximityctl alerts consume
                Shows each alert offered as a desktop notification.
            """,
        subcommands: [List.self, Add.self, Remove.self, Watch.self, Accept.self, Decline.self, Done.self, Consume.self])
}

extension Alerts {
    /// `alerts list`: `GetManagedObjects`, `GetDefinitions` and `Current`.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the alerts' targets with their status, and the alerts with no target yet.",
            discussion: """
                One row per alert target, sorted by alert and target: ALERT, TARGET, STATUS (the \
                action status), READY (ready for action), CONDITION (the strategy's condition \
                holds), STRATEGY (the key deciding it), PROXIMITY (the target's zone in the last \
                report) and TITLE; the alert offered or in progress (the node's Current) is marked \
                `*`. An alert whose matcher matches no peer yet has one row, `(no target yet)`.

                With --json, one object: {"current": PATH or null, "alerts": [...]}, each alert \
                with its identifier, source (config or bus), definition (its parts as AddAlert \
                takes them) and targets (target, path, status, ready, condition, strategy, \
                proximity, detected, current).

                Examples:
                  $ proximityctl alerts list
                    The table.
                  $ proximityctl alerts list --json
                    The alerts and their definitions, as one JSON object.
                """)

        @OptionGroup var node: NodeOptions

        @Flag(name: .long, help: "Print one JSON object instead of a table.")
        var json = false

        func run() async throws {
            let listing = await node.withNode("cannot read the node's alerts") { node in
                AlertText.Listing(current: try await node.currentAlert(), targets: try await node.alertProperties(),
                                  definitions: try await node.alertDefinitions())
            }
            if json {
                let data = try JSONSerialization.data(withJSONObject: AlertText.json(listing),
                                                      options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
                print(String(decoding: data, as: UTF8.self))
            } else {
                print(AlertText.table(listing), terminator: "")
            }
        }
    }

    /// `alerts watch`: `AlertReady`, `AlertRemoved` and the targets' status changes, one line each.
    struct Watch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Follow the alerts: one line per offer, removal and status change.",
            discussion: """
                Prints each event as the node announces it, with the time it was received: ready \
                (AlertReady: an offer, with its title, zone and distance), removed (AlertRemoved, \
                with the reason: not-detected, condition-not-valid, alert-removed, status-forced) \
                and status (a target's action status changed). Nothing is printed until an event \
                comes. Output is flushed after each line. Ends after --count lines, on Ctrl-C, or \
                with exit 69 when the node leaves the bus.

                  2026-11-23T15:00:00.123Z welcome/ibeacon:f7826da6-...:1:2 ready "Welcome" near 1.52 m
                  2026-11-23T15:00:00.140Z welcome/ibeacon:f7826da6-...:1:2 status inProgress
                  2026-11-23T15:00:09.120Z welcome/ibeacon:f7826da6-...:1:2 removed not-detected

                With --json, one object a line: {"time", "alert", "target", "path", "event"}, and \
                for ready: title, description, text_to_speech, thumbnail, action, url, uri, extra, \
                proximity, distance (metres, null when unknown); for removed: reason; for status: \
                status.

                Examples:
                  $ proximityctl alerts watch
                    Every alert's offers, removals and status changes.
                  $ proximityctl alerts watch welcome --json --count 1
                    The next event of the alert welcome, as JSON.
                """)

        @OptionGroup var node: NodeOptions

        @OptionGroup var follow: FollowOptions

        @Argument(help: ArgumentHelp("Only these alerts (default: every alert).", valueName: "alert-id"))
        var identifiers: [String] = []

        func run() async throws {
            for identifier in identifiers {
                if let problem = Alert.problem(identifier: identifier) { fail(problem, status: 64) }
            }
            let (only, json) = (Set(identifiers), follow.json)
            await node.follow("cannot follow the alerts", count: follow.count, subscribe: { try await $0.alertSignals() }) { signal, time in
                guard let event = AlertText.Event(signal), only.isEmpty || only.contains(event.identifiers.alert) else { return nil }
                return json ? AlertText.jsonLine(event, time: time) : AlertText.humanLine(event, time: time)
            }
        }
    }

    /// What `accept`, `decline` and `done` share: the ALERT argument, one call.
    struct TargetCommand {
        let verb: String
        let past: String

        func run(_ node: NodeOptions, _ argument: String, _ call: @escaping @Sendable (NodeProxy, ObjectPath) async throws -> Void) async {
            let candidates: [ObjectPath]
            do { candidates = try AlertText.candidates(argument) } catch { fail("\(error)", status: 64) }
            let (verb, past) = (verb, past)
            let path = await node.withNode("cannot \(verb) \(argument)") { node -> ObjectPath in
                let path = candidates.count == 1 ? candidates[0] : AlertText.resolve(candidates, existing: Set(try await node.alertPaths()))
                do {
                    try await call(node, path)
                } catch {
                    await node.close()
                    fail("cannot \(verb) \(AlertText.name(path)): \(Self.explain(error))")
                }
                return path
            }
            print("\(past) \(AlertText.name(path))")
        }

        /// The node's error, with what it means for the names a user meets here.
        static func explain(_ error: any Error) -> String {
            guard let error = error as? DBusError else { return "\(error)" }
            switch error.name {
            case ProximityBus.Errors.notOffered:
                return "\(error) (only the alert on offer can be accepted or declined, and only it or the one in progress marked done: " +
                    "`proximityctl alerts list` marks it *)"
            case ProximityBus.Errors.doesNotExist, .unknownObject:
                return "\(error) (no such alert target: `proximityctl alerts list` shows them)"
            case .accessDenied:
                return "\(error) (on the system bus only root and the group proximityd may accept, decline and close alerts: " +
                    "sudo usermod -aG proximityd $USER, then log in again)"
            default:
                return "\(error)"
            }
        }
    }

    struct Accept: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Accept the alert on offer: it is shown (waitingForAction -> inProgress).",
            discussion: """
                Only the alert on offer (`alerts list` marks it *) can be accepted; another is \
                refused with NotOffered (exit 69).

                Example:
                  $ proximityctl alerts accept \\
                      welcome/ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:2
                    Accepts the alert welcome for that beacon.
                """)

        @OptionGroup var node: NodeOptions

        @Argument(help: ArgumentHelp("The alert target: an object path or ALERT-ID/TARGET-ID.", valueName: "alert"))
        var alert: String

        func run() async throws {
            await TargetCommand(verb: "accept", past: "accepted").run(node, alert) { try await $0.accept($1) }
        }
    }

    struct Decline: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Decline the alert on offer: the node offers the next closest.",
            discussion: """
                A declined target is offered again only after its condition stopped holding and \
                holds again. Only the alert on offer can be declined (NotOffered, exit 69, otherwise).

                Example:
                  $ proximityctl alerts decline \\
                      welcome/ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:2
                    Declines it; the node offers the next closest.
                """)

        @OptionGroup var node: NodeOptions

        @Argument(help: ArgumentHelp("The alert target: an object path or ALERT-ID/TARGET-ID.", valueName: "alert"))
        var alert: String

        func run() async throws {
            await TargetCommand(verb: "decline", past: "declined").run(node, alert) { try await $0.decline($1) }
        }
    }

    struct Done: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Mark the alert in progress (or on offer) done, as when its user closes it.",
            discussion: """
                The node then offers the next ready alert. A done target fires again only after its \
                condition stopped holding for its MaxTimeBeforeReset. Only the alert in progress or \
                on offer can be marked done (NotOffered, exit 69, otherwise).

                Example:
                  $ proximityctl alerts done \\
                      welcome/ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:2
                    Marks it done, as closing its notification does.
                """)

        @OptionGroup var node: NodeOptions

        @Argument(help: ArgumentHelp("The alert target: an object path or ALERT-ID/TARGET-ID.", valueName: "alert"))
        var alert: String

        func run() async throws {
            await TargetCommand(verb: "mark done", past: "done").run(node, alert) { try await $0.done($1) }
        }
    }

    /// `alerts consume`: ``AlertConsumer``.
    struct Consume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show each alert the node offers as a desktop notification (or run a command), accept it, " +
                "and mark it done when closed.",
            discussion: """
                The reference alert client. For each offer (AlertReady), and at start for the alert \
                the node offers now: shows it, then accepts it. An alert already in progress at \
                start (accepted by an earlier run) is shown again, not accepted again.

                Shown as a notification (org.freedesktop.Notifications on --notifications-bus, the \
                session bus by default): the title as summary, the description as body, the \
                thumbnail as icon (when it is a file) and image-path hint, actions "Open" and, when \
                the alert has a URL, the URL (opened with xdg-open), never expiring. Closing the \
                notification marks the alert done. When the node takes the alert back (its target \
                left, its condition failed, the alert was removed), the notification is closed and \
                the alert is not marked done.

                With --exec, no notification server is needed: CMD runs with /bin/sh -c, the alert \
                in its environment (PROXIMITY_ALERT, PROXIMITY_TARGET, PROXIMITY_PATH, \
                PROXIMITY_TITLE, PROXIMITY_DESCRIPTION, PROXIMITY_TEXT_TO_SPEECH, \
                PROXIMITY_THUMBNAIL, PROXIMITY_ACTION, PROXIMITY_URL, PROXIMITY_URI, \
                PROXIMITY_PROXIMITY, PROXIMITY_DISTANCE, PROXIMITY_EXTRA_<KEY>); its exit marks the \
                alert done; when the node takes the alert back, the command's process group gets \
                SIGTERM.

                --speak says the text to speech (or the title) with espeak-ng; --speak-to DIR \
                writes it to DIR/ALERT--TARGET.wav instead (for boxes without sound).

                Logs one line per step on standard error. SIGINT and SIGTERM close the notification \
                (or stop the command) and exit 0; the alert stays in progress for the next run. \
                Exit 69 when the node cannot be reached or leaves the bus, or when no notification \
                server is there (without --exec). On the system bus only root and the group \
                proximityd may accept alerts: a desktop user who runs this must be in the group.

                The node may be on another box (a meeting room's) and the desktop here: --host \
                [USER@]HOST reaches that box's system bus over ssh; the notifications are shown on \
                this session's bus. The user unit proximityctl-consume.service runs this with the \
                options of ~/.config/proximityd/consume.env (CONSUME_OPTIONS=--host pi@room).

                Examples:
                  $ proximityctl alerts consume -H pi@meeting-room.lan
                    The meeting room's alerts, shown on this desktop.
                  $ proximityctl alerts consume --exec 'logger "$PROXIMITY_TITLE"'
                    Logs each alert's title instead; the command's exit marks it done.
                """)

        @OptionGroup var node: NodeOptions

        @Option(name: .customLong("notifications-bus"),
                help: ArgumentHelp("The notification server's bus: session, system, or a D-Bus address.", valueName: "bus"))
        var notificationsBus: String = "session"

        @Option(name: .customLong("exec"), help: ArgumentHelp(
            "Run this command (with /bin/sh -c) for each alert instead of a notification.", valueName: "cmd"))
        var command: String?

        @Flag(name: .long, help: "Say each alert's text to speech (or title) with espeak-ng.")
        var speak = false

        @Option(name: .customLong("speak-to"), help: ArgumentHelp(
            "With speech, write a WAV file per alert into this directory instead of playing it (implies --speak).", valueName: "dir"))
        var speakTo: String?

        func validate() throws {
            do { _ = try BusAddress(parsing: notificationsBus) } catch { throw ValidationError("--notifications-bus: \(error.message)") }
            if let command, command.trimmingCharacters(in: .whitespaces).isEmpty { throw ValidationError("--exec: the command is empty") }
            if let speakTo {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: speakTo, isDirectory: &isDirectory), isDirectory.boolValue else {
                    throw ValidationError("--speak-to: \(speakTo) is not a directory")
                }
            }
        }

        func run() async throws {
            var options = AlertConsumer.Options(command: command)
            if speak || speakTo != nil {
                guard let espeak = Subprocess.find("espeak-ng") else {
                    fail("--speak: espeak-ng is not on PATH (apt-get install espeak-ng)")
                }
                options.espeak = espeak
                options.speakTo = speakTo.map { URL(fileURLWithPath: $0, isDirectory: true) }
            }
            let proxy: NodeProxy
            do { proxy = try await NodeProxy.connect(to: node.address, name: node.name) } catch { fail("\(error)") }
            var notifications: DesktopNotifications?
            if command == nil {
                do {
                    notifications = try await DesktopNotifications.connect(to: try! BusAddress(parsing: notificationsBus))
                } catch {
                    await proxy.close()
                    fail("\(error)")
                }
            }
            let ending = await AlertConsumer(node: proxy, notifications: notifications, options: options).run()
            await notifications?.connection.close()
            await proxy.close()
            switch ending {
            case .interrupted: return
            case .failed(let message): fail(message)
            }
        }
    }
}
