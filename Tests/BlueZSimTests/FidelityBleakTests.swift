import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import Testing

/// Python's bleak (from PyPI), pointed at a box bus, scans, connects and reads as it does against
/// bluetoothd. The scripts are in tests/python/.
@Suite(.serialized, .enabled(if: BleakEnvironment.python != nil, BleakEnvironment.skipReason))
struct FidelityBleakTests {
    static let identity = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
    static let characteristic = "8e0d1bd0-4a4b-4c4c-9d9d-1f1f1f1f1f1f"

    func bleak(_ script: String, _ arguments: [String], bus: String) async throws -> [String: Any] {
        let python = try #require(BleakEnvironment.python)
        let result = try await runCommand(python, [BleakEnvironment.scripts.appendingPathComponent(script).path] + arguments,
                                          environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus], timeout: .seconds(60))
        #expect(result.status == 0, "\(result)")
        let line = result.stdout.split(separator: "\n").last.map(String.init) ?? ""
        return (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]) ?? ["error": "\(result)"]
    }

    @Test func scannerSeesTheOtherBox() async throws {
        try await withSim(twoBoxes(distance: 2, shadowing: 2), realTime: true) { sim in
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
        try await withSim(twoBoxes(distance: 2, shadowing: 2), realTime: true) { sim in
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
/// it is missing.
enum BleakEnvironment {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let scripts = root.appendingPathComponent("tests/python")
    static let venv = root.appendingPathComponent(".venv-tests")

    nonisolated(unsafe) private static var problem = ""

    static let python: String? = {
        if let given = ProcessInfo.processInfo.environment["BLEAK_PYTHON"], !given.isEmpty { return given }
        let python = venv.appendingPathComponent("bin/python").path
        if hasBleak(python) { return python }
        guard run(resolveExecutable("python3"), ["-m", "venv", venv.path]) else {
            problem = "cannot create \(venv.path) with `python3 -m venv`"
            return nil
        }
        guard run(venv.appendingPathComponent("bin/pip").path,
                  ["install", "--quiet", "-r", scripts.appendingPathComponent("requirements.txt").path]),
              hasBleak(python) else {
            problem = "cannot install bleak into \(venv.path) with pip (is PyPI reachable?)"
            return nil
        }
        return python
    }()

    static var skipReason: Comment {
        Comment(rawValue: "bleak is not available: \(python == nil ? problem : ""); run python3 -m venv .venv-tests && .venv-tests/bin/pip install -r tests/python/requirements.txt")
    }

    private static func hasBleak(_ python: String) -> Bool {
        FileManager.default.isExecutableFile(atPath: python) && run(python, ["-c", "import bleak"])
    }

    private static func run(_ executable: String, _ arguments: [String]) -> Bool {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        do {
            try p.run()
        } catch {
            return false
        }
        p.waitUntilExit()
        return p.terminationStatus == 0
    }
}
