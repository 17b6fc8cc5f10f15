import Foundation
import Testing

import BlueZSim

/// Scenario files: the shipped examples, defaults, both syntaxes, and a table of bad inputs each
/// with the path its error must name.
@Suite struct ScenarioTests {
    static let scenarios = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scenarios")

    // MARK: The examples

    @Test func walkPast() throws {
        let scenario = try Scenario.load(from: Self.scenarios.appendingPathComponent("walk-past.yaml"))
        #expect(scenario.seed == 42)
        #expect(scenario.radio == RadioParameters(
            pathLossExponent: 2.7, measuredPower: -59, shadowingSigma: 3, advertisingInterval: 0.1, packetLoss: 0.05,
            connectionLatency: 0.05, connectionFailureRate: 0, sensitivity: -92))
        #expect(scenario.boxes.map(\.name) == ["alpha", "bravo", "charlie"])
        #expect(scenario.boxes.map(\.address) == ["02:00:00:00:00:01", "02:00:00:00:00:02", "02:00:00:00:00:03"])
        #expect(scenario.boxes.allSatisfy { $0.adapter == "hci0" })
        let charlie = try #require(scenario.box(named: "charlie"))
        #expect(charlie.trajectory.waypoints.count == 5)
        #expect(charlie.trajectory.position(at: 10) == Position(x: 2.5, y: 0.3))
        #expect(charlie.trajectory.position(at: 100) == Position(x: 70, y: 0.3))

        let shelf = try #require(scenario.beacon(named: "shelf"))
        #expect(shelf.frame == .iBeacon(uuid: UUID(uuidString: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!, major: 1, minor: 2,
                                        measuredPower: -59))
        #expect(shelf.advertisingInterval == 0.2)
        #expect(shelf.trajectory.position(at: 30) == Position(x: 2.5, y: 2))
    }

    /// The point of walk-past: seen from alpha and from bravo, charlie's true zone goes
    /// immediate → near → far → out of range (the zones' default thresholds 0.5 m and 3 m; out of
    /// range where the mean RSSI is below the sensitivity).
    @Test func walkPastGoesThroughEveryZone() throws {
        let scenario = try Scenario.load(from: Self.scenarios.appendingPathComponent("walk-past.yaml"))
        let model = scenario.radioModel
        let charlie = try #require(scenario.box(named: "charlie"))
        func zones(from name: String) throws -> [String] {
            let box = try #require(scenario.box(named: name))
            var seen: [String] = []
            for step in 0...700 {
                let t = Double(step) / 10
                let d = box.trajectory.position(at: t).distance(to: charlie.trajectory.position(at: t))
                let zone = model.meanRSSI(distance: d) < scenario.radio.sensitivity ? "out"
                    : d < 0.5 ? "immediate" : d < 3 ? "near" : "far"
                if seen.last != zone { seen.append(zone) }
            }
            return seen
        }
        #expect(try zones(from: "alpha") == ["immediate", "near", "far", "out"])
        #expect(try zones(from: "bravo") == ["far", "near", "immediate", "near", "far", "out"])
        // Where charlie ends up, even 5σ of shadowing does not reach the sensitivity.
        let end = charlie.trajectory.position(at: 60)
        for box in scenario.boxes where box.name != "charlie" {
            let mean = model.meanRSSI(distance: box.trajectory.position(at: 60).distance(to: end))
            #expect(mean + 5 * scenario.radio.shadowingSigma < scenario.radio.sensitivity)
        }
    }

    @Test func staticRing() throws {
        let scenario = try Scenario.load(from: Self.scenarios.appendingPathComponent("static-ring.json"))
        #expect(scenario.seed == 7)
        #expect(scenario.radio.shadowingSigma == 4)
        #expect(scenario.radio.packetLoss == 0.1)
        let center = try #require(scenario.box(named: "center"))
        let distances = scenario.boxes.dropFirst().map {
            $0.trajectory.position(at: 0).distance(to: center.trajectory.position(at: 0))
        }
        #expect(distances == [1, 2, 4, 8])
        #expect(scenario.boxes.allSatisfy { $0.trajectory.isFixed })
        #expect(scenario.beacons.isEmpty)
    }

    // MARK: Defaults and both syntaxes

    @Test func minimalScenarioTakesTheDefaults() throws {
        let scenario = try Scenario.parse("""
            boxes:
              - { name: solo, address: "aa:bb:cc:dd:ee:ff", position: [1, 2, 3] }
            """, format: .yaml)
        #expect(scenario.seed == 0)
        #expect(scenario.radio == RadioParameters())
        #expect(scenario.beacons.isEmpty)
        let box = try #require(scenario.boxes.first)
        #expect(box.address == "AA:BB:CC:DD:EE:FF")  // stored uppercase
        #expect(box.adapter == "hci0")
        #expect(box.trajectory.position(at: 5) == Position(x: 1, y: 2, z: 3))
    }

    @Test func yamlAndJSONDescribeTheSameScenario() throws {
        let yaml = try Scenario.parse("""
            seed: 18446744073709551615
            radio: { shadowing_sigma: 0, sensitivity: -90.5 }
            boxes:
              - name: a
                address: "02:00:00:00:00:01"
                adapter: hci2
                waypoints:
                  - { t: 0, at: [0, 0] }
                  - { t: 1.5, at: [3, 4, 5] }
            beacons:
              - name: b
                address: "C0:00:00:00:00:01"
                eddystone_url: { url: "https://www.example.com/", tx_power: -20 }
                position: [1, 1]
                advertising_interval: 1
            """, format: .yaml)
        let json = try Scenario.parse("""
            {"seed": 18446744073709551615, "radio": {"shadowing_sigma": 0, "sensitivity": -90.5},
             "boxes": [{"name": "a", "address": "02:00:00:00:00:01", "adapter": "hci2",
                        "waypoints": [{"t": 0, "at": [0, 0]}, {"t": 1.5e0, "at": [3, 4, 5]}]}],
             "beacons": [{"name": "b", "address": "C0:00:00:00:00:01",
                          "eddystone_url": {"url": "https:\\/\\/www.example.com\\u002F", "tx_power": -20},
                          "position": [1, 1], "advertising_interval": 1}]}
            """, format: .json)
        #expect(yaml == json)
        #expect(yaml.seed == UInt64.max)
        #expect(yaml.boxes[0].adapter == "hci2")
    }

    @Test func everyBeaconKindAndItsDefaults() throws {
        let scenario = try Scenario.parse("""
            radio: { measured_power: -65 }
            boxes: [{ name: a, address: "02:00:00:00:00:01", position: [0, 0] }]
            beacons:
              - name: ib
                address: "C0:00:00:00:00:01"
                ibeacon: { uuid: "f7826da6-4fa2-4e98-8024-bc5b71e0893e", major: 0x10, minor: 65535 }
                position: [0, 1]
              - name: alt
                address: "C0:00:00:00:00:02"
                altbeacon: { id1: "2F234454-CF6D-4A0F-ADF2-F4911BA9FFA6", id2: 1, id3: 2 }
                position: [0, 2]
              - name: uid
                address: "C0:00:00:00:00:03"
                eddystone_uid: { namespace: EDD1EBEAC04E5DEFA017, instance: "0bdb87539b67" }
                position: [0, 3]
              - name: url
                address: "C0:00:00:00:00:04"
                eddystone_url: { url: "https://goo.gl/S6zT6P" }
                waypoints: [{ t: 0, at: [0, 4] }]
            """, format: .yaml)
        let frames = scenario.beacons.map(\.frame)
        // Uncalibrated beacons take the scenario's measured power (Eddystone: + 41 dB at 0 m).
        #expect(frames == [
            .iBeacon(uuid: UUID(uuidString: "F7826DA6-4FA2-4E98-8024-BC5B71E0893E")!, major: 16, minor: 65535,
                     measuredPower: -65),
            .altBeacon(manufacturer: 0x0118, id1: UUID(uuidString: "2F234454-CF6D-4A0F-ADF2-F4911BA9FFA6")!, id2: 1, id3: 2,
                       referenceRSSI: -65),
            .eddystoneUID(namespace: [0xED, 0xD1, 0xEB, 0xEA, 0xC0, 0x4E, 0x5D, 0xEF, 0xA0, 0x17],
                          instance: [0x0B, 0xDB, 0x87, 0x53, 0x9B, 0x67], txPowerAt0m: -24),
            .eddystoneURL(url: "https://goo.gl/S6zT6P", txPowerAt0m: -24),
        ])
        #expect(frames.allSatisfy { $0.measuredPowerAt1m == -65 })
        #expect(scenario.beacons.allSatisfy { $0.advertisingInterval == nil })
    }

    @Test func unquotedYAMLAddressesStayText() throws {
        // YAML 1.1 reads 12:34:56:00:00:01 as a base-60 integer; an address field takes the text.
        let scenario = try Scenario.parse("""
            boxes: [{ name: a, address: 12:34:56:00:00:01, position: [0, 0] }]
            """, format: .yaml)
        #expect(scenario.boxes[0].address == "12:34:56:00:00:01")
    }

    // MARK: Errors: where, and which line

    @Test func errorsCarryTheLineAndFile() throws {
        let text = """
            seed: 1
            boxes:
              - name: a
                address: "02:00:00:00:00:01"
                position: [0, 0]
              - name: b
                address: "not an address"
                position: [0, 0]
            """
        do {
            _ = try Scenario.parse(text, format: .yaml)
            Issue.record("accepted a bad address")
        } catch {
            #expect(error.path == "boxes[1].address")
            #expect(error.line == 7 && error.column == 14)
            #expect(error.description == "line 7: boxes[1].address: \"not an address\" is not a Bluetooth address in the form AA:BB:CC:DD:EE:FF")
        }
        // A rule checked after decoding (a duplicate name) still finds its line.
        do {
            _ = try Scenario.parse(text.replacingOccurrences(of: "name: b", with: "name: a")
                .replacingOccurrences(of: "not an address", with: "02:00:00:00:00:02"), format: .yaml)
            Issue.record("accepted a duplicate name")
        } catch {
            #expect(error.path == "boxes[1].name")
            #expect(error.line == 6)
            #expect(error.message.contains("also boxes[0]"))
        }

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bluezsim-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("bad.yml")
        try text.write(to: file, atomically: true, encoding: .utf8)
        do {
            _ = try Scenario.load(from: file)
            Issue.record("loaded a bad file")
        } catch {
            #expect(error.file == file.path)
            #expect(error.description.hasPrefix("\(file.path):7:14: boxes[1].address: "))
        }
        do {
            _ = try Scenario.load(from: directory.appendingPathComponent("missing.json"))
            Issue.record("loaded a missing file")
        } catch {
            #expect(error.path == "")
            #expect(error.message.hasPrefix("cannot read the file"))
        }
        do {
            _ = try Scenario.load(from: directory.appendingPathComponent("scenario.toml"))
            Issue.record("loaded a .toml file")
        } catch {
            #expect(error.message.contains("unknown scenario format"))
        }
    }

    @Test func jsonSyntaxErrorsGiveLineAndColumn() {
        do {
            _ = try Scenario.parse("{\n  \"seed\": 1,\n  \"boxes\": [1,]\n}", format: .json)
            Issue.record("accepted a trailing comma")
        } catch {
            #expect(error.path == "")
            #expect(error.line == 3)
            #expect(error.message == "invalid JSON at column 15: expected a value, found ']'")
        }
    }

    @Test(arguments: BadScenario.all)
    func badScenarioIsRejectedAtItsPath(_ bad: BadScenario) {
        do {
            let scenario = try Scenario.parse(bad.text, format: bad.format)
            Issue.record("accepted: \(scenario)")
        } catch {
            #expect(error.path == bad.path, "\(error)")
            #expect(!error.message.isEmpty)
        }
    }

    @Test func oneBeaconOnItsOwn() throws {
        // What the control interface adds at run time: one `beacons` entry, paths relative to it.
        let radio = RadioParameters(measuredPower: -61)
        let beacon = try BeaconSpec.parse("""
            {"name": "door", "address": "c0:00:00:00:00:99", "position": [1, 2],
             "ibeacon": {"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 7, "minor": 8}}
            """, format: .json, radio: radio)
        #expect(beacon.address == "C0:00:00:00:00:99")
        #expect(beacon.frame.measuredPowerAt1m == -61)
        let bad: [(String, String)] = [
            (#"{"name": "door", "address": "c0:00:00:00:00:99", "position": [1, 2]}"#, ""),
            (#"{"name": "door", "address": "c0:00:00:00:00:99", "position": [1, 2], "eddystone_url": {"url": "gopher://x"}}"#,
             "eddystone_url.url"),
            (#"{"name": "d o", "address": "c0:00:00:00:00:99", "position": [1, 2], "eddystone_url": {"url": "http://x"}}"#, "name"),
            (#"{"name": "door", "address": "c0:00:00:00:00:99", "waypoints": [{"t": 1, "at": [0, 0]}, {"t": 0, "at": [0, 0]}], "eddystone_url": {"url": "http://x"}}"#,
             "waypoints[1].t"),
        ]
        for (text, path) in bad {
            #expect(throws: ScenarioError.self) { try BeaconSpec.parse(text, format: .json, radio: radio) }
            do {
                _ = try BeaconSpec.parse(text, format: .json, radio: radio)
            } catch {
                #expect(error.path == path, "\(error)")
            }
        }
    }

    @Test func programmaticScenariosAreValidatedToo() throws {
        let fixed = Trajectory(fixed: Position(x: 0, y: 0))
        var scenario = Scenario(boxes: [BoxSpec(name: "a", address: "02:00:00:00:00:01", trajectory: fixed)])
        try scenario.validate()
        scenario.boxes.append(BoxSpec(name: "b", address: "02:00:00:00:00:01", trajectory: fixed))
        #expect(throws: ScenarioError(path: "boxes[1].address", message: "duplicate address 02:00:00:00:00:01 (also boxes[0])")) {
            try scenario.validate()
        }
        scenario.boxes[1].address = "02:00:00:00:00:02"
        scenario.beacons = [BeaconSpec(name: "e", address: "C0:00:00:00:00:01",
                                       frame: .eddystoneUID(namespace: [1], instance: [2], txPowerAt0m: 0), trajectory: fixed)]
        #expect(throws: ScenarioError.self) { try scenario.validate() }
        do {
            try scenario.validate()
        } catch {
            #expect(error.path == "beacons[0].eddystone_uid")
        }
    }
}

/// One bad scenario and the path its error must name.
struct BadScenario: Sendable, CustomTestStringConvertible {
    var label: String
    var format: ScenarioFormat
    var text: String
    var path: String
    var testDescription: String { label }

    static let box = #"{ name: a, address: "02:00:00:00:00:01", position: [0, 0] }"#
    static let box2 = #"{ name: b, address: "02:00:00:00:00:02", position: [1, 0] }"#

    static func yaml(_ label: String, _ path: String, _ text: String) -> BadScenario {
        BadScenario(label: label, format: .yaml, text: text, path: path)
    }

    static func json(_ label: String, _ path: String, _ text: String) -> BadScenario {
        BadScenario(label: label, format: .json, text: text, path: path)
    }

    /// A scenario with one good box and one beacon whose body is `beacon`.
    static func beacon(_ label: String, _ path: String, _ beacon: String) -> BadScenario {
        yaml(label, path, "boxes: [\(box)]\nbeacons:\n  - { name: z, address: \"C0:00:00:00:00:01\", position: [0, 1], \(beacon) }")
    }

    static func radio(_ label: String, _ path: String, _ radio: String) -> BadScenario {
        yaml(label, path, "radio: { \(radio) }\nboxes: [\(box)]")
    }

    static func oneBox(_ label: String, _ path: String, _ body: String) -> BadScenario {
        yaml(label, path, "boxes:\n  - { \(body) }")
    }

    static let all: [BadScenario] = [
        // The document
        yaml("empty document", "", ""),
        yaml("YAML syntax error", "", "boxes: [\(box)\nseed: 1"),
        yaml("top level is a list", "", "- 1\n- 2"),
        yaml("unknown top-level key", "colour", "colour: red\nboxes: [\(box)]"),
        yaml("YAML duplicate key", "seed", "seed: 1\nseed: 2\nboxes: [\(box)]"),
        yaml("seed negative", "seed", "seed: -1\nboxes: [\(box)]"),
        yaml("seed fractional", "seed", "seed: 1.5\nboxes: [\(box)]"),
        yaml("seed too large", "seed", "seed: 18446744073709551616\nboxes: [\(box)]"),
        // The radio
        radio("unknown radio key", "radio.pathloss", "pathloss: 2"),
        radio("radio value a string", "radio.packet_loss", "packet_loss: high"),
        radio("radio value quoted number", "radio.sensitivity", #"sensitivity: "-90""#),
        radio("packet loss above 1", "radio.packet_loss", "packet_loss: 1.5"),
        radio("failure rate negative", "radio.connection_failure_rate", "connection_failure_rate: -0.1"),
        radio("sigma negative", "radio.shadowing_sigma", "shadowing_sigma: -1"),
        radio("sigma NaN", "radio.shadowing_sigma", "shadowing_sigma: .nan"),
        radio("interval negative", "radio.advertising_interval", "advertising_interval: -0.1"),
        radio("interval below 20 ms", "radio.advertising_interval", "advertising_interval: 0.005"),
        radio("latency negative", "radio.connection_latency", "connection_latency: -1"),
        radio("exponent zero", "radio.path_loss_exponent", "path_loss_exponent: 0"),
        radio("measured power above 20 dBm", "radio.measured_power", "measured_power: 30"),
        radio("burst loss rate above 1", "radio.burst_loss_rate", "burst_loss_rate: 1.5"),
        radio("burst duration zero", "radio.burst_duration", "burst_duration: 0"),
        radio("burst duration below 10 ms", "radio.burst_duration", "burst_duration: 0.001"),
        radio("report batching negative", "radio.report_batching", "report_batching: -1"),
        yaml("radio not a mapping", "radio", "radio: [1, 2]\nboxes: [\(box)]"),
        // Boxes
        yaml("no boxes key", "boxes", "seed: 1"),
        yaml("no boxes", "boxes", "boxes: []"),
        yaml("boxes not a list", "boxes", "boxes: { a: 1 }"),
        yaml("box not a mapping", "boxes[0]", "boxes: [alpha]"),
        oneBox("missing name", "boxes[0].name", #"address: "02:00:00:00:00:01", position: [0, 0]"#),
        oneBox("name with a space", "boxes[0].name", #"name: "a b", address: "02:00:00:00:00:01", position: [0, 0]"#),
        oneBox("name a list", "boxes[0].name", #"name: [a], address: "02:00:00:00:00:01", position: [0, 0]"#),
        oneBox("missing address", "boxes[0].address", "name: a, position: [0, 0]"),
        oneBox("address too short", "boxes[0].address", #"name: a, address: "02:00:00:00:01", position: [0, 0]"#),
        oneBox("address not hex", "boxes[0].address", #"name: a, address: "02:00:00:00:00:0G", position: [0, 0]"#),
        oneBox("address with dashes", "boxes[0].address", #"name: a, address: "02-00-00-00-00-01", position: [0, 0]"#),
        oneBox("adapter not hciN", "boxes[0].adapter", #"name: a, address: "02:00:00:00:00:01", adapter: bt0, position: [0, 0]"#),
        oneBox("adapter leading zero", "boxes[0].adapter", #"name: a, address: "02:00:00:00:00:01", adapter: hci01, position: [0, 0]"#),
        oneBox("unknown box key", "boxes[0].colour", #"name: a, address: "02:00:00:00:00:01", colour: red, position: [0, 0]"#),
        yaml("duplicate box name", "boxes[1].name",
             #"boxes: [\#(box), { name: a, address: "02:00:00:00:00:02", position: [0, 0] }]"#),
        yaml("duplicate address in other case", "boxes[1].address",
             #"boxes: [{ name: a, address: "0a:00:00:00:00:01", position: [0, 0] }, { name: b, address: "0A:00:00:00:00:01", position: [0, 0] }]"#),
        // Positions and waypoints
        oneBox("no position", "boxes[0]", #"name: a, address: "02:00:00:00:00:01""#),
        oneBox("position and waypoints", "boxes[0]",
               #"name: a, address: "02:00:00:00:00:01", position: [0, 0], waypoints: [{ t: 0, at: [0, 0] }]"#),
        oneBox("position of one number", "boxes[0].position", #"name: a, address: "02:00:00:00:00:01", position: [0]"#),
        oneBox("position of four numbers", "boxes[0].position", #"name: a, address: "02:00:00:00:00:01", position: [0, 0, 0, 0]"#),
        oneBox("position coordinate a string", "boxes[0].position[1]", #"name: a, address: "02:00:00:00:00:01", position: [0, y]"#),
        oneBox("position a mapping", "boxes[0].position", #"name: a, address: "02:00:00:00:00:01", position: { x: 0, y: 0 }"#),
        oneBox("no waypoints", "boxes[0].waypoints", #"name: a, address: "02:00:00:00:00:01", waypoints: []"#),
        oneBox("waypoints not increasing", "boxes[0].waypoints[2].t",
               #"name: a, address: "02:00:00:00:00:01", waypoints: [{ t: 0, at: [0, 0] }, { t: 5, at: [1, 0] }, { t: 5, at: [2, 0] }]"#),
        oneBox("waypoint time negative", "boxes[0].waypoints[0].t",
               #"name: a, address: "02:00:00:00:00:01", waypoints: [{ t: -1, at: [0, 0] }]"#),
        oneBox("waypoint without at", "boxes[0].waypoints[0].at", #"name: a, address: "02:00:00:00:00:01", waypoints: [{ t: 0 }]"#),
        oneBox("waypoint unknown key", "boxes[0].waypoints[0].when",
               #"name: a, address: "02:00:00:00:00:01", waypoints: [{ when: 0, at: [0, 0] }]"#),
        oneBox("waypoint position bad", "boxes[0].waypoints[1].at[0]",
               #"name: a, address: "02:00:00:00:00:01", waypoints: [{ t: 0, at: [0, 0] }, { t: 1, at: [x, 0] }]"#),
        // Beacons
        beacon("beacon without a frame", "beacons[0]", ""),
        beacon("beacon with two frames", "beacons[0]",
               #"ibeacon: { uuid: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", major: 1, minor: 2 }, eddystone_url: { url: "https://a.com" }"#),
        beacon("iBeacon bad UUID", "beacons[0].ibeacon.uuid", #"ibeacon: { uuid: "E2C56DB5", major: 1, minor: 2 }"#),
        beacon("iBeacon major too large", "beacons[0].ibeacon.major",
               #"ibeacon: { uuid: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", major: 70000, minor: 2 }"#),
        beacon("iBeacon minor missing", "beacons[0].ibeacon.minor", #"ibeacon: { uuid: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", major: 1 }"#),
        beacon("iBeacon power out of Int8", "beacons[0].ibeacon.measured_power",
               #"ibeacon: { uuid: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", major: 1, minor: 2, measured_power: -200 }"#),
        beacon("iBeacon unknown key", "beacons[0].ibeacon.power",
               #"ibeacon: { uuid: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", major: 1, minor: 2, power: -59 }"#),
        beacon("AltBeacon manufacturer too large", "beacons[0].altbeacon.manufacturer",
               #"altbeacon: { manufacturer: 0x10000, id1: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", id2: 1, id3: 2 }"#),
        beacon("Eddystone namespace 9 bytes", "beacons[0].eddystone_uid.namespace",
               #"eddystone_uid: { namespace: "EDD1EBEAC04E5DEFA0", instance: "0BDB87539B67" }"#),
        beacon("Eddystone instance not hex", "beacons[0].eddystone_uid.instance",
               #"eddystone_uid: { namespace: "EDD1EBEAC04E5DEFA017", instance: "0BDB87539BZZ" }"#),
        beacon("Eddystone URL scheme", "beacons[0].eddystone_url.url", #"eddystone_url: { url: "ftp://example.com" }"#),
        beacon("Eddystone URL too long", "beacons[0].eddystone_url.url",
               #"eddystone_url: { url: "https://abcdefghijklmnopqrstuvwxyz" }"#),
        beacon("Eddystone tx power a string", "beacons[0].eddystone_url.tx_power",
               #"eddystone_url: { url: "https://a.com", tx_power: loud }"#),
        beacon("beacon interval zero", "beacons[0].advertising_interval",
               #"eddystone_url: { url: "https://a.com" }, advertising_interval: 0"#),
        beacon("beacon unknown key", "beacons[0].name2", #"eddystone_url: { url: "https://a.com" }, name2: x"#),
        beacon("beacon tx_offset a string", "beacons[0].tx_offset", #"eddystone_url: { url: "https://a.com" }, tx_offset: low"#),
        beacon("beacon tx_offset below -60 dB", "beacons[0].tx_offset", #"eddystone_url: { url: "https://a.com" }, tx_offset: -61"#),
        oneBox("box tx_offset above 60 dB", "boxes[0].tx_offset", #"name: a, address: "02:00:00:00:00:01", position: [0, 0], tx_offset: 61"#),
        yaml("beacon name taken by a box", "beacons[0].name",
             "boxes: [\(box)]\nbeacons: [{ name: a, address: \"C0:00:00:00:00:01\", position: [0, 0], eddystone_url: { url: \"https://a.com\" } }]"),
        yaml("beacon address taken by a box", "beacons[0].address",
             "boxes: [\(box)]\nbeacons: [{ name: z, address: \"02:00:00:00:00:01\", position: [0, 0], eddystone_url: { url: \"https://a.com\" } }]"),
        // JSON
        json("JSON trailing comma", "", #"{"boxes": [],}"#),
        json("JSON comment", "", "{\"boxes\": [] // none\n}"),
        json("JSON single quotes", "", "{'boxes': []}"),
        json("JSON leading zero", "", #"{"seed": 01, "boxes": []}"#),
        json("JSON two documents", "", #"{"boxes": []} {}"#),
        json("JSON duplicate key", "radio.sensitivity",
             #"{"radio": {"sensitivity": -90, "sensitivity": -80}, "boxes": [{"name": "a", "address": "02:00:00:00:00:01", "position": [0, 0]}]}"#),
        json("JSON seed as a string", "seed",
             #"{"seed": "42", "boxes": [{"name": "a", "address": "02:00:00:00:00:01", "position": [0, 0]}]}"#),
        json("JSON number as a name", "boxes[0].name", #"{"boxes": [{"name": 5, "address": "02:00:00:00:00:01", "position": [0, 0]}]}"#),
        json("JSON box a string", "boxes[0]", #"{"boxes": ["alpha"]}"#),
        json("JSON boolean position", "boxes[0].position[0]",
             #"{"boxes": [{"name": "a", "address": "02:00:00:00:00:01", "position": [true, 0]}]}"#),
        json("JSON null name", "boxes[0].name", #"{"boxes": [{"name": null, "address": "02:00:00:00:00:01", "position": [0, 0]}]}"#),
        json("JSON huge exponent", "boxes[0].position[0]",
             #"{"boxes": [{"name": "a", "address": "02:00:00:00:00:01", "position": [1e999, 0]}]}"#),
        json("JSON deeply nested", "", String(repeating: "[", count: 200) + String(repeating: "]", count: 200)),
    ]
}
