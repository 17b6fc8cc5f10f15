import Foundation
import ProximityCore
import Testing

@Suite struct IdentityResolverTests {
    static let service = "b89491c9-43dd-4d75-bf16-dff381aed967"
    static let me = UUID(uuidString: "00000000-0000-4000-8000-000000000001")!
    static let peer = UUID(uuidString: "00000000-0000-4000-8000-000000000002")!
    static let node = AdvertisedFrame(serviceUUIDs: [service])
    /// An iBeacon frame: UUID e2c56db5-…, major 1, minor 2, -59 dBm at 1 m.
    static let iBeacon = AdvertisedFrame(manufacturerData: [0x004C: [0x02, 0x15] + Array(UUID(uuidString: "e2c56db5-dffb-48d2-b060-d0f5a71096e0")!.uuidString.replacingOccurrences(of: "-", with: "").chunked()) + [0, 1, 0, 2, 0xC5]])

    func resolver(beacons: Bool = true) -> IdentityResolver {
        IdentityResolver(configuration: .init(serviceUUID: Self.service.uppercased(), ownIdentity: Self.me, rangeBeacons: beacons,
                                              maxRememberedAddresses: 2, maxFrames: 4))
    }

    @Test("a node is identified once, then ranged by address with no connection; a sample without RSSI is not ranged")
    func nodes() {
        var r = resolver()
        #expect(r.resolve(Observation(address: "A", rssi: -60, time: 0, frame: Self.node)) == .identify)
        #expect(r.resolve(Observation(address: "A", rssi: -60, time: 1)) == .identify)
        let learnt = r.learn(Self.peer, at: "A", time: 2)
        #expect(learnt.isNew && !learnt.isOwn && learnt.previousAddresses.isEmpty)
        #expect(r.resolve(Observation(address: "A", rssi: -61, time: 3)) == .range(.node(Self.peer), .node, beacon: nil))
        #expect(r.resolve(Observation(address: "A", rssi: nil, time: 4)) == .ignore)
        #expect(r.resolve(Observation(address: "A", rssi: 127, time: 4)) == .ignore, "127 is no sample")
        #expect(!r.learn(Self.peer, at: "A", time: 5).isNew)
    }

    @Test("a beacon's frame is parsed when it comes, and its samples are ranged by address without it")
    func beacons() throws {
        var r = resolver()
        let first = r.resolve(Observation(address: "B", rssi: -70, time: 0, frame: Self.iBeacon))
        guard case .range(let id, .ibeacon, let beacon?) = first else { Issue.record("\(first)"); return }
        #expect(id == "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2" && beacon.measuredPower == -59)
        #expect(r.resolve(Observation(address: "B", rssi: -71, time: 1)) == first)
        var noBeacons = resolver(beacons: false)
        #expect(noBeacons.resolve(Observation(address: "B", rssi: -70, time: 0, frame: Self.iBeacon)) == .ignore)
    }

    @Test("an unknown address without its frame asks for it; the frames of long-unheard addresses are forgotten")
    func needsFrame() {
        var r = resolver()
        #expect(r.resolve(Observation(address: "X", rssi: -70, time: 0)) == .needsFrame)
        #expect(r.resolve(Observation(address: "X", rssi: -70, time: 0, frame: AdvertisedFrame())) == .ignore)
        for (i, a) in ["P", "Q", "R", "S"].enumerated() { _ = r.resolve(Observation(address: a, rssi: -70, time: Double(1 + i), frame: Self.iBeacon)) }
        #expect(r.resolve(Observation(address: "X", rssi: -70, time: 9)) == .needsFrame)
    }

    @Test("its own identity makes an address ignored; a new address for a known identity replaces the old; the cache is capped by last heard")
    func learning() {
        var r = resolver()
        #expect(r.learn(Self.me, at: "M", time: 0).isOwn)
        #expect(r.resolve(Observation(address: "M", rssi: -50, time: 1, frame: Self.node)) == .ignore)
        _ = r.learn(Self.peer, at: "A", time: 1)
        let moved = r.learn(Self.peer, at: "B", time: 2)
        #expect(moved.previousAddresses == ["A"] && r.identity(at: "A") == nil && r.identity(at: "B") == Self.peer)
        let other = UUID(uuidString: "00000000-0000-4000-8000-000000000003")!
        let third = UUID(uuidString: "00000000-0000-4000-8000-000000000004")!
        _ = r.learn(other, at: "C", time: 3)
        let full = r.learn(third, at: "D", time: 4)
        #expect(full.evicted == ["B"] && Set(r.identities.keys) == ["C", "D"])
    }

    @Test("a flood of claimed identities never evicts a verified member: the least recently heard unverified go first")
    func floodKeepsMembers() {
        var r = IdentityResolver(configuration: .init(serviceUUID: "b89491c9-43dd-4d75-bf16-dff381aed967", ownIdentity: Self.me,
                                                      maxRememberedAddresses: 16))
        let member = UUID()
        _ = r.learn(member, at: "MEMBER", verified: true, time: 0)
        for i in 0 ..< 1000 { _ = r.learn(UUID(), at: "FLOOD-\(i)", time: Double(1 + i)) }
        #expect(r.nodes.count == 16 && r.isVerified(at: "MEMBER") && r.identity(at: "MEMBER") == member)
    }

    @Test("frames of addresses unheard for longer than asked are forgotten; one heard again needs its frame once more")
    func framesForgotten() {
        var r = resolver()
        _ = r.resolve(Observation(address: "old", rssi: -70, time: 0, frame: Self.iBeacon))
        _ = r.resolve(Observation(address: "kept", rssi: -70, time: 0, frame: Self.iBeacon))
        _ = r.resolve(Observation(address: "kept", rssi: -70, time: 100))
        #expect(r.rememberedFrames == 2)
        #expect(r.forgetFrames(notHeardFor: 120, at: 130) == 1)
        #expect(r.rememberedFrames == 1)
        #expect(r.resolve(Observation(address: "old", rssi: -70, time: 131)) == .needsFrame)
        #expect(r.resolve(Observation(address: "kept", rssi: -70, time: 131)) != IdentityResolver.Resolution.needsFrame)
    }
}

private extension String {
    /// "e2c5…" → its bytes.
    func chunked() -> [UInt8] {
        var bytes: [UInt8] = []
        var i = startIndex
        while i < endIndex {
            let j = index(i, offsetBy: 2)
            bytes.append(UInt8(self[i..<j], radix: 16)!)
            i = j
        }
        return bytes
    }
}
