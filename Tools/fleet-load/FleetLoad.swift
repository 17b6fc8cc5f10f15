import ArgumentParser
import Foundation
import MQTTKit
import ProximityMQTT
import ProximityTesting
import Synchronization

/// The fleet service under load: N simulated nodes × D devices publishing distance reports to a
/// local Mosquitto at ESPresense's rate, and `proximity-fleet`'s CPU, memory and latency as N
/// grows (docs/fleet.md, "Load").
@main
struct FleetLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet-load",
        abstract: "Measure proximity-fleet's CPU, memory and latency with N nodes × D devices reporting.",
        discussion: """
            Starts a local mosquitto and the built proximity-fleet, then for each N in --nodes: \
            every node reports each of --devices devices once per --interval seconds (ESPresense's \
            heartbeat; the reports spread evenly), from --connections MQTT connections. Latency: \
            every 0.2 s a new probe device is reported by one node; the fleet gives it a room at its \
            first report, so the time from that report to its room message on the broker is the \
            pipeline's (broker in, fleet, broker out), under the load. CPU: proximity-fleet's user \
            and system time over the measured window, as a share of one core; memory: its peak RSS.
            """)

    @Option(help: "Node counts to run, in order.")
    var nodes: [Int] = [10, 50, 100, 200]

    @Option(help: "Devices each node reports.")
    var devices = 50

    @Option(help: "Seconds between two reports of one device by one node.")
    var interval = 5.0

    @Option(help: "Measured seconds per node count (after a warm-up of one interval).")
    var seconds = 20.0

    @Option(help: "MQTT connections the simulated nodes share.")
    var connections = 20

    @Flag(help: "Print JSON.")
    var json = false

    @Flag(help: "Measure the positioning instead, in process: --position-devices devices heard by the nodes within 25 m on a warehouse of --position-nodes nodes, a GridPositioner each, stepped once a second (docs/positioning.md, Benchmarks).")
    var positions = false

    @Option(help: "Positions: devices.")
    var positionDevices = 2_000

    @Option(help: "Positions: nodes (on a lattice 10 m × 7 m apart).")
    var positionNodes = 100

    @Option(help: "Positions: measured seconds (after 5 of warm-up).")
    var positionSeconds = 10

    @Flag(help: "Positions: also measure the filter on the whole floor (no window), with a tenth of the devices.")
    var wholeFloor = false

    func validate() throws {
        guard !nodes.isEmpty, nodes.allSatisfy({ (1...10_000).contains($0) }) else { throw ValidationError("--nodes: 1...10000 each") }
        guard (1...10_000).contains(devices) else { throw ValidationError("--devices: 1...10000") }
        guard interval > 0, interval <= 60 else { throw ValidationError("--interval: 0...60 s") }
        guard seconds >= 2, seconds <= 3600 else { throw ValidationError("--seconds: 2...3600") }
        guard (1...200).contains(connections) else { throw ValidationError("--connections: 1...200") }
    }

    struct Row: Codable {
        var nodes: Int
        var devices: Int
        var offered: Double
        /// Reports actually sent a second, warm-up included.
        var sent: Double
        var cpu: Double
        var rssMiB: Double
        var latencyP50: Double?
        var latencyP99: Double?
        var latencyMax: Double?
        var probes: Int
        var answered: Int
    }

    func run() async throws {
        if positions {
            var rows = [PositionsLoad.measure(nodes: positionNodes, devices: positionDevices, seconds: positionSeconds, window: nil)]
            if wholeFloor {
                rows.append(PositionsLoad.measure(nodes: positionNodes, devices: max(1, positionDevices / 10), seconds: positionSeconds,
                                                  window: 1_000))
            }
            if json {
                try printJSONRows(rows)
            } else {
                print(PositionsLoad.header)
                for r in rows { print(PositionsLoad.render(r)) }
                print("one core: the estimator's CPU a second of fleet time for all the devices; tick batch: the CPU time of one " +
                      "tick's estimates, the most a report waits after the tick for its position.")
            }
            return
        }
        var rows: [Row] = []
        for n in nodes {
            rows.append(try await measure(nodes: n))
            if !json { print(Self.render(rows.last!)) }
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(rows), as: UTF8.self))
        } else {
            print()
            print(Self.header)
            for row in rows { print(Self.render(row)) }
        }
    }

    func printJSONRows<T: Encodable>(_ rows: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        print(String(decoding: try encoder.encode(rows), as: UTF8.self))
    }

    static let header = "nodes  devices  reports/s  fleet CPU  peak RSS   latency p50    p99    max   probes"

    static func render(_ r: Row) -> String {
        func ms(_ x: Double?) -> String { x.map { String(format: "%6.1f", $0 * 1000) } ?? "     -" }
        return String(format: "%5d  %7d  %9.0f  %8.1f%%  %5.1f MiB  ", r.nodes, r.devices, r.offered, r.cpu * 100, r.rssMiB)
            + "\(ms(r.latencyP50)) ms \(ms(r.latencyP99)) \(ms(r.latencyMax))  \(r.answered)/\(r.probes)"
    }

    /// One node count: a broker and a fleet service of their own.
    func measure(nodes n: Int) async throws -> Row {
        try await MosquittoBroker.with(["allow_anonymous true", "max_queued_messages 100000", "log_type error"]) { broker in
            let fleet = try ManagedProcess(BuiltProducts.path("proximity-fleet"),
                                           ["--broker", "mqtt://127.0.0.1:\(broker.port)", "--no-discovery", "--log-level", "warning"])
            defer { fleet.signal(SIGKILL) }
            // The probes' rooms, as they arrive.
            let watcher = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "load-watcher"))
            defer { watcher.disconnect() }
            let arrivals = Arrivals()
            let watching = Task {
                for await m in watcher.messages {
                    let levels = m.topic.split(separator: "/")
                    if levels.count == 4, levels[2].hasPrefix("probe-") { arrivals.arrived(String(levels[2]), at: Self.now()) }
                }
            }
            defer { watching.cancel() }
            watcher.connect()
            try await Self.connected(watcher)
            try await watcher.subscribe("proximity-fleet/devices/+/room")

            var clients: [MQTTClient] = []
            for i in 0..<min(connections, n) {
                let c = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "load-\(i)"))
                c.connect()
                try await Self.connected(c)
                clients.append(c)
            }
            defer { for c in clients { c.disconnect() } }
            // The fleet is up once it says so on the broker.
            try await Self.waitOnline(broker)

            let total = n * devices
            let offered = Double(total) / interval
            let start = Self.now()
            let warmUp = interval
            var sent = 0
            var probes: [String: Double] = [:]
            var cpuStart: Double?
            var nextProbe = start + warmUp
            var probeIndex = 0
            // Report k (of node k / devices, device k % devices) is due at start + (k + 0.5) × interval / total, each round.
            var k = 0
            while true {
                let now = Self.now()
                if now - start >= warmUp + seconds { break }
                if cpuStart == nil, now - start >= warmUp { cpuStart = Self.cpuSeconds(fleet.pid) }
                let due = Int(((now - start) / interval * Double(total)).rounded(.down))
                while k <= due {
                    let node = (k / devices) % n, device = k % devices
                    // A device's distance from each node: stable, different per node (no room changes).
                    let distance = 1 + Double((node * 7 + device * 13) % 90) / 10
                    try? clients[node % clients.count].send("proximityd/node\(node)/peers/dev\(device)",
                                                               Self.report("dev\(device)", distance: distance), qos: 0)
                    k += 1
                    sent += 1
                }
                if now >= nextProbe {
                    let id = "probe-\(n)-\(probeIndex)"
                    probeIndex += 1
                    probes[id] = Self.now()
                    try? clients[probeIndex % clients.count].send("proximityd/node\(probeIndex % n)/peers/\(id)",
                                                                     Self.report(id, distance: 1.5), qos: 0)
                    nextProbe += 0.2
                }
                try await Task.sleep(for: .milliseconds(5))
            }
            let cpuEnd = Self.cpuSeconds(fleet.pid)
            // Late answers: a second more.
            try await Task.sleep(for: .seconds(1))
            let answered = arrivals.times
            let latencies = probes.compactMap { id, t in answered[id].map { $0 - t } }.sorted()
            func pct(_ p: Double) -> Double? {
                latencies.isEmpty ? nil : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]
            }
            return Row(nodes: n, devices: devices, offered: offered, sent: Double(sent) / (warmUp + seconds),
                       cpu: ((cpuEnd ?? 0) - (cpuStart ?? 0)) / seconds, rssMiB: Self.peakRSS(fleet.pid) / 1024,
                       latencyP50: pct(0.5), latencyP99: pct(0.99), latencyMax: latencies.last, probes: probes.count,
                       answered: latencies.count)
        }
    }

    final class Arrivals: Sendable {
        private let state = Mutex<[String: Double]>([:])
        func arrived(_ id: String, at t: Double) { state.withLock { if $0[id] == nil { $0[id] = t } } }
        var times: [String: Double] { state.withLock { $0 } }
    }

    /// A node's report of `device` at `distance` metres, as the node writes it (``PeerReport``).
    static func report(_ device: String, distance: Double) -> String {
        MQTTJSON.encode(PeerReport(id: device, kind: nil, rssi: nil, rssiAt1m: nil, distance: distance, proximity: nil, time: nil))
    }

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// utime + stime of `pid`, seconds (/proc/PID/stat fields 14 and 15).
    static func cpuSeconds(_ pid: pid_t) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let u = Double(fields[11]), let s = Double(fields[12]) else { return nil }
        return (u + s) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// VmHWM of `pid`, KiB.
    static func peakRSS(_ pid: pid_t) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            return Double(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
        }
        return 0
    }

    static func connected(_ client: MQTTClient) async throws {
        for await event in client.events {
            if event == .connected { return }
            if case .refused(_, let reason) = event { throw ValidationError("the broker refused: \(reason)") }
        }
    }

    static func waitOnline(_ broker: MosquittoBroker) async throws {
        let r = try await runCommand("mosquitto_sub", broker.clientArguments + ["-t", "proximity-fleet/status", "-C", "1", "-W", "30"])
        guard r.stdout.contains("online") else { throw ValidationError("proximity-fleet did not come online: \(r)") }
    }
}
