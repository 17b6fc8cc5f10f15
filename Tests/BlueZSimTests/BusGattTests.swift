import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import Testing
import SimTesting

/// Connections between boxes and the GATT client: the peer's application appears under the
/// device, and reads go to the peer's application over the peer's bus.
@Suite(.serialized) struct BusGattTests {
    static let identity = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"

    /// Beta advertises and serves its identity; alpha discovers beta. Returns alpha's client and
    /// signal log, and beta's application.
    func prepare(_ sim: SimBoxes) async throws -> (DBusConnection, SignalLog, TestGattApplication, DBusConnection) {
        let beta = try await sim.client("beta")
        let app = try await TestGattApplication(on: beta, identity: Self.identity)
        try await app.register(beta)
        let ad = try await TestAdvertisement(on: beta, properties: peripheralAdvertisement())
        try await ad.register(beta)
        let alpha = try await sim.client("alpha")
        let log = try await SignalLog.bluez(alpha)
        try await alpha.adapter("SetDiscoveryFilter", [.vardict(["UUIDs": .strings([serviceUUID]), "Transport": .string("le")])])
        try await alpha.adapter("StartDiscovery")
        await sim.advance(1)
        try await log.wait { $0.isInterfacesAdded(betaPath) }
        return (alpha, log, app, beta)
    }

    /// Runs `Connect` while the simulated clock moves.
    func connect(_ sim: SimBoxes, _ alpha: DBusConnection) async throws {
        _ = try await sim.during { try await alpha.bluez(betaPath, BlueZ.deviceInterface, "Connect") }
    }

    @Test func registerConnectRead() async throws {
        try await withSimBoxes(twoBoxes(), time: .simulated) { sim in
            let (alpha, log, app, beta) = try await prepare(sim)
            let betaAdapter = try await beta.getProperty(destination: BlueZ.service, path: adapterPath,
                                                         interface: BlueZ.adapterInterface, name: "UUIDs")
            #expect(betaAdapter.arrayElements?.contains(.string(serviceUUID)) == true)

            try await connect(sim, alpha)
            try await log.wait { $0.isChange(betaPath) && $0.changed["Connected"] == .boolean(true) }
            await sim.advance(0.1)
            try await log.wait { $0.isChange(betaPath) && $0.changed["ServicesResolved"] == .boolean(true) }
            let service: ObjectPath = "/org/bluez/hci0/dev_AA_00_00_00_00_02/service000e"
            let chrc: ObjectPath = "/org/bluez/hci0/dev_AA_00_00_00_00_02/service000e/char000f"
            let objects = try await alpha.managedObjects()
            let s = try #require(objects[service]?[BlueZ.gattServiceInterface.rawValue])
            #expect(s["UUID"] == .string(serviceUUID))
            #expect(s["Primary"] == .boolean(true))
            #expect(s["Device"] == .objectPath(betaPath))
            let c = try #require(objects[chrc]?[BlueZ.gattCharacteristicInterface.rawValue])
            #expect(c["Service"] == .objectPath(service))
            #expect(c["Flags"] == .strings(["read"]))
            #expect(c["MTU"] == .uint16(517))
            #expect(c["Value"] == nil)

            // Beta sees the incoming connection as a device of its own.
            let betaObjects = try await beta.managedObjects()
            #expect(betaObjects[alphaPath]?[BlueZ.deviceInterface.rawValue]?["Connected"] == .boolean(true))

            let whole = try await alpha.bluez(chrc, BlueZ.gattCharacteristicInterface, "ReadValue", [.vardict([:])])
            #expect(whole.first?.bytes == Array(Self.identity.utf8))
            let tail = try await alpha.bluez(chrc, BlueZ.gattCharacteristicInterface, "ReadValue", [.vardict(["offset": .uint16(30)])])
            #expect(tail.first?.bytes == Array(Self.identity.utf8.dropFirst(30)))
            let options = try #require(app.readOptions.last)
            #expect(options["offset"] == .uint16(30))
            #expect(options["device"] == .objectPath(alphaPath))
            #expect(options["link"] == .string("LE"))
            #expect(options["mtu"] == .uint16(517))
            #expect(app.readOptions.first?["offset"] == nil)
            await expectError("org.bluez.Error.InvalidArguments") {
                _ = try await alpha.bluez(chrc, BlueZ.gattCharacteristicInterface, "ReadValue", [.vardict(["offset": .uint32(3)])])
            }
            await expectError("org.bluez.Error.InvalidArguments", "Invalid offset") {
                _ = try await alpha.bluez(chrc, BlueZ.gattCharacteristicInterface, "ReadValue", [.vardict(["offset": .uint16(99)])])
            }

            _ = try await sim.during { try await alpha.bluez(betaPath, BlueZ.deviceInterface, "Disconnect") }
            try await log.wait { $0.isInterfacesRemoved(chrc) }
            try await log.wait { $0.isChange(betaPath) && $0.changed["Connected"] == .boolean(false) }
            await alpha.close()
            await beta.close()
        }
    }

    /// On a 23-byte MTU a 36-byte identity takes a long read: the application sees offsets 0 and
    /// 22, the caller gets the whole value.
    @Test func longReadOnSmallMTU() async throws {
        try await withSimBoxes(twoBoxes(), time: .simulated) { sim in
            try await sim.simulator.air.configure(["MTU": .double(23)])
            let (alpha, log, app, beta) = try await prepare(sim)
            try await connect(sim, alpha)
            await sim.advance(0.1)
            try await log.wait { $0.isChange(betaPath) && $0.changed["ServicesResolved"] == .boolean(true) }
            let chrc: ObjectPath = "/org/bluez/hci0/dev_AA_00_00_00_00_02/service000e/char000f"
            let value = try await alpha.bluez(chrc, BlueZ.gattCharacteristicInterface, "ReadValue", [.vardict([:])])
            #expect(value.first?.bytes == Array(Self.identity.utf8))
            #expect(app.readOptions.map { $0["offset"]?.integer ?? 0 } == [0, 22])
            #expect(app.readOptions.allSatisfy { $0["mtu"] == .uint16(23) })
            let cached = try await alpha.getProperty(destination: BlueZ.service, path: chrc,
                                                     interface: BlueZ.gattCharacteristicInterface, name: "Value")
            #expect(cached.bytes == Array(Self.identity.utf8))
            await alpha.close()
            await beta.close()
        }
    }

    @Test func badApplications() async throws {
        try await withSimBoxes(twoBoxes(), time: .simulated) { sim in
            let beta = try await sim.client("beta")
            // No object manager at the path.
            _ = try await beta.export([DBusInterface(BlueZ.gattServiceInterface, properties: [
                DBusProperty("UUID", .string, .string(serviceUUID)), DBusProperty("Primary", .boolean, .boolean(true)),
            ])], at: "/org/bare/service0")
            await expectError("org.bluez.Error.Failed", "No object received") {
                _ = try await beta.bluez(adapterPath, BlueZ.gattManagerInterface, "RegisterApplication", [.objectPath("/org/bare"), .vardict([:])])
            }
            // A characteristic pointing at no service.
            try await beta.addObjectManager(at: "/org/orphan")
            _ = try await beta.export([DBusInterface(BlueZ.gattCharacteristicInterface, properties: [
                DBusProperty("UUID", .string, .string(serviceUUID)), DBusProperty("Service", .objectPath, .objectPath("/nowhere")),
                DBusProperty("Flags", .array(.string), .strings(["read"])),
            ])], at: "/org/orphan/char0")
            await expectError("org.bluez.Error.Failed", "No valid service object found") {
                _ = try await beta.bluez(adapterPath, BlueZ.gattManagerInterface, "RegisterApplication", [.objectPath("/org/orphan"), .vardict([:])])
            }
            // A service without Primary.
            try await beta.addObjectManager(at: "/org/noprimary")
            _ = try await beta.export([DBusInterface(BlueZ.gattServiceInterface, properties: [
                DBusProperty("UUID", .string, .string(serviceUUID)),
            ])], at: "/org/noprimary/service0")
            await expectError("org.bluez.Error.Failed", "Failed to create entry in database") {
                _ = try await beta.bluez(adapterPath, BlueZ.gattManagerInterface, "RegisterApplication", [.objectPath("/org/noprimary"), .vardict([:])])
            }
            let app = try await TestGattApplication(on: beta, identity: Self.identity)
            try await app.register(beta)
            await expectError("org.bluez.Error.AlreadyExists", "Already Exists") { try await app.register(beta) }
            _ = try await beta.bluez(adapterPath, BlueZ.gattManagerInterface, "UnregisterApplication", [.objectPath(app.root)])
            await expectError("org.bluez.Error.DoesNotExist", "Does Not Exist") {
                _ = try await beta.bluez(adapterPath, BlueZ.gattManagerInterface, "UnregisterApplication", [.objectPath(app.root)])
            }
            await beta.close()
        }
    }

    /// Injected failures: BlueZ's "le-connection-abort-by-local" with Connected flipping, InProgress
    /// for a second Connect, NotReady on a powered-off adapter, a timeout for a device that does
    /// not answer.
    /// Returns once the simulator has counted a connection attempt after `attempts` (a Connect
    /// sent over the bus has reached it), at most 10 s of real time.
    static func untilAttempted(_ simulator: Simulator, after attempts: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while await simulator.air.stats.connectionAttempts == attempts {
            guard ContinuousClock.now < deadline else { throw TestKitError("the Connect never reached the simulator") }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    @Test func connectFailures() async throws {
        try await withSimBoxes(twoBoxes(), time: .simulated) { sim in
            let (alpha, log, _, beta) = try await prepare(sim)
            try await sim.simulator.air.configure(["ConnectionFailureRate": .double(1), "ConnectTimeout": .double(3)])
            let before = log.count
            await expectError("org.bluez.Error.Failed", "le-connection-abort-by-local") { try await connect(sim, alpha) }
            // The signals were sent before the error reply, but the log is filled by another task:
            // wait for the second flip rather than assume it is already there.
            try await log.wait(from: before, "Connected false") { $0.isChange(betaPath) && $0.changed["Connected"]?.bool == false }
            let flips = log.messages.dropFirst(before).compactMap { m -> Bool? in
                m.isChange(betaPath) ? m.changed["Connected"]?.bool : nil
            }
            #expect(flips == [true, false])

            // A slow connection (0.5 s) keeps the first Connect pending while the second arrives.
            try await sim.simulator.air.configure(["ConnectionFailureRate": .double(0), "ConnectionLatency": .double(0.5)])
            // Two Connects: the second, made while the first is pending (time standing still), is
            // told a connection is in progress; then time moves and the first connects. (Sent
            // together while time moved, the first could connect before the second arrived.)
            let simulator = sim.simulator
            let pending = await simulator.air.stats.connectionAttempts
            let first = Task { try await outcome { try await alpha.bluez(betaPath, BlueZ.deviceInterface, "Connect") } }
            try await Self.untilAttempted(simulator, after: pending)
            let second = try await outcome { try await alpha.bluez(betaPath, BlueZ.deviceInterface, "Connect") }
            #expect(second == "org.bluez.Error.InProgress: In Progress")
            #expect(try await sim.during { try await first.value } == "ok")

            // Beta stops advertising: a new connection attempt finds nobody and times out.
            _ = try await sim.during { try await alpha.bluez(betaPath, BlueZ.deviceInterface, "Disconnect") }
            _ = try await beta.bluez(adapterPath, BlueZ.advertisingManagerInterface, "UnregisterAdvertisement", [.objectPath("/org/test/adv0")])
            await expectError("org.bluez.Error.Failed", "le-connection-abort-by-local") {
                _ = try await sim.during { try await alpha.bluez(betaPath, BlueZ.deviceInterface, "Connect") }
            }
            // Like a controller, a pending Connect keeps looking: beta advertising again 1 s into
            // the 3 s timeout is connected to then.
            let started = simulator.clock.now
            let attempts = await simulator.air.stats.connectionAttempts
            let attempt = Task { try await outcome { try await alpha.bluez(betaPath, BlueZ.deviceInterface, "Connect") } }
            // The attempt is under way (the simulator counted it) before time moves.
            try await Self.untilAttempted(simulator, after: attempts)
            await sim.advance(1)
            _ = try await beta.bluez(adapterPath, BlueZ.advertisingManagerInterface, "RegisterAdvertisement",
                                     [.objectPath("/org/test/adv0"), .vardict([:])])
            let comesBack = try await sim.during(limit: 1.5) { try await attempt.value }
            #expect(simulator.clock.now - started < 3, "connected only at the timeout")
            #expect(comesBack == "ok")

            try await sim.simulator.air.setPowered(box: "alpha", false)
            await expectError("org.bluez.Error.NotReady", "Resource Not Ready") {
                _ = try await alpha.bluez(betaPath, BlueZ.deviceInterface, "Connect")
            }
            await alpha.close()
            await beta.close()
        }
    }
}

/// "ok", or the D-Bus error a call ended with.
func outcome(_ call: () async throws -> [DBusValue]) async throws -> String {
    do {
        _ = try await call()
        return "ok"
    } catch let error as DBusError {
        return error.name.rawValue + ": " + error.message
    }
}
