import ArgumentParser
import DBusKit
import Foundation

/// `dbuskit-bench emit` (hidden): the emitter of the `signals` benchmark, run by it as a separate
/// process. It sends `count` BlueZ-style `PropertiesChanged` signals as fast as DBusKit and the bus
/// take them, then one `Done`, and prints its send rate as one JSON line.
///
/// Signals go out in bursts; after each burst a round trip to the bus (`GetId`) waits until the
/// daemon has read the burst, so the queue between the emitter and the daemon stays bounded by one
/// burst however slow the daemon is. (What the daemon queues for each subscriber is bounded by its
/// `max_outgoing_bytes`.)
struct Emit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Emit the signal stream of the signals benchmark (used by 'signals').",
        shouldDisplay: false
    )

    @Option(help: "The bus address.")
    var address: String

    @Option(help: "PropertiesChanged signals to send.")
    var count: Int

    @Option(help: "Signals per burst between round trips to the bus.")
    var burst = 1_000

    func validate() throws {
        guard count > 0, count <= Int(UInt32.max) else { throw ValidationError("--count must be in 1...\(UInt32.max)") }
        guard burst > 0 else { throw ValidationError("--burst must be positive") }
    }

    struct Report: Codable {
        var sent: Int
        /// CLOCK_MONOTONIC seconds of the first send and of the end of the last burst's round trip.
        var start: Double
        var end: Double
        var seconds: Double
        var signalsPerSecond: Double
        var cpuSeconds: Double
    }

    func run() async throws {
        let connection = try await DBusConnection.connect(to: BusAddress(parsing: address))
        // 70 argument lists, one per RSSI value, built before the clock starts.
        let payloads = (0..<70).map(BenchSignal.arguments)
        let cpuStart = processCPUSeconds()
        let start = monotonicSeconds()
        var sent = 0
        while sent < count {
            let end = min(sent + burst, count)
            for i in sent..<end {
                try connection.emitSignal(path: BenchSignal.path, interface: .properties,
                                          member: BenchSignal.changedMember, payloads[i % payloads.count])
            }
            sent = end
            _ = try await connection.callBus("GetId")
        }
        let end = monotonicSeconds()
        let cpu = processCPUSeconds() - cpuStart
        try connection.emitSignal(path: BenchSignal.path, interface: BenchSignal.benchInterface,
                                  member: BenchSignal.doneMember,
                                  [.uint32(UInt32(count)), .int64(BenchSignal.rssiSum(count: count))])
        _ = try await connection.callBus("GetId")
        await connection.close()
        try printJSON(Report(sent: sent, start: start, end: end, seconds: end - start,
                             signalsPerSecond: Double(sent) / (end - start), cpuSeconds: cpu))
    }
}
