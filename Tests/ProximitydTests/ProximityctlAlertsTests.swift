import BlueZSim
import DBusKit
import Foundation
import ProximityAPI
import ProximityTesting
import Testing
import SimTesting
import ClientTesting

/// `proximityctl alerts` against proximityd on bluez-sim in real time, with an iBeacon near the
/// box (1.4 m: the near zone) and alerts on it (range near, `=`): `consume` showing them through a
/// real notification server (dunst on Xvfb, on a private session bus) or an `--exec` command,
/// `list --json`, `watch`, and `accept`/`decline`/`done` with the node's refusals.
///
/// Every wait is on an event (a signal, a process's output or exit, a file) or a bounded poll of
/// a state (dunst's count, the node's property); none is a guessed delay.
@Suite("proximityctl alerts", .serialized)
struct ProximityctlAlertsTests {
    static let fleet = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"
    static let beacon = "ibeacon:\(fleet):1:2"

    /// One box at the origin; no shadowing, so that the beacon stays in the near zone.
    static func scenario() -> Scenario {
        var radio = RadioParameters()
        radio.shadowingSigma = 0
        radio.packetLoss = 0
        return Scenario(seed: 23, radio: radio, boxes: [
            BoxSpec(name: "box", address: "AA:00:00:00:00:01", trajectory: Trajectory(fixed: Position(x: 0, y: 0))),
        ])
    }

    static let tag = """
        {"name": "tag", "address": "C0:00:00:00:00:01", "ibeacon": {"uuid": "\(fleet)", "major": 1, "minor": 2, "measured_power": -59}, "position": [1, 1]}
        """

    static func path(_ alert: String) -> ObjectPath { ProximityBus.alertPath(alert: alert, target: beacon) }

    /// An alert on the beacon, range near, `=`, with `parts` (bus names) on top.
    static func alert(_ title: String, _ parts: [String: DBusValue] = [:]) -> [String: DBusValue] {
        var values: [String: DBusValue] = ["Title": .string(title), "Range": .string("near"), "Comparison": .string("="),
                                           "Match": .variantMap(["UUID": .string(fleet)])]
        for (k, v) in parts { values[k] = v }
        return values
    }

    /// The node on `box` and an observer of its alert signals, subscribed before anything is added.
    final class Node: Sendable {
        let proxy: NodeProxy
        /// `PropertiesChanged` of the `Alert1` objects.
        let changes: SignalLog
        /// `AlertReady` and `AlertRemoved`.
        let manager: SignalLog

        init(proxy: NodeProxy, changes: SignalLog, manager: SignalLog) {
            self.proxy = proxy
            self.changes = changes
            self.manager = manager
        }

        static func observe(_ sim: SimBoxes) async throws -> Node {
            let proxy = try await NodeProxy.connect(to: .address(sim.address("box")))
            let changes = SignalLog(try await proxy.connection.subscribe(MatchRule(
                sender: "org.proximityd", pathNamespace: ProximityBus.alertsPath, interface: .properties, member: "PropertiesChanged")))
            let manager = SignalLog(try await proxy.connection.subscribe(MatchRule(
                sender: "org.proximityd", path: ProximityBus.rootPath, interface: ProximityBus.AlertManager1.interface)))
            return Node(proxy: proxy, changes: changes, manager: manager)
        }

        /// `AddAlert`, as a client calls it.
        func add(_ identifier: String, _ values: [String: DBusValue]) async throws {
            _ = try await proxy.connection.call(destination: proxy.name, path: ProximityBus.rootPath,
                                                interface: ProximityBus.AlertManager1.interface, member: ProximityBus.AlertManager1.addAlert.name,
                                                [.string(identifier), .variantMap(values)])
        }

        func status(_ alert: String) async throws -> String {
            try await proxy.connection.getProperty(destination: proxy.name, path: ProximityctlAlertsTests.path(alert),
                                                   interface: ProximityBus.Alert1.interface, name: "ActionStatus").unwrapped.string ?? ""
        }

        /// Waits for `alert`'s ActionStatus to become `status`, announced from entry `from` on of
        /// the log (or already so).
        func waitStatus(_ alert: String, _ status: String, from: Int = 0, timeout: Duration = .seconds(20)) async throws {
            let path = ProximityctlAlertsTests.path(alert)
            try await changes.wait(from: from, timeout: timeout, "\(alert) \(status)") { m in
                m.path == path && (m.body.count > 1 ? m.body[1].stringKeyedDictionary?["ActionStatus"]?.unwrapped.string : nil) == status
            }
        }

        /// Waits for `AlertReady` (or `AlertRemoved` with `reason`) of `alert`.
        func waitSignal(_ member: String, _ alert: String, reason: String? = nil, from: Int = 0, timeout: Duration = .seconds(20)) async throws {
            let path = ProximityctlAlertsTests.path(alert)
            try await manager.wait(from: from, timeout: timeout, "\(member) \(alert)") { m in
                m.member?.rawValue == member && m.body.first?.objectPath == path && (reason == nil || m.body[1].string == reason)
            }
        }

        func close() async {
            changes.cancel()
            manager.cancel()
            await proxy.close()
        }
    }

    static func proximityctl(_ sim: SimBoxes, _ arguments: [String]) async throws -> CommandResult {
        try await runCommand(BuiltProducts.path("proximityctl"), ["alerts"] + arguments + ["--bus", sim.address("box")])
    }

    static func consume(_ sim: SimBoxes, _ arguments: [String], environment: [String: String] = [:]) throws -> ManagedProcess {
        try ManagedProcess(BuiltProducts.path("proximityctl"), ["alerts", "consume", "--bus", sim.address("box")] + arguments,
                           environment: environment)
    }

    // MARK: - consume with notifications

    @Test("consume: an offer becomes a dunst notification and is accepted; closing it marks it done and the next offer is shown; after a restart the alert in progress is shown again, not accepted again; one taken back by the node is closed, not done")
    func consumeNotifications() async throws {
        try await withNotificationServer { server in
            try await withNodes(Self.scenario()) { sim, daemons in
                daemons["box"] = try await sim.startDaemon("box")
                let node = try await Node.observe(sim)
                let notifications = ["--notifications-bus", server.bus.address]
                // xdg-open, with no desktop, opens URLs with $BROWSER: this one writes it down. (A
                // script run by /bin/sh, not executed itself: a file just written may still be open
                // in a child another test is spawning, and exec would fail with ETXTBSY.)
                let opened = server.directory.appendingPathComponent("opened")
                let browser = server.directory.appendingPathComponent("browser.sh")
                try "echo \"$1\" > '\(opened.path)'\n".write(to: browser, atomically: true, encoding: .utf8)
                let desktop = ["BROWSER": "/bin/sh \(browser.path)", "DISPLAY": "", "XDG_CURRENT_DESKTOP": "X-Generic"]
                var consume = try Self.consume(sim, notifications, environment: desktop)
                defer { consume.signal(SIGKILL) }
                try await consume.waitForOutput(containing: "waiting for alerts", inStderr: true, timeout: .seconds(10))
                #expect(consume.stderr.contains("(dunst 1.9"), "\(consume.stderr)")

                _ = try await sim.control(["AddBeacon", "s", Self.tag])
                try await node.add("welcome", Self.alert("Welcome to the desk", [
                    "Description": .string("Hot desks are on the left."), "TextToSpeech": .string("Welcome"),
                    "Thumbnail": .string("/usr/share/pixmaps/desk.png"), "URL": .string("https://example.com/desk"),
                ]))
                try await node.add("xmas", Self.alert("Seasonal offer", ["Description": .string("Mulled wine at the bar."),
                                                                         "URL": .string("https://example.com/xmas")]))

                // welcome is offered first (the same distance: the identifier decides), shown, accepted.
                try await node.waitSignal("AlertReady", "welcome")
                try await node.waitStatus("welcome", "inProgress")
                try await eventually("welcome on the screen", timeout: .seconds(5)) { try await server.displayedCount() == 1 }
                // Logged once Accept's reply came, maybe after the node's change.
                try await consume.waitForOutput(containing: "accepted welcome/\(Self.beacon)", inStderr: true, timeout: .seconds(10))

                // The user closes it: done, and xmas is offered at once, shown and accepted.
                var mark = node.changes.count
                try await server.closeLast()
                try await node.waitStatus("welcome", "done", from: mark, timeout: .seconds(10))
                try await node.waitStatus("xmas", "inProgress", from: mark, timeout: .seconds(10))
                try await eventually("xmas on the screen", timeout: .seconds(5)) { try await server.displayedCount() == 1 }
                let closed = try await server.history()
                #expect(closed.count == 1, "\(closed)")
                #expect(closed.first?.summary == "Welcome to the desk", "\(closed)")
                #expect(closed.first?.body == "Hot desks are on the left.", "\(closed)")
                #expect(closed.first?.appName == "proximityctl", "\(closed)")
                // "done" is logged once Done's reply came; the closing before the call.
                try await consume.waitForOutput(containing: "done welcome/\(Self.beacon)", inStderr: true, timeout: .seconds(10))
                #expect(consume.stderr.contains("closed (dismissed by the user)"), "\(consume.stderr)")

                // The user clicks it (the default action, "Open"): its URL is opened with xdg-open,
                // and the notification stays.
                let clicked = try await server.dunstctl(["action", "0"])
                #expect(clicked.status == 0, "\(clicked)")
                do {
                    try await eventually("xdg-open opened xmas's URL", timeout: .seconds(10)) {
                        (try? String(contentsOf: opened, encoding: .utf8)) == "https://example.com/xmas\n"
                    }
                } catch {
                    throw TestKitError("\(error)\nproximityctl: \(consume.stderr)\ndunst: \(server.log)")
                }
                // Logged once xdg-open started, maybe after it opened the URL.
                try await consume.waitForOutput(containing: "action \"default\" of xmas/\(Self.beacon): xdg-open https://example.com/xmas",
                                                inStderr: true, timeout: .seconds(10))
                #expect(try await server.displayedCount() == 1)
                #expect(try await node.status("xmas") == "inProgress")

                // SIGTERM: the notification is closed, xmas stays in progress, exit 0.
                consume.signal(SIGTERM)
                #expect(try await consume.waitForExit(timeout: .seconds(10)) == 0, "\(consume.stderr)")
                try await eventually("the notification closed on exit", timeout: .seconds(5)) { try await server.displayedCount() == 0 }
                #expect(try await node.status("xmas") == "inProgress")

                // A new run shows xmas again, without accepting it again.
                consume = try Self.consume(sim, notifications)
                try await consume.waitForOutput(containing: "showing it again, not accepting it again", inStderr: true, timeout: .seconds(10))
                try await eventually("xmas on the screen again", timeout: .seconds(5)) { try await server.displayedCount() == 1 }
                #expect(!consume.stderr.contains("accepted"), "\(consume.stderr)")

                // The box walks away (the beacon is far: the condition no longer holds): the node
                // takes xmas back, the notification is closed, and this client does not call Done
                // (the node itself marks an action it takes back done).
                mark = node.manager.count
                _ = try await sim.control(["MoveBox", "sddd", "box", "8", "0", "0"])
                try await node.waitSignal("AlertRemoved", "xmas", reason: "condition-not-valid", from: mark, timeout: .seconds(30))
                try await eventually("xmas closed", timeout: .seconds(5)) { try await server.displayedCount() == 0 }
                // (AlertRemoved and the status's change come on two subscriptions: either may be
                // handled first, and closes it.)
                try await consume.waitForOutput(containing: "taken back by the node (condition-not-valid)", inStderr: true, timeout: .seconds(5))
                #expect(consume.stderr.contains("closed notification") && consume.stderr.contains("xmas/\(Self.beacon)"), "\(consume.stderr)")
                #expect(try await server.history().first?.summary == "Seasonal offer")

                consume.signal(SIGINT)
                #expect(try await consume.waitForExit(timeout: .seconds(10)) == 0, "\(consume.stderr)")
                #expect(!consume.stderr.contains("done xmas"), "\(consume.stderr)")
                #expect(!consume.stderr.contains("cannot"), "\(consume.stderr)")
                await node.close()
            }
        }
    }

    @Test("consume without a notification server: one line, exit 69")
    func consumeWithoutServer() async throws {
        try await withNodes(Self.scenario()) { sim, daemons in
            daemons["box"] = try await sim.startDaemon("box")
            let empty = try await PrivateBus.start(name: "empty-session")
            let consume = try Self.consume(sim, ["--notifications-bus", empty.address])
            #expect(try await consume.waitForExit(timeout: .seconds(10)) == 69)
            #expect(consume.stderr == "proximityctl: error: no notification server on the \(empty.address) bus (org.freedesktop.Notifications has no owner): start one (dunst, a desktop's own), give its bus with --notifications-bus, or use --exec\n",
                    "\(consume.stderr)")
            await empty.stop()
        }
    }

    @Test("a bus policy that denies Accept: one line with the advice, exit 69")
    func acceptDenied() async throws {
        // As dbus/org.proximityd.conf does for users outside the group proximityd.
        let bus = try await PrivateBus.start(name: "policy", policy: """
            <policy context="default">
              <allow user="*"/>
              <allow own="*"/>
              <allow send_type="method_call"/>
              <allow send_destination="*"/>
              <allow receive_sender="*"/>
              <deny send_destination="org.proximityd" send_interface="org.proximityd.AlertManager1" send_member="Accept"/>
            </policy>
            """)
        let box = Box(bus: bus, observer: try await bus.connect(), stateDirectory: bus.directory.appendingPathComponent("state"))
        do {
            let daemon = try await box.startDaemon()
            let denied = try await runCommand(BuiltProducts.path("proximityctl"), ["alerts", "accept", "welcome/\(Self.beacon)", "--bus", box.address])
            #expect(denied.status == 69, "\(denied)")
            #expect(denied.stderr.hasPrefix("proximityctl: error: cannot accept welcome/\(Self.beacon): org.freedesktop.DBus.Error.AccessDenied: "),
                    "\(denied)")
            #expect(denied.stderr.hasSuffix("(on the system bus only root and the group proximityd may accept, decline and close alerts: sudo usermod -aG proximityd $USER, then log in again)\n"),
                    "\(denied)")
            // Reading is still allowed.
            let list = try await runCommand(BuiltProducts.path("proximityctl"), ["alerts", "list", "--bus", box.address])
            #expect(list.status == 0 && list.stdout.hasSuffix("(no alerts)\n"), "\(list)")
            await daemon.stop()
            #expect(daemon.exitStatus == 0, "\(daemon.stderr)")
        } catch {
            await box.stop()
            throw error
        }
        await box.stop()
    }

    // MARK: - consume --exec, --speak-to

    @Test("consume --exec: the alert in the command's environment, done when it exits; SIGTERM when the node takes it back; --speak-to writes a WAV; no notification server needed")
    func consumeExec() async throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("proximityctl-exec-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: out) }
        try await withNodes(Self.scenario()) { sim, daemons in
            daemons["box"] = try await sim.startDaemon("box")
            let node = try await Node.observe(sim)
            _ = try await sim.control(["AddBeacon", "s", Self.tag])
            try await node.add("welcome", Self.alert("Welcome to the desk", [
                "Description": .string("Hot desks are on the left."), "TextToSpeech": .string("Welcome, Albert."),
                "Thumbnail": .string("https://example.com/desk.png"), "Action": .string("popup"),
                "URL": .string("https://example.com/desk"), "URI": .string("app://desk/7"),
                "Extra": .stringMap(["floor": "2", "desk-id": "A7"]),
            ]))
            try await node.add("linger", Self.alert("Stay a while", ["Extra": .stringMap(["linger": "yes"])]))
            // Offered before consume starts: it takes the node's Current at start.
            try await node.waitSignal("AlertReady", "linger")

            let command = """
                env | grep '^PROXIMITY_' | sort > "$OUT/$PROXIMITY_ALERT.env.part" && mv "$OUT/$PROXIMITY_ALERT.env.part" "$OUT/$PROXIMITY_ALERT.env"
                if [ -n "$PROXIMITY_EXTRA_LINGER" ]; then
                  trap 'echo SIGTERM > "$OUT/$PROXIMITY_ALERT.term"; exit 143' TERM
                  sleep 60 & wait
                fi
                """
            // No session bus at all: --exec needs none.
            let consume = try Self.consume(sim, ["--exec", command, "--speak-to", out.path],
                                           environment: ["OUT": out.path, "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"])
            defer { consume.signal(SIGKILL) }

            // linger (identifier before welcome) was on offer at start: its command runs until the
            // node takes it back, then gets SIGTERM, and linger is not marked done.
            try await node.waitStatus("linger", "inProgress")
            try await eventually("linger's command started", timeout: .seconds(5)) {
                FileManager.default.fileExists(atPath: out.appendingPathComponent("linger.env").path)
            }
            #expect(consume.stderr.contains("offer linger/\(Self.beacon) \"Stay a while\" (current at start)"), "\(consume.stderr)")
            let mark = node.changes.count
            _ = try await node.proxy.connection.call(destination: node.proxy.name, path: ProximityBus.rootPath,
                                                     interface: ProximityBus.AlertManager1.interface,
                                                     member: ProximityBus.AlertManager1.removeAlert.name, [.string("linger")])
            try await eventually("linger's command got SIGTERM", timeout: .seconds(10)) {
                FileManager.default.fileExists(atPath: out.appendingPathComponent("linger.term").path)
            }

            // welcome is offered next: its command writes its environment and exits: done.
            try await node.waitStatus("welcome", "done", from: mark)
            let env = try String(contentsOf: out.appendingPathComponent("welcome.env"), encoding: .utf8)
            let expected = [
                "PROXIMITY_ACTION=popup", "PROXIMITY_ALERT=welcome", "PROXIMITY_DESCRIPTION=Hot desks are on the left.",
                "PROXIMITY_EXTRA_DESK_ID=A7", "PROXIMITY_EXTRA_FLOOR=2",
                "PROXIMITY_PATH=\(Self.path("welcome").rawValue)", "PROXIMITY_PROXIMITY=near",
                "PROXIMITY_TARGET=\(Self.beacon)", "PROXIMITY_TEXT_TO_SPEECH=Welcome, Albert.",
                "PROXIMITY_THUMBNAIL=https://example.com/desk.png", "PROXIMITY_TITLE=Welcome to the desk",
                "PROXIMITY_URI=app://desk/7", "PROXIMITY_URL=https://example.com/desk",
            ]
            let lines = Set(env.split(separator: "\n").map(String.init))
            for line in expected { #expect(lines.contains(line), "\(line) not in\n\(env)") }
            #expect(lines.contains { $0.hasPrefix("PROXIMITY_DISTANCE=") && Double($0.dropFirst("PROXIMITY_DISTANCE=".count)) != nil }, "\(env)")

            // --speak-to: one WAV per alert, moved into place once espeak-ng has written it.
            let wav = out.appendingPathComponent("welcome--ibeacon_\(Self.fleet)_1_2.wav")
            try await eventually("the WAV of welcome", timeout: .seconds(15)) { FileManager.default.fileExists(atPath: wav.path) }
            let data = try Data(contentsOf: wav)
            #expect(data.count > 1000 && data.prefix(4) == Data("RIFF".utf8) && data.dropFirst(8).prefix(4) == Data("WAVE".utf8),
                    "\(data.count) bytes")
            try await eventually("the WAV of linger", timeout: .seconds(15)) {
                FileManager.default.fileExists(atPath: out.appendingPathComponent("linger--ibeacon_\(Self.fleet)_1_2.wav").path)
            }

            consume.signal(SIGTERM)
            #expect(try await consume.waitForExit(timeout: .seconds(10)) == 0, "\(consume.stderr)")
            let log = consume.stderr
            #expect(log.contains("sent SIGTERM to the command for linger/\(Self.beacon)"), "\(log)")
            #expect(log.contains("done welcome/\(Self.beacon)") && !log.contains("done linger"), "\(log)")
            #expect(!log.contains("cannot"), "\(log)")
            await node.close()
        }
    }

    // MARK: - list, watch, accept, decline, done

    @Test("list and list --json; watch; accept of a target not on offer is refused with NotOffered (exit 69); decline, accept by path, done")
    func listWatchAndCommands() async throws {
        try await withNodes(Self.scenario()) { sim, daemons in
            daemons["box"] = try await sim.startDaemon("box")
            let node = try await Node.observe(sim)
            _ = try await sim.control(["AddBeacon", "s", Self.tag])
            try await node.add("welcome", Self.alert("Welcome to the desk", ["Description": .string("Hot desks are on the left.")]))
            try await node.add("xmas", Self.alert("Seasonal offer"))
            try await node.add("nowhere", Self.alert("Never seen", ["Match": .variantMap(["UUID": .string("00000000-0000-4000-8000-000000000000")])]))
            try await node.waitSignal("AlertReady", "welcome")
            try await sim.until("box", "both targets exported", timeout: .seconds(10)) { try await node.proxy.alertPaths().count == 2 }

            // list --json: Current, the targets, the alert with no target yet.
            let json = try await Self.proximityctl(sim, ["list", "--json"])
            #expect(json.status == 0, "\(json)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json)")
            #expect(object["current"] as? String == Self.path("welcome").rawValue, "\(json.stdout)")
            let alerts = try #require(object["alerts"] as? [[String: Any]])
            #expect(alerts.map { $0["identifier"] as? String } == ["nowhere", "welcome", "xmas"], "\(json.stdout)")
            #expect(alerts.allSatisfy { $0["source"] as? String == "bus" }, "\(json.stdout)")
            #expect((alerts[0]["targets"] as? [Any])?.isEmpty == true, "\(json.stdout)")
            let welcome = try #require((alerts[1]["targets"] as? [[String: Any]])?.first, "\(json.stdout)")
            #expect(welcome["target"] as? String == Self.beacon && welcome["path"] as? String == Self.path("welcome").rawValue)
            #expect(welcome["status"] as? String == "waitingForAction" && welcome["ready"] as? Bool == true
                    && welcome["condition"] as? Bool == true && welcome["current"] as? Bool == true && welcome["detected"] as? Bool == true
                    && welcome["strategy"] as? String == "range" && welcome["proximity"] as? String == "near", "\(welcome)")
            let definition = try #require(alerts[1]["definition"] as? [String: Any])
            #expect(definition["Title"] as? String == "Welcome to the desk" && definition["Range"] as? String == "near"
                    && (definition["Match"] as? [String: Any])?["UUID"] as? String == Self.fleet, "\(definition)")
            let xmas = try #require((alerts[2]["targets"] as? [[String: Any]])?.first, "\(json.stdout)")
            #expect(xmas["current"] as? Bool == false && xmas["ready"] as? Bool == true, "\(xmas)")

            // The table.
            let table = try await Self.proximityctl(sim, ["list"])
            #expect(table.status == 0, "\(table)")
            let rows = table.stdout.split(separator: "\n").map(String.init)
            #expect(rows.count == 4, "\(table.stdout)")
            #expect(rows[0].hasPrefix("  ALERT    TARGET") && rows[0].hasSuffix("STATUS            READY  CONDITION  STRATEGY  PROXIMITY  TITLE"),
                    "\(table.stdout)")
            #expect(rows[1].hasPrefix("  nowhere  (no target yet)") && rows[1].hasSuffix("Never seen"), "\(table.stdout)")
            #expect((try? #/\* welcome  ibeacon:\S+ +waitingForAction +yes +yes +range +near +Welcome to the desk/#.wholeMatch(in: rows[2])) != nil,
                    "\(table.stdout)")
            #expect(rows[3].hasPrefix("  xmas     \(Self.beacon)"), "\(table.stdout)")

            // Refusals: xmas is not on offer; nowhere has no such target; arguments that name nothing.
            let notOffered = try await Self.proximityctl(sim, ["accept", "xmas/\(Self.beacon)"])
            #expect(notOffered.status == 69, "\(notOffered)")
            #expect(notOffered.stderr.hasPrefix("proximityctl: error: cannot accept xmas/\(Self.beacon): org.proximityd.Error.NotOffered: "),
                    "\(notOffered)")
            #expect(notOffered.stderr.contains("is not on offer") && notOffered.stderr.contains("alerts list"), "\(notOffered)")
            let noTarget = try await Self.proximityctl(sim, ["done", "nowhere/\(Self.beacon)"])
            #expect(noTarget.status == 69 && noTarget.stderr.contains("org.proximityd.Error.DoesNotExist"), "\(noTarget)")
            for bad in ["welcome", "/org/proximityd/peers/x", "/welcome"] {
                let result = try await Self.proximityctl(sim, ["accept", bad])
                #expect(result.status == 64, "\(bad): \(result)")
            }
            #expect(try await node.status("xmas") == "waitingForAction")

            // watch: subscribed once it prints; forcing xmas's status (not the current) is an event.
            let watch = try ManagedProcess(BuiltProducts.path("proximityctl"), ["alerts", "watch", "--json", "--bus", sim.address("box")])
            defer { watch.signal(SIGKILL) }
            var forced = "done"
            var rounds = 0
            while !watch.stdout.contains("\"event\":\"status\"") {
                rounds += 1
                try #require(rounds <= 50, "alerts watch printed nothing: \(watch.stdout) \(watch.stderr)")
                try await node.proxy.setActionStatusByName(Self.path("xmas"), forced)
                forced = forced == "done" ? "waitingForAction" : "done"
                _ = try? await watch.waitForOutput(containing: "\"event\":\"status\"", timeout: .milliseconds(200))
            }
            if try await node.status("xmas") != "waitingForAction" {
                try await node.proxy.setActionStatusByName(Self.path("xmas"), "waitingForAction")
            }
            let watched = watch.stdout.count

            // decline welcome: xmas is offered; accept it by path; done.
            let declined = try await Self.proximityctl(sim, ["decline", "welcome/\(Self.beacon)"])
            #expect(declined.status == 0 && declined.stdout == "declined welcome/\(Self.beacon)\n", "\(declined)")
            try await node.waitSignal("AlertReady", "xmas", timeout: .seconds(5))
            let accepted = try await Self.proximityctl(sim, ["accept", Self.path("xmas").rawValue])
            #expect(accepted.status == 0 && accepted.stdout == "accepted xmas/\(Self.beacon)\n", "\(accepted)")
            #expect(try await node.status("xmas") == "inProgress")
            let done = try await Self.proximityctl(sim, ["done", "xmas/\(Self.beacon)"])
            #expect(done.status == 0 && done.stdout == "done xmas/\(Self.beacon)\n", "\(done)")
            #expect(try await node.status("xmas") == "done")

            // watch printed the offer and both status changes, one JSON object a line.
            let printed = await watch.waitForOutput(timeout: .seconds(5)) { out in
                let text = String(out.dropFirst(watched))
                return text.contains("\"status\":\"inProgress\"") && text.contains("\"status\":\"done\"")
            }
            #expect(printed, "watch did not print xmas's offer and statuses: \(watch.stdout)")
            // (A last line of the forcing above may come before the offer.)
            let events = String(watch.stdout.dropFirst(watched)).split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }.filter { $0["alert"] as? String == "xmas" }.drop { $0["event"] as? String != "ready" }
            #expect(events.map { $0["event"] as? String ?? "" } == ["ready", "status", "status"], "\(watch.stdout)")
            #expect(events.first?["title"] as? String == "Seasonal offer" && events.first?["proximity"] as? String == "near"
                    && events.first?["target"] as? String == Self.beacon && events.first?["distance"] is Double, "\(watch.stdout)")
            #expect(events.dropFirst().map { $0["status"] as? String ?? "" } == ["inProgress", "done"], "\(watch.stdout)")

            // The node leaves: watch ends with exit 69.
            await node.close()
            await daemons["box"]!.stop()
            #expect(try await watch.waitForExit(timeout: .seconds(10)) == 69, "\(watch.stderr)")
            #expect(watch.stderr == "proximityctl: error: org.proximityd left the \(sim.address("box")) bus\n", "\(watch.stderr)")
        }
    }
}

extension NodeProxy {
    /// `SetActionStatus` with the status as text.
    func setActionStatusByName(_ path: ObjectPath, _ status: String) async throws {
        _ = try await connection.call(destination: name, path: ProximityBus.rootPath, interface: ProximityBus.AlertManager1.interface,
                                      member: ProximityBus.AlertManager1.setActionStatus.name, [.objectPath(path), .string(status)])
    }
}
