import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import Testing
import SimTesting

/// `LEAdvertisingManager1` with BlueZ 5.66's rules: the advertisement is read from the client over
/// D-Bus, checked, limited to 31 bytes and 5 instances.
@Suite(.serialized) struct BusAdvertisingTests {
    static let parseFailure = "Failed to parse advertisement."

    /// Registers `properties` at a fresh path and returns the error it gets, if any.
    func register(_ connection: DBusConnection, _ properties: [String: DBusValue], path: ObjectPath) async throws -> DBusError? {
        let ad = try await TestAdvertisement(on: connection, path: path, properties: properties)
        do {
            try await ad.register(connection)
            return nil
        } catch let error as DBusError {
            return error
        }
    }

    @Test func malformedAdvertisementsAreRefused() async throws {
        try await withSimBoxes(twoBoxes(), time: .simulated) { sim in
            let beta = try await sim.client("beta")
            let bad: [(String, [String: DBusValue])] = [
                ("oversized manufacturer data", ["Type": .string("peripheral"),
                                                 "ManufacturerData": .dictionary(key: .uint16, value: .variant,
                                                                                 [.init(.uint16(0xffff), .variant(.bytes([UInt8](repeating: 1, count: 28))))])]),
                ("oversized payload", ["Type": .string("peripheral"),
                                       "ServiceUUIDs": .strings([serviceUUID, "8e0d1bd0-4a4b-4c4c-9d9d-1f1f1f1f1f1f"])]),
                ("unknown Type", ["Type": .string("beacon")]),
                ("Type of the wrong type", ["Type": .uint32(1)]),
                ("Includes of the wrong type", ["Type": .string("peripheral"), "Includes": .string("tx-power")]),
                ("LocalName with Includes local-name", ["Type": .string("peripheral"), "LocalName": .string("x"),
                                                        "Includes": .strings(["local-name"])]),
                ("bad UUID", ["Type": .string("peripheral"), "ServiceUUIDs": .strings(["zz"])]),
                ("broadcast with flags", ["Type": .string("broadcast"), "Discoverable": .boolean(true)]),
                ("secondary channel", ["Type": .string("peripheral"), "SecondaryChannel": .string("2M")]),
                ("MinInterval without MaxInterval", ["Type": .string("peripheral"), "MinInterval": .uint32(100)]),
            ]
            for (i, (what, properties)) in bad.enumerated() {
                let error = try await register(beta, properties, path: try ObjectPath("/org/test/bad\(i)"))
                #expect(error?.name.rawValue == "org.bluez.Error.Failed", "\(what)")
                #expect(error?.message == Self.parseFailure, "\(what)")
            }
            // The simulator keeps going, and every instance is still free.
            let instances = try await beta.getProperty(destination: BlueZ.service, path: adapterPath,
                                                       interface: BlueZ.advertisingManagerInterface, name: "SupportedInstances")
            #expect(instances == .byte(5))
            // BlueZ 5.66 takes a missing Type as broadcast and ignores Includes it does not know.
            #expect(try await register(beta, ["ServiceUUIDs": .strings(["180d"])], path: "/org/test/ok0") == nil)
            #expect(try await register(beta, ["Type": .string("peripheral"), "Includes": .strings(["tx-power", "sparkles"])],
                                       path: "/org/test/ok1") == nil)
            // Exactly 31 bytes fit: one 128-bit UUID list (18) and 9 bytes of manufacturer data (13).
            #expect(try await register(beta, ["Type": .string("peripheral"), "ServiceUUIDs": .strings([serviceUUID]),
                                              "ManufacturerData": .dictionary(key: .uint16, value: .variant,
                                                                              [.init(.uint16(0xffff), .variant(.bytes([UInt8](repeating: 1, count: 9))))])],
                                       path: "/org/test/ok2") == nil)
            // A missing object: the simulator answers at once (bluetoothd would leave the call hanging).
            await expectError("org.bluez.Error.Failed") {
                _ = try await beta.bluez(adapterPath, BlueZ.advertisingManagerInterface, "RegisterAdvertisement",
                                         [.objectPath("/org/test/none"), .vardict([:])])
            }
            await beta.close()
        }
    }

    @Test func instancesAndNames() async throws {
        try await withSimBoxes(twoBoxes(), time: .simulated) { sim in
            let beta = try await sim.client("beta")
            for i in 0..<5 {
                #expect(try await register(beta, peripheralAdvertisement(), path: try ObjectPath("/org/test/ad\(i)")) == nil)
            }
            let manager = try await beta.getAllProperties(destination: BlueZ.service, path: adapterPath,
                                                          interface: BlueZ.advertisingManagerInterface)
            #expect(manager["ActiveInstances"] == .byte(5))
            #expect(manager["SupportedInstances"] == .byte(0))
            let full = try await register(beta, peripheralAdvertisement(), path: "/org/test/ad5")
            #expect(full?.name.rawValue == "org.bluez.Error.NotPermitted")
            #expect(full?.message == "Maximum advertisements reached")
            await expectError("org.bluez.Error.AlreadyExists", "Already Exists") {
                _ = try await beta.bluez(adapterPath, BlueZ.advertisingManagerInterface, "RegisterAdvertisement",
                                         [.objectPath("/org/test/ad0"), .vardict([:])])
            }
            _ = try await beta.bluez(adapterPath, BlueZ.advertisingManagerInterface, "UnregisterAdvertisement", [.objectPath("/org/test/ad0")])
            await expectError("org.bluez.Error.DoesNotExist", "Does Not Exist") {
                _ = try await beta.bluez(adapterPath, BlueZ.advertisingManagerInterface, "UnregisterAdvertisement",
                                         [.objectPath("/org/test/ad0")])
            }
            let active = try await beta.getProperty(destination: BlueZ.service, path: adapterPath,
                                                    interface: BlueZ.advertisingManagerInterface, name: "ActiveInstances")
            #expect(active == .byte(4))
            await beta.close()
        }
    }

    /// bluetoothd calls Release when it drops an advertisement itself (it shuts down, or the
    /// advertisement's Timeout ends), not on UnregisterAdvertisement.
    @Test func release() async throws {
        try await withSimBoxes(twoBoxes(), time: .simulated) { sim in
            let beta = try await sim.client("beta")
            let unregistered = try await TestAdvertisement(on: beta, path: "/org/test/a", properties: peripheralAdvertisement())
            try await unregistered.register(beta)
            _ = try await beta.bluez(adapterPath, BlueZ.advertisingManagerInterface, "UnregisterAdvertisement", [.objectPath("/org/test/a")])

            var timed = peripheralAdvertisement()
            timed["Timeout"] = .uint16(2)
            let timedOut = try await TestAdvertisement(on: beta, path: "/org/test/b", properties: timed)
            try await timedOut.register(beta)
            let kept = try await TestAdvertisement(on: beta, path: "/org/test/c", properties: peripheralAdvertisement())
            try await kept.register(beta)

            await sim.advance(2.5)
            try await timedOut.waitForReleases(1)
            #expect(kept.releases == 0)
            try await sim.simulator.restartBluetoothd(box: "beta")
            try await kept.waitForReleases(1)
            #expect(unregistered.releases == 0)
            #expect(timedOut.releases == 1)
            await beta.close()
        }
    }
}

