import DBusKit
import Foundation
import ProximityNode
import ProximityTesting
import Testing

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
                                         "--name", "test-box"] + extra)
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

extension String {
    var trimmed: String { trimmingCharacters(in: .whitespacesAndNewlines) }
}
