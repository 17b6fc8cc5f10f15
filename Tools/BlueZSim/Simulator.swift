import DBusKit
import Foundation
import Logging
import Synchronization

/// The whole simulator: the ``Air`` and, on every box's bus, a "bluetoothd" (a connection that
/// owns `org.bluez`) and the control service (a connection that owns
/// ``ControlService/busName``).
///
/// The library never starts a `dbus-daemon`: it is given one bus address per box (the
/// `bluez-sim` executable and the tests start private buses with `ProximityTesting.PrivateBus`).
public final class Simulator: Sendable {
    public let scenario: Scenario
    public let air: Air
    public let clock: any SimClock
    /// How often the real-time loop (``run()``) advances the air.
    public let tick: Double
    let logger: Logger
    let addresses: [String: String]

    private struct Daemon {
        var connection: DBusConnection
        var tree: BusTree
        var generation: Int
        var tasks: [Task<Void, Never>]
    }

    private struct State {
        var daemons: [String: Daemon] = [:]
        var controls: [String: DBusConnection] = [:]
        var stopped = false
    }
    private let state = Mutex(State())

    /// `addresses`: each box's bus address, by box name. Every box of the scenario needs one.
    /// `storage`: where each box's bluetoothd keeps its bonds (`STORAGE/<box>/` stands for the
    /// box's `/var/lib/bluetooth`); nil keeps them in memory only.
    public init(scenario: Scenario, addresses: [String: String], clock: any SimClock = RealSimClock(), tick: Double = 0.01,
                storage: URL? = nil, logger: Logger = Logger(label: "bluez-sim")) {
        self.scenario = scenario
        self.addresses = addresses
        self.clock = clock
        self.tick = tick
        self.logger = logger
        self.air = Air(scenario: scenario, clock: clock, storage: storage, logger: logger)
    }

    /// Starts "bluetoothd" and the control service on every box bus. Returns once `org.bluez` and
    /// the control name are owned everywhere.
    public func start() async throws {
        for box in scenario.boxes {
            guard addresses[box.name] != nil else {
                throw BlueZError.failed("no bus address for box \(box.name)")
            }
        }
        for box in scenario.boxes {
            try await startControl(box.name)
            try await startBluetoothd(box.name)
        }
    }

    public func address(of box: String) -> String? { addresses[box] }

    /// The connection that plays `box`'s bluetoothd (changes with every restart).
    public func bluetoothdConnection(_ box: String) -> DBusConnection? {
        state.withLock { $0.daemons[box]?.connection }
    }

    private func busAddress(_ box: String) throws -> BusAddress {
        guard let text = addresses[box] else { throw BlueZError.failed("no bus address for box \(box)") }
        return try BusAddress(parsing: text)
    }

    private func startControl(_ box: String) async throws {
        let connection = try await DBusConnection.connect(to: try busAddress(box), logger: logger)
        _ = try await connection.export([ControlService.interface(self)], at: ControlService.objectPath)
        let reply = try await connection.requestName(ControlService.busName, flags: [.doNotQueue])
        guard reply == .primaryOwner || reply == .alreadyOwner else {
            await connection.close()
            throw BlueZError.failed("\(ControlService.busName) is already owned on \(box)'s bus")
        }
        state.withLock { $0.controls[box] = connection }
    }

    /// Starts `box`'s bluetoothd: objects first, then the name, as bluetoothd does.
    private func startBluetoothd(_ box: String) async throws {
        let connection = try await DBusConnection.connect(to: try busAddress(box), logger: logger)
        let tree = BusTree(connection: connection, logger: logger)
        let consumer = Task { await tree.run() }
        do {
            _ = try await connection.export([tree.objectManagerInterface()], at: .root)
            // Clients that leave take their discovery, advertisements and applications with them.
            let owners = try await connection.subscribe(MatchRule(sender: .bus, path: "/org/freedesktop/DBus", interface: .bus,
                                                                  member: "NameOwnerChanged"))
            let generation = await air.attach(box: box, tree: tree)
            let air = self.air
            let watcher = Task {
                for await message in owners {
                    guard message.body.count == 3, let name = message.body[0].string, name.hasPrefix(":"),
                          message.body[2].string == "" else { continue }
                    await air.clientVanished(box: box, generation: generation, owner: name)
                }
            }
            await tree.sync()
            let reply = try await connection.requestName(BlueZ.service, flags: [.doNotQueue])
            guard reply == .primaryOwner || reply == .alreadyOwner else {
                throw BlueZError.failed("org.bluez is already owned on \(box)'s bus: is a bluetoothd running there?")
            }
            state.withLock { $0.daemons[box] = Daemon(connection: connection, tree: tree, generation: generation,
                                                      tasks: [consumer, watcher]) }
            logger.debug("bluetoothd ready", metadata: ["box": "\(box)", "dbus.unique": "\(connection.uniqueName)"])
        } catch {
            tree.close()
            consumer.cancel()
            await connection.close()
            throw error
        }
    }

    /// Stops `box`'s bluetoothd as `systemctl stop bluetooth` would: its advertisements get
    /// `Release`, its connections drop, then the connection closes, so `org.bluez` and every
    /// object vanish at once.
    private func stopBluetoothd(_ box: String) async {
        guard let daemon = state.withLock({ $0.daemons.removeValue(forKey: box) }) else { return }
        let (tree, releases) = await air.detach(box: box)
        await withTaskGroup(of: Void.self) { group in
            for r in releases {
                guard let destination = try? BusName(r.owner) else { continue }
                group.addTask {
                    _ = try? await daemon.connection.call(destination: destination, path: r.path, interface: BlueZ.advertisementInterface,
                                                          member: "Release", timeout: .seconds(2))
                }
            }
        }
        (tree ?? daemon.tree).close()
        for task in daemon.tasks { task.cancel() }
        // The name released by a call the bus answers before the connection closes: a closing
        // socket is noticed by the bus when it gets to it, and a bluetoothd started at once
        // after (a restart) could find org.bluez still taken.
        try? await daemon.connection.releaseName(BlueZ.service)
        await daemon.connection.close()
    }

    /// Restarts `box`'s bluetoothd: its name drops and its objects vanish, then it comes back with
    /// a fresh adapter and no devices, advertisements or applications.
    public func restartBluetoothd(box: String) async throws {
        guard scenario.box(named: box) != nil else { throw ControlError.unknownBox(box) }
        await stopBluetoothd(box)
        guard !state.withLock({ $0.stopped }) else { return }
        try await startBluetoothd(box)
    }

    /// Advances the air in real time every ``tick`` until the task is cancelled.
    public func run() async {
        var next = clock.now
        while !Task.isCancelled {
            next = max(next + tick, clock.now)
            do { try await clock.sleep(until: next) } catch { break }
            await air.advance(to: clock.now)
        }
    }

    /// With a ``ManualSimClock``: moves time forward by `seconds` in steps of ``tick``, running
    /// the air at each step and letting the tasks woken by the clock run.
    public func advance(by seconds: Double) async {
        guard let manual = clock as? ManualSimClock else { return }
        let end = manual.now + seconds
        var t = manual.now
        while t < end {
            t = min(end, t + tick)
            manual.advance(to: t)
            await air.advance(to: t)
            await Task.yield()
        }
    }

    /// Stops every bluetoothd (with `Release` for their advertisements) and the control services.
    public func stop() async {
        let boxes = state.withLock { s -> [String] in
            s.stopped = true
            return Array(s.daemons.keys)
        }
        for box in boxes { await stopBluetoothd(box) }
        let controls = state.withLock { s -> [DBusConnection] in
            defer { s.controls.removeAll() }
            return Array(s.controls.values)
        }
        for c in controls { await c.close() }
    }
}
