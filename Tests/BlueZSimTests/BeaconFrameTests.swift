import Foundation
import Testing

import BlueZSim

/// Byte-exact frames, written out from the specs: Apple's iBeacon layout, the AltBeacon spec,
/// and Google's Eddystone-UID and Eddystone-URL frame specifications.
@Suite struct BeaconFrameTests {
    static func hex(_ text: String) -> [UInt8] {
        BeaconFrame.bytes(fromHex: text.filter { !$0.isWhitespace })!
    }

    @Test func iBeacon() throws {
        let frame = BeaconFrame.iBeacon(
            uuid: try #require(UUID(uuidString: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")), major: 1, minor: 2,
            measuredPower: -59)
        // Company 0x004C; type 0x02, length 0x15; UUID; major and minor big-endian; power 0xC5 = −59.
        #expect(frame.manufacturerData == [0x004C: Self.hex("02 15 E2C56DB5DFFB48D2B060D0F5A71096E0 0001 0002 C5")])
        #expect(frame.serviceData.isEmpty)
        #expect(frame.serviceUUIDs.isEmpty)
        #expect(frame.measuredPowerAt1m == -59)
        // On the air: Flags, then 0x1A bytes of manufacturer-specific data (company little-endian).
        #expect(frame.advertisingData == Self.hex("""
            02 01 06
            1A FF 4C 00 02 15 E2C56DB5DFFB48D2B060D0F5A71096E0 0001 0002 C5
            """))
        #expect(frame.advertisingData.count == 30)
    }

    @Test func iBeaconBigEndianFields() throws {
        let frame = BeaconFrame.iBeacon(
            uuid: try #require(UUID(uuidString: "f7826da6-4fa2-4e98-8024-bc5b71e0893e")), major: 0x1234, minor: 0xFFFE,
            measuredPower: -128)
        #expect(frame.manufacturerData[0x004C] == Self.hex("02 15 F7826DA64FA24E988024BC5B71E0893E 1234 FFFE 80"))
    }

    @Test func altBeacon() throws {
        let frame = BeaconFrame.altBeacon(
            manufacturer: 0x0118, id1: try #require(UUID(uuidString: "2F234454-CF6D-4A0F-ADF2-F4911BA9FFA6")),
            id2: 1, id3: 2, referenceRSSI: -59)
        // Beacon code BE AC; 20-byte id (16 + 2 + 2); reference RSSI; manufacturer reserved 00.
        #expect(frame.manufacturerData == [0x0118: Self.hex("BEAC 2F234454CF6D4A0FADF2F4911BA9FFA6 0001 0002 C5 00")])
        #expect(frame.serviceUUIDs.isEmpty)
        #expect(frame.measuredPowerAt1m == -59)
        // The spec's advertisement: AD length 0x1B, type 0xFF, MFG ID little-endian, 26 bytes.
        #expect(frame.advertisingData == Self.hex("""
            02 01 06
            1B FF 18 01 BE AC 2F234454CF6D4A0FADF2F4911BA9FFA6 0001 0002 C5 00
            """))
        #expect(frame.advertisingData.count == 31)
    }

    @Test func eddystoneUID() {
        let frame = BeaconFrame.eddystoneUID(
            namespace: Self.hex("EDD1EBEAC04E5DEFA017"), instance: Self.hex("0BDB87539B67"), txPowerAt0m: -18)
        let uuid = "0000feaa-0000-1000-8000-00805f9b34fb"
        // Frame type 0x00; TX power at 0 m 0xEE = −18; namespace; instance; RFU 00 00.
        #expect(frame.serviceData == [uuid: Self.hex("00 EE EDD1EBEAC04E5DEFA017 0BDB87539B67 0000")])
        #expect(frame.serviceUUIDs == [uuid])
        #expect(frame.manufacturerData.isEmpty)
        #expect(frame.measuredPowerAt1m == -59)  // −18 − 41
        #expect(frame.advertisingData == Self.hex("""
            02 01 06
            03 03 AA FE
            17 16 AA FE 00 EE EDD1EBEAC04E5DEFA017 0BDB87539B67 0000
            """))
        #expect(frame.advertisingData.count == 31)
    }

    @Test(arguments: [
        // Scheme prefix code, then the URL with expansion codes.
        ("https://www.google.com/", "01 676F6F676C65 00"),
        ("http://www.example.org", "00 6578616D706C65 08"),
        ("https://goo.gl/S6zT6P", "03 676F6F2E676C2F 53367A543650"),
        ("http://example.info/a", "02 6578616D706C65 04 61"),
        ("https://a.com.com/", "03 61 07 00"),  // the longest expansion at each position
        ("http://x.gov", "02 78 0D"),
    ])
    func eddystoneURL(url: String, encoded: String) throws {
        let frame = BeaconFrame.eddystoneURL(url: url, txPowerAt0m: -20)
        try frame.validate()
        #expect(try BeaconFrame.encodeEddystoneURL(url) == Self.hex(encoded))
        #expect(frame.serviceData == ["0000feaa-0000-1000-8000-00805f9b34fb": [0x10, 0xEC] + Self.hex(encoded)])
        #expect(BeaconFrame.decodeEddystoneURL(Self.hex(encoded)) == url)
        #expect(frame.measuredPowerAt1m == -61)
    }

    @Test func eddystoneURLAdvertisement() {
        let frame = BeaconFrame.eddystoneURL(url: "https://www.google.com/", txPowerAt0m: -20)
        #expect(frame.advertisingData == Self.hex("""
            02 01 06
            03 03 AA FE
            0D 16 AA FE 10 EC 01 676F6F676C65 00
            """))
    }

    @Test func eddystoneURLLengthLimit() throws {
        // 17 encoded bytes after the scheme is the most a frame holds.
        let seventeen = "https://" + String(repeating: "a", count: 17)
        #expect(try BeaconFrame.encodeEddystoneURL(seventeen).count == 18)
        #expect(throws: BeaconFrameError.self) { try BeaconFrame.encodeEddystoneURL(seventeen + "a") }
        // Expansion codes make long URLs fit: 13 letters + ".com/" + 3 letters = 17 bytes.
        #expect(try BeaconFrame.encodeEddystoneURL("https://www.abcdefghijklm.com/xyz").count == 18)
    }

    @Test(arguments: ["ftp://example.com", "example.com", "https://exa mple.com", "https://exämple.com", ""])
    func eddystoneURLRejects(url: String) {
        #expect(throws: BeaconFrameError.self) { try BeaconFrame.encodeEddystoneURL(url) }
        #expect(throws: BeaconFrameError.self) { try BeaconFrame.eddystoneURL(url: url, txPowerAt0m: 0).validate() }
    }

    @Test func eddystoneUIDSizesAreValidated() {
        let good = BeaconFrame.eddystoneUID(namespace: Array(repeating: 1, count: 10), instance: Array(repeating: 2, count: 6),
                                            txPowerAt0m: 0)
        #expect(throws: Never.self) { try good.validate() }
        #expect(throws: BeaconFrameError.self) {
            try BeaconFrame.eddystoneUID(namespace: Array(repeating: 1, count: 9), instance: Array(repeating: 2, count: 6),
                                         txPowerAt0m: 0).validate()
        }
        #expect(throws: BeaconFrameError.self) {
            try BeaconFrame.eddystoneUID(namespace: Array(repeating: 1, count: 10), instance: [], txPowerAt0m: 0).validate()
        }
    }

    @Test func decodeRejectsReservedBytes() {
        #expect(BeaconFrame.decodeEddystoneURL([0x04]) == nil)  // no such scheme
        #expect(BeaconFrame.decodeEddystoneURL([0x00, 0x20]) == nil)  // space is reserved
        #expect(BeaconFrame.decodeEddystoneURL([0x00, 0x0E]) == nil)  // past the expansion codes
        #expect(BeaconFrame.decodeEddystoneURL([]) == nil)
    }

    @Test func hexParsing() {
        #expect(BeaconFrame.bytes(fromHex: "00ffA5") == [0x00, 0xFF, 0xA5])
        #expect(BeaconFrame.bytes(fromHex: "") == [])
        #expect(BeaconFrame.bytes(fromHex: "abc") == nil)
        #expect(BeaconFrame.bytes(fromHex: "zz") == nil)
    }
}
