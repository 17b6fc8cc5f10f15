import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import Testing

/// Python's bleak (from PyPI), pointed at a box bus, scans, connects and reads as it does against
/// bluetoothd. The scripts are in tests/python/.
/// Outside CI the suite is skipped when bleak cannot be had (no PyPI); under CI (`CI` set) it always
/// runs, so a missing bleak fails the acceptance test instead of hiding it. scripts/setup.sh creates
/// `.venv-tests`.
@Suite(.serialized, .enabled("bleak is not available: see the log for why; scripts/setup.sh creates .venv-tests with tests/python/requirements.txt") {
    if ProcessInfo.processInfo.environment["CI"] != nil { return true }
    return await BleakEnvironment.shared.python() != nil
})
struct FidelityBleakTests {
    static let identity = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
    static let characteristic = "8e0d1bd0-4a4b-4c4c-9d9d-1f1f1f1f1f1f"

    func bleak(_ script: String, _ arguments: [String], bus: String) async throws -> [String: Any] {
        let python = try #require(await BleakEnvironment.shared.python())
        let result = try await runCommand(python, [BleakEnvironment.scripts.appendingPathComponent(script).path] + arguments,
                                          environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus], timeout: .seconds(60))
        #expect(result.status == 0, "\(result)")
        let line = result.stdout.split(separator: "\n").last.map(String.init) ?? ""
        return (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]) ?? ["error": "\(result)"]
    }

    @Test func scannerSeesTheOtherBox() async throws {
        try await withSimBoxes(twoBoxes(distance: 2, shadowing: 2), time: .real) { sim in
            let beta = try await sim.client("beta")
            let ad = try await TestAdvertisement(on: beta, properties: peripheralAdvertisement(name: "beta-node"))
            try await ad.register(beta)
            let seen = try await bleak("scan.py", ["AA:00:00:00:00:02", serviceUUID, "15"], bus: sim.address("alpha"))
            #expect(seen["address"] as? String == "AA:00:00:00:00:02", "\(seen)")
            #expect((seen["service_uuids"] as? [String])?.contains(serviceUUID) == true, "\(seen)")
            #expect(seen["local_name"] as? String == "beta-node", "\(seen)")
            let rssi = try #require(seen["rssi"] as? Int, "\(seen)")
            // The model's mean at 2 m is −65 dBm; shadowing σ is 2 dB.
            #expect((-75 ... -55).contains(rssi), "\(seen)")
            await beta.close()
        }
    }

    @Test func clientConnectsAndReadsTheIdentity() async throws {
        try await withSimBoxes(twoBoxes(distance: 2, shadowing: 2), time: .real) { sim in
            let beta = try await sim.client("beta")
            let app = try await TestGattApplication(on: beta, identity: Self.identity, characteristicUUID: Self.characteristic)
            try await app.register(beta)
            let ad = try await TestAdvertisement(on: beta, properties: peripheralAdvertisement(discoverable: true))
            try await ad.register(beta)
            let read = try await bleak("connect_read.py", ["AA:00:00:00:00:02", Self.characteristic, "15"], bus: sim.address("alpha"))
            #expect(read["value"] as? String == Self.identity, "\(read)")
            #expect((read["services"] as? [String])?.contains(serviceUUID) == true, "\(read)")
            #expect((read["characteristics"] as? [String])?.contains(Self.characteristic) == true, "\(read)")
            await beta.close()
        }
    }
}

/// Where bleak lives: `$BLEAK_PYTHON`, or the virtual environment `.venv-tests` at the package
/// root, created with `python3 -m venv` and `pip install -r tests/python/requirements.txt` when
/// it is missing (once per test run).
actor BleakEnvironment {
    static let shared = BleakEnvironment()
    nonisolated static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    nonisolated static let scripts = root.appendingPathComponent("tests/python")
    nonisolated static let venv = root.appendingPathComponent(".venv-tests")

    private var checked = false
    private var found: String?

    func python() async -> String? {
        if checked { return found }
        checked = true
        found = await locate()
        return found
    }

    private func locate() async -> String? {
        if let given = ProcessInfo.processInfo.environment["BLEAK_PYTHON"], !given.isEmpty { return given }
        let python = Self.venv.appendingPathComponent("bin/python").path
        if await hasBleak(python) { return python }
        guard await run("python3", ["-m", "venv", Self.venv.path]) else {
            print("FidelityBleakTests skipped: cannot create \(Self.venv.path) with `python3 -m venv`")
            return nil
        }
        guard await run(Self.venv.appendingPathComponent("bin/pip").path,
                        ["install", "--quiet", "-r", Self.scripts.appendingPathComponent("requirements.txt").path]),
              await hasBleak(python) else {
            print("FidelityBleakTests skipped: cannot install bleak into \(Self.venv.path) with pip (is PyPI reachable?)")
            return nil
        }
        return python
    }

    private func hasBleak(_ python: String) async -> Bool {
        guard FileManager.default.isExecutableFile(atPath: python) else { return false }
        return await run(python, ["-c", "import bleak"])
    }

    private func run(_ executable: String, _ arguments: [String]) async -> Bool {
        (try? await runCommand(executable, arguments, timeout: .seconds(300)))?.status == 0
    }
}
