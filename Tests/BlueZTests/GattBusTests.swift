import BlueZ
import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import Testing
import SimTesting

extension BlueZBusTests {
    /// The GATT application on one box, read from the other through BlueZ's GATT client.
    @Suite struct GattBusTests {
        static let identity = UUID(uuidString: "3F2504E0-4F89-41D3-9A0C-0305E82C3301")!

        /// Alpha discovers beta, connects and waits for its services; returns alpha's mirror.
        func connectToBeta(_ rig: SimBoxes) async throws -> RunningMirror {
            let running = RunningMirror.start(on: try await rig.client("alpha"))
            try await running.log.require("the adapter") { $0.addedAdapter != nil }
            let adapter = Adapter(connection: running.connection, path: adapterPath)
            try await adapter.setDiscoveryFilter(.proximity(serviceUUID: generalUUID))
            try await adapter.startDiscovery()
            try await running.log.require("beta") { $0.addedDevice?.path == betaDevice }
            try await Device(connection: running.connection, path: betaDevice).connect()
            try await running.log.require("ServicesResolved") {
                $0.changedDevice?.0.path == betaDevice && $0.changedDevice?.0.servicesResolved == true
            }
            return running
        }

        /// Beta's advertisement, so alpha can find and connect to it.
        func advertise(_ beta: DBusConnection) async throws {
            let ad = try await Advertisement.export(on: beta, content: .init(serviceUUID: generalUUID))
            try await ad.register(with: Adapter(connection: beta, path: adapterPath).advertisingManager)
        }

        /// On a 23-byte MTU the 36-byte identity needs a long read; `readAll` returns exactly it.
        /// An offset past the end is refused, by the application (`InvalidOffset`) and, through
        /// BlueZ's ATT error mapping, on the central (`InvalidArguments` "Invalid offset").
        @Test func readIdentityOnSmallMTU() async throws {
            try await withSimBoxes(twoBoxes(seed: 7)) { rig in
                try await rig.control("Configure", [.vardict(["MTU": .double(23)])])
                let beta = try await rig.client("beta")
                let app = try await GattApplication.export(on: beta, serviceUUID: generalUUID, service: OpenIdentityService(identity: Self.identity))
                try await app.register(with: Adapter(connection: beta, path: adapterPath).gattManager)
                try await advertise(beta)
                let betaAdapter = try await beta.getProperty(destination: BlueZService.name, path: adapterPath,
                                                             interface: BlueZService.adapterInterface, name: "UUIDs")
                #expect(betaAdapter.arrayElements?.contains(.string(generalUUID)) == true)

                let running = try await connectToBeta(rig)
                let service = try #require(await running.mirror.services(under: betaDevice).first)
                #expect(service.uuid == generalUUID)
                #expect(service.primary)
                let info = try #require(await running.mirror.characteristic(ProximityUUIDs.identityCharacteristic,
                                                                             inService: generalUUID, of: betaDevice))
                #expect(info.flags == ["read"])
                #expect(info.mtu == 23)
                let characteristic = GattCharacteristic(connection: running.connection, info)
                let value = try await characteristic.readAll(maxLength: 64)
                #expect(value.count == 36)
                #expect(String(decoding: value, as: UTF8.self) == "3f2504e0-4f89-41d3-9a0c-0305e82c3301")
                #expect(try await characteristic.readValue(offset: 30) == Array(value[30...]))

                await expectThrows(BlueZCallError.invalidArguments("Invalid offset")) {
                    _ = try await characteristic.readValue(offset: 99)
                }
                // One past the end, through BlueZ: the application refuses the offset.
                await expectThrows(BlueZCallError.invalidArguments("Invalid offset")) {
                    _ = try await characteristic.readValue(offset: 37)
                }
                // Anyone but bluetoothd calling the application directly is refused, whatever it asks.
                let probe = try await rig.client("beta")
                for options in [DBusValue.vardict([:]), .vardict(["offset": .uint16(37)])] {
                    do {
                        _ = try await probe.call(destination: beta.uniqueName, path: app.characteristicPath,
                                                 interface: BlueZService.gattCharacteristicInterface, member: "ReadValue", [options])
                        Issue.record("ReadValue from a client that is not bluetoothd succeeded")
                    } catch let error as DBusError {
                        #expect(error.name == BlueZCallers.notPermitted)
                    }
                }
                do {
                    _ = try await probe.call(destination: beta.uniqueName, path: app.helloPath,
                                             interface: BlueZService.gattCharacteristicInterface, member: "WriteValue",
                                             [.bytes(Array(repeating: 1, count: 16)),
                                              .vardict(["device": .objectPath("/org/bluez/hci0/dev_AA_00_00_00_00_01")])])
                    Issue.record("WriteValue from a client that is not bluetoothd succeeded")
                } catch let error as DBusError {
                    #expect(error.name == BlueZCallers.notPermitted)
                }

                try await Device(connection: running.connection, path: betaDevice).disconnect()
                try await running.log.require("disconnected") {
                    $0.changedDevice?.0.path == betaDevice && $0.changedDevice?.0.connected == false
                }
                #expect(await running.mirror.characteristics(under: betaDevice).isEmpty)
                await running.stop()
                await running.connection.close()
                await probe.close()
                await beta.close()
            }
        }

        /// A peer serving a 300-byte "identity": `readAll` stops at its bound instead of reading
        /// whatever a hostile peer offers.
        @Test func readAllRejectsAnOversizedValue() async throws {
            try await withSimBoxes(twoBoxes(seed: 7)) { rig in
                let beta = try await rig.client("beta")
                let root: ObjectPath = "/org/test/hostile"
                let value = [UInt8](repeating: 0x41, count: 300)
                try await beta.addObjectManager(at: root)
                _ = try await beta.export([DBusInterface(BlueZService.gattServiceInterface, properties: [
                    DBusProperty("UUID", .string, .string(generalUUID)),
                    DBusProperty("Primary", .boolean, .boolean(true)),
                ])], at: "/org/test/hostile/service0")
                _ = try await beta.export([DBusInterface(BlueZService.gattCharacteristicInterface, methods: [
                    DBusMethod("ReadValue", inputs: [DBusArgument("options", .dictionary(key: .string, value: .variant))],
                               outputs: [DBusArgument("value", .array(.byte))]) { call in
                        [.bytes(try GattApplication.read(value, options: call.arguments[0].stringKeyedDictionary ?? [:]))]
                    },
                ], properties: [
                    DBusProperty("UUID", .string, .string(ProximityUUIDs.identityCharacteristic)),
                    DBusProperty("Service", .objectPath, .objectPath("/org/test/hostile/service0")),
                    DBusProperty("Flags", .array(.string), .strings(["read"])),
                ])], at: "/org/test/hostile/service0/char0")
                try await Adapter(connection: beta, path: adapterPath).gattManager.registerApplication(root)
                try await advertise(beta)

                let running = try await connectToBeta(rig)
                let info = try #require(await running.mirror.characteristic(ProximityUUIDs.identityCharacteristic,
                                                                             inService: generalUUID, of: betaDevice))
                let characteristic = GattCharacteristic(connection: running.connection, info)
                await expectThrows(GattReadError.valueTooLong(limit: 64)) {
                    _ = try await characteristic.readAll(maxLength: 64)
                }
                #expect(try await characteristic.readAll(maxLength: 512) == value)
                await running.stop()
                await running.connection.close()
                await beta.close()
            }
        }
    }
}
