import ArgumentParser
import Foundation
import ProximityCore
import ProximityFleet

/// `proximity-fleet calibrate --plan PLAN.yaml WALK.csv > PLAN.calibrated.yaml`: the plan with
/// its calibration fitted from a calibration walk (``Calibration``).
struct CalibrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "calibrate",
        abstract: "Fit the plan's calibration from a calibration walk and print the calibrated plan.",
        discussion: """
            WALK.csv has a header row naming its columns, among them time,node,device,rssi,x,y \
            (and z on several floors): a tag's samples, recorded by each node (proximityctl \
            record), with where the tag was held (x,y,z, metres) at each sample. A device whose \
            name is a node of the plan is that node transmitting, at its plan position. The \
            hearings are averaged per node, device and spot (the median of the samples within \
            10 cm), then fitted: each node's receive offset (rx-offset), the transmit power of \
            the nodes heard (tx-power) and the path-loss exponent (docs/positioning.md, \
            Calibration). The plan, with those keys, goes to standard output; a summary (the \
            exponent, each node's offset and how well the fit explains its hearings) to \
            standard error.

            The walk is CSV as RFC 4180 has it (LF or CRLF line ends, quoted fields, a UTF-8 \
            byte order mark); lines starting with # are comments. The rows skipped after the \
            header (empty ones, comments) are counted on standard error: FILE: N rows skipped: ....

            Exit status: 0; 64 for a bad argument; 65 for a bad plan or walk, or one with no \
            hearing of a plan node at a known spot; 66 when a file cannot be read.

            Examples:
              $ proximity-fleet calibrate --plan house.yaml walk.csv \\
                  > house.calibrated.yaml
                The calibrated plan, for proximity-fleet run --plan house.calibrated.yaml.
            """)

    @Option(help: ArgumentHelp("The floor plan (docs/positioning.md).", valueName: "file"))
    var plan: String

    @Argument(help: ArgumentHelp("The walk: time,node,device,rssi,x,y[,z].", valueName: "walk.csv"))
    var walk: String

    func run() throws {
        var floorPlan = Self.loadPlan(plan)
        let samples = Self.loadTrace(walk, truthFor: "calibrate")
        let observations = Self.observations(samples, plan: floorPlan)
        guard let fit = Calibration.fit(observations, holdout: true) else {
            Self.fail("\(walk): no hearing of a plan node at a known spot (rows need a node of the plan and x,y)", status: 65)
        }
        for i in floorPlan.nodes.indices {
            if let rx = fit.rxOffsets[floorPlan.nodes[i].name] { floorPlan.nodes[i].rxOffset = rx }
            if let tx = fit.txPowers[floorPlan.nodes[i].name] { floorPlan.nodes[i].txPower = tx }
        }
        floorPlan.pathLossExponent = fit.exponent
        var summary = String(format: "calibrated from %d spots: path-loss exponent %.2f%@, residual %.1f dB RMS",
                             observations.count, fit.exponent,
                             fit.exponentAtBound
                                 ? " (at its bound: the hearings pushed it out of 1.5...4.5; more spots, or spots farther apart, help)"
                                 : "",
                             fit.rms)
        summary += fit.holdoutRMS.map { String(format: ", %.1f dB RMS on each spot left out of the fit", $0) } ?? ""
        summary += "\n"
        for node in floorPlan.nodes {
            guard let rx = fit.rxOffsets[node.name] else {
                summary += "  \(node.name): not heard in the walk (kept as it was)\n"
                continue
            }
            let residual = fit.nodeResiduals[node.name].map {
                String(format: ", median residual %.1f dB over %d", $0.median, $0.count)
            } ?? ""
            summary += String(format: "  %@: rx-offset %+.1f dB", node.name, rx) + residual + "\n"
        }
        FileHandle.standardError.write(Data(summary.utf8))
        print(FloorPlanFile.render(floorPlan), terminator: "")
    }

    /// The walk's hearings as observations: per node, device and spot (10 cm), the median RSSI,
    /// weighted by its sample count (at most 50).
    static func observations(_ samples: [TraceSample], plan: FloorPlan) -> [Calibration.Observation] {
        struct Key: Hashable { var node: String, device: String, x: Int, y: Int, z: Int }
        var groups: [Key: (point: PlanPoint, rssi: [Double])] = [:]
        for s in samples {
            guard plan.node(named: s.node) != nil, var p = s.truth else { continue }
            if let transmitter = plan.node(named: s.device) { p = transmitter.position }
            let key = Key(node: s.node, device: s.device, x: Int((p.x * 10).rounded()), y: Int((p.y * 10).rounded()),
                          z: Int((p.z * 10).rounded()))
            groups[key, default: (p, [])].rssi.append(s.rssi)
        }
        return groups.sorted {
            ($0.key.node, $0.key.device, $0.key.x, $0.key.y) < ($1.key.node, $1.key.device, $1.key.x, $1.key.y)
        }.compactMap { key, group in
            guard let receiver = plan.node(named: key.node) else { return nil }
            let sorted = group.rssi.sorted()
            return Calibration.Observation(receiver: key.node, transmitter: key.device,
                                           distance: receiver.position.distance(to: group.point),
                                           rssi: sorted[sorted.count / 2], stated: -59, weight: Double(min(sorted.count, 50)))
        }
    }
}
