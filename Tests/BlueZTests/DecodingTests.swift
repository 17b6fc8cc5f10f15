import BlueZ
import DBusKit
import Testing

/// Typed views decoded from property dictionaries that come from another process: never a trap,
/// wrong types read as absent, malformed entries skipped.
@Suite struct DecodingTests {
    @Test func deviceFromBlueZProperties() {
        let device = DeviceInfo(path: "/org/bluez/hci0/dev_AA_00_00_00_00_02", properties: [
            "Address": .string("AA:00:00:00:00:02"),
            "AddressType": .string("public"),
            "Name": .string("beta"),
            "Alias": .string("beta"),
            "RSSI": .int16(-65),
            "TxPower": .int16(0),
            "UUIDs": .strings(["B89491C9-43DD-4D75-BF16-DFF381AED967", "180f"]),
            "ManufacturerData": .dictionary(key: .uint16, value: .variant, [
                .init(.uint16(0x004c), .variant(.bytes([2, 21, 1]))),
            ]),
            "ServiceData": .dictionary(key: .string, value: .variant, [
                .init(.string("0000feaa-0000-1000-8000-00805f9b34fb"), .variant(.bytes([0x10, 0]))),
            ]),
            "Connected": .boolean(true),
            "ServicesResolved": .boolean(false),
            "Paired": .boolean(false),
            "Adapter": .objectPath("/org/bluez/hci0"),
        ])
        #expect(device.address == "AA:00:00:00:00:02")
        #expect(device.addressType == "public")
        #expect(device.name == "beta")
        #expect(device.rssi == -65)
        #expect(device.txPower == 0)
        #expect(device.uuids == [generalUUID, "0000180f-0000-1000-8000-00805f9b34fb"])
        #expect(device.advertises(generalUUID.uppercased()))
        #expect(device.advertises("180f"))
        #expect(device.advertises("feaa"))
        #expect(!device.advertises("1810"))
        #expect(device.manufacturerData == [0x004c: [2, 21, 1]])
        #expect(device.serviceData == ["0000feaa-0000-1000-8000-00805f9b34fb": [0x10, 0]])
        #expect(device.connected)
        #expect(!device.servicesResolved)
        #expect(device.adapter == "/org/bluez/hci0")
    }

    @Test func deviceWithWrongTypesAndNothing() {
        let device = DeviceInfo(path: "/org/bluez/hci1/dev_C0_00_00_00_00_1A", properties: [
            "Address": .int32(5),
            "RSSI": .int32(-300),
            "TxPower": .string("loud"),
            "UUIDs": .array(element: .int32, [.int32(1)]),
            "ManufacturerData": .dictionary(key: .string, value: .variant, [.init(.string("x"), .variant(.bytes([1])))]),
            "ServiceData": .dictionary(key: .string, value: .variant, [
                .init(.string("feaa"), .variant(.string("not bytes"))),
                .init(.string("fd00"), .variant(.bytes([9]))),
            ]),
            "Connected": .string("yes"),
            "Adapter": .string("/org/bluez/hci1"),
        ])
        #expect(device.address == "C0:00:00:00:00:1A")
        #expect(device.rssi == -300)
        #expect(device.txPower == nil)
        #expect(device.uuids.isEmpty)
        #expect(device.manufacturerData.isEmpty)
        #expect(device.serviceData == ["0000fd00-0000-1000-8000-00805f9b34fb": [9]])
        #expect(!device.connected)
        #expect(device.adapter == "/org/bluez/hci1")
        let empty = DeviceInfo(path: "/somewhere/else", properties: [:])
        #expect(empty.address == "")
        #expect(empty.rssi == nil)
        let huge = DeviceInfo(path: "/d", properties: ["RSSI": .int64(1 << 40), "ManufacturerData": .dictionary(
            key: .uint32, value: .variant, [.init(.uint32(70000), .variant(.bytes([1])))])])
        #expect(huge.rssi == nil)
        #expect(huge.manufacturerData.isEmpty)
    }

    @Test func adapterAndGattViews() {
        let adapter = AdapterInfo(path: "/org/bluez/hci0", properties: [
            "Address": .string("AA:00:00:00:00:01"), "Powered": .boolean(true), "Discovering": .int32(1),
            "UUIDs": .strings(["1800"]), "Roles": .strings(["central", "peripheral"]),
        ])
        #expect(adapter.address == "AA:00:00:00:00:01")
        #expect(adapter.powered)
        #expect(!adapter.discovering)
        #expect(adapter.uuids == ["00001800-0000-1000-8000-00805f9b34fb"])
        #expect(adapter.roles == ["central", "peripheral"])

        let chrc = GattCharacteristicInfo(path: "/org/bluez/hci0/dev_AA_00_00_00_00_02/service000e/char000f", properties: [
            "UUID": .string(ProximityUUIDs.identityCharacteristic.uppercased()),
            "Service": .objectPath("/org/bluez/hci0/dev_AA_00_00_00_00_02/service000e"),
            "Flags": .strings(["read"]), "MTU": .uint16(23), "Value": .bytes([1, 2]),
        ])
        #expect(chrc.uuid == ProximityUUIDs.identityCharacteristic)
        #expect(chrc.mtu == 23)
        #expect(chrc.value == [1, 2])
        #expect(chrc.flags == ["read"])
        let bad = GattCharacteristicInfo(path: "/c", properties: ["MTU": .int32(-1), "Value": .strings(["x"])])
        #expect(bad.mtu == nil)
        #expect(bad.value == nil)
        #expect(bad.uuid == "")
    }

    @Test func uuids() {
        #expect(BluetoothUUID("180F")?.full == "0000180f-0000-1000-8000-00805f9b34fb")
        #expect(BluetoothUUID("0x180f")?.wireSize == 2)
        #expect(BluetoothUUID("12345678")?.wireSize == 4)
        #expect(BluetoothUUID("0000180f-0000-1000-8000-00805f9b34fb")?.wireSize == 16)
        #expect(BluetoothUUID("0000180f-0000-1000-8000-00805f9b34f") == nil)
        #expect(BluetoothUUID("0000180f-0000-1000-8000x00805f9b34fb") == nil)
        #expect(BluetoothUUID("xyz1") == nil)
        #expect(BluetoothUUID("") == nil)
    }

    @Test(arguments: [
        ("org.bluez.Error.Failed", BlueZCallError.failed("m")),
        ("org.bluez.Error.InProgress", .inProgress("m")),
        ("org.bluez.Error.NotReady", .notReady("m")),
        ("org.bluez.Error.InvalidArguments", .invalidArguments("m")),
        ("org.bluez.Error.AlreadyExists", .alreadyExists("m")),
        ("org.bluez.Error.DoesNotExist", .doesNotExist("m")),
        ("org.bluez.Error.NotPermitted", .notPermitted("m")),
        ("org.bluez.Error.NotSupported", .notSupported("m")),
        ("org.bluez.Error.NotConnected", .other(name: "org.bluez.Error.NotConnected", message: "m")),
        ("org.freedesktop.DBus.Error.ServiceUnknown", .other(name: "org.freedesktop.DBus.Error.ServiceUnknown", message: "m")),
    ])
    func errorNames(_ name: String, _ expected: BlueZCallError) throws {
        let error = BlueZCallError(DBusError(try ErrorName(name), "m"))
        #expect(error == expected)
        #expect(error.name == name)
        #expect(error.message == "m")
    }

    @Test func discoveryFilter() {
        #expect(DiscoveryFilter.proximity(serviceUUID: generalUUID).dictionary == [
            "UUIDs": .strings([generalUUID]), "Transport": .string("le"), "DuplicateData": .boolean(true),
        ])
        #expect(DiscoveryFilter().dictionary.isEmpty)
        #expect(DiscoveryFilter(rssi: -80, pattern: "AA").dictionary == ["RSSI": .int16(-80), "Pattern": .string("AA")])
    }

    /// `ReadValue` of the identity characteristic honours `offset`.
    @Test func identityReadsByOffset() throws {
        let value = GattApplication.identityValue(AdvertisingPayloadTests.identity)
        #expect(value == Array("3f2504e0-4f89-41d3-9a0c-0305e82c3301".utf8))
        #expect(try GattApplication.read(value, options: [:]) == value)
        #expect(try GattApplication.read(value, options: ["offset": .uint16(22)]) == Array(value[22...]))
        #expect(try GattApplication.read(value, options: ["offset": .variant(.uint16(36))]) == [])
        #expect(throws: DBusError("org.bluez.Error.InvalidOffset", "Invalid offset")) {
            try GattApplication.read(value, options: ["offset": .uint16(37)])
        }
        #expect(throws: DBusError("org.bluez.Error.InvalidArguments", "offset must be an unsigned integer")) {
            try GattApplication.read(value, options: ["offset": .string("3")])
        }
    }
}

/// BlueZ's `BluetoothUUID`, named where BlueZSim's internal type of the same name is not visible
/// (files that `@testable import BlueZSim` see both).
typealias ClientUUID = BluetoothUUID
