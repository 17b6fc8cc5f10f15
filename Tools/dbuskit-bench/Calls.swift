import ArgumentParser
import DBusKit
import Foundation
import ProximityTesting

/// `dbuskit-bench calls`: method calls per second from a client connection to an object exported
/// by a server connection, both DBusKit, through one private `dbus-daemon`.
struct Calls: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Method calls per second, client to an exported object, on one private bus."
    )

    enum Method: String, CaseIterable, ExpressibleByArgument, Codable {
        /// `Echo(s) -> s` with a short string.
        case echo
        /// `EchoProps(a{sv}) -> a{sv}` with a BlueZ Device1-like property set.
        case props
    }

    @Option(help: "Calls timed in each run.")
    var count = 5_000

    @Option(help: "Calls in flight at once. Repeat the option for several runs.")
    var concurrency: [Int] = [1, 16]

    @Option(help: "Methods to call: \(Method.allCases.map(\.rawValue).joined(separator: ", ")). Repeat for several.")
    var method: [Method] = Method.allCases

    @Option(help: "Untimed calls before each run.")
    var warmup = 500

    @Option(help: "A bus to use instead of starting a private dbus-daemon, such as unix:path=/tmp/bus.")
    var address: String?

    @Flag(help: "Print the results as one JSON object.")
    var json = false

    func validate() throws {
        guard count > 0 else { throw ValidationError("--count must be positive") }
        guard concurrency.allSatisfy({ $0 > 0 }) else { throw ValidationError("--concurrency must be positive") }
        guard warmup >= 0 else { throw ValidationError("--warmup must not be negative") }
    }

    struct Run: Codable {
        var method: Method
        var signature: String
        var concurrency: Int
        var calls: Int
        var failures: Int
        var seconds: Double
        var callsPerSecond: Double
        var p50Milliseconds: Double
        var p99Milliseconds: Double
        var maxMilliseconds: Double
    }

    struct Report: Codable {
        var benchmark = "calls"
        var bus: String
        var runs: [Run]
    }

    func run() async throws {
        let privateBus: PrivateBus?
        let busAddress: BusAddress
        if let address {
            privateBus = nil
            busAddress = try BusAddress(parsing: address)
        } else {
            let bus = try await PrivateBus.start(name: "bench-calls")
            privateBus = bus
            busAddress = bus.busAddress
        }
        let server = try await DBusConnection.connect(to: busAddress)
        let client = try await DBusConnection.connect(to: busAddress)
        _ = try await server.export([Self.benchInterface], at: BenchService.path)

        var runs: [Run] = []
        for method in method {
            for concurrency in concurrency {
                if !json { note("calls: \(method.rawValue), \(concurrency) in flight, \(count) calls…") }
                let target = Target(client: client, server: server.uniqueName, method: method)
                _ = await Self.measure(target, count: min(warmup, count), concurrency: concurrency)
                let measured = await Self.measure(target, count: count, concurrency: concurrency)
                let percentile = Percentiles(measured.latencies)
                runs.append(Run(method: method, signature: method.signature, concurrency: concurrency,
                                calls: count, failures: measured.failures, seconds: measured.seconds,
                                callsPerSecond: Double(count) / measured.seconds,
                                p50Milliseconds: percentile(50) * 1000, p99Milliseconds: percentile(99) * 1000,
                                maxMilliseconds: percentile(100) * 1000))
            }
        }
        await Self.shutDown(client, server, privateBus)

        let report = Report(bus: privateBus == nil ? busAddress.description : "private dbus-daemon", runs: runs)
        if json {
            try printJSON(report)
        } else {
            print(Self.table(report))
        }
        if runs.contains(where: { $0.failures > 0 }) { throw ExitCode.failure }
    }

    private static func shutDown(_ client: DBusConnection, _ server: DBusConnection, _ bus: PrivateBus?) async {
        await client.close()
        await server.close()
        await bus?.stop()
    }

    static func table(_ report: Report) -> String {
        var table = TextTable(header: ["method", "in flight", "calls", "seconds", "calls/s", "p50 ms", "p99 ms", "max ms", "failed"])
        for r in report.runs {
            table.rows.append(["\(r.method.rawValue)(\(r.signature))", "\(r.concurrency)", "\(r.calls)", r.seconds.fixed(2),
                               r.callsPerSecond.grouped, r.p50Milliseconds.fixed(3), r.p99Milliseconds.fixed(3),
                               r.maxMilliseconds.fixed(3), "\(r.failures)"])
        }
        return "DBusKit method calls, client -> exported object, one \(report.bus)\n" + table.render()
    }

    // MARK: - The exported object

    static let benchInterface = DBusInterface(BenchService.interface, methods: [
        DBusMethod("Echo", inputs: [DBusArgument("text", .string)], outputs: [DBusArgument("text", .string)]) { call in
            call.arguments
        },
        DBusMethod("EchoProps", inputs: [DBusArgument("props", .dictionary(key: .string, value: .variant))],
                   outputs: [DBusArgument("props", .dictionary(key: .string, value: .variant))]) { call in
            call.arguments
        },
    ])

    /// A BlueZ `Device1` property set, as `GetAll` would return it.
    static let deviceProperties: DBusValue = .vardict([
        "Address": .string("C0:FF:EE:00:00:01"),
        "AddressType": .string("random"),
        "Name": .string("proximity-node-1"),
        "Alias": .string("proximity-node-1"),
        "Paired": .boolean(false),
        "Connected": .boolean(false),
        "RSSI": .int16(-61),
        "TxPower": .int16(-4),
        "UUIDs": .strings(["0000feaa-0000-1000-8000-00805f9b34fb", "0000180f-0000-1000-8000-00805f9b34fb"]),
        "ManufacturerData": .dictionary(key: .uint16, value: .variant, [
            .init(.uint16(BenchSignal.companyID), .variant(.bytes(BenchSignal.manufacturerData))),
        ]),
    ])

    // MARK: - Measuring

    struct Target: Sendable {
        let client: DBusConnection
        let server: BusName
        let method: Method

        /// One call; false if it failed or the reply was not the echo.
        func call(_ i: Int) async -> Bool {
            let arguments: [DBusValue]
            switch method {
            case .echo: arguments = [.string("ping \(i)")]
            case .props: arguments = [Calls.deviceProperties]
            }
            do {
                let reply = try await client.call(destination: server, path: BenchService.path,
                                                  interface: BenchService.interface,
                                                  member: method == .echo ? "Echo" : "EchoProps", arguments)
                return reply == arguments
            } catch {
                return false
            }
        }
    }

    struct Measured: Sendable {
        var seconds: Double
        var latencies: [Double]
        var failures: Int
    }

    /// `count` calls by `concurrency` workers, each keeping one call in flight.
    static func measure(_ target: Target, count: Int, concurrency: Int) async -> Measured {
        let workers = min(concurrency, count)
        let start = monotonicSeconds()
        let perWorker = await withTaskGroup(of: (latencies: [Double], failures: Int).self) { group in
            for w in 0..<workers {
                // Worker w makes calls w, w + workers, w + 2 * workers, ...
                group.addTask {
                    var latencies: [Double] = []
                    latencies.reserveCapacity(count / workers + 1)
                    var failures = 0
                    for i in stride(from: w, to: count, by: workers) {
                        let t0 = monotonicSeconds()
                        if !(await target.call(i)) { failures += 1 }
                        latencies.append(monotonicSeconds() - t0)
                    }
                    return (latencies, failures)
                }
            }
            var all: [(latencies: [Double], failures: Int)] = []
            for await result in group { all.append(result) }
            return all
        }
        let seconds = monotonicSeconds() - start
        return Measured(seconds: seconds, latencies: perWorker.flatMap(\.latencies),
                        failures: perWorker.reduce(0) { $0 + $1.failures })
    }
}

extension Calls.Method {
    var signature: String {
        switch self {
        case .echo: "s"
        case .props: "a{sv}"
        }
    }
}
