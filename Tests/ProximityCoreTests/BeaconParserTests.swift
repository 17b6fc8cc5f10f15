import Foundation
import ProximityCore
import Testing

let kontaktUUID = UUID(uuidString: "F7826DA6-4FA2-4E98-8024-BC5B71E0893E")!

@Suite("Beacon frames")
struct BeaconParserTests {
    func uuidBytes(_ u: UUID) -> [UInt8] { withUnsafeBytes(of: u.uuid) { Array($0) } }

    @Test("iBeacon")
    func iBeacon() {
        let bytes: [UInt8] = [0x02, 0x15] + uuidBytes(kontaktUUID) + [0x00, 0x01, 0x00, 0x02, 0xC5]
        let beacon = BeaconParser.parse(manufacturerData: [0x004C: bytes], serviceData: [:])
        #expect(beacon == .iBeacon(uuid: kontaktUUID, major: 1, minor: 2, measuredPower: -59))
        #expect(beacon?.identifier == "ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:2")
        #expect(beacon?.kind == "ibeacon")
        #expect(beacon?.measuredPower == -59)
    }

    @Test("AltBeacon under any manufacturer")
    func altBeacon() {
        let bytes: [UInt8] = [0xBE, 0xAC] + uuidBytes(kontaktUUID) + [0x00, 0x07, 0x01, 0x00, 0xC3, 0x00]
        let beacon = BeaconParser.parse(manufacturerData: [0x0118: bytes], serviceData: [:])
        #expect(beacon == .altBeacon(manufacturer: 0x0118, id1: kontaktUUID, id2: 7, id3: 256, referenceRSSI: -61))
        #expect(beacon?.identifier == "altbeacon:0118:f7826da6-4fa2-4e98-8024-bc5b71e0893e:7:256")
    }

    @Test("Eddystone-UID and -URL")
    func eddystone() {
        let namespace: [UInt8] = [0xED, 0xD1, 0xEB, 0xEA, 0xC0, 0x4E, 0x5D, 0xEF, 0xA0, 0x17]
        let instance: [UInt8] = [0x00, 0x00, 0x00, 0x00, 0x00, 0x01]
        let uid = BeaconParser.parse(manufacturerData: [:], serviceData: [eddystoneServiceUUID: [0x00, 0xEE] + namespace + instance + [0, 0]])
        #expect(uid == .eddystoneUID(namespace: namespace, instance: instance, txPowerAt0m: -18))
        #expect(uid?.identifier == "eddystone:edd1ebeac04e5defa017:000000000001")
        #expect(uid?.measuredPower == -59)
        let url = BeaconParser.parse(manufacturerData: [:], serviceData: [eddystoneServiceUUID: [0x10, 0xEE, 0x03] + Array("goo.gl/x".utf8) ])
        #expect(url == .eddystoneURL(url: "https://goo.gl/x", txPowerAt0m: -18))
        let expanded = BeaconParser.parse(manufacturerData: [:], serviceData: [eddystoneServiceUUID: [0x10, 0xEE, 0x00] + Array("example".utf8) + [0x07]])
        #expect(expanded == .eddystoneURL(url: "http://www.example.com", txPowerAt0m: -18))
    }

    @Test("malformed frames are not beacons", arguments: [
        [0x004C: [0x02, 0x15, 0x01]] as [UInt16: [UInt8]],
        [0x004C: [0x12, 0x19] + Array(repeating: 0, count: 30)],
        [0x0118: [0xBE, 0xAD] + Array(repeating: 0, count: 22)],
        [0x0118: [0xBE, 0xAC, 0x00]],
        [:],
    ])
    func malformed(data: [UInt16: [UInt8]]) {
        #expect(BeaconParser.parse(manufacturerData: data, serviceData: [:]) == nil)
    }

    @Test("malformed Eddystone frames", arguments: [[], [0x00], [0x00, 0xEE, 1, 2], [0x10, 0xEE, 0x09], [0x10, 0xEE, 0x00, 0x01, 0x80], [0x20, 0x00]] as [[UInt8]])
    func malformedEddystone(bytes: [UInt8]) {
        #expect(BeaconParser.parse(manufacturerData: [:], serviceData: [eddystoneServiceUUID: bytes]) == nil)
    }
}
