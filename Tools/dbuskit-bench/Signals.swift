import ArgumentParser
import DBusKit
import Foundation
import ProximityTesting

/// `dbuskit-bench signals`: signals per second received and decoded by a DBusKit subscriber,
/// measured side by side with Python clients receiving the same stream in the same run, and each
/// alone.
///
/// Every phase gets a fresh private `dbus-daemon`, and its subscribers install their match rule
/// before the emitter (a separate `dbuskit-bench emit` process) starts: the Python scripts print
/// `ready` once `AddMatch` has returned, and ``DBusConnection/subscribe(_:bufferingPolicy:)``
/// returns once it has. The emitter ends the stream with a `Done` signal, which tells each
/// subscriber it has seen everything it will get.
///
/// Two kinds of phase:
/// - live: the subscribers decode the stream while it is emitted (DBusKit in this process). Every
///   process shares the 2 cores, and a subscriber that keeps up decodes at the emitter's pace.
/// - drain: every subscriber is a child process, stopped (`SIGSTOP`) while the whole stream is
///   emitted and queued for it by the daemon, then continued (`SIGCONT`), group by group: first
///   DBusKit and dbus-fast together, then each client alone. A drain measures how fast a client
///   can receive and decode, whatever the emitter's pace.
struct Signals: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Signals per second decoded by a DBusKit subscriber, side by side with Python clients on the same stream."
    )

    enum Client: String, Codable, Sendable {
        case dbuskit = "DBusKit"
        case dbusFast = "dbus-fast"
        case dbusPython = "dbus-python"
    }

    enum Phase: String, CaseIterable, ExpressibleByArgument, Codable, Sendable {
        case sideBySide = "side-by-side"
        case sideBySideDBusPython = "side-by-side-dbus-python"
        case dbuskit = "dbuskit"
        case dbusFast = "dbus-fast"
        case dbusPython = "dbus-python"
        case drain = "drain"

        static let defaults: [Phase] = [.sideBySide, .dbuskit, .dbusFast, .dbusPython, .drain]

        /// The subscribers of a live phase, or every client of the drain.
        var subscribers: [Client] {
            switch self {
            case .sideBySide: [.dbuskit, .dbusFast]
            case .sideBySideDBusPython: [.dbuskit, .dbusPython]
            case .dbuskit: [.dbuskit]
            case .dbusFast: [.dbusFast]
            case .dbusPython: [.dbusPython]
            case .drain: [.dbuskit, .dbusFast, .dbusPython]
            }
        }
    }

    @Option(help: "PropertiesChanged signals the emitter sends in each phase.")
    var count = 150_000

    @Option(help: "Signals the emitter sends between round trips to the bus.")
    var burst = 1_000

    @Option(name: .customLong("phase"),
            help: "Phases to run, in order: \(Phase.allCases.map(\.rawValue).joined(separator: ", ")). Repeat for several (default: \(Phase.defaults.map(\.rawValue).joined(separator: ", "))).")
    var phases: [Phase] = Phase.defaults

    @Option(help: "Python interpreter with dbus-fast (default: the package's .venv-bench/bin/python, else python3).")
    var python: String?

    @Option(name: .customLong("dbus-python"),
            help: "Python interpreter with dbus-python and PyGObject, or 'none' to leave dbus-python out.")
    var dbusPython = "/usr/bin/python3"

    @Option(help: "Directory of receive_signals.py and receive_signals_dbus_python.py (default: the package's benchmarks/python).")
    var scripts: String?

    @Option(help: "Decoded signals per second DBusKit must reach.")
    var target: Double = 20_000

    @Option(help: "Seconds one emission or one drain group may take before its subscribers are stopped.")
    var timeout = 120

    @Flag(help: "Print the results as one JSON object.")
    var json = false

    @Flag(help: "Exit with status 1 when the verdict is FAIL.")
    var check = false

    func validate() throws {
        guard count > 0, count <= Int(UInt32.max) else { throw ValidationError("--count must be in 1...\(UInt32.max)") }
        guard burst > 0 else { throw ValidationError("--burst must be positive") }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
    }

    // MARK: - Results

    /// What one subscriber reports (`receive` and the Python scripts print the same JSON).
    struct Received: Codable, Sendable {
        var subscriber: Client
        var library: String?
        var received = 0
        /// CLOCK_MONOTONIC seconds of the first and last `PropertiesChanged` consumed.
        var first: Double?
        var last: Double?
        /// CPU seconds the subscriber's process used from its first signal to the end.
        var cpuSeconds = 0.0
        var rssiSum: Int64 = 0
        var dataBytes = 0
        var malformed = 0
        var sawDone = false
        /// How the run ended: done (the closing signal came), disconnected, timeout.
        var end = "timeout"
    }

    struct SubscriberResult: Codable, Sendable {
        var client: Client
        var library: String
        var received: Int
        var lost: Int
        /// First to last signal.
        var seconds: Double
        var signalsPerSecond: Double
        var cpuSeconds: Double
        var signalsPerCPUSecond: Double
        /// Every signal arrived, and the RSSI values and byte counts decoded add up to what was sent.
        var verified: Bool
        var end: String

        init(_ r: Received, sent: Int) {
            client = r.subscriber
            library = r.library ?? r.subscriber.rawValue
            received = r.received
            lost = sent - r.received
            seconds = max(0, (r.last ?? 0) - (r.first ?? 0))
            // n signals span n - 1 intervals from the first to the last.
            signalsPerSecond = r.received > 1 && seconds > 0 ? Double(r.received - 1) / seconds : 0
            cpuSeconds = r.cpuSeconds
            signalsPerCPUSecond = r.cpuSeconds > 0 ? Double(r.received) / r.cpuSeconds : 0
            verified = r.received == sent && r.malformed == 0 && r.rssiSum == BenchSignal.rssiSum(count: sent)
                && r.dataBytes == r.received * BenchSignal.manufacturerData.count
            end = r.end
        }
    }

    /// Subscribers that received one stream at the same time.
    struct Group: Codable, Sendable {
        enum Mode: String, Codable, Sendable { case live, drain }
        var mode: Mode
        /// side-by-side, dbuskit, dbus-fast, ...
        var name: String
        /// Index into ``Report/emissions`` of the stream they received.
        var emission: Int
        var subscribers: [SubscriberResult]

        func result(_ client: Client) -> SubscriberResult? { subscribers.first { $0.client == client } }
    }

    struct Verdict: Codable, Sendable {
        var pass: Bool
        var basis: String
        var dbuskitSignalsPerSecond: Double
        var target: Double
        var python: Client?
        var pythonSignalsPerSecond: Double?
        var speedup: Double?
        var line: String
    }

    struct Report: Codable, Sendable {
        var benchmark = "signals"
        var count: Int
        var payload: String
        var skipped: [String: String]
        var emissions: [Emit.Report]
        var groups: [Group]
        var verdict: Verdict
    }

    static let payloadDescription = "PropertiesChanged sa{sv}as: org.bluez.Device1, " +
        "{RSSI: <n>, ManufacturerData: <a{qv} {0x004c: <ay[23]>}>}, []"

    // MARK: - Running

    func run() async throws {
        let tools = await Tools.locate(python: python, dbusPython: dbusPython, scripts: scripts)
        var skipped: [String: String] = [:]
        var emissions: [Emit.Report] = []
        var groups: [Group] = []
        for phase in phases {
            if phase != .drain, let reason = tools.missing(for: phase.subscribers) {
                skipped[phase.rawValue] = reason
                note("signals: skipping phase \(phase.rawValue): \(reason)")
                continue
            }
            if !json {
                let who = phase == .drain ? "stopped subscribers, then drained" : phase.subscribers.map(\.rawValue).joined(separator: " + ")
                note("signals: phase \(phase.rawValue): \(count) signals to \(who)…")
            }
            if phase == .drain {
                for client in phase.subscribers {
                    if let reason = tools.missing(for: [client]) { skipped["drain \(client.rawValue)"] = reason }
                }
                let (emitted, drained) = try await runDrain(tools: tools, emission: emissions.count)
                emissions.append(emitted)
                groups += drained
            } else {
                let (emitted, group) = try await runLive(phase, tools: tools, emission: emissions.count)
                emissions.append(emitted)
                groups.append(group)
            }
        }
        let verdict = Self.verdict(groups, target: target)
        let report = Report(count: count, payload: Self.payloadDescription, skipped: skipped,
                            emissions: emissions, groups: groups, verdict: verdict)
        if json {
            try printJSON(report)
        } else {
            print(Self.table(report))
            print(verdict.line)
        }
        if check && !verdict.pass { throw ExitCode.failure }
    }

    /// A live phase: the subscribers decode while the emitter sends.
    private func runLive(_ phase: Phase, tools: Tools, emission: Int) async throws -> (Emit.Report, Group) {
        let bus = try await PrivateBus.start(name: "bench-signals")
        var children: [ChildSubscriber] = []
        var dbuskit: DBusConnection?
        do {
            // Every subscriber has its match rule installed before the emitter starts.
            for client in phase.subscribers where client != .dbuskit {
                children.append(try ChildSubscriber(client, tools: tools, address: bus.address, timeout: timeout))
            }
            for child in children { try await child.waitUntilReady() }
            var consumer: Task<Received, Never>?
            if phase.subscribers.contains(.dbuskit) {
                let connection = try await bus.connect()
                dbuskit = connection
                let stream = try await connection.subscribe(BenchSignal.matchRule)
                consumer = Task.detached { await Receive.consume(stream) }
            }

            let emitted = try await emit(on: bus)

            // Each subscriber stops at the closing Done signal, or at the timeout.
            var received: [Received] = []
            if let consumer, let connection = dbuskit {
                let watchdog = Task<Bool, Never> {
                    guard (try? await Task.sleep(for: .seconds(timeout))) != nil else { return false }
                    await connection.close()
                    return true
                }
                var result = await consumer.value
                watchdog.cancel()
                if await watchdog.value, !result.sawDone { result.end = "timeout" }
                received.append(result)
                await connection.close()
            }
            for child in children { received.append(try await child.result(timeout: timeout + 10)) }
            await bus.stop()
            return (emitted, Group(mode: .live, name: phase.rawValue, emission: emission,
                                   subscribers: received.map { SubscriberResult($0, sent: emitted.sent) }))
        } catch {
            for child in children { await child.process.stop(grace: .seconds(1)) }
            await dbuskit?.close()
            await bus.stop()
            throw error
        }
    }

    /// The drain phase: one stream queued for stopped subscribers, then drained group by group.
    private func runDrain(tools: Tools, emission: Int) async throws -> (Emit.Report, [Group]) {
        var plan: [(name: String, clients: [Client])] = [
            ("side-by-side", [.dbuskit, .dbusFast]),
            ("dbuskit", [.dbuskit]),
            ("dbus-fast", [.dbusFast]),
            ("dbus-python", [.dbusPython]),
        ]
        plan = plan.filter { tools.missing(for: $0.clients) == nil }
        let bus = try await PrivateBus.start(name: "bench-drain")
        var groups: [[ChildSubscriber]] = []
        do {
            // Their own time limit covers the wait for the stream and for the groups before them.
            let childTimeout = timeout * (plan.count + 1)
            for step in plan {
                groups.append(try step.clients.map {
                    try ChildSubscriber($0, tools: tools, address: bus.address, timeout: childTimeout)
                })
            }
            for child in groups.joined() { try await child.waitUntilReady() }
            for child in groups.joined() { child.process.signal(SIGSTOP) }

            // When the emitter's last round trip returns, the daemon has queued the whole stream
            // for every subscriber.
            let emitted = try await emit(on: bus)

            var results: [Group] = []
            for (step, children) in zip(plan, groups) {
                for child in children { child.process.signal(SIGCONT) }
                var received: [Received] = []
                for child in children { received.append(try await child.result(timeout: timeout)) }
                results.append(Group(mode: .drain, name: step.name, emission: emission,
                                     subscribers: received.map { SubscriberResult($0, sent: emitted.sent) }))
            }
            await bus.stop()
            return (emitted, results)
        } catch {
            for child in groups.joined() {
                child.process.signal(SIGCONT)
                await child.process.stop(grace: .seconds(1))
            }
            await bus.stop()
            throw error
        }
    }

    /// Runs the emitter to completion on `bus`.
    private func emit(on bus: PrivateBus) async throws -> Emit.Report {
        let process = try ManagedProcess(BenchPaths.executable, ["emit", "--address", bus.address,
                                                                 "--count", "\(count)", "--burst", "\(burst)"])
        let status: Int32
        do {
            status = try await process.waitForExit(timeout: .seconds(timeout))
        } catch {
            await process.stop(grace: .seconds(1))
            throw error
        }
        guard status == 0 else {
            throw TestKitError("the emitter failed (exit \(status)): \(process.stderr)")
        }
        return try decodeLastJSONLine(Emit.Report.self, from: process.stdout, what: "emitter")
    }

    // MARK: - Verdict and table

    static func verdict(_ groups: [Group], target: Double) -> Verdict {
        func group(_ mode: Group.Mode, _ name: String) -> Group? {
            groups.first { $0.mode == mode && $0.name == name }
        }
        // Side by side with dbus-fast is the issue's measurement, drained first: a live phase
        // runs at the emitter's pace when every client keeps up.
        let candidates: [(Group.Mode, String, Client?)] = [
            (.drain, "side-by-side", .dbusFast),
            (.live, "side-by-side", .dbusFast),
            (.live, "side-by-side-dbus-python", .dbusPython),
            (.drain, "dbuskit", nil),
            (.live, "dbuskit", nil),
        ]
        for (mode, name, pythonClient) in candidates {
            guard let chosen = group(mode, name), let ours = chosen.result(.dbuskit) else { continue }
            let basis = "\(mode.rawValue) \(name)"
            let theirs = pythonClient.flatMap { chosen.result($0) }
                ?? group(mode, "dbus-fast")?.result(.dbusFast) ?? group(mode, "dbus-python")?.result(.dbusPython)
            let rate = ours.signalsPerSecond
            let meetsTarget = rate >= target && ours.verified
            let targetText = "target \(target.grouped): " +
                "\(meetsTarget ? "met" : "missed")\(ours.verified ? "" : ", signals lost or mis-decoded")"
            guard let theirs else {
                let line = "DBusKit decoded \(rate.grouped) signals/s (\(basis); \(targetText)): FAIL; no Python client was measured"
                return Verdict(pass: false, basis: basis, dbuskitSignalsPerSecond: rate, target: target, line: line)
            }
            let speedup = theirs.signalsPerSecond > 0 ? rate / theirs.signalsPerSecond : .infinity
            let pass = meetsTarget && speedup > 1
            var line = "DBusKit decoded \(rate.grouped) signals/s (\(basis); \(targetText)): \(pass ? "PASS" : "FAIL"); "
            line += "Python \(theirs.client.rawValue) \(theirs.signalsPerSecond.grouped) signals/s; "
            line += speedup >= 1 ? "DBusKit is \(speedup.fixed(2))× faster" : "DBusKit is \((1 / speedup).fixed(2))× slower"
            return Verdict(pass: pass, basis: basis, dbuskitSignalsPerSecond: rate, target: target, python: theirs.client,
                           pythonSignalsPerSecond: theirs.signalsPerSecond, speedup: speedup, line: line)
        }
        return Verdict(pass: false, basis: "none", dbuskitSignalsPerSecond: 0, target: target,
                       line: "DBusKit was not measured: FAIL")
    }

    static func table(_ report: Report) -> String {
        var table = TextTable(header: ["phase", "client", "role", "signals", "lost", "first→last s", "signals/s",
                                       "CPU s", "signals/CPU-s", "checked"])
        var shown = Set<Int>()
        for group in report.groups {
            var label = "\(group.mode.rawValue) \(group.name)"
            if shown.insert(group.emission).inserted {
                let e = report.emissions[group.emission]
                table.rows.append([label, "DBusKit", "emitter", "\(e.sent)", "", e.seconds.fixed(2), e.signalsPerSecond.grouped,
                                   e.cpuSeconds.fixed(2), e.cpuSeconds > 0 ? (Double(e.sent) / e.cpuSeconds).grouped : "-", ""])
                label = ""
            }
            for s in group.subscribers {
                table.rows.append([label, s.client.rawValue, "subscriber", "\(s.received)", "\(s.lost)", s.seconds.fixed(2),
                                   s.signalsPerSecond.grouped, s.cpuSeconds.fixed(2), s.signalsPerCPUSecond.grouped,
                                   s.verified ? "ok" : "NO (\(s.end))"])
                label = ""
            }
        }
        var lines = [
            "Signals: \(report.count) × \(report.payload)",
            "each phase on a fresh private dbus-daemon; the emitter is a separate dbuskit-bench process using DBusKit",
            "",
            table.render(),
            "",
            "live: decoded while emitted (DBusKit in the bench process); a client that keeps up runs at the emitter's pace.",
            "drain: the stream queued for stopped subscriber processes, then drained; the groups drain one after another.",
            "signals/s: first to last signal consumed; signals/CPU-s: per CPU second of the client's process (all its threads);",
            "checked: every signal received, and the RSSI values and data bytes decoded add up to what was sent.",
        ]
        for group in report.groups where group.mode == .live && group.subscribers.count > 1 {
            let emitter = report.emissions[group.emission].signalsPerSecond
            let rates = group.subscribers.map { "\($0.client.rawValue) \($0.signalsPerSecond.grouped)/s" }
            let keptUp = group.subscribers.filter { $0.signalsPerSecond >= 0.97 * emitter }.map(\.client.rawValue)
            lines.append("live \(group.name): \(rates.joined(separator: ", ")) with the emitter at \(emitter.grouped)/s"
                + (keptUp.isEmpty ? "" : "; kept up with the emitter: \(keptUp.joined(separator: ", "))"))
        }
        let alone = report.groups.filter { $0.mode == .drain && $0.subscribers.count == 1 }.compactMap(\.subscribers.first)
        if !alone.isEmpty {
            let ours = alone.first { $0.client == .dbuskit }?.signalsPerSecond
            lines.append("drain, each client alone: " + alone.map { r in
                var text = "\(r.client.rawValue) \(r.signalsPerSecond.grouped)/s"
                if let ours, r.client != .dbuskit, r.signalsPerSecond > 0 {
                    text += " (DBusKit \((ours / r.signalsPerSecond).fixed(2))× its rate)"
                }
                return text
            }.joined(separator: ", "))
        }
        let libraries = Set(report.groups.flatMap(\.subscribers).map(\.library)).sorted()
        lines.append("clients: " + libraries.joined(separator: "; "))
        for (phase, reason) in report.skipped.sorted(by: { $0.key < $1.key }) {
            lines.append("skipped \(phase): \(reason)")
        }
        return lines.joined(separator: "\n")
    }
}

/// A subscriber in a child process: `dbuskit-bench receive`, or one of the Python scripts.
struct ChildSubscriber: Sendable {
    let client: Signals.Client
    let process: ManagedProcess

    init(_ client: Signals.Client, tools: Tools, address: String, timeout: Int) throws {
        self.client = client
        let (executable, arguments) = tools.command(for: client)
        process = try ManagedProcess(executable, arguments + ["--address", address, "--timeout", "\(timeout)"])
    }

    /// Returns once its match rule is installed.
    func waitUntilReady() async throws {
        try await process.waitForOutput(containing: "ready\n", timeout: .seconds(60))
    }

    /// Waits for it to finish and returns what it reported.
    func result(timeout: Int) async throws -> Signals.Received {
        let status = try await process.waitForExit(timeout: .seconds(timeout))
        guard status == 0 else {
            throw TestKitError("the \(client.rawValue) subscriber failed (exit \(status)): \(process.stderr)")
        }
        return try decodeLastJSONLine(Signals.Received.self, from: process.stdout, what: "\(client.rawValue) subscriber")
    }
}

/// How to start each child subscriber, and why one cannot run.
struct Tools: Sendable {
    var commands: [Signals.Client: (executable: String, arguments: [String])] = [:]
    var problems: [Signals.Client: String] = [:]

    static func locate(python: String?, dbusPython: String, scripts: String?) async -> Tools {
        var tools = Tools()
        tools.commands[.dbuskit] = (BenchPaths.executable, ["receive"])
        let dir = scripts.map { URL(fileURLWithPath: $0) } ?? BenchPaths.pythonScripts
        let match = ["--match", BenchSignal.matchRuleText]

        let fastPython = resolveExecutable(python ?? BenchPaths.venvPython ?? "python3")
        if let script = dir?.appendingPathComponent("receive_signals.py").path,
           FileManager.default.fileExists(atPath: script) {
            if await pythonHasModules(fastPython, ["dbus_fast"]) {
                tools.commands[.dbusFast] = (fastPython, [script] + match)
            } else {
                tools.problems[.dbusFast] = "\(fastPython) cannot import dbus_fast (run benchmarks/run-dbus-bench.sh, or pass --python)"
            }
        } else {
            tools.problems[.dbusFast] = "receive_signals.py not found (pass --scripts)"
        }

        if dbusPython == "none" {
            tools.problems[.dbusPython] = "--dbus-python none"
        } else if let script = dir?.appendingPathComponent("receive_signals_dbus_python.py").path,
                  FileManager.default.fileExists(atPath: script) {
            let interpreter = resolveExecutable(dbusPython)
            if await pythonHasModules(interpreter, ["dbus", "dbus.mainloop.glib", "gi"]) {
                tools.commands[.dbusPython] = (interpreter, [script] + match)
            } else {
                tools.problems[.dbusPython] = "\(interpreter) cannot import dbus and gi (apt-get install python3-dbus python3-gi)"
            }
        } else {
            tools.problems[.dbusPython] = "receive_signals_dbus_python.py not found (pass --scripts)"
        }
        return tools
    }

    /// Why one of `clients` cannot run, or nil.
    func missing(for clients: [Signals.Client]) -> String? {
        clients.lazy.compactMap { problems[$0] }.first
    }

    func command(for client: Signals.Client) -> (String, [String]) {
        guard let command = commands[client] else { preconditionFailure("\(client.rawValue) is not available") }
        return command
    }
}

/// The last line of `output` that holds a JSON object, decoded.
func decodeLastJSONLine<T: Decodable>(_ type: T.Type, from output: String, what: String) throws -> T {
    guard let line = output.split(separator: "\n").last(where: { $0.hasPrefix("{") }) else {
        throw TestKitError("the \(what) printed no result: \(output)")
    }
    return try JSONDecoder().decode(T.self, from: Data(line.utf8))
}
