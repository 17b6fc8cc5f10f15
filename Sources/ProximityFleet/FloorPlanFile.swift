import Foundation
import ProximityCore
import StrictYAML

/// A floor plan file (`proximity-fleet --plan FILE`, `docs/positioning.md`), read strictly: every
/// problem reported as `FILE:LINE:COLUMN: message`, in the order of the file, and a file with one
/// is not used.
///
/// ```yaml
/// floors:                      # optional; one unnamed floor by default
///   - name: ground
///     z: [0, 3]
/// nodes:
///   - name: kitchen            # the node's name as it publishes
///     position: [1.2, 3.4, 2.0]
///     rx-offset: -2.5          # optional, dB added to what it receives (calibration)
///     tx-power: -61            # optional, its RSSI at 1 m as others hear it (calibration)
/// rooms:
///   - name: kitchen
///     floor: ground            # optional with one floor
///     polygon: [[0, 0], [4, 0], [4, 5], [0, 5]]
/// calibration:                 # optional
///   path-loss-exponent: 2.5
/// background:                  # optional: a picture of the plan drawn under it on the map
///   image: house.png           # beside the plan file: PNG, JPEG or SVG
///   corner: [0, 0]             # where its bottom-left corner is on the plan, metres
///   width: 12                  # the metres its width spans
///   floor: ground              # optional with one floor
/// ```
public enum FloorPlanFile {
    public static let keys = ["floors", "nodes", "rooms", "calibration", "background"]
    public static let backgroundKeys = ["image", "corner", "width", "floor"]
    /// The pictures a background may be, by extension, and their media types.
    public static let backgroundTypes = ["png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "svg": "image/svg+xml"]
    public static let floorKeys = ["name", "z"]
    public static let nodeKeys = ["name", "position", "rx-offset", "tx-power"]
    public static let roomKeys = ["name", "floor", "polygon"]
    public static let calibrationKeys = ["path-loss-exponent"]
    /// The most of each a plan may have.
    public static let maxFloors = 64, maxNodes = 2_000, maxRooms = 5_000, maxCorners = 1_000
    /// Coordinates are within this many metres of the origin.
    public static let maxCoordinate = 100_000.0

    /// The problems of a file, each `FILE:LINE:COLUMN: message`.
    public struct Problems: Error, Sendable, CustomStringConvertible {
        public var lines: [String]
        /// The file could not be read at all.
        public var unreadable = false
        public var description: String { lines.joined(separator: "\n") }
    }

    public static func load(path: String) throws(Problems) -> FloorPlan {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw Problems(lines: ["\(path): cannot read: \((error as NSError).localizedDescription)"], unreadable: true)
        }
        guard data.count <= YAMLLimits.maxSize else {
            throw Problems(lines: ["\(path): cannot read: larger than \(YAMLLimits.maxSize >> 20) MiB"], unreadable: true)
        }
        return try parse(Array(data), path: path)
    }

    public static func parse(_ text: String, path: String) throws(Problems) -> FloorPlan { try parse(Array(text.utf8), path: path) }

    public static func parse(_ bytes: [UInt8], path: String) throws(Problems) -> FloorPlan {
        let (root, yamlProblems) = StrictYAML.parse(bytes)
        var reader = Reader()
        reader.folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        if yamlProblems.isEmpty || root != nil { reader.read(root) }
        let problems = (yamlProblems + reader.problems).enumerated().sorted {
            let a = $0.element.position ?? YAMLPosition(line: 0, column: 0), b = $1.element.position ?? YAMLPosition(line: 0, column: 0)
            return a != b ? a < b : $0.offset < $1.offset
        }.map(\.element)
        guard problems.isEmpty else { throw Problems(lines: problems.map { $0.line(file: path) }) }
        // What only the whole plan shows (FloorPlan.problems), after each value's own checks.
        let whole = reader.plan.problems
        guard whole.isEmpty else { throw Problems(lines: whole.map { "\(path): \($0)" }) }
        return reader.plan
    }

    struct Reader: YAMLReading {
        var problems: [YAMLProblem] = []
        var floors: [FloorPlan.Floor] = []
        var nodes: [FloorPlan.Node] = []
        var rooms: [FloorPlan.Room] = []
        var exponent = FloorPlan.defaultPathLossExponent
        var background: FloorPlan.Background?
        /// The plan file's folder: a background's image is there.
        var folder = "."
        /// Where each name was first given, by kind, to report a second one.
        var seen: [String: YAMLPosition] = [:]

        var plan: FloorPlan {
            var plan = FloorPlan(floors: floors, nodes: nodes, rooms: rooms, pathLossExponent: exponent)
            plan.background = background
            return plan
        }

        mutating func read(_ root: YAMLNode?) {
            guard let root, !root.isNull else {
                report(nil, "the plan is empty: it needs nodes: and rooms:")
                return
            }
            guard let entries = mapping(root, path: "", keys: FloorPlanFile.keys) else { return }
            let byKey = Dictionary(entries.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
            // Floors first: rooms and nodes refer to them.
            if let e = byKey["floors"] { readFloors(e) }
            if let e = byKey["calibration"] { readCalibration(e) }
            if let e = byKey["nodes"] { readNodes(e) } else { report(root.position, "the plan has no nodes:") }
            if let e = byKey["rooms"] { readRooms(e) } else { report(root.position, "the plan has no rooms:") }
            if let e = byKey["background"] { readBackground(e) }
        }

        mutating func readBackground(_ entry: YAMLEntry) {
            guard let fields = mapping(entry.value, path: "background", keys: FloorPlanFile.backgroundKeys) else { return }
            var image: String?, corner: PlanPoint?, width: Double?, floor: Int? = floors.count <= 1 ? 0 : nil
            for e in fields {
                switch e.key {
                case "image":
                    guard case .string(let text) = e.value.kind else {
                        report(e.value.position, "background.image: must be a file name, not \(e.value.summary)")
                        continue
                    }
                    let ext = URL(fileURLWithPath: text).pathExtension.lowercased()
                    if text.isEmpty || text.hasPrefix("/") || text.split(separator: "/").contains("..") || text.utf8.count > 255 {
                        report(e.value.position, "background.image: a file beside the plan (no /, no ..), not \(text.debugDescription)")
                    } else if FloorPlanFile.backgroundTypes[ext] == nil {
                        report(e.value.position,
                               "background.image: must be a PNG, JPEG or SVG file (.png, .jpg, .jpeg, .svg), not \(text.debugDescription)")
                    } else if !FileManager.default.fileExists(atPath: folder + "/" + text) {
                        report(e.value.position, "background.image: no file \(text.debugDescription) beside the plan (in \(folder))")
                    } else {
                        image = text
                    }
                case "corner":
                    if let pair = numbers(e.value, path: "background.corner", count: 2 ... 2) { corner = PlanPoint(x: pair[0], y: pair[1]) }
                case "width":
                    if let n = number(e.value, path: "background.width", in: 0.1 ... 10_000) { width = n }
                case "floor":
                    guard case .string(let text) = e.value.kind, let index = floors.firstIndex(where: { $0.name == text }) else {
                        report(e.value.position, "background.floor: no floor is named \(e.value.text.debugDescription)")
                        floor = nil
                        continue
                    }
                    floor = index
                default: break
                }
            }
            for key in ["image", "corner", "width"] where !fields.contains(where: { $0.key == key }) {
                report(entry.value.position, "background: needs \(key):")
            }
            if floor == nil, !fields.contains(where: { $0.key == "floor" }) {
                report(entry.value.position, "background: needs floor: (the plan has \(floors.count) floors)")
            }
            if let image, let corner, let width, let floor { background = .init(image: image, corner: corner, width: width, floor: floor) }
        }

        // MARK: - Sections

        mutating func readFloors(_ entry: YAMLEntry) {
            guard let items = sequence(entry.value, path: "floors", max: FloorPlanFile.maxFloors, holder: "a plan") else { return }
            for (i, item) in items.enumerated() {
                let path = "floors[\(i)]"
                guard let fields = mapping(item, path: path, keys: FloorPlanFile.floorKeys) else { continue }
                let name = fields.first(where: { $0.key == "name" }).flatMap { self.name($0, path: path, kind: "floor") }
                var z: ClosedRange<Double>?
                if let e = fields.first(where: { $0.key == "z" }), let pair = numbers(e.value, path: "\(path).z", count: 2 ... 2) {
                    if pair[0] < pair[1] { z = pair[0] ... pair[1] } else {
                        report(e.value.position, "\(path).z: the bottom must be below the top, not \(pair[0]) and \(pair[1])")
                    }
                }
                if fields.first(where: { $0.key == "name" }) == nil { report(item.position, "\(path): needs name:") }
                if fields.first(where: { $0.key == "z" }) == nil { report(item.position, "\(path): needs z: [bottom, top], metres") }
                if let name, let z {
                    if let other = floors.first(where: { $0.z.upperBound > z.lowerBound && z.upperBound > $0.z.lowerBound }) {
                        report(item.position,
                               "\(path): floor \(name.debugDescription) overlaps floor \(other.name.debugDescription) in height")
                    }
                    floors.append(.init(name: name, z: z))
                }
            }
        }

        mutating func readCalibration(_ entry: YAMLEntry) {
            guard let fields = mapping(entry.value, path: "calibration", keys: FloorPlanFile.calibrationKeys) else { return }
            for e in fields where e.key == "path-loss-exponent" {
                if let n = number(e.value, path: "calibration.path-loss-exponent", in: 1 ... 6) { exponent = n }
            }
        }

        mutating func readNodes(_ entry: YAMLEntry) {
            guard let items = sequence(entry.value, path: "nodes", max: FloorPlanFile.maxNodes, holder: "a plan") else { return }
            if items.isEmpty { report(entry.keyPosition, "nodes: at least one node") }
            for (i, item) in items.enumerated() {
                let path = "nodes[\(i)]"
                guard let fields = mapping(item, path: path, keys: FloorPlanFile.nodeKeys) else { continue }
                var name: String?, position: PlanPoint?, rx: Double?, tx: Double?
                for e in fields {
                    switch e.key {
                    case "name": name = self.name(e, path: path, kind: "node")
                    case "position":
                        if let p = numbers(e.value, path: "\(path).position", count: 2 ... 3) {
                            position = PlanPoint(x: p[0], y: p[1], z: p.count == 3 ? p[2] : defaultHeight)
                        }
                    case "rx-offset": rx = number(e.value, path: "\(path).rx-offset", in: -40 ... 40)
                    default: tx = number(e.value, path: "\(path).tx-power", in: -127 ... 20)
                    }
                }
                if !fields.contains(where: { $0.key == "name" }) {
                    report(item.position, "\(path): needs name: (the node's name, as it publishes)")
                }
                if !fields.contains(where: { $0.key == "position" }) {
                    report(item.position, "\(path): needs position: [x, y] or [x, y, z], metres")
                }
                if let name, let position { nodes.append(.init(name: name, position: position, rxOffset: rx, txPower: tx)) }
            }
        }

        /// A node's height when its position has none: 1 m above the lowest floor.
        var defaultHeight: Double { (floors.map(\.z.lowerBound).min() ?? 0) + 1 }

        mutating func readRooms(_ entry: YAMLEntry) {
            guard let items = sequence(entry.value, path: "rooms", max: FloorPlanFile.maxRooms, holder: "a plan") else { return }
            if items.isEmpty { report(entry.keyPosition, "rooms: at least one room") }
            for (i, item) in items.enumerated() {
                let path = "rooms[\(i)]"
                guard let fields = mapping(item, path: path, keys: FloorPlanFile.roomKeys) else { continue }
                var name: String?, floor: Int? = floors.isEmpty ? 0 : nil, polygon: [PlanPoint]?
                var floorGiven = false
                for e in fields {
                    switch e.key {
                    case "name": name = self.name(e, path: path, kind: "room")
                    case "floor":
                        floorGiven = true
                        guard case .string(let text) = e.value.kind else {
                            report(e.value.position, "\(path).floor: must be a floor's name, not \(e.value.summary)")
                            continue
                        }
                        if let index = floors.firstIndex(where: { $0.name == text }) { floor = index } else {
                            report(e.value.position, "\(path).floor: no floor is named \(text.debugDescription)"
                                   + (floors.isEmpty ? " (the plan has no floors:)"
                                                     : " (floors: \(floors.map(\.name).joined(separator: ", ")))"))
                        }
                    default: polygon = corners(e.value, path: "\(path).polygon")
                    }
                }
                if !fields.contains(where: { $0.key == "name" }) { report(item.position, "\(path): needs name:") }
                if !fields.contains(where: { $0.key == "polygon" }) { report(item.position, "\(path): needs polygon: [[x, y], …], metres") }
                if !floorGiven, floors.count > 1 { report(item.position, "\(path): needs floor: (the plan has \(floors.count) floors)") }
                if !floorGiven, floors.count == 1 { floor = 0 }
                if let name, let floor, let polygon {
                    let room = FloorPlan.Room(name: name, floor: floor, polygon: polygon)
                    if room.area < 0.01 { report(item.position, "\(path): the polygon has no area") } else { rooms.append(room) }
                }
            }
        }

        // MARK: - Names and corners (the shapes and numbers are YAMLReading's)

        mutating func name(_ entry: YAMLEntry, path: String, kind: String) -> String? {
            guard let text = string(entry.value, path: "\(path).name") else { return nil }
            if text.isEmpty || text.utf8.count > 255 || text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
                report(entry.value.position, "\(path).name: must be 1 to 255 bytes without control characters")
                return nil
            }
            if let first = seen["\(kind):\(text)"] {
                report(entry.value.position, "\(path).name: \(kind) \(text.debugDescription) is given twice (first at \(first))")
                return nil
            }
            seen["\(kind):\(text)"] = entry.value.position
            return text
        }

        /// A list of `count` coordinates, metres.
        mutating func numbers(_ node: YAMLNode, path: String, count: ClosedRange<Int>) -> [Double]? {
            numbers(node, path: path, count: count, in: -FloorPlanFile.maxCoordinate ... FloorPlanFile.maxCoordinate)
        }

        mutating func corners(_ node: YAMLNode, path: String) -> [PlanPoint]? {
            guard let items = sequence(node, path: path, max: FloorPlanFile.maxCorners, holder: "a plan") else { return nil }
            guard items.count >= 3 else {
                report(node.position, "\(path): a polygon needs at least 3 corners, not \(items.count)")
                return nil
            }
            var out: [PlanPoint] = []
            for (i, item) in items.enumerated() {
                guard let p = numbers(item, path: "\(path)[\(i)]", count: 2 ... 2) else { return nil }
                out.append(PlanPoint(x: p[0], y: p[1]))
            }
            return out
        }
    }
}

extension FloorPlanFile {
    /// The plan as a plan file (what `proximity-fleet calibrate` writes): floors when it has named
    /// ones, nodes with their calibration, rooms, and the exponent. Reading it back gives the plan.
    public static func render(_ plan: FloorPlan) -> String {
        func number(_ v: Double) -> String {
            let rounded = (v * 1000).rounded() / 1000
            return rounded == rounded.rounded() && abs(rounded) < 1e15 ? String(Int(rounded)) : String(rounded)
        }
        func name(_ s: String) -> String {
            let plain = !s.isEmpty && s.unicodeScalars.allSatisfy {
                ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_ .".unicodeScalars.contains($0))
            }
                && s.first.map { $0.isLetter } == true
                && !["true", "false", "yes", "no", "on", "off", "null", "y", "n"].contains(s.lowercased())
                && s.last != " "
            return plain ? s : "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        var out = ""
        let named = plan.floors.count > 1
            || plan.floors.first.map { $0.name != FloorPlan.defaultFloor.name || $0.z != FloorPlan.defaultFloor.z } == true
        if named {
            out += "floors:\n"
            for f in plan.floors { out += "  - name: \(name(f.name))\n    z: [\(number(f.z.lowerBound)), \(number(f.z.upperBound))]\n" }
        }
        out += "nodes:\n"
        for n in plan.nodes {
            out += "  - name: \(name(n.name))\n    position: [\(number(n.position.x)), \(number(n.position.y)), \(number(n.position.z))]\n"
            if let rx = n.rxOffset { out += "    rx-offset: \(number(rx))\n" }
            if let tx = n.txPower { out += "    tx-power: \(number(tx))\n" }
        }
        out += "rooms:\n"
        for r in plan.rooms {
            out += "  - name: \(name(r.name))\n"
            if named { out += "    floor: \(name(plan.floors[r.floor].name))\n" }
            out += "    polygon: [\(r.polygon.map { "[\(number($0.x)), \(number($0.y))]" }.joined(separator: ", "))]\n"
        }
        out += "calibration:\n  path-loss-exponent: \(number(plan.pathLossExponent))\n"
        if let b = plan.background {
            out += "background:\n  image: \(name(b.image))\n  corner: [\(number(b.corner.x)), \(number(b.corner.y))]\n  " +
                "width: \(number(b.width))\n"
            if named { out += "  floor: \(name(plan.floors[b.floor].name))\n" }
        }
        return out
    }
}
