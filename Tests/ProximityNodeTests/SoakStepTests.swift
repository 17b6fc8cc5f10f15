import Foundation
import ProximityCore
@testable import ProximityNode
import ProximityTrust
import Testing

/// Issue 33, item 5 (the pure step's soak): the node's step on an injected clock, under the soak's
/// workload, hour after hour: 200 iBeacons in a region, 1,000 new phone addresses a minute (most
/// resolvable private addresses of keys the node does not have, some of the one it has), a
/// trickle of advertisers of the general UUID that never answer, a report every 10 s. Every
/// collection the step holds stays within its bound and stops growing once the workload's
/// addresses have turned over: its size in the last hours is no larger than in the second.
///
/// `PROXIMITYD_SOAK_HOURS` sets the span: by default 168 simulated hours, the seven days of issue
/// 33 (about five minutes of a debug build, beside the rest of the suite); 6 for a quick look.
@Suite struct SoakStepTests {
    typealias S = NodeStepTests

    struct Sizes: Equatable, CustomStringConvertible {
        var nodes = 0, frames = 0, scheduled = 0, tracked = 0, table = 0, superseded = 0
        var all: [Int] { [nodes, frames, scheduled, tracked, table, superseded] }
        var description: String {
            "nodes \(nodes), frames \(frames), scheduled \(scheduled), tracked \(tracked), table \(table), superseded \(superseded)"
        }
        static func of(_ step: NodeStep) -> Sizes {
            Sizes(nodes: step.resolver.nodes.count, frames: step.resolver.rememberedFrames, scheduled: step.scheduler.rememberedCount,
                  tracked: step.scheduler.trackedCount, table: step.table.count, superseded: step.superseded.count)
        }
    }

    @Test("seven days of the soak's workload on an injected clock: every collection of the step bounded, none growing after the second hour")
    func boundedOverHours() async throws {
        let hours = Int(ProcessInfo.processInfo.environment["PROXIMITYD_SOAK_HOURS"] ?? "") ?? 168
        let anna = try IdentityResolvingKey(hex: "ec0234a357c8ad05341010a60a397d9b")
        let stranger = try IdentityResolvingKey(hex: "00112233445566778899aabbccddeeff")
        var matcher = RegionMatcher()
        matcher.kind = .ibeacon
        var step = S.step(S.configuration {
            $0.regions = [Region(identifier: "shelves", matcher: matcher, source: .config)]
            $0.trust.irks = ["anna": anna]
        })
        _ = step.input(.adapterSeen(powered: true, discovering: true, address: "AA:00:00:00:00:01"), at: S.time(0))
        let uuid = UUID(uuidString: "f7826da6-4fa2-4e98-8024-bc5b71e0893e")!
        let beacons: [(String, AdvertisedFrame)] = (0 ..< 200).map { i in
            let frame = AdvertisedFrame(manufacturerData: [0x004C: [0x02, 0x15] + withUnsafeBytes(of: uuid.uuid) { Array($0) }
                                                              + [0, 1, UInt8(i >> 8), UInt8(i & 0xff), 0xC5]])
            return (String(format: "C0:00:00:00:%02X:%02X", i >> 8, i & 0xff), frame)
        }
        let phoneFrame = AdvertisedFrame(manufacturerData: [0x004C: [0x10, 0x05, 0x01, 0x18, 0x00, 0x00, 0x00]])
        let general = AdvertisedFrame(serviceUUIDs: [NodeConfiguration.defaultServiceUUID.uuidString.lowercased()])
        var rng = SystemRandomNumberGenerator()
        var prand: UInt32 = 1
        func rpa(_ key: IdentityResolvingKey) -> String {
            prand = prand &+ 7919
            return IdentityResolvingKey.addressText(key.address(prand: 0x40_0000 | (prand & 0x3F_FFFF)))
        }
        var samples: [Sizes] = []
        var t = 0.0
        let end = Double(hours) * 3600
        var fake = 0
        while t < end {
            t += 10
            for (address, frame) in beacons {
                _ = step.input(.sighting(Observation(address: address, rssi: Int16(-60 - Int.random(in: 0 ... 20, using: &rng)), time: t),
                                         frame: frame, alias: nil), at: S.time(t))
            }
            // 1,000 new phone addresses a minute: 167 each 10 s, one in 20 the keyed phone's.
            for i in 0 ..< 167 {
                let address = rpa(i % 20 == 0 ? anna : stranger)
                _ = step.input(.sighting(Observation(address: address, rssi: -70, time: t), frame: phoneFrame, alias: nil), at: S.time(t))
            }
            // An advertiser of the general UUID that never answers, at a new address each minute.
            if Int(t) % 60 == 0 {
                fake += 1
                let address = String(format: "D0:00:00:00:%02X:%02X", (fake >> 8) & 0xff, fake & 0xff)
                let effects = step.input(.sighting(Observation(address: address, rssi: -70, time: t), frame: general, alias: nil), at: S.time(t))
                for case .identify(let connect) in effects {
                    _ = step.input(.identified(address: connect.address, .failed), at: S.time(t + 5))
                }
            }
            for case .identify(let connect) in step.report(at: S.time(t)) {
                _ = step.input(.identified(address: connect.address, .failed), at: S.time(t + 5))
            }
            if Int(t) % 3600 == 0 { samples.append(.of(step)) }
            // Five minutes of work on one of the cooperative pool's threads (two, on a two-core
            // machine): the tests running beside it in the parallel suite get their turns.
            await Task.yield()
        }
        print("soak (\(hours) h simulated): " + samples.enumerated().map { "h\($0.offset + 1): \($0.element)" }.joined(separator: "; "))
        #expect(samples.count == hours)
        let bounds = Sizes(nodes: 4096, frames: step.resolver.configuration.maxFrames, scheduled: 4096,
                           tracked: step.scheduler.configuration.maxTracked, table: step.configuration.maxPeers, superseded: 256)
        for (hour, sizes) in samples.enumerated() {
            for (size, bound) in zip(sizes.all, bounds.all) { #expect(size <= bound, "hour \(hour + 1): \(sizes) against \(bounds)") }
        }
        guard samples.count >= 3 else { return }
        let second = samples[1]
        for (hour, sizes) in samples.enumerated().dropFirst(2) {
            for (size, reference) in zip(sizes.all, second.all) {
                #expect(size <= max(reference, 1) + reference / 10, "grows: hour \(hour + 1) \(sizes), hour 2 \(second)")
            }
        }
    }
}
