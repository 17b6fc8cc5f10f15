import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import Testing
import SimTesting

/// BlueZ's own bluetoothctl, pointed at a box bus, cannot tell the simulator from bluetoothd.
@Suite(.serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: resolveExecutable("bluetoothctl")),
                           "bluetoothctl is not installed (Debian package bluez)"))
struct FidelityBluetoothctlTests {
    @Test func listShowAndScan() async throws {
        try await withSimBoxes(twoBoxes(shadowing: 2), time: .real) { sim in
            let beta = try await sim.client("beta")
            let ad = try await TestAdvertisement(on: beta, properties: peripheralAdvertisement(discoverable: true, name: "beta-node"))
            try await ad.register(beta)
            let env = ["DBUS_SYSTEM_BUS_ADDRESS": sim.address("alpha")]

            let list = try await runCommand("bluetoothctl", ["list"], environment: env, timeout: .seconds(20))
            #expect(list.stdout.contains("Controller AA:00:00:00:00:01 alpha [default]"), "\(list)")

            let show = try await runCommand("bluetoothctl", ["show"], environment: env, timeout: .seconds(20))
            #expect(show.stdout.contains("Powered: yes"), "\(show)")
            #expect(show.stdout.contains("Discovering: no"), "\(show)")

            // Scanning until beta shows up, then SIGTERM. stdbuf -oL: line by line, as on a
            // terminal (to a pipe bluetoothctl writes only when it exits).
            let scan = try ManagedProcess(resolveExecutable("stdbuf"), ["-oL", "bluetoothctl", "scan", "on"], environment: env)
            try await scan.waitForOutput(containing: "Device AA:00:00:00:00:02 beta-node", timeout: .seconds(30))
            #expect(scan.stdout.contains("Discovery started"), "\(scan.stdout)")
            await scan.stop()
            await beta.close()
        }
    }
}
