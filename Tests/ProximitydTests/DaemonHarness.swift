import BlueZSim
import DBusKit
import Foundation
import ProximityNode
import NodeTesting
import ProximityTesting
import Testing
import SimTesting

let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// One box: a private bus and a proximityd on it, as a user would run it.
final class Box: Sendable {
    let bus: PrivateBus
    let observer: DBusConnection
    let stateDirectory: URL
    let busName: String

    init(bus: PrivateBus, observer: DBusConnection, stateDirectory: URL, busName: String = "org.proximityd") {
        self.bus = bus
        self.observer = observer
        self.stateDirectory = stateDirectory
        self.busName = busName
    }

    static func make() async throws -> Box {
        let bus = try await PrivateBus.start(name: "box")
        let observer = try await bus.connect()
        return Box(bus: bus, observer: observer, stateDirectory: bus.directory.appendingPathComponent("state"))
    }

    var address: String { bus.address }

    /// Starts proximityd and returns once it owns its name (seen as NameOwnerChanged on the bus).
    func startDaemon(_ extra: [String] = [], busName: String = "org.proximityd") async throws -> ManagedProcess {
        let owners = try await observer.subscribe(MatchRule(sender: .bus, interface: .bus, member: "NameOwnerChanged", arg0: busName))
        let daemon = try ManagedProcess(BuiltProducts.path("proximityd"),
                                        ["run", "--bus", address, "--state-dir", stateDirectory.path, "--bus-name", busName,
                                         "--name", "test-box"]
                                            // Not the machine's /etc/proximityd/proximityd.yaml.
                                            + (extra.contains("--config") ? [] : ["--config", "/dev/null"]) + extra)
        let appeared = Task { () -> Bool in
            for await change in owners where change.body.count == 3 && change.body[2].string?.isEmpty == false { return true }
            return false
        }
        let exited = Task { try? await daemon.waitForExit(timeout: .seconds(30)) }
        defer { exited.cancel() }
        let ok = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask { await appeared.value }
            group.addTask { _ = await exited.value; return false }
            group.addTask { try await Task.sleep(for: .seconds(20)); return false }
            defer { group.cancelAll(); appeared.cancel(); exited.cancel() }
            return try await group.next() ?? false
        }
        guard ok else {
            daemon.signal(SIGKILL)
            throw TestKitError("proximityd did not take \(busName): exit \(String(describing: daemon.exitStatus))\n\(daemon.stderr)")
        }
        return daemon
    }

    func busctl(_ arguments: [String]) async throws -> CommandResult {
        try await runCommand("busctl", ["--address=\(address)"] + arguments)
    }

    func stop() async {
        await observer.close()
        await bus.stop()
    }
}

func withBox(_ body: (Box) async throws -> Void) async throws {
    let box = try await Box.make()
    do {
        try await body(box)
    } catch {
        await box.stop()
        throw error
    }
    await box.stop()
}

/// Nodes on simulated boxes: one proximityd process per box of a ``SimBoxes``, driven with busctl
/// as a user would.
extension SimBoxes {
    /// Where `box`'s proximityd keeps its state: in its bus's directory, removed with the bus.
    func stateDirectory(_ box: String) -> URL { buses[box]!.directory.appendingPathComponent("state") }

    /// Starts proximityd on `box`'s bus; returns once it owns org.proximityd.
    func startDaemon(_ box: String, _ extra: [String] = []) async throws -> ManagedProcess {
        try await NodeRunner.startProcess(box, on: self, stateDirectory: stateDirectory(box), arguments: extra)
    }

    func busctl(_ box: String, _ arguments: [String]) async throws -> CommandResult {
        try await runCommand("busctl", ["--address=\(address(box))"] + arguments)
    }

    func node(_ box: String, _ arguments: [String]) async throws -> CommandResult {
        try await busctl(box, ["call", "org.proximityd", "/org/proximityd", "org.proximityd.Node1"] + arguments)
    }

    /// A call to the simulator's control service through busctl (on the first box's bus), as a
    /// script would make it; ``SimBoxes/control(_:_:via:)`` is the typed call.
    func control(_ arguments: [String]) async throws -> CommandResult {
        try await busctl(scenario.boxes[0].name, ["call", "org.proximityd.BlueZSim", "/org/proximityd/BlueZSim",
                                                  "org.proximityd.BlueZSim1"] + arguments)
    }

    /// The node's `Identifier`, bare.
    func identifier(_ box: String) async throws -> String {
        try await property(box, "Identifier").replacingOccurrences(of: "s ", with: "").replacingOccurrences(of: "\"", with: "")
    }

    /// A `Peer1` property of one of `box`'s peers, as busctl prints it.
    func peerProperty(_ box: String, _ identifier: String, _ names: [String]) async throws -> String {
        try await busctl(box, ["get-property", "org.proximityd", "/org/proximityd/peers/\(escaped(identifier))",
                               "org.proximityd.Peer1"] + names).stdout.trimmed
    }

    func property(_ box: String, _ name: String) async throws -> String {
        try await busctl(box, ["get-property", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", name]).stdout.trimmed
    }

    /// Every signal `box`'s proximityd (or `sender`) sends from now on (it sends `FoundDevices` at each tick,
    /// and `PropertiesChanged`, `InterfacesAdded` … as its state changes): the moments what
    /// busctl reads of it can change.
    func nodeSignals(_ box: String, sender: BusName = "org.proximityd") async throws -> SignalLog {
        let connection = try await buses[box]!.connect()
        let stream = try await connection.subscribe(MatchRule(sender: sender))
        // The connection lives as long as the stream it delivers to is read.
        return SignalLog(AsyncStream { continuation in
            let task = Task {
                for await message in stream { continuation.yield(message) }
                continuation.finish()
                await connection.close()
            }
            continuation.onTermination = { _ in task.cancel() }
        })
    }

    /// Waits until `condition` holds on `box`'s node (or `sender`, the box's bluetoothd): checked
    /// now and after each signal it sends, bounded by `timeout`. For state that busctl reads (a
    /// property, a method's answer) and a signal announces.
    func until(_ box: String, sender: BusName = "org.proximityd", _ what: String, timeout: Duration,
               _ condition: () async throws -> Bool) async throws {
        let signals = try await nodeSignals(box, sender: sender)
        defer { signals.cancel() }
        try await signals.until(what, timeout: timeout, condition)
    }

    /// Waits until `box`'s node ranges its peers as `predicate` wants: `GetRanging` now, then
    /// each `FoundDevices` signal (the value `GetRanging` returns from then on).
    func waitRanging(_ box: String, _ what: String, timeout: Duration,
                     _ predicate: @escaping @Sendable ([String: String]) -> Bool) async throws {
        let signals = try await nodeSignals(box)
        defer { signals.cancel() }
        if predicate(try await ranging(box)) { return }
        try await signals.wait(timeout: timeout, what) { m in
            guard m.member == "FoundDevices", let zones = m.body.first?.stringKeyedDictionary else { return false }
            return predicate(zones.compactMapValues(\.string))
        }
    }

    /// `GetRanging`, parsed from busctl's `a{ss} N "k" "v" …`.
    func ranging(_ box: String) async throws -> [String: String] {
        let out = try await node(box, ["GetRanging"]).stdout
        let quoted = out.split(separator: "\"", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
        var result: [String: String] = [:]
        var i = 0
        while i + 1 < quoted.count { result[quoted[i]] = quoted[i + 1]; i += 2 }
        return result
    }
}

/// Runs `body` with the boxes of `scenario` in real time and the proximityd processes it starts
/// (`daemons`), stopping the daemons and the boxes whatever happens; when `body` returns, each
/// daemon must exit 0. With `simulate` false the simulator starts when the body calls
/// ``SimBoxes/simulate()`` (bluetoothd appearing after the nodes).
func withNodes(_ scenario: Scenario, simulate: Bool = true, storage: URL? = nil,
               _ body: (SimBoxes, inout [String: ManagedProcess]) async throws -> Void) async throws {
    try await withSimBoxes(scenario, time: .real, simulate: simulate, storage: storage) { sim in
        var daemons: [String: ManagedProcess] = [:]
        do {
            try await body(sim, &daemons)
        } catch {
            for daemon in daemons.values { await daemon.stop() }
            throw error
        }
        for (box, daemon) in daemons {
            await daemon.stop()
            #expect(daemon.exitStatus == 0, "\(box): \(daemon.stderr)")
        }
    }
}

extension String {
    var trimmed: String { trimmingCharacters(in: .whitespacesAndNewlines) }
}
