import Foundation

// The seam between the simulator's two halves, fixed here so both can be built at once:
//
// - the *model* (pure, no I/O, time injected): scenario files, box and beacon trajectories, the
//   radio (log-distance path loss with Gaussian shadowing, independent and bursty packet loss,
//   advertising intervals, connection latency and failures), and third-party beacon frames.
//   Files: Scenario.swift, Trajectory.swift, RadioModel.swift, SeededGenerator.swift,
//   BeaconFrames.swift.
// - the *bus side*: "bluetoothd" on every box bus (org.bluez objects with BlueZ's semantics), the
//   air that carries advertisements between boxes, the control interface, and the executable.
//   Files: Air.swift, SimulatedAdapter.swift, SimulatedDevice.swift, Advertising.swift, Gatt.swift,
//   Control.swift, Simulator.swift, BlueZNames.swift.

/// Simulated time: seconds since the scenario started. The model never reads a clock.
public typealias SimTime = Double

/// A position in metres.
public struct Position: Sendable, Hashable, Codable {
    public var x: Double
    public var y: Double
    public var z: Double
    public init(x: Double, y: Double, z: Double = 0) {
        self.x = x
        self.y = y
        self.z = z
    }
    public func distance(to other: Position) -> Double {
        let dx = x - other.x, dy = y - other.y, dz = z - other.z
        return (dx * dx + dy * dy + dz * dz).squareRoot()
    }
}
