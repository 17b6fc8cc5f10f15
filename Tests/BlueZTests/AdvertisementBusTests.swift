import BlueZ
import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import Testing
import SimTesting

extension BlueZBusTests {
    /// The exported advertisement against bluez-sim: registration, the errors, and `Release`.
    @Suite struct AdvertisementBusTests {
        @Test func registerUnregisterAndErrors() async throws {
            try await withSimBoxes(twoBoxes(seed: 7)) { rig in
                let alpha = try await rig.client("alpha")
                let manager = Adapter(connection: alpha, path: adapterPath).advertisingManager
                let identity = UUID()
                let ad = try await Advertisement.export(on: alpha, content: .init(serviceUUID: generalUUID,
                                                                                  localName: String(repeating: "x", count: 40),
                                                                                  identity: identity))
                #expect(ad.path == Advertisement.defaultPath)
                #expect(ad.plan.localName == String(repeating: "x", count: 29))
                #expect(!ad.plan.carriesIdentity)
                // What BlueZ reads back is the plan.
                let exported = try await alpha.getAllProperties(destination: alpha.uniqueName, path: ad.path,
                                                                interface: BlueZService.advertisementInterface)
                #expect(exported == ad.plan.properties)

                try await ad.register(with: manager)
                let instances = try await alpha.getProperty(destination: BlueZService.name, path: adapterPath,
                                                            interface: BlueZService.advertisingManagerInterface, name: "ActiveInstances")
                #expect(instances == .byte(1))
                await expectThrows(BlueZCallError.alreadyExists("Already Exists")) { try await ad.register(with: manager) }
                try await ad.unregister(from: manager)
                await expectThrows(BlueZCallError.doesNotExist("Does Not Exist")) { try await ad.unregister(from: manager) }
                await ad.unexport()
                await alpha.close()
            }
        }

        /// bluetoothd stopping calls `Release`; the owner hears it on `releases` and registers again
        /// once the new bluetoothd is there.
        @Test func releaseWhenBluetoothdRestarts() async throws {
            try await withSimBoxes(twoBoxes(seed: 7)) { rig in
                let alpha = try await rig.client("alpha")
                let manager = Adapter(connection: alpha, path: adapterPath).advertisingManager
                let ad = try await Advertisement.export(on: alpha, content: .init(serviceUUID: generalUUID, localName: "alpha"))
                try await ad.register(with: manager)

                try await rig.control("RestartBluetoothd", [.string("alpha")])
                let released: Void? = await nextElement(of: ad.releases)
                #expect(released != nil, "no Release within 10 s")

                // The new bluetoothd has forgotten it; registering again works.
                try await ad.register(with: manager)
                let instances = try await alpha.getProperty(destination: BlueZService.name, path: adapterPath,
                                                            interface: BlueZService.advertisingManagerInterface, name: "ActiveInstances")
                #expect(instances == .byte(1))
                await alpha.close()
            }
        }
    }
}
