import Foundation
import ProximityCore
@testable import ProximityFleet
import Testing

/// The plan file: what it reads, and every problem at FILE:LINE:COLUMN.
@Suite struct FloorPlanFileTests {
    static let file = "plan.yaml"

    static let house = """
        floors:
          - name: ground
            z: [0, 3]
          - name: first
            z: [3, 6]
        nodes:
          - name: kitchen
            position: [1.2, 3.4, 2.0]
            rx-offset: -2.5
          - name: landing
            position: [5, 5, 5]
            tx-power: -61
          - name: hall
            position: [8, 1]
        rooms:
          - name: kitchen
            floor: ground
            polygon: [[0, 0], [4, 0], [4, 5], [0, 5]]
          - name: bedroom
            floor: first
            polygon: [[0, 0], [6, 0], [6, 6], [0, 6]]
        calibration:
          path-loss-exponent: 2.8

        """

    static func problems(_ text: String) -> [String] {
        do {
            _ = try FloorPlanFile.parse(text, path: file)
            return []
        } catch { return error.lines }
    }

    @Test("a plan with floors, nodes (z defaulted to 1 m above the lowest floor), rooms and calibration")
    func reads() throws {
        let plan = try FloorPlanFile.parse(Self.house, path: Self.file)
        #expect(plan.floors.map(\.name) == ["ground", "first"])
        #expect(plan.nodes.map(\.name) == ["kitchen", "landing", "hall"])
        #expect(plan.nodes[0].position == PlanPoint(x: 1.2, y: 3.4, z: 2) && plan.nodes[0].rxOffset == -2.5 && plan.nodes[0].txPower == nil)
        #expect(plan.nodes[1].txPower == -61)
        #expect(plan.nodes[2].position.z == 1)
        #expect(plan.rooms.map(\.floor) == [0, 1] && plan.rooms[1].polygon.count == 4)
        #expect(plan.pathLossExponent == 2.8)
        #expect(plan.floor(atHeight: plan.nodes[1].position.z) == 1)
        #expect(plan.problems.isEmpty)
        // Without floors, one floor, and rooms need none.
        let flat = try FloorPlanFile.parse("nodes:\n  - {name: a, position: [0, 0]}\nrooms:\n  - {name: r, polygon: [[0,0],[1,0],[1,1]]}\n", path: Self.file)
        #expect(flat.floors.count == 1 && flat.rooms[0].floor == 0)
    }

    @Test("bad plans are refused with every problem at FILE:LINE:COLUMN", arguments: [
        ("nodes: []\nrooms: []\n", ["1:1: nodes: at least one node", "2:1: rooms: at least one room"]),
        ("", ["the plan is empty: it needs nodes: and rooms:"]),
        ("nodes:\n  - {name: a, position: [0]}\nrooms:\n  - {name: r, polygon: [[0,0],[1,0]]}\n",
         ["2:25: nodes[0].position: must be a list of 2 or 3 numbers, not a list",
          "4:24: rooms[0].polygon: a polygon needs at least 3 corners, not 2"]),
        ("nodes:\n  - {name: a, position: [0, x]}\n  - {name: a, position: [1, 1]}\nrooms:\n  - {name: r, polygon: [[0,0],[1,0],[0,1]], floor: up}\n",
         ["2:29: nodes[0].position[1]: must be a number, not the string \"x\"",
          "3:12: nodes[1].name: node \"a\" is given twice (first at 2:12)",
          "5:52: rooms[0].floor: no floor is named \"up\" (the plan has no floors:)"]),
        ("nodes:\n  - {name: a, position: [0, 0], rx-offset: 90, colour: red}\nrooms:\n  - {name: r, polygon: [[0,0],[1,0],[2,0]]}\nwalls: 3\n",
         ["2:44: nodes[0].rx-offset: must be in -40…40, not 90",
          "2:48: nodes[0]: unknown key 'colour'",
          "4:5: rooms[0]: the polygon has no area",
          "5:1: unknown key 'walls'"]),
        ("nodes:\n  - {name: a, postion: [0, 0]}\nrooms:\n  - {name: r, polygon: [[0,0],[1,0],[0,1]]}\n",
         ["2:5: nodes[0]: needs position: [x, y] or [x, y, z], metres", "2:15: nodes[0]: unknown key 'postion' (did you mean 'position'?)"]),
        ("floors:\n  - {name: g, z: [0, 3]}\n  - {name: f, z: [2, 5]}\nnodes:\n  - {name: a, position: [0, 0]}\nrooms:\n  - {name: r, polygon: [[0,0],[1,0],[0,1]]}\n",
         ["3:5: floors[1]: floor \"f\" overlaps floor \"g\" in height", "7:5: rooms[0]: needs floor: (the plan has 2 floors)"]),
        ("nodes:\n  - {name: a, position: [0, 0]}\nrooms:\n  - {name: r, polygon: [[0,0],[1,0],[0,1]]}\ncalibration: {path-loss-exponent: 9}\n",
         ["5:35: calibration.path-loss-exponent: must be in 1…6, not 9"]),
    ])
    func refused(_ text: String, _ expected: [String]) {
        #expect(Self.problems(text) == expected.map { "\(Self.file):\($0)" }.map { $0.hasPrefix("\(Self.file):the") ? $0.replacingOccurrences(of: "\(Self.file):", with: "\(Self.file): ") : $0 })
    }

    @Test("render: a plan written back reads as the same plan, calibration included; names that YAML would misread are quoted")
    func roundTrip() throws {
        var plan = try FloorPlanFile.parse(Self.house, path: Self.file)
        plan.rooms[0].name = "yes"
        plan.nodes[2].name = "hall: east"
        let text = FloorPlanFile.render(plan)
        let back = try FloorPlanFile.parse(text, path: Self.file)
        #expect(back == plan, "\(text)")
        let flat = try FloorPlanFile.parse("nodes:\n  - {name: a, position: [0, 0]}\nrooms:\n  - {name: r, polygon: [[0,0],[1,0],[1,1]]}\n", path: Self.file)
        #expect(try FloorPlanFile.parse(FloorPlanFile.render(flat), path: Self.file) == flat)
        #expect(!FloorPlanFile.render(flat).contains("floors:"))
    }

    @Test("a missing or unreadable file is one line")
    func unreadable() {
        #expect(throws: FloorPlanFile.Problems.self) { try FloorPlanFile.load(path: "/nonexistent/plan.yaml") }
        do { _ = try FloorPlanFile.load(path: "/nonexistent/plan.yaml") } catch {
            #expect(error.lines.count == 1 && error.lines[0].hasPrefix("/nonexistent/plan.yaml: cannot read: "), "\(error.lines)")
        }
    }
}
