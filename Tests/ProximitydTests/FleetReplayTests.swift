import Foundation
import ProximityTesting
import Testing

/// `proximity-fleet replay` and `check-plan` as a user runs them: a plan file, a CSV recording.
@Suite("proximity-fleet replay and check-plan")
struct FleetReplayTests {
    static let plan = """
        nodes:
          - {name: a, position: [0.5, 0.5, 2]}
          - {name: b, position: [9.5, 0.5, 2]}
          - {name: c, position: [9.5, 7.5, 2]}
          - {name: d, position: [0.5, 7.5, 2]}
        rooms:
          - {name: kitchen, polygon: [[0,0],[5,0],[5,4],[0,4]]}
          - {name: hall, polygon: [[5,0],[10,0],[10,4],[5,4]]}
          - {name: study, polygon: [[5,4],[10,4],[10,8],[5,8]]}
          - {name: living, polygon: [[0,4],[5,4],[5,8],[0,8]]}

        """

    /// 60 s of a tag standing in the kitchen then the study, each node sampling it 5 times a
    /// second (a seeded 3 dB of noise), with the truth; a sample of a node not in the plan too.
    /// A seeded standard normal draw.
    static func gaussian(_ seed: inout UInt64) -> Double {
        func uniform() -> Double {
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            return (Double(seed >> 11) + 0.5) / Double(1 << 53)
        }
        return (-2 * log(uniform())).squareRoot() * cos(2 * .pi * uniform())
    }

    static func trace() -> String {
        var seed: UInt64 = 9
        func gaussian() -> Double { Self.gaussian(&seed) }
        let nodes: [(String, Double, Double)] = [("a", 0.5, 0.5), ("b", 9.5, 0.5), ("c", 9.5, 7.5), ("d", 0.5, 7.5)]
        var out = "time,node,device,rssi,x,y,z,note\n"
        for tenth in stride(from: 0, to: 600, by: 2) {
            let t = Double(tenth) / 10
            let (x, y) = t < 30 ? (2.0, 2.0) : (8.0, 6.0)
            for (name, nx, ny) in nodes {
                let d = max(0.3, ((x - nx) * (x - nx) + (y - ny) * (y - ny) + 1).squareRoot())
                let rssi = (-59 - 25 * log10(d) + 3 * gaussian()).rounded()
                out += String(format: "%.1f,%@,tag 1,%.0f,%.1f,%.1f,1,x\n", t, name, rssi, x, y)
            }
        }
        return out + "1.0,garage,tag 1,-80,2,2,1,x\n"
    }

    /// Writes files into a new temporary folder named after `prefix`: `write(NAME, TEXT)` returns
    /// the file's path.
    static func writer(_ prefix: String) throws -> (String, String) throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return { name, text in
            let url = dir.appendingPathComponent(name)
            try Data(text.utf8).write(to: url)
            return url.path
        }
    }

    static func files(_ trace: String, plan: String = plan) throws -> (plan: String, trace: String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("replay-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let p = dir.appendingPathComponent("house.yaml"), t = dir.appendingPathComponent("walk.csv")
        try Data(plan.utf8).write(to: p)
        try Data(trace.utf8).write(to: t)
        return (p.path, t.path)
    }

    @Test("replay: a row a second (time,device,x,y,z,room), the kitchen then the study; --score's lines; a node not in the plan is named on standard error")
    func replay() async throws {
        let (plan, trace) = try Self.files(Self.trace())
        let result = try await runCommand(BuiltProducts.path("proximity-fleet"), ["replay", "--plan", plan, trace, "--score"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr == "proximity-fleet: warning: nodes not in the plan, their samples unused for positions: garage\n")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "time,device,x,y,z,room")
        let rows = lines.dropFirst().filter { !$0.hasPrefix("#") }.map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
        #expect(rows.count == 60 && rows.allSatisfy { $0.count == 6 && $0[1] == "tag 1" }, "\(rows.prefix(3))")
        let rooms = rows.map { $0[5] }
        #expect(rooms[5 ..< 29].allSatisfy { $0 == "kitchen" } && rooms[40...].allSatisfy { $0 == "study" }, "\(rooms)")
        let score = lines.filter { $0.hasPrefix("#") }
        // The service places a device 2 s after its first report (FleetStep.fallbackDelay): the
        // first two seconds have no position, as live.
        #expect(score.count == 6 && score[0] == "# estimator fleet, 58 estimates of 60 device-seconds", "\(score)")
        #expect(score[5].hasPrefix("# lateness: closest to the truth ") && score[5].hasSuffix(" m against the truth at the same moment)"), "\(score)")
        #expect(rows.prefix(2).allSatisfy { $0[2].isEmpty } && rows.dropFirst(2).allSatisfy { !$0[2].isEmpty }, "\(rows.prefix(4))")
        #expect(score[1].hasPrefix("# error m: median ") && score[3].hasPrefix("# room accuracy ") && score[4].hasPrefix("# room changes per minute "), "\(score)")
        // The baseline, on the same recording.
        let espresense = try await runCommand(BuiltProducts.path("proximity-fleet"), ["replay", "--plan", plan, trace, "--estimator", "espresense"])
        #expect(espresense.status == 0 && espresense.stdout.split(separator: "\n").count == 61, "\(espresense)")
    }

    /// A tag at `spots` (each for 10 s, 5 samples a second per node), heard by nodes whose
    /// receivers read `bias` dB high, with 3 dB of seeded noise.
    static func walk(_ spots: [(Double, Double)], bias: [String: Double], seed: UInt64) -> String {
        var seed = seed
        func gaussian() -> Double { Self.gaussian(&seed) }
        let nodes: [(String, Double, Double)] = [("a", 0.5, 0.5), ("b", 9.5, 0.5), ("c", 9.5, 7.5), ("d", 0.5, 7.5)]
        var out = "time,node,device,rssi,x,y\n"
        var t = 0.0
        for (x, y) in spots {
            for _ in 0 ..< 50 {
                for (name, nx, ny) in nodes {
                    let d = max(0.3, ((x - nx) * (x - nx) + (y - ny) * (y - ny) + 1).squareRoot())
                    let rssi = -59 - 25 * log10(d) + bias[name]! + 3 * gaussian()
                    out += String(format: "%.1f,%@,tag,%.0f,%.2f,%.2f\n", t, name, rssi, x, y)
                }
                t += 0.2
            }
        }
        return out
    }

    @Test("calibrate: a walk with biased receivers gives a plan whose rx-offsets undo the biases (up to a common shift); replayed with it, another walk is placed better")
    func calibrate() async throws {
        let fleet = BuiltProducts.path("proximity-fleet")
        let bias: [String: Double] = ["a": 7, "b": -5, "c": 2, "d": -6]
        let grid = stride(from: 1.0, through: 9.0, by: 2.0).flatMap { x in stride(from: 1.0, through: 7.0, by: 2.0).map { (x, $0) } }
        let (plan, walkFile) = try Self.files(Self.walk(grid, bias: bias, seed: 5))
        let calibrated = try await runCommand(fleet, ["calibrate", "--plan", plan, walkFile])
        #expect(calibrated.status == 0, "\(calibrated)")
        #expect(calibrated.stderr.hasPrefix("calibrated from 80 spots: path-loss exponent "), "\(calibrated.stderr)")
        print("calibrate on a synthetic walk (docs/positioning.md):\n\(calibrated.stderr)")
        let out = URL(fileURLWithPath: plan).deletingLastPathComponent().appendingPathComponent("calibrated.yaml")
        try Data(calibrated.stdout.utf8).write(to: out)
        let check = try await runCommand(fleet, ["check-plan", out.path])
        #expect(check.status == 0, "\(check)")
        // Each rx-offset undoes its node's bias, up to the shift they share.
        var fitted: [String: Double] = [:]
        var node: String?
        for line in calibrated.stdout.split(separator: "\n") {
            if line.hasPrefix("  - name: ") { node = String(line.dropFirst("  - name: ".count)) }
            if line.hasPrefix("    rx-offset: "), let node { fitted[node] = Double(line.dropFirst("    rx-offset: ".count)) }
        }
        #expect(fitted.count == 4, "\(calibrated.stdout)")
        let shift = (fitted.values.reduce(0, +) + bias.values.reduce(0, +)) / 4
        for (name, b) in bias { #expect(abs(fitted[name, default: .nan] + b - shift) < 1, "\(name): \(fitted) for \(bias)") }

        // Another walk, scored with the plan as drawn and with the calibrated one.
        let path = [(2.0, 2.0), (3.5, 2.5), (5.0, 3.0), (6.5, 4.0), (8.0, 5.5), (8.5, 6.5), (6.0, 6.5), (3.0, 6.0)]
        let (_, second) = try Self.files(Self.walk(path, bias: bias, seed: 11))
        func median(_ plan: String) async throws -> Double {
            let r = try await runCommand(fleet, ["replay", "--plan", plan, second, "--score"])
            let line = try #require(r.stdout.split(separator: "\n").first { $0.hasPrefix("# error m: median ") }, "\(r)")
            return Double(line.dropFirst("# error m: median ".count).prefix { $0 != "," }) ?? .nan
        }
        let before = try await median(plan), after = try await median(out.path)
        #expect(after < before, "median error \(before) m as drawn, \(after) m calibrated")
    }

    /// tests/fixtures/house (a new user's house, issue 30): the fleet's first self-calibration's
    /// nine hearings. The fit used to take the exponent to its 1.5 bound and leave 7.5 dB RMS, the
    /// offsets where the unbounded exponent had put them.
    @Test("calibrate on the house's first hearings: the exponent off its bounds, 4.5 dB RMS at most, every node's offset within the priors")
    func calibrateHouse() async throws {
        let house = repositoryRoot.appendingPathComponent("tests/fixtures/house")
        let calibrated = try await runCommand(BuiltProducts.path("proximity-fleet"),
                                              ["calibrate", "--plan", house.appendingPathComponent("plan.yaml").path,
                                               house.appendingPathComponent("calibration-pairs.csv").path])
        #expect(calibrated.status == 0, "\(calibrated)")
        let summary = try #require(calibrated.stderr.split(separator: "\n").first.map(String.init))
        let words = summary.split(separator: " ")
        let exponent = try #require(words.firstIndex(of: "exponent").flatMap { Double(words[$0 + 1].trimmingCharacters(in: .punctuationCharacters)) },
                                    "\(summary)")
        let rms = try #require(words.firstIndex(of: "residual").flatMap { Double(words[$0 + 1]) }, "\(summary)")
        #expect(exponent > 1.6 && exponent < 4.4 && !summary.contains("at its bound"), "\(summary)")
        #expect(rms <= 4.5, "\(summary)")
        let offsets = calibrated.stderr.split(separator: "\n").dropFirst().compactMap { line -> Double? in
            line.split(separator: " ").firstIndex(of: "rx-offset").flatMap { Double(line.split(separator: " ")[$0 + 1]) }
        }
        #expect(offsets.count == 4 && offsets.allSatisfy { abs($0) < 12 }, "\(calibrated.stderr)")
    }

    @Test("walk: proximityctl record's files (the node's name from their first line, or NAME=FILE) and the marks become one walk CSV, samples in time order with the mark's position")
    func walk() async throws {
        let fleet = BuiltProducts.path("proximity-fleet")
        let write = try Self.writer("walk")
        let preamble = { (name: String) in
            "# proximityctl record: node=0f8e62a4-5c1e-4a57-9f0a-3b6c2d1e7f90 started=2026-11-26T10:00:00.000Z path_loss_exponent=2 clear_interval=10 default_measured_power=-59 name=\(name)\n"
                + "# peers: tag\n# time: seconds since the Unix epoch\ntime,peer,rssi,truth,measured_power,zone,distance\n"
        }
        let a = try write("a.csv", preamble("a") + "1000.10,tag,-60,,-59,,\n1000.50,tag,-61,,-59,,\n1001.00,tag,,,-59,near,1.2\n1003.00,tag,-70,,-59,,\n")
        let b = try write("b.csv", preamble("b") + "1000.20,tag,-75,,-59,,\n1002.90,tag,-72,,-59,,\n")
        let marks = try write("marks.csv", "start,end,x,y\n1000.0,1001.0,2,3\n1002.5,1003.5,4,5\n")
        let result = try await runCommand(fleet, ["walk", "--marks", marks, a, "hall=\(b)"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == """
            time,node,device,rssi,x,y,z
            1000.100,a,tag,-60,2,3,1
            1000.200,hall,tag,-75,2,3,1
            1000.500,a,tag,-61,2,3,1
            1002.900,hall,tag,-72,4,5,1
            1003.000,a,tag,-70,4,5,1

            """, "\(result.stdout)")
        let bad = try await runCommand(fleet, ["walk", "--marks", try write("bad.csv", "start,end,x,y\n5,4,1,1\n"), a])
        #expect(bad.status == 65 && bad.stderr.hasSuffix("bad.csv:2: start must not be after end\n"), "\(bad)")
    }

    /// `text` as a spreadsheet or Python's csv module saves it: CRLF line ends, a UTF-8 BOM.
    static func crlf(_ text: String) -> String { "\u{FEFF}" + text.replacingOccurrences(of: "\n", with: "\r\n") }

    @Test("replay: a trace saved with CRLF line ends and a BOM gives the same bytes as saved with LF; no row skipped, none said")
    func replayCRLF() async throws {
        let fleet = BuiltProducts.path("proximity-fleet")
        let (plan, lf) = try Self.files(Self.trace())
        let (_, crlf) = try Self.files(Self.crlf(Self.trace()))
        let a = try await runCommand(fleet, ["replay", "--plan", plan, lf, "--score"])
        let b = try await runCommand(fleet, ["replay", "--plan", plan, crlf, "--score"])
        #expect(a.status == 0 && b.status == 0, "\(a)\n\(b)")
        #expect(Array(b.stdout.utf8) == Array(a.stdout.utf8) && a.stdout.split(separator: "\n").count == 67, "\(a.stdout)\n\(b.stdout)")
        #expect(b.stderr == a.stderr && !b.stderr.contains("skipped"), "\(b.stderr)")
    }

    @Test("calibrate: a walk saved with CRLF and a BOM gives the same plan and summary as with LF; its empty rows and comments counted on standard error")
    func calibrateCRLF() async throws {
        let fleet = BuiltProducts.path("proximity-fleet")
        let walk = Self.walk([(2, 2), (8, 2), (8, 6), (2, 6), (5, 4)], bias: ["a": 3, "b": -2, "c": 0, "d": 1], seed: 3)
        let (plan, lf) = try Self.files(walk)
        // The same rows, with an empty row after the header and a comment among them.
        let lines = walk.split(separator: "\n", omittingEmptySubsequences: false)
        let edited = ([lines[0], "", "# held at the door"] + lines[1...]).joined(separator: "\n")
        let (_, crlf) = try Self.files(Self.crlf(edited))
        let a = try await runCommand(fleet, ["calibrate", "--plan", plan, lf])
        let b = try await runCommand(fleet, ["calibrate", "--plan", plan, crlf])
        #expect(a.status == 0 && b.status == 0, "\(a)\n\(b)")
        #expect(a.stderr.hasPrefix("calibrated from 20 spots: ") && b.stdout == a.stdout, "\(a)\n\(b)")
        #expect(b.stderr == "proximity-fleet: \(crlf): 2 rows skipped: 1 empty, 1 commented out (#)\n" + a.stderr, "\(b.stderr)")
    }

    /// A `proximityctl record` file of node `name` (its first line naming it unless nil), holding
    /// `samples` (time, peer, rssi) and, after each, a report row.
    static func record(_ name: String?, _ samples: [(time: String, peer: String, rssi: String)]) -> String {
        var out = "# proximityctl record: node=0f8e62a4-5c1e-4a57-9f0a-3b6c2d1e7f90 started=2026-11-26T10:00:00.000Z path_loss_exponent=2"
            + " clear_interval=10 default_measured_power=-59\(name.map { " name=\($0)" } ?? "")\n"
            + "# peers: tag\n# time: seconds since the Unix epoch\ntime,peer,rssi,truth,measured_power,zone,distance\n"
        for s in samples { out += "\(s.time),\(s.peer),\(s.rssi),,-59,,\n\(s.time),\(s.peer),,,-59,near,1.2\n" }
        return out
    }

    @Test("replay takes a proximityctl record file as it is: the node its first line names, the devices its peers; the same bytes as the trace of those rows; without the name, one line says how")
    func replayRecord() async throws {
        let fleet = BuiltProducts.path("proximity-fleet")
        // Node a's rows of the trace, as a's recording, with a report row after each sample.
        let rows = Self.trace().split(separator: "\n").dropFirst().map { $0.split(separator: ",").map(String.init) }.filter { $0[1] == "a" }
        let (plan, trace) = try Self.files("time,node,device,rssi\n" + rows.map { "\($0[0]),a,\($0[2]),\($0[3])\n" }.joined())
        let (_, record) = try Self.files(Self.crlf(Self.record("a", rows.map { ($0[0], "\"\($0[2])\"", $0[3]) })))
        let expected = try await runCommand(fleet, ["replay", "--plan", plan, trace])
        let result = try await runCommand(fleet, ["replay", "--plan", plan, record])
        #expect(expected.status == 0 && expected.stdout.split(separator: "\n").count == 61, "\(expected)")
        #expect(result.status == 0 && Array(result.stdout.utf8) == Array(expected.stdout.utf8), "\(result)")
        #expect(result.stderr == "proximity-fleet: \(record): \(rows.count) rows skipped: \(rows.count) without an rssi (a report's or a truth mark's row)\n",
                "\(result.stderr)")
        let (_, unnamed) = try Self.files(Self.record(nil, [("1", "tag", "-60")]))
        let refused = try await runCommand(fleet, ["replay", "--plan", plan, unnamed])
        #expect(refused.status == 65 && refused.stderr == "proximity-fleet: error: \(unnamed): a proximityctl record file without its node's name "
                + "(name=… in its first line): proximity-fleet walk NAME=\(unnamed) > trace.csv makes a trace of it\n", "\(refused)")
    }

    @Test("walk: CRLF records and marks give the same walk as LF; without --marks, x,y,z empty; the rows skipped are counted on standard error")
    func walkCRLF() async throws {
        let fleet = BuiltProducts.path("proximity-fleet")
        let write = try Self.writer("walk")
        let a = Self.record("a", [("1000.10", "tag", "-60"), ("1000.50", "\"tag, 2\"", "-61"), ("1003.00", "tag", "-70")])
        let b = Self.record(nil, [("1000.20", "tag", "-75")])
        let marks = "start,end,x,y\n\n1000.0,1001.0,2,3\n# not held still\n1002.5,1003.5,4,5\n"
        let lf = (a: try write("a.csv", a), b: try write("b.csv", b), marks: try write("marks.csv", marks))
        let crlf = (a: try write("a-crlf.csv", Self.crlf(a)), b: try write("b-crlf.csv", Self.crlf(b)), marks: try write("marks-crlf.csv", Self.crlf(marks)))
        let expected = try await runCommand(fleet, ["walk", "--marks", lf.marks, lf.a, "hall=\(lf.b)"])
        #expect(expected.status == 0 && expected.stdout == """
            time,node,device,rssi,x,y,z
            1000.100,a,tag,-60,2,3,1
            1000.200,hall,tag,-75,2,3,1
            1000.500,a,"tag, 2",-61,2,3,1
            1003.000,a,tag,-70,4,5,1

            """, "\(expected)")
        let result = try await runCommand(fleet, ["walk", "--marks", crlf.marks, crlf.a, "hall=\(crlf.b)"])
        #expect(result.status == 0 && Array(result.stdout.utf8) == Array(expected.stdout.utf8), "\(result)")
        #expect(result.stderr == """
            proximity-fleet: \(crlf.marks): 2 rows skipped: 1 empty, 1 commented out (#)
            proximity-fleet: \(crlf.a): 3 rows skipped: 3 without an rssi (a report's or a truth mark's row)
            proximity-fleet: \(crlf.b): 1 row skipped: 1 without an rssi (a report's or a truth mark's row)

            """, "\(result.stderr)")
        // Without marks: the rows with x,y,z empty, a trace for replay.
        let unmarked = try await runCommand(fleet, ["walk", crlf.a, "hall=\(crlf.b)"])
        #expect(unmarked.status == 0 && unmarked.stdout == """
            time,node,device,rssi,x,y,z
            1000.100,a,tag,-60,,,
            1000.200,hall,tag,-75,,,
            1000.500,a,"tag, 2",-61,,,
            1003.000,a,tag,-70,,,

            """, "\(unmarked)")
        let (plan, _) = try Self.files("t")
        let trace = try write("trace.csv", unmarked.stdout)
        let replayed = try await runCommand(fleet, ["replay", "--plan", plan, trace])
        #expect(replayed.status == 0 && replayed.stdout.hasPrefix("time,device,x,y,z,room\n"), "\(replayed)")
    }

    @Test("bad input: a trace without the columns or with a bad number (FILE:LINE, 65), --score and calibrate without truth, each saying which, a missing file (66), a bad plan (FILE:LINE:COLUMN, 65)")
    func refused() async throws {
        let fleet = BuiltProducts.path("proximity-fleet")
        var (plan, trace) = try Self.files("time,node,rssi\n1,a,-60\n")
        var result = try await runCommand(fleet, ["replay", "--plan", plan, trace])
        #expect(result.status == 65 && result.stderr == "proximity-fleet: error: \(trace):1: no device column (the header names time,node,rssi)\n", "\(result)")
        (plan, trace) = try Self.files("time,node,device,rssi\n1,a,t,-60\n2,a,t,loud\n")
        result = try await runCommand(fleet, ["replay", "--plan", plan, trace])
        #expect(result.status == 65 && result.stderr == "proximity-fleet: error: \(trace):3: rssi must be a number, not \"loud\"\n", "\(result)")
        (plan, trace) = try Self.files("time,node,device,rssi\n1,a,t,-60\n1e12,a,t,-60\n")
        result = try await runCommand(fleet, ["replay", "--plan", plan, trace])
        #expect(result.status == 65 && result.stderr.contains("a replay covers at most 604800 s (7 days)"), "\(result)")
        (plan, trace) = try Self.files("time,node,device,rssi\n1,a,t,-60\n2,a,t,loud\n")
        result = try await runCommand(fleet, ["replay", "--plan", plan, trace, "--score"])
        #expect(result.status == 65 && result.stderr.contains(":1: --score needs the truth"), "\(result)")
        result = try await runCommand(fleet, ["calibrate", "--plan", plan, trace])
        #expect(result.status == 65 && result.stderr.contains(":1: calibrate needs the truth: x,y columns"), "\(result)")
        result = try await runCommand(fleet, ["replay", "--plan", plan, "/nonexistent.csv"])
        #expect(result.status == 66 && result.stderr.hasPrefix("proximity-fleet: error: /nonexistent.csv: cannot read: "), "\(result)")
        (plan, trace) = try Self.files("time,node,device,rssi\n1,a,t,-60\n", plan: "nodes:\n  - {name: a, position: [0]}\nrooms: []\n")
        result = try await runCommand(fleet, ["replay", "--plan", plan, trace])
        #expect(result.status == 65 && result.stderr == """
            proximity-fleet: error: \(plan):2:25: nodes[0].position: must be a list of 2 or 3 numbers, not a list
            proximity-fleet: error: \(plan):3:1: rooms: at least one room

            """, "\(result)")
        let check = try await runCommand(fleet, ["check-plan", plan])
        #expect(check.status == 65 && check.stderr.split(separator: "\n").count == 2, "\(check)")
        (plan, _) = try Self.files("t", plan: Self.plan)
        let good = try await runCommand(fleet, ["check-plan", plan])
        #expect(good.status == 0 && good.stdout == "\(plan): ok (1 floor, 4 nodes, 4 rooms)\n", "\(good)")
    }
}
