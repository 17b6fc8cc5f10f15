import BlueZSim
import Foundation
import ProximityCore

/// One box's node as ranging-bench drives it (its `NodePipeline`): the found-devices table with the
/// node's ranging configuration; every received advertisement goes in, and once a second the table
/// reports the device's zone and distance (none when it is unknown: not heard, or stale).
struct NodePipeline {
    var table: FoundDevicesTable
    let measuredPower: Double
    static let peer: PeerID = "device"

    init(configuration: RangingConfiguration = RangingConfiguration(), measuredPower: Double) {
        table = FoundDevicesTable(configuration: configuration)
        self.measuredPower = measuredPower
    }

    mutating func observe(_ rssi: Double, at t: Double) {
        // The device's advertisement says its measured power (as a beacon frame's Tx power does).
        table.observe(Self.peer, rssi: rssi, at: t, measuredPower: measuredPower)
    }

    mutating func report(at t: Double) -> Double? {
        let zone = table.tick(at: t).zones[Self.peer] ?? .unknown
        return zone == .unknown ? nil : table.peers[Self.peer]?.distance
    }
}

/// One distance report a node publishes, as the fleet service receives it.
struct Report: Sendable {
    var t: Double
    var node: String
    var distance: Double
}

/// What the nodes of a layout publish for one trace: each box's node ranges the device once a
/// second (each box at its own phase), and its publisher (`ReportThrottle`, ESPresense's rate
/// control) decides which distances go out. The stream is the same for every rule.
///
/// `calibration`, when given, is the realistic radio and installation seed whose device offsets
/// each node's measured power includes (a node calibrated for the device at 1 m).
func publishedReports(_ trace: Trace, measuredPower: Double, throttle configuration: ReportThrottle.Configuration,
                      calibration: (radio: RealisticRadio, installation: UInt64)? = nil,
                      rng: SeededGenerator) -> (reports: [Report], ranged: Int) {
    var phases = rng.derived("node phases")
    var reports: [Report] = []
    var ranged = 0
    for (i, box) in trace.layout.boxes.enumerated() {
        var power = measuredPower
        if let (radio, seed) = calibration {
            power += radio.deviceOffset(seed: seed, device: Trace.device, role: "tx") + radio.deviceOffset(seed: seed, device: box.name, role: "rx")
        }
        var node = NodePipeline(measuredPower: power)
        var throttle = ReportThrottle(configuration: configuration)
        let samples = trace.samples[i]
        var k = 0
        var tick = phases.uniform(0...1)
        while tick <= trace.duration {
            while k < samples.count, samples[k].t <= tick {
                node.observe(samples[k].rssi, at: samples[k].t)
                k += 1
            }
            if let d = node.report(at: tick) {
                ranged += 1
                if throttle.offer(device: Trace.device, distance: d, at: tick) {
                    reports.append(Report(t: tick, node: box.name, distance: d))
                }
            } else {
                throttle.forget(device: Trace.device)
            }
            tick += 1
        }
    }
    reports.sort { ($0.t, $0.node) < ($1.t, $1.node) }
    return (reports, ranged)
}
