import BlueZ
@testable import BlueZSim
import DBusKit
import Foundation
import Testing

/// The 31-byte budget: the advertisement plan (what is dropped, what is shortened), and the size
/// rules checked against bluez-sim's parser, which follows BlueZ 5.66's.
@Suite struct AdvertisingPayloadTests {
    static let identity = UUID(uuidString: "3f2504e0-4f89-41d3-9a0c-0305e82c3301")!

    struct PlanCase: Sendable, CustomTestStringConvertible {
        var label: String
        var content: AdvertisementContent
        var adapterDiscoverable = true
        var name: String?
        var identity: Bool
        var length: Int
        var testDescription: String { label }
    }

    static let planCases: [PlanCase] = [
        PlanCase(label: "short name kept", content: .init(serviceUUID: generalUUID, localName: "alpha"),
                 name: "alpha", identity: false, length: 18),
        PlanCase(label: "no name", content: .init(serviceUUID: generalUUID), name: nil, identity: false, length: 18),
        PlanCase(label: "empty name dropped", content: .init(serviceUUID: generalUUID, localName: ""),
                 name: nil, identity: false, length: 18),
        PlanCase(label: "29 bytes kept whole", content: .init(serviceUUID: generalUUID, localName: String(repeating: "n", count: 29)),
                 name: String(repeating: "n", count: 29), identity: false, length: 18),
        PlanCase(label: "long ASCII name cut to 29 bytes",
                 content: .init(serviceUUID: generalUUID, localName: "proximityd-node-in-the-meeting-room-3"),
                 name: "proximityd-node-in-the-meetin", identity: false, length: 18),
        PlanCase(label: "two-byte characters cut between characters",
                 content: .init(serviceUUID: generalUUID, localName: String(repeating: "é", count: 20)),
                 name: String(repeating: "é", count: 14), identity: false, length: 18),
        PlanCase(label: "a grapheme that does not fit is left out whole",
                 content: .init(serviceUUID: generalUUID, localName: "abcdef" + "👩‍👩‍👧‍👦"),
                 name: "abcdef", identity: false, length: 18),
        PlanCase(label: "identity dropped: 128-bit service and key need 52",
                 content: .init(serviceUUID: generalUUID, localName: "alpha", identity: identity),
                 name: "alpha", identity: false, length: 18),
        PlanCase(label: "identity dropped: 128-bit service and a 16-bit key need 38",
                 content: .init(serviceUUID: generalUUID, identity: identity, identityServiceDataUUID: "fd00"),
                 name: nil, identity: false, length: 18),
        PlanCase(label: "identity dropped even on a non-discoverable adapter (budget 31)",
                 content: .init(serviceUUID: generalUUID, identity: identity, identityServiceDataUUID: "fd00"),
                 adapterDiscoverable: false, name: nil, identity: false, length: 18),
        PlanCase(label: "identity kept: 16-bit service and key need 24",
                 content: .init(serviceUUID: "fd00", localName: "alpha", identity: identity),
                 name: "alpha", identity: true, length: 24),
        PlanCase(label: "identity kept: 32-bit service and key need exactly 28",
                 content: .init(serviceUUID: "fd00aa01", identity: identity),
                 name: nil, identity: true, length: 28),
        PlanCase(label: "identity dropped: 16-bit service, 128-bit key need 38",
                 content: .init(serviceUUID: "fd00", identity: identity, identityServiceDataUUID: generalUUID),
                 name: nil, identity: false, length: 4),
    ]

    @Test(arguments: planCases) func plan(_ c: PlanCase) throws {
        let plan = try Advertisement.plan(c.content, adapterDiscoverable: c.adapterDiscoverable)
        #expect(plan.localName == c.name)
        #expect(plan.properties["LocalName"]?.string == c.name)
        #expect(plan.carriesIdentity == c.identity)
        #expect((plan.properties["ServiceData"] != nil) == c.identity)
        #expect(plan.payload.length == c.length)
        #expect(plan.properties["Type"] == .string("peripheral"))
        #expect(plan.properties["ServiceUUIDs"] == .strings([c.content.serviceUUID]))
        if let name = c.name { #expect(name.utf8.count <= 29) }
        // bluez-sim, parsing as BlueZ does, accepts it, sized the same, even on a discoverable
        // adapter (3 bytes of flags).
        let spec = try AdvertisementSpec.parse(plan.properties, adapterDiscoverable: true)
        #expect(spec.payload.length == plan.payload.length)
        if c.identity {
            let data = try #require(plan.properties["ServiceData"]?.dictEntries?.first)
            #expect(data.value.unwrapped.bytes == Array(withUnsafeBytes(of: Self.identity.uuid) { Array($0) }))
        }
    }

    @Test("manufacturer data is kept when it fits, before the identity, and dropped whole when it does not")
    func manufacturerData() throws {
        let power: [UInt16: [UInt8]] = [0xFFFF: [0x50, 0x58, 0x01, 0xBA]]
        let plan = try Advertisement.plan(.init(serviceUUID: generalUUID, localName: "alpha", manufacturerData: power,
                                                identity: Self.identity))
        #expect(plan.carriesManufacturerData && !plan.carriesIdentity)
        #expect(plan.payload.length == 18 + 2 + 2 + 4)
        #expect(plan.properties["ManufacturerData"] == .dictionary(key: .uint16, value: .variant, [
            .init(.uint16(0xFFFF), .variant(.bytes([0x50, 0x58, 0x01, 0xBA]))),
        ]))
        let spec = try AdvertisementSpec.parse(plan.properties, adapterDiscoverable: true)
        #expect(spec.payload.length == plan.payload.length && spec.manufacturerData == power)

        // Seven bytes need 18 + 11 = 29: over the 28 of a discoverable adapter, within 31 otherwise.
        let big: [UInt16: [UInt8]] = [0xFFFF: Array(repeating: 1, count: 7)]
        let dropped = try Advertisement.plan(.init(serviceUUID: generalUUID, manufacturerData: big))
        #expect(!dropped.carriesManufacturerData && dropped.properties["ManufacturerData"] == nil && dropped.payload.length == 18)
        let kept = try Advertisement.plan(.init(serviceUUID: generalUUID, manufacturerData: big), adapterDiscoverable: false)
        #expect(kept.carriesManufacturerData && kept.payload.length == 29)
        #expect(try AdvertisementSpec.parse(kept.properties, adapterDiscoverable: false).payload.length == 29)

        // The manufacturer data goes first: with a 16-bit service (4) it takes 8, and the identity
        // (20) no longer fits the 28.
        let both = try Advertisement.plan(.init(serviceUUID: "fd00", manufacturerData: power, identity: Self.identity))
        #expect(both.carriesManufacturerData && !both.carriesIdentity && both.payload.length == 12)
    }

    @Test func invalidServiceUUID() {
        #expect(throws: AdvertisementError.invalidUUID("not-a-uuid")) {
            try Advertisement.plan(.init(serviceUUID: "not-a-uuid"))
        }
    }

    struct SizeCase: Sendable, CustomTestStringConvertible {
        var label: String
        var properties: [String: DBusValue]
        var payload: LegacyAdvertisingPayload
        var testDescription: String { label }
    }

    static func u(_ s: String) -> ClientUUID { ClientUUID(s)! }

    static let sizeCases: [SizeCase] = [
        SizeCase(label: "one 128-bit service UUID",
                 properties: ["Type": .string("peripheral"), "ServiceUUIDs": .strings([generalUUID])],
                 payload: .init(serviceUUIDs: [u(generalUUID)])),
        SizeCase(label: "UUIDs of three sizes, a SIG UUID in full form counts 16",
                 properties: ["Type": .string("peripheral"),
                              "ServiceUUIDs": .strings(["180f", "0000180a-0000-1000-8000-00805f9b34fb", "12345678"])],
                 payload: .init(serviceUUIDs: [u("180f"), u("0000180a-0000-1000-8000-00805f9b34fb"), u("12345678")])),
        SizeCase(label: "duplicate UUIDs count once",
                 properties: ["Type": .string("peripheral"), "ServiceUUIDs": .strings(["180f", "180F"])],
                 payload: .init(serviceUUIDs: [u("180f"), u("180F")])),
        SizeCase(label: "manufacturer data and Discoverable flags",
                 properties: ["Type": .string("peripheral"), "Discoverable": .boolean(true),
                              "ManufacturerData": .dictionary(key: .uint16, value: .variant, [
                                  .init(.uint16(0x004c), .variant(.bytes([1, 2, 3, 4, 5]))),
                              ])],
                 payload: .init(manufacturerData: [0x004c: [1, 2, 3, 4, 5]], setsFlags: true)),
        SizeCase(label: "tx-power and appearance included",
                 properties: ["Type": .string("peripheral"), "ServiceUUIDs": .strings([generalUUID]),
                              "Includes": .strings(["tx-power", "appearance"])],
                 payload: .init(serviceUUIDs: [u(generalUUID)], includes: ["tx-power", "appearance"])),
        SizeCase(label: "broadcast: no flags reserved",
                 properties: ["Type": .string("broadcast"), "ServiceUUIDs": .strings([generalUUID]),
                              "ServiceData": .dictionary(key: .string, value: .variant, [
                                  .init(.string("fd00"), .variant(.bytes(Array(repeating: 7, count: 9)))),
                              ])],
                 payload: .init(peripheral: false, serviceUUIDs: [u(generalUUID)], serviceData: [u("fd00"): Array(repeating: 7, count: 9)])),
        SizeCase(label: "peripheral one byte over on a discoverable adapter",
                 properties: ["Type": .string("peripheral"), "ServiceUUIDs": .strings([generalUUID]),
                              "ServiceData": .dictionary(key: .string, value: .variant, [
                                  .init(.string("fd00"), .variant(.bytes(Array(repeating: 7, count: 7)))),
                              ])],
                 payload: .init(serviceUUIDs: [u(generalUUID)], serviceData: [u("fd00"): Array(repeating: 7, count: 7)])),
        SizeCase(label: "too long whatever the adapter",
                 properties: ["Type": .string("peripheral"), "ServiceUUIDs": .strings([generalUUID, "b89491c9-43dd-4d75-bf16-dff381aed968"])],
                 payload: .init(serviceUUIDs: [u(generalUUID), u("b89491c9-43dd-4d75-bf16-dff381aed968")])),
    ]

    /// Length, budget and verdict agree with bluez-sim's parser on both kinds of adapter.
    @Test(arguments: sizeCases) func sizeLikeBlueZ(_ c: SizeCase) throws {
        for discoverable in [false, true] {
            let spec = try? AdvertisementSpec.parse(c.properties, adapterDiscoverable: discoverable)
            #expect((spec != nil) == c.payload.fits(adapterDiscoverable: discoverable), "discoverable \(discoverable)")
            if let spec {
                #expect(spec.payload.length == c.payload.length)
                #expect(spec.payload.maxLength(adapterDiscoverable: discoverable) == c.payload.maxLength(adapterDiscoverable: discoverable))
            }
        }
    }

    @Test func sizes() {
        #expect(Self.sizeCases[0].payload.length == 18)
        #expect(Self.sizeCases[1].payload.length == 4 + 6 + 18)
        #expect(Self.sizeCases[4].payload.maxLength(adapterDiscoverable: true) == 31 - 3 - 3 - 4)
        #expect(Self.sizeCases[6].payload.length == 29)
        #expect(Self.sizeCases[6].payload.fits(adapterDiscoverable: false))
        #expect(!Self.sizeCases[6].payload.fits(adapterDiscoverable: true))
    }
}
