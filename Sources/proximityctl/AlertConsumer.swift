import DBusKit
import Dispatch
import Foundation
import ProximityAPI
import ProximityCore

/// `proximityctl alerts consume`: the reference alert client. It takes each alert the node offers
/// (`AlertReady`), shows it (a desktop notification, or an `--exec` command), accepts it, and marks
/// it done when the user closes the notification (or the command exits); when the node takes the
/// alert back (`AlertRemoved`) it closes the notification (or sends the command SIGTERM) and does
/// not mark it done.
///
/// Everything it hears (the node's signals, the notification server's, children exiting, SIGINT
/// and SIGTERM) goes into one queue, handled one event at a time in order: each step sees the
/// state the steps before it left, and a signal that arrives while a call is under way waits for
/// it.
final class AlertConsumer {
    struct Options: Sendable {
        /// `--exec`: run this with `/bin/sh -c` instead of showing a notification.
        var command: String?
        /// `espeak-ng`'s path, when speaking.
        var espeak: String?
        /// `--speak-to`: a WAV file per alert in this directory instead of the sound card.
        var speakTo: URL?
    }

    enum Event: Sendable {
        case alert(AlertSignal)
        case notification(DesktopNotifications.Signal)
        case commandExited(pid: Int32, status: Int32)
        case nodeLeft
        case notificationsLeft
        case disconnected
        case interrupted(Int32)
    }

    /// The alert being shown, and how.
    private struct Shown {
        var path: ObjectPath
        var content: AlertProperties
        var distance: Double?
        var notification: UInt32?
        var command: Subprocess?
    }

    /// How the command ends.
    enum Ending {
        /// SIGINT or SIGTERM: exit 0.
        case interrupted
        /// One line on stderr, exit 69.
        case failed(String)
    }

    private let node: NodeProxy
    private let notifications: DesktopNotifications?
    private let options: Options
    private let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private var shown: Shown?
    /// Notifications this client closed itself: their `NotificationClosed` is not the user's.
    private var closedByUs: Set<UInt32> = []
    /// Commands this client sent SIGTERM: their exit is not the end of an action.
    private var terminatedByUs: Set<Int32> = []
    /// The last alert whose notification (or command) this client ended without `Done`.
    private var lastRetracted: ObjectPath?
    private var tasks: [Task<Void, Never>] = []
    private var signalSources: [any DispatchSourceSignal] = []

    init(node: NodeProxy, notifications: DesktopNotifications?, options: Options) {
        self.node = node
        self.notifications = notifications
        self.options = options
        (events, continuation) = AsyncStream<Event>.makeStream()
    }

    static func log(_ message: String) {
        FileHandle.standardError.write(Data("proximityctl: consume: \(message)\n".utf8))
    }

    private func log(_ message: String) { Self.log(message) }

    /// Follows the node until it leaves, the notification server leaves, or a signal.
    func run() async -> Ending {
        // SIGINT and SIGTERM become events, so that the notification is closed before exiting.
        let continuation = continuation
        signalSources = await interruptionSources { continuation.yield(.interrupted($0)) }
        defer { for task in tasks { task.cancel() } }

        // Subscriptions first, so that every signal sent from now on is seen: the node leaving,
        // its alert signals, the notification server's.
        do {
            let departure = try await node.departure()
            let alertSignals = try await node.alertSignals()
            forward(departure) { _ in .nodeLeft }
            forward(alertSignals, ending: .disconnected) { .alert($0) }
            if let notifications {
                let (signals, left) = try await notifications.signals()
                forward(signals, ending: .notificationsLeft) { .notification($0) }
                forward(left) { .notificationsLeft }
                guard try await notifications.connection.nameOwner(of: DesktopNotifications.name) == notifications.owner else {
                    return .failed("the notification server left the \(notifications.bus) bus")
                }
            }
            // Either may have left before its subscription.
            guard try await node.isStillThere() else {
                return .failed("\(NodeConnectionError.nodeLeft(bus: node.bus, name: node.name))")
            }
        } catch {
            return .failed("cannot follow the node's alerts: \(error)")
        }

        var how = options.command.map { "running `\($0)` for each alert" } ?? "showing each alert as a notification"
        if let notifications, let server = try? await notifications.serverDescription() {
            how += " (\(server) on the \(notifications.bus) bus)"
        }
        if options.espeak != nil { how += options.speakTo.map { ", speaking into \($0.path)" } ?? ", speaking" }
        log("following \(node.name) on the \(node.bus) bus, \(how)")

        if let ending = await takeCurrent() { return await end(ending) }
        for await event in events {
            if let ending = await handle(event) { return await end(ending) }
        }
        return await end(.failed("\(NodeConnectionError.disconnected(bus: node.bus))"))
    }

    /// Feeds a stream into the queue; `ending` (if any) when it ends.
    private func forward<S: AsyncSequence & Sendable>(_ stream: S, ending: Event? = nil,
                                                      _ transform: @escaping @Sendable (S.Element) -> Event?)
        where S.Element: Sendable {
        let continuation = continuation
        tasks.append(Task {
            do {
                for try await element in stream {
                    if let event = transform(element) { continuation.yield(event) }
                }
            } catch {}
            if let ending, !Task.isCancelled { continuation.yield(ending) }
        })
    }

    // MARK: - The steps

    /// At start: the alert the node offers now is taken; the one in progress (accepted by an
    /// earlier run) is shown again, not accepted again.
    private func takeCurrent() async -> Ending? {
        let current: ObjectPath?
        let properties: AlertProperties
        do {
            current = try await node.currentAlert()
            guard let current else {
                log("nothing offered now; waiting for alerts")
                return nil
            }
            properties = AlertProperties(try await node.connection.getAllProperties(
                destination: node.name, path: current, interface: ProximityBus.Alert1.interface, timeout: node.timeout))
        } catch {
            log("cannot read the current alert: \(error)")
            return nil
        }
        let path = current!
        switch properties.actionStatus {
        case ActionStatus.waitingForAction.rawValue:
            log("offer \(AlertText.name(path)) \(properties.title.debugDescription) (current at start)")
            return await take(path, properties, distance: nil, accept: true)
        case ActionStatus.inProgress.rawValue:
            log("\(AlertText.name(path)) \(properties.title.debugDescription) is in progress: showing it again, not accepting it again")
            return await take(path, properties, distance: nil, accept: false)
        default:
            log("current alert \(AlertText.name(path)) is \(properties.actionStatus); waiting for alerts")
            return nil
        }
    }

    private func handle(_ event: Event) async -> Ending? {
        switch event {
        case .alert(.ready(let path, let values)):
            let content = AlertProperties(values)
            let distance = values["Distance"]?.unwrapped.double.flatMap { $0 >= 0 && $0.isFinite ? $0 : nil }
            if shown?.path == path {
                return nil  // already shown: offered at start, and announced too
            }
            log("offer \(AlertText.name(path)) \(content.title.debugDescription) (\(content.proximity)"
                + (distance.map { String(format: ", %.2f m", $0) } ?? "") + ")")
            if let other = shown {
                // The node offers only one alert at a time: the one shown is no longer its.
                await retract(other, "the node offers \(AlertText.name(path)) instead")
            }
            return await take(path, content, distance: distance, accept: true)

        case .alert(.removed(let path, let reason)):
            guard let current = shown, current.path == path else {
                log("\(AlertText.name(path)) taken back by the node (\(reason))"
                    + (lastRetracted == path ? "; already closed here" : "; it was not shown here"))
                return nil
            }
            await retract(current, "taken back by the node (\(reason))")
            return nil

        case .alert(.changed(let path, let properties)):
            guard let status = properties[AlertProperties.Key.actionStatus.rawValue]?.unwrapped.string,
                  let current = shown, current.path == path, status != ActionStatus.inProgress.rawValue else { return nil }
            // The manager's signals and the objects' changes come on two subscriptions, whose
            // order between them is not kept: this change may be older than the offer shown (a
            // status forced back to waitingForAction, then the offer it made). The node's state
            // now decides.
            let now = try? await node.connection.getProperty(destination: node.name, path: path, interface: ProximityBus.Alert1.interface,
                                                             name: AlertProperties.Key.actionStatus.rawValue, timeout: node.timeout)
                .unwrapped.string
            if now == ActionStatus.inProgress.rawValue { return nil }
            // No longer in progress, and not by this client: the node took it back (it announces
            // the action done with its AlertRemoved), or another client marked it (`alerts done`,
            // SetActionStatus).
            await retract(current, "its status became \(now ?? status)")
            return nil

        case .notification(.closed(let id, let reason)):
            if closedByUs.remove(id) != nil { return nil }
            guard let current = shown, current.notification == id else { return nil }
            shown = nil
            log("notification \(id) of \(AlertText.name(current.path)) closed (\(DesktopNotifications.reason(reason)))")
            await done(current.path)
            return nil

        case .notification(.actionInvoked(let id, let key)):
            guard let current = shown, current.notification == id else { return nil }
            let target: String? = switch key {
            case AlertText.urlAction: current.content.url
            case "default": [current.content.url, current.content.uri].first { !$0.isEmpty }
            default: nil
            }
            guard let target, !target.isEmpty else {
                log("notification \(id) of \(AlertText.name(current.path)): action \(key.debugDescription) (nothing to open)")
                return nil
            }
            open(target, for: current.path, action: key)
            return nil

        case .commandExited(let pid, let status):
            if terminatedByUs.remove(pid) != nil {
                log("command (pid \(pid)) ended after SIGTERM (\(Self.exitText(status)))")
                return nil
            }
            guard let current = shown, current.command?.pid == pid else { return nil }
            shown = nil
            log("command for \(AlertText.name(current.path)) exited (\(Self.exitText(status)))")
            await done(current.path)
            return nil

        case .nodeLeft:
            return .failed("\(NodeConnectionError.nodeLeft(bus: node.bus, name: node.name))")
        case .notificationsLeft:
            return .failed("the notification server left the \(notifications.map { "\($0.bus)" } ?? "session") bus")
        case .disconnected:
            return .failed("\(NodeConnectionError.disconnected(bus: node.bus))")
        case .interrupted(let s):
            log("\(s == SIGINT ? "SIGINT" : "SIGTERM"): stopping")
            return .interrupted
        }
    }

    /// Shows the alert (a notification, or the command), then accepts it if `accept`.
    private func take(_ path: ObjectPath, _ content: AlertProperties, distance: Double?, accept: Bool) async -> Ending? {
        var shown = Shown(path: path, content: content, distance: distance)
        if let command = options.command {
            let continuation = continuation
            do {
                let child = try Subprocess("/bin/sh", ["-c", command],
                                           environment: AlertText.environment(path, content, distance: distance)) {
                    pid, status in continuation.yield(.commandExited(pid: pid, status: status))
                }
                log("command for \(AlertText.name(path)) started (pid \(child.pid))")
                shown.command = child
            } catch {
                return .failed("\(error)")
            }
        } else if let notifications {
            do {
                let id = try await notifications.notify(AlertText.notification(content))
                shown.notification = id
                log("notification \(id) shows \(AlertText.name(path))")
            } catch {
                return .failed("cannot show a notification: \(error)")
            }
        }
        self.shown = shown
        if let espeak = options.espeak { speak(content, with: espeak) }
        guard accept else { return nil }
        do {
            try await node.accept(path)
            log("accepted \(AlertText.name(path))")
        } catch let error as DBusError where error.name == .accessDenied {
            // Every offer would be refused the same way: say so once, and stop.
            await retract(shown, "not accepted")
            return .failed("cannot accept \(AlertText.name(path)): \(Alerts.TargetCommand.explain(error))")
        } catch {
            log("cannot accept \(AlertText.name(path)): \(error)")
            await retract(shown, "not accepted")
        }
        return nil
    }

    /// Undoes what shows `alert`, without marking it done: the node took it back.
    private func retract(_ alert: Shown, _ why: String) async {
        if shown?.path == alert.path { shown = nil }
        lastRetracted = alert.path
        if let id = alert.notification, let notifications {
            closedByUs.insert(id)
            do {
                try await notifications.close(id)
                log("closed notification \(id) of \(AlertText.name(alert.path)): \(why)")
            } catch {
                log("cannot close notification \(id) of \(AlertText.name(alert.path)) (\(why)): \(error)")
            }
        }
        if let command = alert.command {
            if command.isRunning {
                terminatedByUs.insert(command.pid)
                command.signalGroup(SIGTERM)
                log("sent SIGTERM to the command for \(AlertText.name(alert.path)) (pid \(command.pid)): \(why)")
            } else {
                log("\(AlertText.name(alert.path)): \(why); its command had ended")
            }
        }
        if alert.notification == nil && alert.command == nil { log("\(AlertText.name(alert.path)): \(why)") }
    }

    private func done(_ path: ObjectPath) async {
        do {
            try await node.done(path)
            log("done \(AlertText.name(path))")
        } catch {
            log("cannot mark \(AlertText.name(path)) done: \(error)")
        }
    }

    /// Before exiting: the notification closed, the command sent SIGTERM; the alert stays in
    /// progress (shown again by the next run).
    private func end(_ ending: Ending) async -> Ending {
        if let current = shown {
            await retract(current, "proximityctl is stopping; \(AlertText.name(current.path)) stays in progress")
        }
        for source in signalSources { source.cancel() }
        return ending
    }

    // MARK: - Speech, URLs

    private func speak(_ content: AlertProperties, with espeak: String) {
        let text = content.textToSpeech.isEmpty ? content.title : content.textToSpeech
        guard !text.isEmpty else { return }
        var arguments: [String] = []
        let file: (partial: URL, final: URL)? = options.speakTo.map { directory in
            let final = directory.appendingPathComponent(AlertText.wavName(content))
            return (URL(fileURLWithPath: final.path + ".part"), final)
        }
        if let file { arguments += ["-w", file.partial.path] }
        arguments += ["--", text]
        let name = "\(content.alert)/\(content.target)"
        do {
            let child = try Subprocess(espeak, arguments, stdoutToStderr: true) { _, status in
                if let file, status == 0 {
                    _ = try? FileManager.default.removeItem(at: file.final)
                    do {
                        try FileManager.default.moveItem(at: file.partial, to: file.final)
                        Self.log("spoke \(name) into \(file.final.path)")
                    } catch {
                        Self.log("cannot move \(file.partial.path) to \(file.final.path): \(error)")
                    }
                } else if status == 0 {
                    Self.log("spoke \(name)")
                } else {
                    Self.log("espeak-ng for \(name) failed (\(Self.exitText(status)))")
                }
            }
            log("speaking \(name) (espeak-ng pid \(child.pid)): \(text.debugDescription)")
        } catch {
            log("cannot speak \(name): \(error)")
        }
    }

    private func open(_ target: String, for path: ObjectPath, action: String) {
        guard let xdgOpen = Subprocess.find("xdg-open") else {
            log("action \(action.debugDescription) of \(AlertText.name(path)): would open \(target) (no xdg-open on PATH)")
            return
        }
        do {
            let child = try Subprocess(xdgOpen, [target], stdoutToStderr: true) { _, status in
                if status != 0 { Self.log("xdg-open \(target) failed (\(Self.exitText(status)))") }
            }
            log("action \(action.debugDescription) of \(AlertText.name(path)): xdg-open \(target) (pid \(child.pid))")
        } catch {
            log("action \(action.debugDescription) of \(AlertText.name(path)): cannot open \(target): \(error)")
        }
    }

    static func exitText(_ status: Int32) -> String {
        status >= 0 ? "exit \(status)" : "killed by signal \(-status)"
    }
}
