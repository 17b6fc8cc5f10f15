import BlueZ
import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import Testing
import SimTesting

extension BlueZBusTests {
    /// The mirror against bluez-sim: the simulated air, RSSI, and a restarted bluetoothd.
    @Suite struct MirrorSimTests {
        /// Beta advertises; alpha's mirror sees its adapter, then beta with the general UUID once
        /// discovering with the node's filter, with RSSI samples that follow the distance.
        @Test func adapterDevicesAndRSSI() async throws {
            let scenario = twoBoxes(distance: 2, seed: 7)
            try await withSimBoxes(scenario) { rig in
                let beta = try await rig.client("beta")
                let ad = try await Advertisement.export(on: beta, content: .init(serviceUUID: generalUUID, localName: "beta-node"))
                try await ad.register(with: Adapter(connection: beta, path: adapterPath).advertisingManager)

                let running = RunningMirror.start(on: try await rig.client("alpha"))
                let adapterInfo = try #require(try await running.log.require("the adapter") { $0.addedAdapter != nil }.addedAdapter)
                #expect(adapterInfo.path == adapterPath)
                #expect(adapterInfo.address == "AA:00:00:00:00:01")
                #expect(adapterInfo.powered)
                #expect(!adapterInfo.discovering)

                let adapter = Adapter(connection: running.connection, path: adapterPath)
                try await adapter.setDiscoveryFilter(.proximity(serviceUUID: generalUUID))
                try await adapter.startDiscovery()
                try await running.log.require("Discovering") {
                    if case .adapterChanged(let a, let changed) = $0 { changed.contains("Discovering") && a.discovering } else { false }
                }
                let found = try #require(try await running.log.require("beta") { $0.addedDevice?.path == betaDevice }.addedDevice)
                #expect(found.address == "AA:00:00:00:00:02")
                #expect(found.advertises(generalUUID))
                #expect(found.name == "beta-node")
                #expect(found.rssi == expectedRSSI(scenario, distance: 2))
                #expect(found.serviceData.isEmpty)  // the identity does not fit beside a 128-bit UUID
                #expect(found.adapter == adapterPath)

                // Under the filter every report is a sample, even when the RSSI does not change.
                let mark = running.log.count
                try await running.log.require("an unchanged RSSI sample", from: mark) {
                    guard let (d, changed) = $0.changedDevice else { return false }
                    return d.path == betaDevice && changed.contains("RSSI") && d.rssi == expectedRSSI(scenario, distance: 2)
                }
                // Beta walks to 8 m: the samples follow.
                try await rig.control("MoveBox", [.string("beta"), .double(8), .double(0), .double(0)])
                try await running.log.require("the RSSI at 8 m") {
                    $0.changedDevice?.0.path == betaDevice && $0.changedDevice?.0.rssi == expectedRSSI(scenario, distance: 8)
                }
                #expect(await running.mirror.device(at: betaDevice)?.rssi == expectedRSSI(scenario, distance: 8))

                // Stopping discovery clears RSSI (invalidated); then the mirror is BlueZ's tree.
                try await adapter.stopDiscovery()
                try await running.log.require("RSSI cleared") {
                    guard let (d, changed) = $0.changedDevice else { return false }
                    return changed.contains("RSSI") && d.rssi == nil
                }
                try await running.log.require("Discovering false") {
                    if case .adapterChanged(let a, let changed) = $0 { changed.contains("Discovering") && !a.discovering } else { false }
                }
                #expect(await running.mirror.managedObjects == (try await running.connection.managedObjects()))
                #expect(await running.mirror.devices().map(\.path) == [betaDevice])
                await running.stop()
                await running.connection.close()
                await beta.close()
            }
        }

        /// `RestartBluetoothd` through the control service: the mirror empties (bluezGone), then
        /// rebuilds from the new bluetoothd (bluezRestarted, its adapter, no devices), and discovery
        /// started again finds beta again.
        @Test func resyncAfterRestart() async throws {
            try await withSimBoxes(twoBoxes(seed: 7)) { rig in
                let beta = try await rig.client("beta")
                let ad = try await Advertisement.export(on: beta, content: .init(serviceUUID: generalUUID))
                try await ad.register(with: Adapter(connection: beta, path: adapterPath).advertisingManager)

                let running = RunningMirror.start(on: try await rig.client("alpha"))
                try await running.log.require("the adapter") { $0.addedAdapter != nil }
                let adapter = Adapter(connection: running.connection, path: adapterPath)
                try await adapter.setDiscoveryFilter(.proximity(serviceUUID: generalUUID))
                try await adapter.startDiscovery()
                try await running.log.require("beta") { $0.addedDevice?.path == betaDevice }
                let before = try #require(await running.mirror.owner)

                let mark = running.log.count
                try await rig.control("RestartBluetoothd", [.string("alpha")])
                let gone = try await running.log.require("bluezGone", from: mark) { $0 == .bluezGone }
                _ = gone
                try await running.log.require("bluezRestarted", from: mark) { $0 == .bluezRestarted }
                let added = try await running.log.require("the new adapter", from: mark) { $0.addedAdapter != nil }
                let sequence = running.log.events.dropFirst(mark).filter {
                    if case .deviceChanged = $0 { false } else { true }  // samples still in flight before the restart
                }.map(\.summary)
                #expect(Array(sequence.prefix(3)) == ["bluezGone", "bluezRestarted", "adapterAdded(/org/bluez/hci0)"])

                let after = try #require(await running.mirror.owner)
                #expect(after != before)
                #expect(after == rig.simulator.bluetoothdConnection("alpha")?.uniqueName)
                #expect(await running.mirror.devices().isEmpty)
                #expect(await running.mirror.adapters().map(\.discovering) == [false])

                // The new bluetoothd shows its adapter off, then powers it itself 0.1 s later (as 5.66
                // does): the mirror sees the change, unless (a loaded machine) it read the objects
                // after it, and then shows the adapter powered at once. Either way, powered.
                if added.addedAdapter?.powered == false {
                    try await running.log.require("the adapter powered", from: mark) {
                        if case .adapterChanged(let a, let changed) = $0 { changed.contains("Powered") && a.powered } else { false }
                    }
                }
                #expect(await running.mirror.adapters().map(\.powered) == [true])
                // Only now, with nothing left to change on the bus, may the mirror and the bus be
                // compared: before the power-on, the bus may already show it while the mirror's
                // PropertiesChanged is still on its way (the race this test lost three times).
                #expect(await running.mirror.managedObjects == (try await running.connection.managedObjects()))
                // It knows nothing of the old filter and discovery: start again.
                try await adapter.setDiscoveryFilter(.proximity(serviceUUID: generalUUID))
                try await adapter.startDiscovery()
                try await running.log.require("beta again", from: mark) { $0.addedDevice?.path == betaDevice }
                await running.stop()
                await running.connection.close()
                await beta.close()
            }
        }
    }
}
