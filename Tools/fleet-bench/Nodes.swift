import BlueZSim
import Foundation
import ProximityBenchmarking
import ProximityCore

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
/// each node's measured power includes (a node calibrated for the device at 1 m). With
/// `compatibility`, the stream of the compatibility forms: the native reports and, between them,
/// one at least every ``PeerPublishing/compatibilityHeartbeat`` seconds (PeerPublishing's rule).
func publishedReports(_ trace: Trace, measuredPower: Double, throttle configuration: ReportThrottle.Configuration,
                      calibration: (radio: RealisticRadio, installation: UInt64)? = nil,
                      rng: SeededGenerator, compatibility: Bool = false) -> (reports: [Report], ranged: Int) {
    var phases = rng.derived("node phases")
    var reports: [Report] = []
    var ranged = 0
    for (i, box) in trace.layout.boxes.enumerated() {
        var power = measuredPower
        if let (radio, seed) = calibration {
            power += radio.deviceOffset(seed: seed, device: Trace.device, role: "tx")
                + radio.deviceOffset(seed: seed, device: box.name, role: "rx")
        }
        // The node's table, as ranging-bench runs it (ProximityBenchmarking's adapter).
        var node = NodePipeline(measuredPower: power, peer: PeerID(Trace.device))
        var throttle = ReportThrottle(configuration: configuration)
        var heartbeat = ReportThrottle(configuration: .init(heartbeat: min(configuration.heartbeat, PeerPublishing.compatibilityHeartbeat),
                                                            skipDistance: configuration.skipDistance))
        node.drive(trace.samples[i], firstTick: phases.uniform(0...1), through: trace.duration) { tick, _, distance in
            if let d = distance {
                ranged += 1
                if throttle.offer(device: Trace.device, distance: d, at: tick) {
                    heartbeat.record(device: Trace.device, distance: d, at: tick)
                    reports.append(Report(t: tick, node: box.name, distance: d))
                } else if compatibility, heartbeat.offer(device: Trace.device, distance: d, at: tick) {
                    reports.append(Report(t: tick, node: box.name, distance: d))
                }
            } else {
                throttle.forget(device: Trace.device)
                heartbeat.forget(device: Trace.device)
            }
        }
    }
    reports.sort { ($0.t, $0.node) < ($1.t, $1.node) }
    return (reports, ranged)
}
