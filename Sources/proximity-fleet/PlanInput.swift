import ArgumentParser
import Foundation
import ProximityCore
import ProximityFleet

extension ParsableCommand {
    /// The plan at `path`, or the end of the command: its problems (65) or why it cannot be read (66).
    static func loadPlan(_ path: String) -> FloorPlan {
        do { return try FloorPlanFile.load(path: path) } catch { fail(error.description, status: error.unreadable ? 66 : 65) }
    }

    /// The recording at `path`, or the end of the command: its problem (65) or why it cannot be read (66).
    static func loadTrace(_ path: String, truthRequired: Bool) -> [TraceSample] {
        do { return try TraceFile.load(path: path, truthRequired: truthRequired) } catch { fail(error.message, status: error.unreadable ? 66 : 65) }
    }
}
