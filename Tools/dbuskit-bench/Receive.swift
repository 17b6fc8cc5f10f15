import ArgumentParser
import DBusKit
import Foundation

/// `dbuskit-bench receive` (hidden): a DBusKit subscriber in a process of its own, the twin of
/// `benchmarks/python/receive_signals.py` (same `ready` line, same JSON result). The `signals`
/// benchmark runs it in its drain phase, where every subscriber is a child process that can be
/// paused while the stream is queued for it.
struct Receive: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Receive the signal stream of the signals benchmark (used by 'signals').",
        shouldDisplay: false
    )

    @Option(help: "The bus address.")
    var address: String

    @Option(help: "Give up after this many seconds.")
    var timeout = 120

    func run() async throws {
        let connection = try await DBusConnection.connect(to: BusAddress(parsing: address))
        let stream = try await connection.subscribe(BenchSignal.matchRule)
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        let watchdog = Task<Bool, Never> {
            guard (try? await Task.sleep(for: .seconds(timeout))) != nil else { return false }
            await connection.close()
            return true
        }
        var result = await Self.consume(stream)
        watchdog.cancel()
        if await watchdog.value, !result.sawDone { result.end = "timeout" }
        await connection.close()
        try printJSON(result)
    }

    /// The DBusKit subscriber, in this process or in the bench's: consumes the stream as an
    /// application would, reading the RSSI and the manufacturer data out of every decoded
    /// `PropertiesChanged`, until the closing `Done` or the end of the stream.
    static func consume(_ stream: DBusSignalStream) async -> Signals.Received {
        var r = Signals.Received(subscriber: .dbuskit, library: "DBusKit")
        var cpuAtFirst: Double?
        loop: for await message in stream {
            if message.member == BenchSignal.changedMember {
                if message.body.count == 3, let changed = message.body[1].stringKeyedDictionary,
                   let rssi = changed["RSSI"]?.unwrapped.integer,
                   let data = changed["ManufacturerData"]?.unwrapped.dictEntries?
                       .first(where: { $0.key == .uint16(BenchSignal.companyID) })?.value.unwrapped.bytes {
                    r.rssiSum += rssi
                    r.dataBytes += data.count
                } else {
                    r.malformed += 1
                }
                let now = monotonicSeconds()
                if r.first == nil {
                    r.first = now
                    cpuAtFirst = processCPUSeconds()
                }
                r.last = now
                r.received += 1
            } else if message.member == BenchSignal.doneMember {
                r.sawDone = true
                r.end = "done"
                break loop
            }
        }
        if !r.sawDone { r.end = "disconnected" }
        r.cpuSeconds = cpuAtFirst.map { processCPUSeconds() - $0 } ?? 0
        return r
    }
}
