import BlueZ
import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import Testing
import SimTesting

extension BlueZBusTests {
    /// `waitForDevice`: woken by the mirror's own changes, false at the timeout.
    @Suite struct MirrorWaitTests {
        @Test func wokenByChangesAndBoundedByTimeout() async throws {
            try await withSimBoxes(twoBoxes(distance: 2, seed: 7)) { rig in
                let beta = try await rig.client("beta")
                let ad = try await Advertisement.export(on: beta, content: .init(serviceUUID: generalUUID, localName: "beta-node"))
                try await ad.register(with: Adapter(connection: beta, path: adapterPath).advertisingManager)
                let running = RunningMirror.start(on: try await rig.client("alpha"))
                try await running.log.require("the adapter") { $0.addedAdapter != nil }

                // A device that never appears: false, after the timeout and not before.
                let clock = ContinuousClock()
                let started = clock.now
                #expect(await running.mirror.waitForDevice(at: betaDevice, timeout: .milliseconds(300)) { $0 != nil } == false)
                #expect(clock.now - started >= .milliseconds(300))

                // Discovery brings beta in: the waiter started before is woken by that change.
                async let seen = running.mirror.waitForDevice(at: betaDevice, timeout: .seconds(20)) { $0?.advertises(generalUUID) == true }
                let adapter = Adapter(connection: running.connection, path: adapterPath)
                try await adapter.setDiscoveryFilter(.proximity(serviceUUID: generalUUID))
                try await adapter.startDiscovery()
                #expect(await seen)
                // Already true: returns at once.
                #expect(await running.mirror.waitForDevice(at: betaDevice, timeout: .zero) { $0 != nil })
            }
        }
    }
}
