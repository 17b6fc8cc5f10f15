import ArgumentParser
import Foundation
import ProximityCore
import ProximityFleet

extension ParsableCommand {
    /// The plan at `path`, or the end of the command: its problems (65) or why it cannot be read (66).
    static func loadPlan(_ path: String) -> FloorPlan {
        do { return try FloorPlanFile.load(path: path) } catch { fail(error.description, status: error.unreadable ? 66 : 65) }
    }

    /// The recording at `path` (a trace or a `proximityctl record` file), or the end of the
    /// command: its problem (65) or why it cannot be read (66). The rows it skipped are said.
    static func loadTrace(_ path: String, truthFor: String? = nil) -> [TraceSample] {
        do {
            let trace = try TraceFile.load(path: path, truthFor: truthFor)
            noteSkipped(trace.skipped, in: path)
            return trace.samples
        } catch { fail(error.message, status: error.unreadable ? 66 : 65) }
    }

    /// `proximity-fleet: FILE: 3 rows skipped: 2 empty, 1 commented out (#)` on standard error,
    /// when a row was: none goes in silence.
    static func noteSkipped(_ skipped: SkippedRows, in path: String) {
        if let summary = skipped.summary { FileHandle.standardError.write(Data("proximity-fleet: \(path): \(summary)\n".utf8)) }
    }
}
