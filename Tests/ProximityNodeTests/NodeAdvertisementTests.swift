import BlueZ
@testable import BlueZSim
import DBusKit
import Foundation
import ProximityCore
@testable import ProximityNode
import ProximityTrust
import Testing

/// What a node advertises: its measured power in manufacturer data (`NodePowerFrame`), within the
/// 31-byte legacy payload, as BlueZ 5.66 (and bluez-sim, which sizes it the same way) takes it.
@Suite struct NodeAdvertisementTests {
    static let identity = UUID(uuidString: "3f2504e0-4f89-41d3-9a0c-0305e82c3301")!

    @Test("every measured power round-trips through the frame, whose bytes are 50 58 01 and the power")
    func roundTrip() {
        for power in NodePowerFrame.powerRange {
            let bytes = NodePowerFrame.encode(measuredPower: power)
            #expect(bytes == [0x50, 0x58, 0x01, UInt8(bitPattern: Int8(power))])
            #expect(NodePowerFrame.measuredPower(in: bytes) == power)
            #expect(NodePowerFrame.measuredPower(in: NodePowerFrame.manufacturerData(measuredPower: power)) == power)
        }
        #expect(NodePowerFrame.encode(measuredPower: -70) == [0x50, 0x58, 0x01, 0xBA])
        #expect(NodePowerFrame.manufacturerData(measuredPower: -59) == [0xFFFF: [0x50, 0x58, 0x01, 0xC5]])
        // Trailing bytes are for later additions to version 1: ignored.
        #expect(NodePowerFrame.measuredPower(in: [0x50, 0x58, 0x01, 0xBA, 0x00, 0x07]) == -70)
    }

    @Test("anything else under 0xFFFF, or the frame under another company, is not read as a power")
    func refused() {
        let refused: [[UInt8]] = [
            [], [0x50, 0x58, 0x01],                 // too short
            [0x58, 0x50, 0x01, 0xBA],               // another marker
            [0x50, 0x58, 0x02, 0xBA],               // another version
            [0x50, 0x58, 0x00, 0xBA],
            [0x50, 0x58, 0x01, 0x15],               // +21 dBm: above the range
            [0x50, 0x58, 0x01, 0x80],               // -128 dBm: below it
            [0x50, 0x58, 0x01, 0x7F],               // 127: HCI's "not available"
            [0xBE, 0xAC, 0x01, 0xBA],               // the start of an AltBeacon frame
        ]
        for bytes in refused {
            #expect(NodePowerFrame.measuredPower(in: bytes) == nil, "\(bytes)")
            #expect(NodePowerFrame.measuredPower(in: [0xFFFF: bytes]) == nil, "\(bytes)")
        }
        #expect(NodePowerFrame.measuredPower(in: [0x004C: [0x50, 0x58, 0x01, 0xBA]]) == nil)
        #expect(NodePowerFrame.measuredPower(in: [:]) == nil)
        // Encoding clamps to the range (the node's --measured-power is checked before).
        #expect(NodePowerFrame.encode(measuredPower: 100) == [0x50, 0x58, 0x01, 0x14])
        // The frame is no beacon: a node that sends it is still classified by its service UUID.
        #expect(BeaconParser.parse(manufacturerData: NodePowerFrame.manufacturerData(measuredPower: -59), serviceData: [:]) == nil)
    }

    @Test("a peer's advertised power is read only from a node that advertises the general service, and only a valid frame")
    func readFromPeerNodes() throws {
        let general = NodeConfiguration.defaultServiceUUID.lowercased
        func device(uuids: [String], _ data: [UInt16: [UInt8]]) -> DeviceInfo {
            var properties: [String: DBusValue] = ["Address": .string("AA:00:00:00:00:02"), "UUIDs": .strings(uuids), "RSSI": .int16(-60)]
            if !data.isEmpty {
                properties["ManufacturerData"] = .dictionary(key: .uint16, value: .variant, data.keys.sorted().map {
                    .init(.uint16($0), .variant(.bytes(data[$0]!)))
                })
            }
            return DeviceInfo(path: "/org/bluez/hci0/dev_AA_00_00_00_00_02", properties: properties)
        }
        func power(_ info: DeviceInfo, _ kind: PeerKind, serviceUUID: String) -> Double? {
            NodeStep.advertisedPower(AdvertisedFrame(serviceUUIDs: info.uuids, manufacturerData: info.manufacturerData, serviceData: info.serviceData),
                                     kind, serviceUUID: serviceUUID)
        }
        let frame = NodePowerFrame.manufacturerData(measuredPower: -70)
        #expect(power(device(uuids: [general], frame), .node, serviceUUID: general) == -70)
        // With other manufacturer data beside it.
        #expect(power(device(uuids: [general], frame.merging([0x004C: [1, 2]]) { a, _ in a }), .node,
                                           serviceUUID: general) == -70)
        // A node that advertises none: the node's own default applies (nil here).
        #expect(power(device(uuids: [general], [:]), .node, serviceUUID: general) == nil)
        #expect(power(device(uuids: [general], [0xFFFF: [1, 2, 3, 4]]), .node, serviceUUID: general) == nil)
        // Not from a device without the general service, nor from a beacon.
        #expect(power(device(uuids: [], frame), .node, serviceUUID: general) == nil)
        #expect(power(device(uuids: [general], frame), .node, serviceUUID: "b89491c9-43dd-4d75-bf16-dff381aed968") == nil)
        #expect(power(device(uuids: [general], frame), .ibeacon, serviceUUID: general) == nil)
    }

    @Test("the node's advertisement carries its power and fits 31 bytes with the flags; bluez-sim parses it and reports the power")
    func nodeAdvertisementFits() throws {
        for power: Int16 in [-127, -70, -59, 20] {
            var configuration = NodeConfiguration(stateDirectory: URL(fileURLWithPath: "/nonexistent"))
            configuration.name = "a-rather-long-node-name-that-goes-to-the-scan-response"
            configuration.measuredPower = power
            let content = BlueZSide.advertisementContent(configuration, identity: Self.identity)
            let plan = try Advertisement.plan(content, adapterDiscoverable: true)
            #expect(plan.carriesManufacturerData)
            #expect(!plan.carriesIdentity, "a 128-bit service UUID leaves no room for the identity")
            // 18 (the 128-bit service UUID) + 8 (2 + company 2 + 4) = 26; + 3 bytes of flags the
            // kernel adds on a discoverable adapter = 29 ≤ 31.
            #expect(plan.payload.length == 26)
            #expect(plan.payload.length + 3 <= LegacyAdvertisingPayload.maxLength)
            #expect(plan.payload.fits(adapterDiscoverable: true))
            let expected = DBusValue.dictionary(key: .uint16, value: .variant, [
                .init(.uint16(0xFFFF), .variant(.bytes(NodePowerFrame.encode(measuredPower: power)))),
            ])
            #expect(plan.properties["ManufacturerData"] == expected)

            // BlueZ's rules, as bluez-sim applies them: accepted, the same size, and what a
            // scanner receives reads back as the power.
            let spec = try AdvertisementSpec.parse(plan.properties, adapterDiscoverable: true)
            #expect(spec.payload.length == plan.payload.length)
            #expect(spec.payload.length + 3 <= AdvertisementSpec.maxLength)
            let report = spec.report(adapterAlias: "alpha", adapterDiscoverable: true)
            #expect(NodePowerFrame.measuredPower(in: report.manufacturerData) == power)
            #expect(report.serviceUUIDs == [NodeConfiguration.defaultServiceUUID.lowercased])
        }
    }

    @Test("a keyed node's power frame carries its member tag for its address: 31 bytes with the flags, all of the budget; bluez-sim parses it; an older reader still reads the power; no tag before the address is known, nor under LE privacy (bluetoothd's main.conf)")
    func memberTagFits() throws {
        let key = FleetKey.generate()
        var configuration = NodeConfiguration(stateDirectory: URL(fileURLWithPath: "/nonexistent"))
        configuration.trust = TrustSettings(key: key)
        let address = "AA:00:00:00:00:01"
        let plan = try Advertisement.plan(BlueZSide.advertisementContent(configuration, identity: Self.identity, address: address),
                                          adapterDiscoverable: true)
        #expect(plan.carriesManufacturerData && plan.localName == nil && !plan.carriesIdentity)
        #expect(plan.payload.length + 3 == LegacyAdvertisingPayload.maxLength)
        let spec = try AdvertisementSpec.parse(plan.properties, adapterDiscoverable: true)
        let report = spec.report(adapterAlias: "alpha", adapterDiscoverable: true)
        #expect(NodePowerFrame.measuredPower(in: report.manufacturerData) == configuration.measuredPower)
        let tag = NodePowerFrame.memberTag(in: report.manufacturerData)
        #expect(tag == KeyedMemberTag(key).tag(for: address))
        #expect(KeyedMemberTag(key).isMember(address.lowercased(), tag: tag))
        #expect(!KeyedMemberTag(key).isMember("AA:00:00:00:00:02", tag: tag), "bound to the address")
        #expect(!KeyedMemberTag(FleetKey.generate()).isMember(address, tag: tag), "bound to the key")
        // Under LE privacy no tag: made for the identity address, it would match nothing and link
        // the private addresses.
        let underPrivacy = try Advertisement.plan(BlueZSide.advertisementContent(configuration, identity: Self.identity, address: address,
                                                                                 privacy: true), adapterDiscoverable: true)
        #expect(NodePowerFrame.memberTag(in: try AdvertisementSpec.parse(underPrivacy.properties, adapterDiscoverable: true)
            .report(adapterAlias: "alpha", adapterDiscoverable: true).manufacturerData) == nil)
        #expect(BluetoothdPrivacy.isOn(mainConf: "[General]\n#Privacy = device\n") == false)
        #expect(BluetoothdPrivacy.isOn(mainConf: "[General]\nName = box\nPrivacy = device\n"))
        #expect(BluetoothdPrivacy.isOn(mainConf: "[General]\nPrivacy=network\n[Policy]\n"))
        #expect(!BluetoothdPrivacy.isOn(mainConf: "[General]\nPrivacy = off\n"))
        #expect(!BluetoothdPrivacy.isOn(mainConf: "[Policy]\nPrivacy = device\n"), "only [General]'s")
        let before = try Advertisement.plan(BlueZSide.advertisementContent(configuration, identity: Self.identity), adapterDiscoverable: true)
        #expect(NodePowerFrame.memberTag(in: try AdvertisementSpec.parse(before.properties, adapterDiscoverable: true)
            .report(adapterAlias: "alpha", adapterDiscoverable: true).manufacturerData) == nil)
    }
}
