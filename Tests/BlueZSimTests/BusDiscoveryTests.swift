@testable import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import Testing
import SimTesting

/// Discovery between boxes on real private buses, with BlueZ's rules for devices and RSSI.
@Suite(.serialized) struct BusDiscoveryTests {
    @Test func adapterAndObjectManager() async throws {
        try await withSimBoxes(twoBoxes(), time: .simulated) { sim in
            let alpha = try await sim.client("alpha")
            let objects = try await alpha.managedObjects()
            let adapter = try #require(objects[adapterPath]?[BlueZ.adapterInterface.rawValue])
            #expect(adapter["Address"] == .string("AA:00:00:00:00:01"))
            #expect(adapter["AddressType"] == .string("public"))
            #expect(adapter["Name"] == .string("alpha"))
            #expect(adapter["Alias"] == .string("alpha"))
            #expect(adapter["Powered"] == .boolean(true))
            #expect(adapter["Discovering"] == .boolean(false))
            #expect(adapter["Roles"] == .strings(["central", "peripheral"]))
            #expect(objects[adapterPath]?[BlueZ.advertisingManagerInterface.rawValue]?["SupportedInstances"] == .byte(5))
            #expect(objects[adapterPath]?[BlueZ.gattManagerInterface.rawValue] != nil)
            #expect(objects[BlueZ.rootPath]?[BlueZ.agentManagerInterface.rawValue] != nil)
            // Each box has its own bus: beta's adapter is not on alpha's.
            let beta = try await sim.client("beta")
            let betaAdapter = try await beta.getProperty(destination: BlueZ.service, path: adapterPath,
                                                         interface: BlueZ.adapterInterface, name: "Address")
            #expect(betaAdapter == .string("AA:00:00:00:00:02"))
            await alpha.close()
            await beta.close()
        }
    }

    /// Beta advertises; alpha discovers it with the RSSI the radio model gives for 2 m.
    @Test func discoveryBetweenBoxes() async throws {
        try await withSimBoxes(twoBoxes(distance: 2, shadowing: 2), time: .simulated) { sim in
            let beta = try await sim.client("beta")
            let ad = try await TestAdvertisement(on: beta, properties: peripheralAdvertisement(name: "beta-node"))
            try await ad.register(beta)

            let alpha = try await sim.client("alpha")
            let log = try await SignalLog.bluez(alpha)
            try await alpha.adapter("SetDiscoveryFilter", [.vardict([
                "UUIDs": .strings([serviceUUID]), "Transport": .string("le"), "DuplicateData": .boolean(true),
            ])])
            try await alpha.adapter("StartDiscovery")
            try await log.wait { $0.isChange(adapterPath, BlueZ.adapterInterface) && $0.changed["Discovering"] == .boolean(true) }
            await sim.advance(5)
            let added = try await log.wait { $0.isInterfacesAdded(betaPath) }
            let device = try #require(added.added(BlueZ.deviceInterface))
            #expect(device["Address"] == .string("AA:00:00:00:00:02"))
            #expect(device["AddressType"] == .string("public"))
            #expect(device["Name"] == .string("beta-node"))
            #expect(device["Alias"] == .string("beta-node"))
            #expect(device["UUIDs"] == .strings([serviceUUID]))
            #expect(device["Connected"] == .boolean(false))
            #expect(device["Adapter"] == .objectPath(adapterPath))
            #expect(device["RSSI"] != nil)
            // With a filter every report is announced: ~10 reports a second for 5 s.
            let reports = try await waitForRSSI(log, betaPath, atLeast: 40)
            let mean = Double(reports.reduce(0, +)) / Double(reports.count)
            let expected = -59 - 20 * log10(2.0)
            #expect(abs(mean - expected) < 1.5, "mean RSSI \(mean), model \(expected)")
            await alpha.close()
            await beta.close()
        }
    }

    /// A box's advertised `ManufacturerData` (a node's measured power under 0xFFFF) reaches the
    /// other box's `Device1` with the service UUID, and is announced again at every report under
    /// `DuplicateData`, as BlueZ does.
    @Test func manufacturerDataBetweenBoxes() async throws {
        try await withSimBoxes(twoBoxes(distance: 2, shadowing: 2), time: .simulated) { sim in
            let beta = try await sim.client("beta")
            var properties = peripheralAdvertisement(name: "beta-node")
            properties["ManufacturerData"] = .dictionary(key: .uint16, value: .variant, [
                .init(.uint16(0xFFFF), .variant(.bytes([0x50, 0x58, 0x01, 0xBA]))),
            ])
            let ad = try await TestAdvertisement(on: beta, properties: properties)
            try await ad.register(beta)

            let alpha = try await sim.client("alpha")
            let log = try await SignalLog.bluez(alpha)
            try await alpha.adapter("SetDiscoveryFilter", [.vardict([
                "UUIDs": .strings([serviceUUID]), "Transport": .string("le"), "DuplicateData": .boolean(true),
            ])])
            try await alpha.adapter("StartDiscovery")
            await sim.advance(2)
            let added = try await log.wait { $0.isInterfacesAdded(betaPath) }
            let device = try #require(added.added(BlueZ.deviceInterface))
            #expect(device["UUIDs"] == .strings([serviceUUID]))
            let expected = DBusValue.dictionary(key: .uint16, value: .variant, [.init(.uint16(0xFFFF), .variant(.bytes([0x50, 0x58, 0x01, 0xBA])))])
            #expect(device["ManufacturerData"] == expected)
            let before = log.count
            await sim.advance(1)
            try await log.wait(from: before) { $0.isChange(betaPath) && $0.changed["ManufacturerData"] == expected }
            await alpha.close()
            await beta.close()
        }
    }

    /// Without a discovery filter BlueZ announces an RSSI change only past 8 dBm; with one, every
    /// report, even with the same value.
    @Test func rssiThreshold() async throws {
        try await withSimBoxes(twoBoxes(distance: 2, shadowing: 0), time: .simulated) { sim in
            let beta = try await sim.client("beta")
            let ad = try await TestAdvertisement(on: beta, properties: peripheralAdvertisement(discoverable: true))
            try await ad.register(beta)
            let alpha = try await sim.client("alpha")
            let log = try await SignalLog.bluez(alpha)
            try await alpha.adapter("StartDiscovery")
            await sim.advance(3)
            let added = try await log.wait { $0.isInterfacesAdded(betaPath) }
            #expect(added.added(BlueZ.deviceInterface)?["RSSI"] == .int16(-65))
            // No shadowing: the RSSI never changes, so nothing more is announced.
            #expect(rssiValues(log, betaPath).isEmpty)
            // 4 m further: −77 dBm, 12 dB less, past the threshold.
            try await sim.simulator.air.moveBox("beta", to: Position(x: 8, y: 0))
            await sim.advance(1)
            try await log.wait { $0.isChange(betaPath) && $0.changed["RSSI"] == .int16(-77) }
            // 0.5 m more: −78, 1 dB: below the threshold, not announced.
            try await sim.simulator.air.moveBox("beta", to: Position(x: 8.9, y: 0))
            await sim.advance(2)
            #expect(rssiValues(log, betaPath) == [-77])

            // A filter lifts the threshold: the same −78 announced at every report.
            try await alpha.adapter("StopDiscovery")
            try await alpha.adapter("SetDiscoveryFilter", [.vardict(["Transport": .string("le")])])
            try await alpha.adapter("StartDiscovery")
            let before = log.count
            await sim.advance(2)
            let values = try await waitForRSSI(log, betaPath, atLeast: 15, from: before)
            #expect(Set(values) == [-78])
            await alpha.close()
            await beta.close()
        }
    }

    /// StopDiscovery clears RSSI (announced as invalidated) and removes temporary devices that
    /// are not connectable; the connectable ones go after the 30 s temporary timeout.
    @Test func stopDiscoveryAndTemporaryTimeout() async throws {
        let beacon = iBeacon("door", "C0:00:00:00:00:01", at: Position(x: 1, y: 1))
        let beaconPath: ObjectPath = "/org/bluez/hci0/dev_C0_00_00_00_00_01"
        try await withSimBoxes(twoBoxes(beacons: [beacon]), time: .simulated) { sim in
            let beta = try await sim.client("beta")
            let ad = try await TestAdvertisement(on: beta, properties: peripheralAdvertisement(discoverable: true))
            try await ad.register(beta)
            let alpha = try await sim.client("alpha")
            let log = try await SignalLog.bluez(alpha)
            try await alpha.adapter("StartDiscovery")
            await sim.advance(2)
            try await log.wait { $0.isInterfacesAdded(betaPath) }
            let beaconAdded = try await log.wait { $0.isInterfacesAdded(beaconPath) }
            let props = try #require(beaconAdded.added(BlueZ.deviceInterface))
            #expect(props["Alias"] == .string("C0-00-00-00-00-01"))
            #expect(props["Name"] == nil)
            let md = try #require(props["ManufacturerData"]?.dictEntries?.first)
            #expect(md.key == .uint16(0x004C))

            try await alpha.adapter("StopDiscovery")
            try await log.wait { $0.isChange(betaPath) && $0.invalidated.contains("RSSI") }
            try await log.wait { $0.isInterfacesRemoved(beaconPath) }
            // What clients mirror (GetManagedObjects) has no RSSI any more. (A direct Get still
            // answers: see "What differs from real BlueZ" in docs/simulator.md.)
            let objects = try await alpha.managedObjects()
            #expect(objects[betaPath]?[BlueZ.deviceInterface.rawValue]?["RSSI"] == nil)
            #expect(objects[betaPath]?[BlueZ.deviceInterface.rawValue]?["Address"] == .string("AA:00:00:00:00:02"))

            // Unheard for 30 s (nobody discovers), the temporary device goes.
            await sim.advance(29)
            #expect(!log.messages.contains { $0.isInterfacesRemoved(betaPath) })
            await sim.advance(1.5)
            try await log.wait { $0.isInterfacesRemoved(betaPath) }
            await alpha.close()
            await beta.close()
        }
    }

    /// A device that stops advertising while discovery goes on is removed 30 s after it was last
    /// heard.
    @Test func silentDeviceRemovedWhileDiscovering() async throws {
        try await withSimBoxes(twoBoxes(), time: .simulated) { sim in
            let beta = try await sim.client("beta")
            let ad = try await TestAdvertisement(on: beta, properties: peripheralAdvertisement(discoverable: true))
            try await ad.register(beta)
            let alpha = try await sim.client("alpha")
            let log = try await SignalLog.bluez(alpha)
            try await alpha.adapter("StartDiscovery")
            await sim.advance(1)
            try await log.wait { $0.isInterfacesAdded(betaPath) }
            _ = try await beta.bluez(adapterPath, BlueZ.advertisingManagerInterface, "UnregisterAdvertisement", [.objectPath(ad.path)])
            await sim.advance(29)
            #expect(!log.messages.contains { $0.isInterfacesRemoved(betaPath) })
            await sim.advance(1.5)
            try await log.wait { $0.isInterfacesRemoved(betaPath) }
            await alpha.close()
            await beta.close()
        }
    }

    /// Filters as BlueZ takes them: UUIDs narrow, RSSI thresholds, and bad dictionaries refused.
    @Test func discoveryFilters() async throws {
        let near = iBeacon("near", "C0:00:00:00:00:01", at: Position(x: 1, y: 0))
        let far = iBeacon("far", "C0:00:00:00:00:02", at: Position(x: 30, y: 0), minor: 2)
        try await withSimBoxes(twoBoxes(beacons: [near, far]), time: .simulated) { sim in
            let beta = try await sim.client("beta")
            let ad = try await TestAdvertisement(on: beta, properties: peripheralAdvertisement())
            try await ad.register(beta)
            let alpha = try await sim.client("alpha")
            for bad: [String: DBusValue] in [
                ["Colour": .string("blue")],
                ["RSSI": .int32(-70)],
                ["RSSI": .int16(-200)],
                ["Transport": .string("radio")],
                ["UUIDs": .strings(["not-a-uuid"])],
                ["RSSI": .int16(-70), "Pathloss": .uint16(20)],
                ["DuplicateData": .string("yes")],
            ] {
                await expectError("org.bluez.Error.InvalidArguments", "Invalid arguments in method call") {
                    try await alpha.adapter("SetDiscoveryFilter", [.vardict(bad)])
                }
            }
            await expectError("org.bluez.Error.Failed", "No discovery started") { try await alpha.adapter("StopDiscovery") }

            // UUIDs: only beta (it advertises the service UUID); the beacons do not.
            let log = try await SignalLog.bluez(alpha)
            try await alpha.adapter("SetDiscoveryFilter", [.vardict(["UUIDs": .strings([serviceUUID])])])
            try await alpha.adapter("StartDiscovery")
            await expectError("org.bluez.Error.InProgress", "Operation already in progress") { try await alpha.adapter("StartDiscovery") }
            await sim.advance(2)
            try await log.wait { $0.isInterfacesAdded(betaPath) }
            #expect(!log.messages.contains { $0.member == "InterfacesAdded" && $0.body.first?.objectPath?.rawValue.contains("C0_00") == true })
            try await alpha.adapter("StopDiscovery")

            // RSSI −70: the near beacon (−59) passes, the far one (−88) does not.
            try await alpha.adapter("SetDiscoveryFilter", [.vardict(["RSSI": .int16(-70)])])
            try await alpha.adapter("StartDiscovery")
            await sim.advance(2)
            try await log.wait { $0.isInterfacesAdded("/org/bluez/hci0/dev_C0_00_00_00_00_01") }
            #expect(!log.messages.contains { $0.isInterfacesAdded("/org/bluez/hci0/dev_C0_00_00_00_00_02") })
            await alpha.close()
            await beta.close()
        }
    }

    /// Without a filter, BlueZ shows only advertisers with discoverable flags: proximityd's
    /// peripheral advertisement on a non-discoverable adapter is not among them.
    @Test func unfilteredDiscoveryNeedsDiscoverableFlags() async throws {
        try await withSimBoxes(twoBoxes(), time: .simulated) { sim in
            let beta = try await sim.client("beta")
            let ad = try await TestAdvertisement(on: beta, properties: peripheralAdvertisement())
            try await ad.register(beta)
            let alpha = try await sim.client("alpha")
            let log = try await SignalLog.bluez(alpha)
            try await alpha.adapter("StartDiscovery")
            await sim.advance(2)
            try await beta.setProperty(destination: BlueZ.service, path: adapterPath, interface: BlueZ.adapterInterface,
                                       name: "Discoverable", value: .boolean(true))
            #expect(!log.messages.contains { $0.isInterfacesAdded(betaPath) })
            await sim.advance(1)
            try await log.wait { $0.isInterfacesAdded(betaPath) }
            await alpha.close()
            await beta.close()
        }
    }

    /// A client that leaves the bus ends its discovery.
    @Test func clientDisconnectEndsDiscovery() async throws {
        try await withSimBoxes(twoBoxes(), time: .simulated) { sim in
            let alpha = try await sim.client("alpha")
            let watcher = try await sim.client("alpha")
            let log = try await SignalLog.bluez(watcher)
            try await alpha.adapter("StartDiscovery")
            try await log.wait { $0.isChange(adapterPath, BlueZ.adapterInterface) && $0.changed["Discovering"] == .boolean(true) }
            await alpha.close()
            try await log.wait { $0.isChange(adapterPath, BlueZ.adapterInterface) && $0.changed["Discovering"] == .boolean(false) }
            await watcher.close()
        }
    }

    @Test func rssiRule() {
        var d = DeviceState(address: "AA:00:00:00:00:09", adapter: "hci0", now: 0)
        var announced: [Bool] = []
        for (value, delta) in [(-60, 8), (-66, 8), (-68, 8), (-68, 0), (0, 8), (0, 8)] as [(Int16, Int16)] {
            announced.append(d.setRSSI(value, delta: delta))
        }
        // From none; 6 dB; 8 dB; the same with a filter; cleared; cleared again.
        #expect(announced == [true, false, true, true, true, false])
    }
}

/// RSSI values announced for `path` (in `PropertiesChanged`), from message `from` on.
func rssiValues(_ log: SignalLog, _ path: ObjectPath, from: Int = 0) -> [Int16] {
    log.messages.dropFirst(from).compactMap { m in
        guard m.isChange(path), case .int16(let v)? = m.changed["RSSI"] else { return nil }
        return v
    }
}

/// Waits until at least `count` RSSI values were announced for `path`.
func waitForRSSI(_ log: SignalLog, _ path: ObjectPath, atLeast count: Int, from: Int = 0) async throws -> [Int16] {
    let deadline = ContinuousClock.now + .seconds(10)
    while rssiValues(log, path, from: from).count < count {
        let seen = log.count
        guard ContinuousClock.now < deadline else {
            throw TestKitError("only \(rssiValues(log, path, from: from).count) RSSI updates for \(path), expected \(count)")
        }
        _ = try? await log.wait(from: seen, timeout: .seconds(2)) { _ in true }
    }
    return rssiValues(log, path, from: from)
}
