import ArgumentParser
import DBusKit
import Foundation
import ProximityAPI
import ProximityCore
import Synchronization

/// `proximityctl calibrate`: measures a peer's RSSI at a known distance (the median of every
/// sample, channels mixed) and sets its measured power with `SetMeasuredPower`.
struct Calibrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure a peer's RSSI at a known distance and set its measured power (SetMeasuredPower).",
        discussion: """
            Put the peer --distance metres from this box and keep it there. For --seconds the node \
            sends every sample of it (Node1.StartRecording); the median of all of them (every \
            advertising channel mixed) is converted to the RSSI at 1 m with the node's path-loss \
            exponent n, P = median + 10*n*log10(distance), and set as the peer's measured power. It \
            prints the median, the spread (interquartile range, median absolute deviation, range) \
            and the sample count. SIGINT or SIGTERM ends the measurement early. Setting needs root \
            or group proximityd on the system bus; --dry-run only measures.

            Exit status: 0 on success, 64 for a bad argument, 69 when the node cannot be reached, \
            does not range the peer, hears fewer than --min-samples samples of it, refuses the call, \
            or leaves the bus.

            Examples:
              $ proximityctl calibrate ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:2
                The beacon 1 m away for 20 s; sets its measured power.
              $ proximityctl calibrate ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:3 \\
                  --distance 2 --dry-run
                Another beacon 2 m away: measured, nothing set.
            """)

    @OptionGroup var node: NodeOptions

    @Argument(help: ArgumentHelp("The peer, as GetRanging and `proximityctl peers` name it.", valueName: "peer"))
    var peer: String

    @Option(name: .long, help: ArgumentHelp("The true distance of the peer, metres (0.1 to 30).", valueName: "metres"))
    var distance = 1.0

    @Option(name: .long, help: ArgumentHelp("How long to measure (1 to 600).", valueName: "seconds"))
    var seconds = 20.0

    @Option(name: .customLong("min-samples"), help: ArgumentHelp("Refuse with fewer samples than this (at least 3).", valueName: "n"))
    var minSamples = 10

    @Flag(name: .customLong("dry-run"), help: "Measure and print, but do not set anything.")
    var dryRun = false

    func validate() throws {
        _ = try SampleSession.peers([peer], option: "PEER")
        guard distance.isFinite, (0.1...30).contains(distance) else { throw ValidationError("--distance: must be 0.1 to 30 metres") }
        guard seconds.isFinite, (1...600).contains(seconds) else { throw ValidationError("--seconds: must be 1 to 600") }
        guard minSamples >= 3 else { throw ValidationError("--min-samples: must be at least 3") }
    }

    func run() async throws {
        let peer = try SampleSession.peers([peer], option: "PEER")[0]
        let (distance, seconds, minSamples, dryRun) = (distance, seconds, minSamples, dryRun)
        let address = node.address, name = node.name
        await node.withNode("cannot calibrate \(peer)") { node in
            let properties = try await node.properties()
            let exponent = properties.pathLossExponent > 0 ? properties.pathLossExponent : 2
            let ranged = try await node.ranging()
            guard ranged[peer] != nil else {
                let known = ranged.keys.sorted()
                throw CalibrationError("the node does not range \(peer) now"
                    + (known.isEmpty ? " (it ranges no peer)" : " (it ranges: \(known.joined(separator: ", ")))"))
            }
            let box = SampleBox()
            let end = try await SampleSession.run(node, peers: [peer], seconds: seconds, started: {
                Self.note("measuring \(peer) at \(RecordingFile.number(distance)) m for \(RecordingFile.number(seconds)) s " +
                          "(Ctrl-C ends early)")
            }, handle: { batch in
                for sample in batch.samples where sample.peer == peer {
                    box.add(sample.rssi, power: sample.measuredPower)
                }
                if let report = batch.reports.first(where: { $0.peer == peer && $0.zone != RecordedReport.removed }) {
                    box.setPower(report.measuredPower)
                }
            })
            switch end {
            case .nodeLeft: throw NodeConnectionError.nodeLeft(bus: address, name: name)
            case .disconnected: throw NodeConnectionError.disconnected(bus: address)
            case .interrupted, .timeUp: break
            }
            let values = box.values
            guard values.count >= minSamples else {
                throw CalibrationError("only \(values.count) sample\(values.count == 1 ? "" : "s") of \(peer) in the measurement "
                    + "(at least \(minSamples) needed): is it in range and advertising? Measure longer with --seconds")
            }
            let stats = Spread(values)
            let exact = stats.median + 10 * exponent * log10(distance)
            let power = Int16(exact.rounded())
            let range = NodePowerFrame.powerRange
            guard range.contains(power) else {
                throw CalibrationError("the measured power works out at \(Self.dbm(exact)) dBm, " +
                    "outside \(range.lowerBound)…\(range.upperBound): is --distance right?")
            }
            print("""
                \(peer) at \(RecordingFile.number(distance)) m: \(values.count) samples
                  median RSSI     \(Self.dbm(stats.median)) dBm
                  spread          IQR \(Self.dbm(stats.q3 - stats.q1)) dB (\(Self.dbm(stats.q1)) … \(Self.dbm(stats.q3))), \
                MAD \(Self.dbm(stats.mad)) dB, range \(Self.dbm(stats.min)) … \(Self.dbm(stats.max))
                  exponent        \(RecordingFile.number(exponent)) (the node's path-loss exponent)
                  measured power  \(power) dBm = median + 10·\(RecordingFile.number(exponent))·log10(\(RecordingFile.number(distance)))\
                \(box.power.map { "; was \(Self.dbm($0)) dBm" } ?? "")
                """)
            if dryRun {
                print("--dry-run: nothing set")
            } else {
                try await node.setMeasuredPower(power, for: peer)
                print("set the measured power of \(peer) to \(power) dBm (SetMeasuredPower)")
            }
        }
    }

    static func dbm(_ x: Double) -> String {
        let rounded = (x * 10).rounded() / 10
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(format: "%.1f", rounded)
    }

    static func note(_ message: String) {
        FileHandle.standardError.write(Data("proximityctl: calibrate: \(message)\n".utf8))
    }
}

/// The samples of a calibration, filled by the session's handler and read once it ended.
private final class SampleBox: Sendable {
    private struct State {
        var values: [Double] = []
        var power: Double?
    }
    private let state = Mutex(State())

    func add(_ rssi: Double, power: Double?) {
        state.withLock { s in
            s.values.append(rssi)
            if let power { s.power = power }
        }
    }

    func setPower(_ power: Double) { state.withLock { $0.power = power } }
    var values: [Double] { state.withLock { $0.values } }
    var power: Double? { state.withLock { $0.power } }
}

struct CalibrationError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Median, quartiles (linear interpolation), median absolute deviation and range.
struct Spread {
    var median: Double, q1: Double, q3: Double, mad: Double, min: Double, max: Double

    init(_ values: [Double]) {
        let sorted = values.sorted()
        func quantile(_ v: [Double], _ p: Double) -> Double {
            let rank = p * Double(v.count - 1)
            let lo = Int(rank.rounded(.down)), hi = Int(rank.rounded(.up))
            return v[lo] + (v[hi] - v[lo]) * (rank - Double(lo))
        }
        median = quantile(sorted, 0.5)
        q1 = quantile(sorted, 0.25)
        q3 = quantile(sorted, 0.75)
        let m = median
        mad = quantile(sorted.map { abs($0 - m) }.sorted(), 0.5)
        min = sorted.first ?? 0
        max = sorted.last ?? 0
    }
}
