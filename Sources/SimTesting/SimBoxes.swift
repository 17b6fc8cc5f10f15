import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import Logging
import Synchronization

/// The boxes of a scenario on one machine: one private `dbus-daemon` per box (unless a bus is
/// given for it), and the in-process ``Simulator`` playing bluetoothd on every box bus and the air
/// between the boxes. Used by the tests and by `bluez-sim run`.
///
/// Prefer ``withSimBoxes(_:time:simulate:attaching:logger:_:)``, which always stops them.
public final class SimBoxes: Sendable {
    /// How the simulation's time moves.
    public enum Time: Sendable {
        /// Only when ``advance(_:)`` says so (a ``ManualSimClock``): a 30 s timeout takes
        /// milliseconds, and every step is reproducible.
        case simulated
        /// On its own, in real time (``Simulator/run()``): for clients in other processes, and
        /// clients that keep their own time.
        case real
    }

    public let scenario: Scenario
    public let time: Time
    public let simulator: Simulator
    /// The buses started here, by box (not the buses given for boxes).
    public let buses: [String: PrivateBus]
    /// Every box's bus address, by box.
    public let addresses: [String: String]

    private enum Phase {
        case idle
        /// The simulator is started; in real time, `runner` advances the air.
        case simulating(runner: Task<Void, Never>?)
        case stopped
    }
    private let phase = Mutex(Phase.idle)

    private init(scenario: Scenario, time: Time, simulator: Simulator, buses: [String: PrivateBus], addresses: [String: String]) {
        self.scenario = scenario
        self.time = time
        self.simulator = simulator
        self.buses = buses
        self.addresses = addresses
    }

    /// Starts a bus for every box not in `attaching` (box name to bus address), and the simulator
    /// on all of them unless `simulate` is false (then ``simulate()`` starts it later, as a
    /// bluetoothd that comes up after its clients).
    /// `storage`: where each box's bluetoothd keeps its bonds (`STORAGE/<box>/` is the box's
    /// `/var/lib/bluetooth`); nil keeps them in memory.
    public static func start(_ scenario: Scenario, time: Time = .real, simulate: Bool = true,
                             attaching given: [String: String] = [:], storage: URL? = nil,
                             logger: Logger = Logger(label: "bluez-sim")) async throws -> SimBoxes {
        var buses: [String: PrivateBus] = [:]
        do {
            for box in scenario.boxes where given[box.name] == nil {
                buses[box.name] = try await PrivateBus.start(name: "box-\(box.name)")
            }
        } catch {
            for bus in buses.values { await bus.stop() }
            throw error
        }
        let addresses = given.merging(buses.mapValues(\.address)) { given, _ in given }
        let clock: any SimClock = time == .simulated ? ManualSimClock() : RealSimClock()
        let simulator = Simulator(scenario: scenario, addresses: addresses, clock: clock, storage: storage, logger: logger)
        let boxes = SimBoxes(scenario: scenario, time: time, simulator: simulator, buses: buses, addresses: addresses)
        if simulate {
            do {
                try await boxes.simulate()
            } catch {
                await boxes.stop()
                throw error
            }
        }
        return boxes
    }

    /// Starts the simulator (bluetoothd and the control service on every box bus) and, in real
    /// time, the air. Does nothing if it is already started or the boxes are stopped.
    public func simulate() async throws {
        let starting = phase.withLock { phase -> Bool in
            guard case .idle = phase else { return false }
            phase = .simulating(runner: nil)
            return true
        }
        guard starting else { return }
        // On failure the phase stays `simulating`: stop() then closes what did start.
        try await simulator.start()
        guard time == .real else { return }
        let simulator = self.simulator
        let runner = Task { await simulator.run() }
        let kept = phase.withLock { phase -> Bool in
            guard case .simulating = phase else { return false }
            phase = .simulating(runner: runner)
            return true
        }
        if !kept { runner.cancel() }
    }

    /// Stops the air, every bluetoothd (with `Release` for their advertisements) and the control
    /// service, then the buses started here. Safe to call more than once.
    public func stop() async {
        let previous = phase.withLock { phase -> Phase in
            defer { phase = .stopped }
            return phase
        }
        switch previous {
        case .stopped:
            return
        case .idle:
            break
        case .simulating(let runner):
            runner?.cancel()
            await runner?.value
            await simulator.stop()
        }
        for bus in buses.values { await bus.stop() }
    }

    /// The bus address of `box`.
    public func address(_ box: String) -> String {
        guard let address = addresses[box] else { preconditionFailure("the scenario has no box '\(box)'") }
        return address
    }

    /// A new client connection on `box`'s bus (a process of that box). The caller closes it.
    public func client(_ box: String) async throws -> DBusConnection {
        try await DBusConnection.connect(to: .address(address(box)))
    }

    /// Calls the simulator's control service (`org.proximityd.BlueZSim1`) as a script would, on
    /// `box`'s bus (any box controls them all; the first by default), and returns its reply.
    @discardableResult
    public func control(_ member: MemberName, _ arguments: [DBusValue] = [], via box: String? = nil) async throws -> [DBusValue] {
        let connection = try await client(box ?? scenario.boxes[0].name)
        do {
            let reply = try await connection.call(destination: ControlService.busName, path: ControlService.objectPath,
                                                  interface: ControlService.interfaceName, member: member, arguments)
            await connection.close()
            return reply
        } catch {
            await connection.close()
            throw error
        }
    }

    /// Moves simulated time forward by `seconds` (``Time/simulated`` only; real time moves on
    /// its own).
    public func advance(_ seconds: Double) async {
        await simulator.advance(by: seconds)
    }

    /// Runs `call` while moving simulated time forward in steps of 20 ms, until it returns or
    /// `limit` simulated seconds have passed (then it waits for `call` without moving time): for
    /// calls that wait on the simulated clock, such as `Connect`.
    public func during<T: Sendable>(limit: Double = 60, _ call: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: DuringOutcome<T>.self) { group in
            group.addTask { .returned(try await call()) }
            group.addTask {
                var elapsed = 0.0
                while elapsed < limit && !Task.isCancelled {
                    await self.advance(0.02)
                    elapsed += 0.02
                }
                return .timeIsUp
            }
            defer { group.cancelAll() }
            while let outcome = try await group.next() {
                if case .returned(let value) = outcome { return value }
            }
            preconditionFailure("the call's task ended without an outcome")
        }
    }
}

/// What finished first in ``SimBoxes/during(limit:_:)``.
private enum DuringOutcome<T: Sendable>: Sendable {
    case returned(T)
    case timeIsUp
}

/// Runs `body` with the boxes of `scenario` (see ``SimBoxes/start(_:time:simulate:attaching:logger:)``)
/// and stops them afterwards, whether `body` returns or throws.
public func withSimBoxes<T>(_ scenario: Scenario, time: SimBoxes.Time = .real, simulate: Bool = true,
                            attaching given: [String: String] = [:], storage: URL? = nil, logger: Logger = Logger(label: "bluez-sim"),
                            _ body: (SimBoxes) async throws -> T) async throws -> T {
    let boxes = try await SimBoxes.start(scenario, time: time, simulate: simulate, attaching: given, storage: storage, logger: logger)
    let result: T
    do {
        result = try await body(boxes)
    } catch {
        await boxes.stop()
        throw error
    }
    await boxes.stop()
    return result
}

/// Two boxes, alpha at the origin and beta `distance` m away along x, with no shadowing unless
/// asked and no packet loss: every RSSI is the model's mean.
public func twoBoxes(distance: Double = 2, shadowing: Double = 0, beacons: [BeaconSpec] = [], seed: UInt64 = 1) -> Scenario {
    var radio = RadioParameters()
    radio.shadowingSigma = shadowing
    radio.packetLoss = 0
    return Scenario(seed: seed, radio: radio, boxes: [
        BoxSpec(name: "alpha", address: "AA:00:00:00:00:01", trajectory: Trajectory(fixed: Position(x: 0, y: 0))),
        BoxSpec(name: "beta", address: "AA:00:00:00:00:02", trajectory: Trajectory(fixed: Position(x: distance, y: 0))),
    ], beacons: beacons)
}

extension DBusConnection {
    /// `GetManagedObjects` of `service`, with the variants unwrapped.
    public func managedObjects(of service: BusName = BlueZ.service) async throws -> [ObjectPath: [String: [String: DBusValue]]] {
        let reply = try await call(destination: service, path: .root, interface: .objectManager, member: "GetManagedObjects")
        var objects: [ObjectPath: [String: [String: DBusValue]]] = [:]
        for entry in reply.first?.dictEntries ?? [] {
            guard let path = entry.key.objectPath else { continue }
            var interfaces: [String: [String: DBusValue]] = [:]
            for interface in entry.value.dictEntries ?? [] {
                interfaces[interface.key.string ?? ""] = interface.value.stringKeyedDictionary?.mapValues(\.unwrapped) ?? [:]
            }
            objects[path] = interfaces
        }
        return objects
    }
}
