import ArgumentParser
import Foundation
import ProximityCore
import ProximityFleet

/// `proximity-fleet check-plan PLAN.yaml`: reads a floor plan as `--plan` would.
struct CheckPlan: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-plan",
        abstract: "Check a floor plan file and say what it holds.",
        discussion: """
            Reads the plan as --plan does: every problem is one line, FILE:LINE:COLUMN: message, \
            and a plan with one is not used. docs/positioning.md.

            Exit status: 0 when the plan is good; 65 when it has problems; 66 when it cannot be read.

            Examples:
              $ proximity-fleet check-plan /etc/proximityd/plan.yaml
                plan.yaml: ok (1 floor, 4 nodes, 5 rooms)
            """)

    @Argument(help: ArgumentHelp("The floor plan.", valueName: "plan.yaml"))
    var plan: String

    func run() throws {
        let floorPlan = Self.loadPlan(plan)
        func count(_ n: Int, _ what: String) -> String { "\(n) \(what)\(n == 1 ? "" : "s")" }
        print("\(plan): ok (\(count(floorPlan.floors.count, "floor")), \(count(floorPlan.nodes.count, "node")), " +
              "\(count(floorPlan.rooms.count, "room")))")
    }
}
