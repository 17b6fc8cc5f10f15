import BlueZSim
import Foundation
import ProximityBenchmarking
import ProximityCore
import ProximityFleet
import Testing

/// tests/fixtures/house (a new user's house, issue 30): its bluez-sim scenario's radio (the
/// realistic preset, seed 7) heard by its four boxes, each box played as a node (its table, its
/// hearings of each second, its reports) into the fleet's step with the house's plan, as
/// `proximity-fleet replay` and the service do.
@Suite struct FleetHouseTests {
    static let house = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("tests/fixtures/house")

    /// What the boxes hear of the scenario's beacons for `duration` seconds, as the recording of a
    /// fleet of nodes.
    static func samples(_ scenario: Scenario, duration: Double) -> [TraceSample] {
        let radio = scenario.radioModel
        let boxes = scenario.boxes.map { (name: $0.name, position: $0.trajectory.position(at: 0)) }
        var samples: [TraceSample] = []
        for beacon in scenario.beacons {
            let heard = receptions(of: beacon.name, along: beacon.trajectory, by: boxes, duration: duration, radio: radio,
                                   installation: scenario.seed, rng: scenario.generator.derived("house \(beacon.name)"))
            for (i, list) in heard.enumerated() {
                for s in list { samples.append(TraceSample(time: s.t, node: boxes[i].name, device: beacon.name, rssi: s.rssi)) }
            }
        }
        return samples
    }

    @Test("the house: Cleo's still tag is in the bedroom from 60 s on, for the whole 10 minutes; Anna's tag is in each room she stands in; no box is a device")
    func house() throws {
        let scenario = try Scenario.load(from: Self.house.appendingPathComponent("scenario.yaml"))
        var configuration = FleetConfiguration()
        configuration.plan = try FloorPlanFile.load(path: Self.house.appendingPathComponent("plan.yaml").path)
        let plan = try #require(configuration.plan)
        let anna = try #require(scenario.beacon(named: "anna"))
        var cleoRooms: [String: Int] = [:]
        var annaSeconds: [String: (right: Int, total: Int)] = [:]
        var devices = Set<String>()
        FleetReplay.play(Self.samples(scenario, duration: 600), configuration: configuration) { rows in
            for row in rows {
                devices.insert(row.device)
                if row.device == "cleo", row.time >= 60 { cleoRooms[row.room, default: 0] += 1 }
                if row.device == "anna" {
                    // Scored where she stands, 15 s after she got there: the room she is in.
                    let p = anna.trajectory.position(at: row.time), before = anna.trajectory.position(at: row.time - 15)
                    guard abs(p.x - before.x) + abs(p.y - before.y) < 0.01, let room = plan.room(x: p.x, y: p.y, floor: 0) else { continue }
                    let name = plan.rooms[room].name
                    annaSeconds[name, default: (0, 0)].total += 1
                    if row.room == name { annaSeconds[name]!.right += 1 }
                }
            }
        }
        #expect(cleoRooms.keys.sorted() == ["bedroom"], "Cleo's rooms from 60 s on, seconds each: \(cleoRooms)")
        #expect(Set(annaSeconds.keys) == ["living", "kitchen", "office", "bedroom"])
        for (room, s) in annaSeconds.sorted(by: { $0.key < $1.key }) {
            #expect(Double(s.right) >= 0.9 * Double(s.total), "Anna in the \(room): \(s.right) of \(s.total) seconds right")
        }
        #expect(devices == ["anna", "cleo"])
    }
}
