import BlueZSim
import DBusKit
import Foundation
import ProximityAPI
import ProximityNode
import ProximityTesting
import Testing

/// Recording (`Node1.StartRecording`, `Samples`), `proximityctl record` and `calibrate`, and
/// `ranging-bench --replay`, against real nodes on bluez-sim and on private buses.
@Suite("record, replay and calibrate", .serialized)
struct RecordReplayTests {
    static let fleet = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"
    static let door = "ibeacon:\(fleet):1:2"

    static func ctl(_ address: String, _ arguments: [String]) async throws -> CommandResult {
        try await runCommand(BuiltProducts.path("proximityctl"), arguments + ["--bus", address], timeout: .seconds(60))
    }

    /// Alpha at the origin and the door, an iBeacon whose frame says −59 dBm, sending `txOffset`
    /// dB off that, on a radio with 4 dB of shadowing and 10 % loss.
    static func scenario(seed: UInt64, door trajectory: Trajectory, txOffset: Double = 0) -> Scenario {
        var radio = RadioParameters()
        radio.shadowingSigma = 4
        radio.packetLoss = 0.1
        return Scenario(seed: seed, radio: radio, boxes: [
            BoxSpec(name: "alpha", address: "AA:00:00:00:00:01", trajectory: Trajectory(fixed: Position(x: 0, y: 0))),
        ], beacons: [
            BeaconSpec(name: "door", address: "C0:00:00:00:00:01",
                       frame: .iBeacon(uuid: UUID(uuidString: fleet)!, major: 1, minor: 2, measuredPower: -59),
                       trajectory: trajectory, txOffset: txOffset),
        ])
    }

    /// Back and forth between 0.3 m (immediate), 1.5 m (near) and 6 m (far), holding 6 s at each,
    /// for five minutes: whenever a recording starts the door moves through every zone.
    static var walking: Trajectory {
        var points: [Waypoint] = []
        var t = 0.0
        while t < 300 {
            for d in [0.3, 1.5, 6.0, 1.5] {
                points.append(Waypoint(time: t, position: Position(x: d, y: 0)))
                points.append(Waypoint(time: t + 6, position: Position(x: d, y: 0)))
                t += 8
            }
        }
        return try! Trajectory(waypoints: points)
    }

    @Test("proximityctl record on a walking iBeacon, then ranging-bench --replay of the file: the replayed node's zone equals the live node's at every report (and FoundDevices says the same)")
    func recordThenReplay() async throws {
        try await withNodes(Self.scenario(seed: 31, door: Self.walking), simulate: false) { sim, daemons in
            // The node first, waiting for bluetoothd: the recording holds the door's every sample.
            daemons["alpha"] = try await sim.startDaemon("alpha")
            let observer = try await sim.buses["alpha"]!.connect()
            let found = SignalLog(try await observer.subscribe(MatchRule(sender: "org.proximityd", interface: "org.proximityd.Node1",
                                                                        member: "FoundDevices")))
            defer { found.cancel() }
            let file = sim.stateDirectory("alpha").deletingLastPathComponent().appendingPathComponent("door.csv")
            let record = try ManagedProcess(BuiltProducts.path("proximityctl"),
                                            ["record", "--peer", Self.door, "--out", file.path, "--seconds", "24", "--bus", sim.address("alpha")])
            defer { record.signal(SIGKILL) }
            try await record.waitForOutput(containing: "record: recording", inStderr: true, timeout: .seconds(15))
            try await sim.simulate()
            #expect(try await record.waitForExit(timeout: .seconds(45)) == 0, "\(record.stderr)")
            #expect(record.stderr.contains("stopped after 24 s"), "\(record.stderr)")

            let csv = try String(contentsOf: file, encoding: .utf8)
            let lines = csv.split(separator: "\n").map(String.init)
            #expect(lines.first?.hasPrefix("# proximityctl record: node=") == true, "\(lines.prefix(3))")
            #expect(lines.contains("time,peer,rssi,truth,measured_power,zone,distance"))
            let rows = lines.filter { !$0.hasPrefix("#") && !$0.hasPrefix("time,") }.map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
            let samples = rows.filter { !$0[2].isEmpty }
            let reports = rows.filter { !$0[5].isEmpty }
            // The recording started before the simulation: the sample that put the door in the
            // table comes before the first report of it. The door advertises ten times a second,
            // so one sample a report row is a wide margin, whatever the machine's load.
            #expect(rows.first.map { !$0[2].isEmpty } == true, "the first row is a sample: \(rows.prefix(3))")
            #expect(!reports.isEmpty && samples.count >= reports.count, "\(samples.count) samples, \(reports.count) reports")
            #expect(rows.allSatisfy { $0.count == 7 && $0[1] == Self.door && $0[3].isEmpty }, "every row the door's, truth empty")
            #expect(samples.allSatisfy { $0[4] == "-59" }, "the frame's measured power")
            let recordedZones = reports.map { $0[5] }
            #expect(Set(recordedZones).count >= 2, "the door moved through zones: \(recordedZones)")

            // The zones recorded are the ones FoundDevices announced, report after report from the
            // first that listed the door: none dropped. (The observer may get the last reports
            // after the recording ended.)
            let listed = recordedZones.filter { $0 != "removed" }
            try await found.until("FoundDevices lists the door as often as the recording", timeout: .seconds(10)) {
                found.messages.filter { zones($0)[Self.door] != nil }.count >= listed.count
            }
            let announced = found.messages.compactMap { zones($0)[Self.door] }
            #expect(Array(announced.prefix(listed.count)) == listed, "FoundDevices \(announced) against the recording \(recordedZones)")

            let replay = try await runCommand(BuiltProducts.path("ranging-bench"), ["--replay", file.path, "--zones", "--json"],
                                              timeout: .seconds(60))
            #expect(replay.status == 0, "\(replay)")
            let results = try #require(try JSONSerialization.jsonObject(with: Data(replay.stdout.utf8)) as? [[String: Any]])
            let result = try #require(results.first)
            let agreement = try #require(result["agreement"] as? [String: Any], "\(result)")
            #expect(agreement["reports"] as? Int == reports.count)
            #expect(agreement["agreeing"] as? Int == reports.count, "\(agreement)")
            let zoneRows = try #require(result["zones"] as? [[String: Any]])
            #expect(zoneRows.count == reports.count)
            let replayed = zoneRows.compactMap { ($0["zones"] as? [String])?.first }
            #expect(replayed == recordedZones, "replayed \(replayed), live \(recordedZones)")
            #expect(zoneRows.compactMap { $0["recorded"] as? String } == recordedZones)
            // Every pipeline ran; without truth no pipeline has a zone accuracy.
            let summaries = try #require(result["summaries"] as? [[String: Any]])
            let names = summaries.compactMap { $0["pipeline"] as? String }
            #expect(names.first == "node" && Set(["altbeacon-ios", "android-beacon-lib", "room-assistant"]).isSubset(of: names), "\(names)")
            #expect(summaries.allSatisfy { $0["zoneAccuracy"] == nil && $0["ticksWithTruth"] as? Int == 0 }, "\(summaries)")
            #expect(summaries.allSatisfy { ($0["ticks"] as? Int) == reports.count })

            // The text form says the same.
            let text = try await runCommand(BuiltProducts.path("ranging-bench"), ["--replay", file.path], timeout: .seconds(60))
            #expect(text.stdout.contains("node vs the live node's zones: \(reports.count) of \(reports.count) reports agree"), "\(text)")
            await observer.close()
        }
    }

    @Test("proximityctl calibrate: an iBeacon 1 m away sending 16 dB less than its frame's −59 dBm is far, then gets a measured power within 2 dB of −75 and is near")
    func calibrate() async throws {
        let scenario = Self.scenario(seed: 32, door: Trajectory(fixed: Position(x: 1, y: 0)), txOffset: -16)
        try await withNodes(scenario) { sim, daemons in
            daemons["alpha"] = try await sim.startDaemon("alpha")
            try await sim.waitRanging("alpha", "alpha ranges the door far", timeout: .seconds(30)) { $0[Self.door] == "far" }
            #expect(try await sim.peerProperty("alpha", Self.door, ["Proximity", "MeasuredPower"]) == "s \"far\"\nn -59")

            let dry = try await Self.ctl(sim.address("alpha"), ["calibrate", Self.door, "--seconds", "3", "--dry-run"])
            #expect(dry.status == 0 && dry.stdout.contains("--dry-run: nothing set"), "\(dry)")
            #expect(try await sim.peerProperty("alpha", Self.door, ["MeasuredPower"]) == "n -59")

            // Capitals are put right. The median of 30 samples or more under 4 dB of shadowing is
            // within 2 dB of the truth; calibrate refuses with fewer.
            let run = try await Self.ctl(sim.address("alpha"), ["calibrate", Self.door.uppercased(), "--distance", "1", "--seconds", "8",
                                                                "--min-samples", "30"])
            #expect(run.status == 0, "\(run)")
            #expect(run.stdout.contains("median RSSI") && run.stdout.contains("IQR") && run.stdout.contains("MAD")
                    && run.stdout.contains("samples") && run.stdout.contains("was -59 dBm"), "\(run.stdout)")
            let line = try #require(run.stdout.split(separator: "\n").first { $0.hasPrefix("set the measured power") }, "\(run.stdout)")
            let set = try #require(Int(line.split(separator: " ").dropLast(2).last ?? ""), "\(line)")
            #expect(abs(set - -75) <= 2, "set \(set) dBm, true -75 dBm: \(run.stdout)")
            let count = try #require(run.stdout.split(separator: "\n").first.flatMap { $0.split(separator: " ").dropLast().last }.flatMap { Int($0) })
            #expect(count >= 30, "\(count) samples, --min-samples 30")

            try await sim.until("alpha", "the door uses its new measured power", timeout: .seconds(5)) {
                try await sim.peerProperty("alpha", Self.door, ["MeasuredPower"]) == "n \(set)"
            }
            try await sim.until("alpha", "the door 1 m away is near", timeout: .seconds(5)) {
                try await sim.peerProperty("alpha", Self.door, ["Proximity"]) == "s \"near\""
            }
            let settings = try String(contentsOf: sim.stateDirectory("alpha").appendingPathComponent("settings.json"), encoding: .utf8)
            #expect(settings.contains("\"\(Self.door)\" : \(set)"), "\(settings)")
        }
    }

    @Test("StartRecording/StopRecording: bad peers, too many peers, the wrong signature, stopping twice, the client limit; Samples reach the recording client only, once a report; a client that leaves is dropped")
    func busInput() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            func call(_ connection: DBusConnection, _ member: MemberName, _ arguments: [DBusValue]) async throws {
                _ = try await connection.call(destination: "org.proximityd", path: ProximityBus.rootPath,
                                              interface: ProximityBus.Node1.interface, member: member, arguments)
            }
            func expectError(_ name: ErrorName, _ member: MemberName, _ arguments: [DBusValue], on connection: DBusConnection,
                             containing text: String = "", sourceLocation: SourceLocation = #_sourceLocation) async {
                do {
                    try await call(connection, member, arguments)
                    Issue.record("\(member)\(arguments) was accepted", sourceLocation: sourceLocation)
                } catch let error as DBusError {
                    #expect(error.name == name && (text.isEmpty || error.message.contains(text)), "\(member): \(error)", sourceLocation: sourceLocation)
                } catch {
                    Issue.record("\(error)", sourceLocation: sourceLocation)
                }
            }
            func peers(_ names: [String]) -> [DBusValue] { [.array(element: .string, names.map { .string($0) })] }
            let client = try await box.bus.connect()
            let start = ProximityBus.Node1.startRecording.name, stop = ProximityBus.Node1.stopRecording.name
            await expectError(ProximityBus.Errors.invalidArguments, start, peers(["nobody"]), on: client, containing: "is not a peer identifier")
            await expectError(ProximityBus.Errors.invalidArguments, start, peers([Self.door.uppercased()]), on: client)
            await expectError(ProximityBus.Errors.invalidArguments, start, peers(["ibeacon:\(Self.fleet):1:70000"]), on: client)
            await expectError(ProximityBus.Errors.invalidArguments, start, peers([""]), on: client, containing: "empty")
            await expectError(ProximityBus.Errors.invalidArguments, start, peers((0..<65).map { "ibeacon:\(Self.fleet):1:\($0)" }), on: client,
                              containing: "at most 64")
            await expectError("org.freedesktop.DBus.Error.InvalidArgs", start, [.string(Self.door)], on: client)
            await expectError(ProximityBus.Errors.doesNotExist, stop, [], on: client, containing: "is not recording")

            // 64 peers, a name given twice, every form: accepted.
            try await call(client, start, peers((0..<64).map { "ibeacon:\(Self.fleet):1:\($0)" } + ["ibeacon:\(Self.fleet):1:0"]))
            try await call(client, start, peers([Self.door, "35b639de-a46c-45e4-8206-ab21ecfd26b3",
                                                 "altbeacon:0118:\(Self.fleet):1:2", "eddystone:00010203040506070809:0a0b0c0d0e0f",
                                                 "eddystone-url:https://example.com/a,b"]))

            // Samples: once a report (empty here: no BlueZ), to the recording client only.
            let mine = SignalLog(try await client.subscribe(MatchRule(sender: "org.proximityd", interface: ProximityBus.Node1.interface,
                                                                     member: ProximityBus.Node1.samples)))
            let others = SignalLog(try await box.observer.subscribe(MatchRule(sender: "org.proximityd", interface: ProximityBus.Node1.interface,
                                                                             member: ProximityBus.Node1.samples)))
            let reports = SignalLog(try await box.observer.subscribe(MatchRule(sender: "org.proximityd", interface: ProximityBus.Node1.interface,
                                                                              member: ProximityBus.Node1.foundDevices)))
            defer { mine.cancel(); others.cancel(); reports.cancel() }
            let first = try await mine.wait(timeout: .seconds(5), "a Samples signal") { _ in true }
            let batch = try #require(RecordedBatch(first), "\(first)")
            #expect(batch.samples.isEmpty && batch.reports.isEmpty && abs(batch.time - Date().timeIntervalSince1970) < 5)
            #expect(first.destination?.rawValue == client.uniqueName.rawValue, "unicast: \(String(describing: first.destination))")
            // Three reports later the observer (not recording) has seen FoundDevices but no Samples,
            // and the recording client a Samples signal with each: waited for on its own
            // connection, which the bus serves apart from the observer's.
            let mark = reports.count
            for i in 1...3 { _ = try await reports.wait(from: mark + i - 1, timeout: .seconds(10), "FoundDevices") { _ in true } }
            _ = try await mine.wait(from: 2, timeout: .seconds(10), "a third Samples signal") { _ in true }
            #expect(others.count == 0, "Samples reached a client that does not record")

            try await call(client, stop, [])
            await expectError(ProximityBus.Errors.doesNotExist, stop, [], on: client)

            // 16 clients at once; the 17th waits until one leaves the bus.
            var clients: [DBusConnection] = []
            for _ in 0..<ProximityBus.Node1.maxRecorders {
                let c = try await box.bus.connect()
                try await call(c, start, peers([]))
                clients.append(c)
            }
            await expectError(ProximityBus.Errors.limitReached, start, peers([Self.door]), on: client, containing: "at most 16")
            let leaving = clients.removeFirst()
            let leaver = leaving.uniqueName.rawValue
            await leaving.close()
            try await daemon.waitForOutput(containing: "its client left the bus", inStderr: true, timeout: .seconds(10))
            #expect(daemon.stderr.contains(leaver), "\(daemon.stderr)")
            try await call(client, start, peers([Self.door]))
            for c in clients { await c.close() }
            await client.close()
            await daemon.stop()
            #expect(daemon.exitStatus == 0, "\(daemon.stderr)")
        }
    }

    @Test("proximityctl record and calibrate refuse bad input (64), an unwritable file (73), a peer the node does not range (69); record without BlueZ writes the header and stops at --seconds")
    func cliInput() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            let dir = box.bus.directory
            let out = dir.appendingPathComponent("r.csv").path
            func expect(_ arguments: [String], _ status: Int32, _ text: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
                let r = try await Self.ctl(box.address, arguments)
                #expect(r.status == status && r.stderr.contains(text), "\(arguments): \(r)", sourceLocation: sourceLocation)
            }
            try await expect(["record", "--out", out], 64, "--peer: name at least one peer")
            try await expect(["record", "--peer", "nobody", "--out", out], 64, "\"nobody\" is not a peer identifier")
            try await expect(["record", "--peer", Self.door, "--out", out, "--seconds", "0"], 64, "--seconds")
            try await expect(["record", "--peer", Self.door, "--out", out, "--colour"], 64, "Unknown option '--colour'")
            try await expect(["record", "--peer", Self.door], 64, "Missing expected argument '--out <file>'")
            try await expect(["record", "--peer", Self.door, "--out", dir.appendingPathComponent("no/such/dir.csv").path], 73, "cannot create")
            try await expect(["calibrate", "nobody"], 64, "is not a peer identifier")
            try await expect(["calibrate", Self.door, "--distance", "0"], 64, "--distance")
            try await expect(["calibrate", Self.door, "--seconds", "0.5"], 64, "--seconds")
            try await expect(["calibrate", Self.door, "--min-samples", "2"], 64, "--min-samples")
            try await expect(["calibrate", Self.door], 69, "the node does not range \(Self.door) now (it ranges no peer)")

            let record = try await Self.ctl(box.address, ["record", "--peer", Self.door, "--peer", Self.door, "--out", out, "--seconds", "2"])
            #expect(record.status == 0, "\(record)")
            #expect(record.stderr.contains("\(Self.door) is not ranged now") && record.stderr.contains("0 samples and 0 report rows written"),
                    "\(record.stderr)")
            let file = try String(contentsOf: URL(fileURLWithPath: out), encoding: .utf8).split(separator: "\n")
            #expect(file.count == 4 && file[1] == "# peers: \(Self.door)" && file[3] == "time,peer,rssi,truth,measured_power,zone,distance",
                    "\(file)")

            // SIGTERM stops it at once with exit 0, keeping the file.
            let long = try ManagedProcess(BuiltProducts.path("proximityctl"), ["record", "--peer", Self.door, "--out", out, "--bus", box.address])
            try await long.waitForOutput(containing: "Ctrl-C to stop", inStderr: true, timeout: .seconds(10))
            long.signal(SIGTERM)
            #expect(try await long.waitForExit(timeout: .seconds(10)) == 0, "\(long.stderr)")
            #expect(long.stderr.contains("SIGTERM: stopped"), "\(long.stderr)")
            await daemon.stop()
        }
    }

    @Test("ranging-bench --replay: metrics that need truth only where it is given (a distance, or absent), the others everywhere; a bad file is refused with FILE:LINE")
    func replayTruth() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("replay-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        // A peer at 2 m (−65 dBm at 10 samples a second, measured power −59) for 40 s, then gone
        // for 20 s; truth given for the first 20 s (2 m) and for the last 20 s (absent) only.
        var text = "# hand-made\ntime,peer,rssi,truth,measured_power\n"
        let t0 = 1_800_000_000.0
        for i in 0..<400 {
            let t = t0 + Double(i) * 0.1
            text += "\(t),p,\(i % 2 == 0 ? -64 : -66),\(t < t0 + 20 ? "2" : ""),-59\n"
        }
        // Reports are not recorded: the replay reports once a second from a second after the
        // first row to a second after the last. Truth-only rows hold the absent stretch's truth.
        for i in 0..<20 { text += "\(t0 + 41 + Double(i)),p,,absent,\n" }
        let file = dir.appendingPathComponent("hand.csv")
        try text.write(to: file, atomically: true, encoding: .utf8)
        let replay = try await runCommand(BuiltProducts.path("ranging-bench"), ["--replay", file.path, "--json"], timeout: .seconds(60))
        #expect(replay.status == 0, "\(replay)")
        let result = try #require((try JSONSerialization.jsonObject(with: Data(replay.stdout.utf8)) as? [[String: Any]])?.first)
        let node = try #require((result["summaries"] as? [[String: Any]])?.first { $0["pipeline"] as? String == "node" })
        let withTruth = try #require(node["ticksWithTruth"] as? Int)
        #expect((19...21).contains(withTruth), "truth on the first 20 s only: \(withTruth)")
        #expect((node["zoneAccuracy"] as? Double ?? 0) > 0.9, "\(node)")
        #expect((node["distanceErrorMedian"] as? Double ?? 9) < 0.5, "\(node)")
        #expect(result["agreement"] == nil, "no report rows, nothing to agree with")
        #expect(node["ticks"] as? Int == 61, "\(node)")
        #expect(node["departures"] as? Int == 1 && (node["departureMedian"] as? Double ?? 99) <= 4, "\(node)")
        // Present from the first sample to the last (no truth there) and while the truth is 2 m.
        #expect(node["unknownWhilePresent"] as? Double == 0, "\(node)")

        for (content, message) in [
            ("time,peer,rssi\n1,p,-60\n", "bad.csv:1: the header needs the columns time,peer,rssi,truth; missing: truth"),
            ("time,peer,rssi,truth\n1,p,loud,\n", "bad.csv:2: rssi: \"loud\" is not a number"),
            ("# c\ntime,peer,rssi,truth\n1,p,-60,near\n", "bad.csv:3: truth: \"near\" is neither a distance in metres (0 or more) nor absent"),
            ("time,peer,rssi,truth,zone\n1,p,-60,,near\n", "bad.csv:2: a row is a sample (rssi) or a report (zone), not both"),
            ("time,peer,rssi,truth\n,p,-60,\n", "bad.csv:2: time is empty"),
            ("time,peer,rssi,truth\n1,\"p,-60,\n", "bad.csv:2: a quoted field opens on this line and is not closed"),
            ("time,peer,rssi,truth,zone\n1,p,,,close\n", "bad.csv:2: zone: \"close\" is not immediate, near, far, unknown or removed"),
            ("time,peer,rssi,truth\n1,p,,\n", "bad.csv:2: a row needs rssi (a sample), zone (a report) or truth"),
            ("time,peer,rssi,truth\n1,p,,3\n", "bad.csv: no sample rows"),
        ] {
            let bad = dir.appendingPathComponent("bad.csv")
            try content.write(to: bad, atomically: true, encoding: .utf8)
            let r = try await runCommand(BuiltProducts.path("ranging-bench"), ["--replay", bad.path])
            #expect(r.status == 64 && r.stderr.contains(dir.appendingPathComponent(message).path), "\(message): \(r)")
        }
    }
}
