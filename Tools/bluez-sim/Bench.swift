import ArgumentParser
import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import LibCrypto
import SimTesting

/// `bluez-sim bench`: how many RSSI updates per second the simulator delivers on one box bus.
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure RSSI updates per second delivered on one box bus.",
        discussion: """
            Starts a private bus with one box and --devices iBeacons around it, advertising every \
            --interval seconds. A DBusKit client sets a discovery filter (Transport le, \
            DuplicateData true: every report is announced), starts discovery, and counts the \
            PropertiesChanged signals carrying RSSI that arrive during --seconds.

            With --proximityd PATH it also runs that proximityd on the box bus (its table capped \
            at --max-peers) and reports its CPU use and peak RSS over the same window, and the \
            size of its table, against the targets of 25% of one core and 50 MB.

            With --irks N the devices are phones instead: private devices, each with its own IRK,             changing their resolvable private address every --rotation seconds; the node is             given the IRKs of the first N of them (irks: in a config file, mode 0600) and ranges             those as irk:<name>, trying every new address of the others against all N keys.             That measures the cost of IRK resolution against the same rate of iBeacons.
            """)

    @Option(help: "Beacons on the air.") var devices = 200
    @Option(help: "Their advertising interval in seconds (0.02...10.24).") var interval = 0.04
    @Option(help: "How long to count, after a one-second warm-up.") var seconds = 5.0
    @Flag(help: "Print the result as JSON.") var json = false
    @Option(help: ArgumentHelp("Run this proximityd on the box bus and measure it.", valueName: "path")) var proximityd: String?
    @Option(name: .customLong("max-peers"), help: "The node's --max-peers.") var maxPeers = 100
    @Option(help: "Seconds of warm-up before counting (the node identifies nothing, but fills its table).") var warmUp = 1.0
    @Option(help: "Phones instead of beacons: the node knows the IRKs of this many of them (0: beacons).") var irks = 0
    @Option(help: "With --irks: seconds between a phone's address changes (1...3600).") var rotation = 900.0
    @Option(help: ArgumentHelp("The node publishes to this MQTT broker (its mqtt: section, Home Assistant discovery off).",
                               valueName: "mqtt://host:port"))
    var mqtt: String?
    @Option(help: "With --mqtt: the node's mqtt.hearings (true: it publishes what it heard of each peer in each second).")
    var hearings = true

    func validate() throws {
        guard (1...5000).contains(devices) else { throw ValidationError("--devices must be 1...5000") }
        guard (0.02...10.24).contains(interval) else { throw ValidationError("--interval must be 0.02...10.24 s") }
        guard seconds > 0, seconds <= 600 else { throw ValidationError("--seconds must be in (0, 600]") }
        guard warmUp >= 0, warmUp <= 600 else { throw ValidationError("--warm-up must be in [0, 600]") }
        guard (1...100_000).contains(maxPeers) else { throw ValidationError("--max-peers must be 1...100000") }
        guard (0...devices).contains(irks), irks <= 512 else { throw ValidationError("--irks must be 0...min(--devices, 512)") }
        guard PrivateDeviceSpec.rotationRange.contains(rotation) else { throw ValidationError("--rotation must be 1...3600 s") }
        if let proximityd, access(proximityd, X_OK) != 0 { throw ValidationError("--proximityd: \(proximityd) is not an executable") }
    }

    func run() async throws {
        var rng = SeededGenerator(seed: 7)
        var beacons: [BeaconSpec] = []
        var phones: [PrivateDeviceSpec] = []
        for i in 0..<devices where irks > 0 {
            let position = Position(x: rng.uniform(-5...5), y: rng.uniform(-5...5))
            let key = try IdentityResolvingKey(bytes: (0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) })
            phones.append(PrivateDeviceSpec(name: "p\(i)", irk: key, rotation: rotation, trajectory: Trajectory(fixed: position),
                                            advertisingInterval: interval))
        }
        for i in 0..<devices where irks == 0 {
            let address = String(format: "C0:00:00:00:%02X:%02X", (i >> 8) & 0xff, i & 0xff)
            let position = Position(x: rng.uniform(-5...5), y: rng.uniform(-5...5))
            beacons.append(BeaconSpec(
                name: "b\(i)", address: address,
                frame: .iBeacon(uuid: UUID(uuidString: "f7826da6-4fa2-4e98-8024-bc5b71e0893e")!, major: 1, minor: UInt16(i),
                                measuredPower: -59),
                trajectory: Trajectory(fixed: position), advertisingInterval: interval))
        }
        var scenario = Scenario(seed: 7, boxes: [BoxSpec(name: "bench", address: "AA:00:00:00:00:01",
                                                         trajectory: Trajectory(fixed: Position(x: 0, y: 0)))],
                                beacons: beacons)
        scenario.privateDevices = phones
        try await withSimBoxes(scenario) { boxes in try await measure(boxes, keys: phones.prefix(irks)) }
    }

    /// Runs the client (and the node) on the bench box's bus, and prints what they measured.
    private func measure(_ boxes: SimBoxes, keys: ArraySlice<PrivateDeviceSpec>) async throws {
        let bus = boxes.address("bench")
        var node: ManagedProcess?
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("proximityd-bench-\(getpid())")
        defer { try? FileManager.default.removeItem(at: state) }
        if let proximityd {
            var arguments = ["run", "--bus", bus, "--state-dir", state.path, "--name", "bench", "--max-peers", "\(maxPeers)",
                             "--log-level", "warning"]
            if !keys.isEmpty || mqtt != nil {
                // The phones' IRKs and the broker, in a config file that is its owner's alone.
                try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
                let config = state.appendingPathComponent("bench.yaml")
                var text = keys.isEmpty ? "" : "irks:\n" + keys.map { "  \($0.name): \(Hex.text($0.irk.bytes))\n" }.joined()
                if let mqtt { text += "mqtt:\n  broker: \(mqtt)\n  discovery: false\n  hearings: \(hearings)\n" }
                guard FileManager.default.createFile(atPath: config.path, contents: Data(text.utf8),
                                                     attributes: [.posixPermissions: 0o600]) else {
                    throw ValidationError("cannot write \(config.path)")
                }
                arguments += ["--config", config.path]
            }
            let process = try ManagedProcess(proximityd, arguments)
            node = process
            let watcher = try await boxes.client("bench")
            let deadline = ContinuousClock.now + .seconds(20)
            while try await watcher.nameOwner(of: "org.proximityd") == nil {
                guard process.isRunning, ContinuousClock.now < deadline else {
                    throw ValidationError("proximityd did not start: \(process.stderr)")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            await watcher.close()
        }

        let client = try await boxes.client("bench")
        let signals = try await client.subscribe(MatchRule(sender: BlueZ.service, pathNamespace: "/org/bluez", interface: .properties,
                                                           member: "PropertiesChanged"))
        let adapter = BlueZ.adapterPath("hci0")
        _ = try await client.call(destination: BlueZ.service, path: adapter, interface: BlueZ.adapterInterface,
                                  member: "SetDiscoveryFilter", [.vardict(["Transport": .string("le"), "DuplicateData": .boolean(true)])])
        _ = try await client.call(destination: BlueZ.service, path: adapter, interface: BlueZ.adapterInterface, member: "StartDiscovery")

        let start = ContinuousClock.now
        let warmUp = start + .milliseconds(Int64(self.warmUp * 1000))
        let end = warmUp + .milliseconds(Int64(seconds * 1000))
        let counter = Task { () -> (count: Int, cpu: Double) in
            var count = 0
            var cpuStart = 0.0
            var started = false
            for await message in signals {
                let now = ContinuousClock.now
                if now >= end { break }
                if now < warmUp { continue }
                if !started {
                    started = true
                    cpuStart = processCPUSeconds()
                }
                if message.body.count >= 2, message.body[0].string == BlueZ.deviceInterface.rawValue,
                   message.body[1].stringKeyedDictionary?["RSSI"] != nil {
                    count += 1
                }
            }
            return (count, processCPUSeconds() - cpuStart)
        }
        var nodeStart: Double?
        if let node {
            try await Task.sleep(until: warmUp, clock: .continuous)
            nodeStart = ProcessStats.cpuSeconds(node.pid)
        }
        try await Task.sleep(until: end, clock: .continuous)
        let nodeCPU = node.flatMap { n in nodeStart.flatMap { s in ProcessStats.cpuSeconds(n.pid).map { $0 - s } } }
        let nodePeak = node.flatMap { ProcessStats.peakResidentBytes($0.pid) }
        var tableSize: Int?
        if node != nil {
            let reply = try await client.call(destination: "org.proximityd", path: "/org/proximityd", interface: "org.proximityd.Node1",
                                              member: "GetRanging")
            if case .dictionary(_, _, let entries)? = reply.first { tableSize = entries.count }
        }
        try await Task.sleep(until: end + .milliseconds(200), clock: .continuous)
        counter.cancel()
        let (count, cpu) = await counter.value
        if let node {
            await node.stop()
            if node.exitStatus != 0 { FileHandle.standardError.write(Data("proximityd: \(node.stderr)\n".utf8)) }
        }
        await client.close()

        let rate = Double(count) / seconds
        let offered = Double(devices) / (interval + 0.005)
        let nodePercent = nodeCPU.map { 100 * $0 / seconds }
        let nodeMB = nodePeak.map { Double($0) / 1_048_576 }
        if json {
            var extra = ""
            if let nodePercent, let nodeMB {
                extra = ", \"proximityd_cpu_percent\": \(String(format: "%.1f", nodePercent)), \"proximityd_peak_rss_mb\": "
                    + "\(String(format: "%.1f", nodeMB)), \"proximityd_table\": \(tableSize ?? -1), \"max_peers\": \(maxPeers)"
            }
            print("""
                {"devices": \(devices), "irks": \(irks), "rotation": \(irks > 0 ? rotation : 0), "interval": \(interval), "seconds": \(seconds), "rssi_updates": \(count), \
                "updates_per_second": \(Int(rate.rounded())), "offered_per_second": \(Int(offered.rounded())), \
                "cpu_seconds": \(String(format: "%.2f", cpu))\(extra)}
                """)
        } else {
            if irks > 0 { print("phones with private addresses changing every \(rotation) s; the node knows \(irks) of their IRKs") }
            print("\(devices) devices every \(interval) s for \(seconds) s: \(count) RSSI updates, "
                  + "\(Int(rate.rounded()))/s on one box bus (offered \(Int(offered.rounded()))/s); "
                  + "process CPU \(String(format: "%.2f", cpu)) s (simulator and client)")
            if let nodePercent, let nodeMB {
                let cpuOK = nodePercent < 25, memoryOK = nodeMB < 50
                print("proximityd: CPU \(String(format: "%.1f", nodePercent))% of one core (target < 25%: \(cpuOK ? "met" : "NOT met")), "
                      + "peak RSS \(String(format: "%.1f", nodeMB)) MB (target < 50 MB: \(memoryOK ? "met" : "NOT met")), "
                      + "table \(tableSize.map(String.init) ?? "?") peers (cap \(maxPeers))")
            }
        }
    }
}

/// User and system CPU time of this process (`getrusage`).
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(0), &usage)  // RUSAGE_SELF
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

/// What `/proc` says of another process.
enum ProcessStats {
    /// User and system CPU seconds (`/proc/PID/stat` fields 14 and 15).
    static func cpuSeconds(_ pid: Int32) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        // Fields after the command name, which may hold spaces: field 3 is the state.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Peak resident set size (`VmHWM`), bytes.
    static func peakResidentBytes(_ pid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kb = Int(line.split(separator: " ").dropFirst().first ?? "") else { return nil }
        return kb * 1024
    }
}
