import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import Testing
import SimTesting

/// `tx_offset`: a box or beacon whose transmissions are a fixed number of dB off what the radio
/// (or its frame) says, as a real device's are.
@Suite(.serialized) struct TxOffsetTests {
    @Test func parsedForBoxesAndBeaconsAndZeroByDefault() throws {
        let scenario = try Scenario.parse("""
            boxes:
              - { name: a, address: "02:00:00:00:00:01", position: [0, 0] }
              - { name: b, address: "02:00:00:00:00:02", position: [1, 0], tx_offset: -16 }
            beacons:
              - { name: z, address: "C0:00:00:00:00:01", position: [0, 1], tx_offset: 4.5,
                  ibeacon: { uuid: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", major: 1, minor: 2 } }
            """, format: .yaml)
        #expect(scenario.boxes.map(\.txOffset) == [0, -16])
        #expect(scenario.beacons.map(\.txOffset) == [4.5])
        let added = try BeaconSpec.parse(#"{"name": "y", "address": "C0:00:00:00:00:02", "position": [0, 0], "tx_offset": -16, "eddystone_url": {"url": "https://a.com"}}"#,
                                         format: .json, radio: RadioParameters())
        #expect(added.txOffset == -16)
    }

    /// Two iBeacons 1 m from alpha whose frames both say −59 dBm, one sending 16 dB less: with no
    /// shadowing alpha hears −59 and −75 exactly, and the other's samples are untouched.
    @Test func offsetsEverySampleOfItsDevice() async throws {
        var quiet = iBeacon("quiet", "C0:00:00:00:00:01", at: Position(x: 1, y: 0), minor: 1)
        quiet.txOffset = -16
        let plain = iBeacon("plain", "C0:00:00:00:00:02", at: Position(x: 0, y: 1), minor: 2)
        try await withSimBoxes(twoBoxes(distance: 5, shadowing: 0, beacons: [quiet, plain]), time: .simulated) { sim in
            let alpha = try await sim.client("alpha")
            let log = try await SignalLog.bluez(alpha)
            try await alpha.adapter("SetDiscoveryFilter", [.vardict(["Transport": .string("le"), "DuplicateData": .boolean(true)])])
            try await alpha.adapter("StartDiscovery")
            await sim.advance(3)
            let quietValues = try await waitForRSSI(log, "/org/bluez/hci0/dev_C0_00_00_00_00_01", atLeast: 20)
            let plainValues = try await waitForRSSI(log, "/org/bluez/hci0/dev_C0_00_00_00_00_02", atLeast: 20)
            #expect(Set(quietValues) == [-75], "\(quietValues)")
            #expect(Set(plainValues) == [-59], "\(plainValues)")
            await alpha.close()
        }
    }
}
