import ArgumentParser
import BlueZSim
import DBusKit
import Foundation
import ProximityTesting

/// `bluez-sim bench`: how many RSSI updates per second the simulator delivers on one box bus.
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure RSSI updates per second delivered on one box bus.",
        discussion: """
            Starts a private bus with one box and --devices iBeacons around it, advertising every \
            --interval seconds. A DBusKit client sets a discovery filter (Transport le, \
            DuplicateData true: every report is announced), starts discovery, and counts the \
            PropertiesChanged signals carrying RSSI that arrive during --seconds.
            """)

    @Option(help: "Beacons on the air.") var devices = 200
    @Option(help: "Their advertising interval in seconds (0.02...10.24).") var interval = 0.04
    @Option(help: "How long to count, after a one-second warm-up.") var seconds = 5.0
    @Flag(help: "Print the result as JSON.") var json = false

    func validate() throws {
        guard (1...5000).contains(devices) else { throw ValidationError("--devices must be 1...5000") }
        guard (0.02...10.24).contains(interval) else { throw ValidationError("--interval must be 0.02...10.24 s") }
        guard seconds > 0, seconds <= 600 else { throw ValidationError("--seconds must be in (0, 600]") }
    }

    func run() async throws {
        var rng = SeededGenerator(seed: 7)
        var beacons: [BeaconSpec] = []
        for i in 0..<devices {
            let address = String(format: "C0:00:00:00:%02X:%02X", (i >> 8) & 0xff, i & 0xff)
            let position = Position(x: rng.uniform(-5...5), y: rng.uniform(-5...5))
            beacons.append(BeaconSpec(
                name: "b\(i)", address: address,
                frame: .iBeacon(uuid: UUID(uuidString: "f7826da6-4fa2-4e98-8024-bc5b71e0893e")!, major: 1, minor: UInt16(i),
                                measuredPower: -59),
                trajectory: Trajectory(fixed: position), advertisingInterval: interval))
        }
        let scenario = Scenario(seed: 7, boxes: [BoxSpec(name: "bench", address: "AA:00:00:00:00:01", trajectory: Trajectory(fixed: Position(x: 0, y: 0)))],
                                beacons: beacons)
        let bus = try await PrivateBus.start(name: "bench")
        let simulator = Simulator(scenario: scenario, addresses: ["bench": bus.address])
        try await simulator.start()
        let runner = Task { await simulator.run() }

        let client = try await bus.connect()
        let signals = try await client.subscribe(MatchRule(sender: BlueZ.service, pathNamespace: "/org/bluez", interface: .properties,
                                                           member: "PropertiesChanged"))
        let adapter = BlueZ.adapterPath("hci0")
        _ = try await client.call(destination: BlueZ.service, path: adapter, interface: BlueZ.adapterInterface,
                                  member: "SetDiscoveryFilter", [.vardict(["Transport": .string("le"), "DuplicateData": .boolean(true)])])
        _ = try await client.call(destination: BlueZ.service, path: adapter, interface: BlueZ.adapterInterface, member: "StartDiscovery")

        let start = ContinuousClock.now
        let warmUp = start + .seconds(1)
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
        try await Task.sleep(until: end + .milliseconds(200), clock: .continuous)
        counter.cancel()
        let (count, cpu) = await counter.value
        runner.cancel()
        await runner.value
        await client.close()
        await simulator.stop()
        await bus.stop()

        let rate = Double(count) / seconds
        let offered = Double(devices) / (interval + 0.005)
        if json {
            print("""
                {"devices": \(devices), "interval": \(interval), "seconds": \(seconds), "rssi_updates": \(count), \
                "updates_per_second": \(Int(rate.rounded())), "offered_per_second": \(Int(offered.rounded())), \
                "cpu_seconds": \(String(format: "%.2f", cpu))}
                """)
        } else {
            print("\(devices) devices every \(interval) s for \(seconds) s: \(count) RSSI updates, "
                  + "\(Int(rate.rounded()))/s on one box bus (offered \(Int(offered.rounded()))/s); "
                  + "process CPU \(String(format: "%.2f", cpu)) s (simulator and client)")
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
