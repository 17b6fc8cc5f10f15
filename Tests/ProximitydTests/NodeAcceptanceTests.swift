import BlueZSim
import DBusKit
import Foundation
import ProximityAPI
import ProximityNode
import ProximityTesting
import Synchronization
import Testing

/// The zones of a `FoundDevices(a{ss})` signal.
func zones(_ signal: DBusMessage) -> [String: String] {
    guard case .dictionary(_, _, let entries)? = signal.body.first else { return [:] }
    var result: [String: String] = [:]
    for entry in entries {
        if let k = entry.key.string, let v = entry.value.string { result[k] = v }
    }
    return result
}


@Suite("proximityd acceptance on bluez-sim", .serialized)
struct NodeAcceptanceTests {
    /// Boxes named alpha, bravo, … at fixed points, addresses AA:00:00:00:00:01, 02, …
    static func scenario(seed: UInt64, failures: Double = 0, _ points: [(x: Double, y: Double)]) -> Scenario {
        let names = ["alpha", "bravo", "charlie", "delta", "echo"]
        return Scenario(seed: seed, radio: radio(failures: failures), boxes: points.enumerated().map { i, p in
            BoxSpec(name: names[i], address: String(format: "AA:00:00:00:00:%02X", i + 1),
                    trajectory: Trajectory(fixed: Position(x: p.x, y: p.y)))
        })
    }

    static func radio(failures: Double = 0) -> RadioParameters {
        var radio = RadioParameters()
        radio.shadowingSigma = 1
        radio.packetLoss = 0
        radio.connectionFailureRate = failures
        return radio
    }

    @Test("with 30% of connections failing every peer is still identified, each within 8 attempts")
    func connectionFailures() async throws {
        let scenario = Self.scenario(seed: 8, failures: 0.3, [(0, 0), (1.5, 0), (0, 1.5), (1.5, 1.5)])
        try await withNodes(scenario) { sim, daemons in
            let boxes = scenario.boxes.map(\.name)
            var observers: [DBusConnection] = []
            var identified: [String: SignalLog] = [:]
            for box in boxes {
                let observer = try await sim.buses[box]!.connect()
                observers.append(observer)
                identified[box] = SignalLog(try await observer.subscribe(MatchRule(interface: ProximityBus.Node1.interface,
                                                                                   member: ProximityBus.Node1.peerIdentified)))
            }
            for box in boxes { daemons[box] = try await sim.startDaemon(box) }
            var ids: [String: String] = [:]
            for box in boxes { ids[box] = try await sim.identifier(box) }
            for box in boxes {
                let others = Set(boxes.filter { $0 != box }.map { ids[$0]! })
                try await sim.waitRanging(box, "\(box) identifies its three peers", timeout: .seconds(90)) { Set($0.keys) == others }
                _ = try await identified[box]!.wait(from: 2, timeout: .seconds(10), "\(box)'s third PeerIdentified") { _ in true }
            }
            let state = try await sim.control(["GetState"])
            let json = try #require(try JSONSerialization.jsonObject(with: Data(
                state.stdout.trimmed.dropFirst(2).replacingOccurrences(of: "\\\"", with: "\"").dropFirst().dropLast().utf8)) as? [String: Any])
            let stats = try #require(json["stats"] as? [String: Int], "\(state)")
            let injected = stats["injected_connection_failures"] ?? 0
            #expect(injected > 0, "no failure was injected: \(stats)")
            // Per pair: the node with the lower address connects (the other waits for its hello),
            // within 8 attempts; each node learns the other's identity once.
            var attemptsInLogs = 0
            func lines(_ box: String, _ text: String, _ other: BoxSpec) -> Int {
                daemons[box]!.stderr.split(separator: "\n").filter { $0.contains(text) && $0.contains("peer.address=\(other.address)") }.count
            }
            for a in scenario.boxes {
                for b in scenario.boxes where a.address < b.address {
                    let attempts = lines(a.name, "connecting to identify a peer", b) + lines(b.name, "connecting to identify a peer", a)
                    attemptsInLogs += attempts
                    #expect((1...8).contains(attempts), "\(a.name) and \(b.name) connected \(attempts) times")
                    for (box, other) in [(a, b), (b, a)] {
                        // PeerIdentified(identifier, address, introduced), once per identity learnt.
                        let learnt = identified[box.name]!.messages.filter { $0.body.count == 3 && $0.body[1].string == other.address }.count
                        #expect(learnt == 1, "\(box.name) learnt \(other.name)'s identity \(learnt) times")
                    }
                }
            }
            // The nodes' attempts are the simulator's: nothing else connected.
            #expect(attemptsInLogs == stats["connection_attempts"], "\(stats)")
            for observer in observers { await observer.close() }
        }
    }

    @Test("a peer that changes address is identified again at the new one, keeps its identity, and the old address is forgotten")
    func addressChange() async throws {
        let scenario = Self.scenario(seed: 5, [(0, 0), (1, 0)])
        try await withNodes(scenario) { sim, daemons in
            let observer = try await sim.buses["alpha"]!.connect()
            let identified = SignalLog(try await observer.subscribe(MatchRule(interface: ProximityBus.Node1.interface,
                                                                              member: ProximityBus.Node1.peerIdentified)))
            for box in ["alpha", "bravo"] { daemons[box] = try await sim.startDaemon(box) }
            let bravo = try await sim.identifier("bravo")
            try await sim.waitRanging("alpha", "alpha ranges bravo", timeout: .seconds(60)) { $0 == [bravo: "near"] }
            #expect(try await sim.peerProperty("alpha", bravo, ["Address"]) == "s \"AA:00:00:00:00:02\"")

            #expect(try await sim.control(["SetAddress", "ss", "bravo", "aa:00:00:00:00:22"]).status == 0)
            let peers = sim.stateDirectory("alpha").appendingPathComponent("peers.json")
            // Identified at the new address: announced, and written to peers.json (a cache, written
            // at most once a second: an open node's identity within the next report).
            try await identified.wait(timeout: .seconds(30), "PeerIdentified at the new address") {
                $0.body.count == 3 && $0.body[0].string == bravo && $0.body[1].string == "AA:00:00:00:00:22"
            }
            try await sim.until("alpha", "peers.json holds the new address, not the old", timeout: .seconds(5)) {
                let file = (try? String(contentsOf: peers, encoding: .utf8)) ?? ""
                return file.contains("AA:00:00:00:00:22") && !file.contains("AA:00:00:00:00:02")
            }
            try await sim.until("alpha", "alpha shows bravo at its new address", timeout: .seconds(10)) {
                try await sim.peerProperty("alpha", bravo, ["Address"]) == "s \"AA:00:00:00:00:22\""
            }
            #expect(try await sim.ranging("alpha") == [bravo: "near"])
            let log = daemons["alpha"]!.stderr
            #expect(log.contains("a peer changed address"), "\(log)")
            let identities = try await sim.node("alpha", ["GetIdentities"]).stdout.trimmed
            #expect(identities == "a{ss} 1 \"AA:00:00:00:00:22\" \"\(bravo)\"", "\(identities)")
            #expect(identified.messages.map { $0.body.count == 3 ? $0.body[1].string ?? "" : "" } == ["AA:00:00:00:00:02", "AA:00:00:00:00:22"],
                    "\(identified.messages)")
            await observer.close()
            // Bad addresses are refused by the simulator's control service.
            let bad = try await sim.control(["SetAddress", "ss", "bravo", "nope"])
            #expect(bad.status != 0 && bad.stderr.contains("not a Bluetooth address"), "\(bad)")
        }
    }

    @Test("beacons are ranged as peers of their kind with their frame's fields; a measured-power override is used, kept and reset")
    func beacons() async throws {
        var scenario = Self.scenario(seed: 9, [(0, 0), (8, 0)])
        let ibeaconUUID = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"
        scenario.beacons = [
            BeaconSpec(name: "door", address: "C0:00:00:00:00:01",
                       frame: .iBeacon(uuid: UUID(uuidString: ibeaconUUID)!, major: 7, minor: 42, measuredPower: -59),
                       trajectory: Trajectory(fixed: Position(x: 2, y: 0))),
            BeaconSpec(name: "desk", address: "C0:00:00:00:00:02",
                       frame: .eddystoneUID(namespace: Array(0..<10), instance: [0xa, 0xb, 0xc, 0xd, 0xe, 0xf], txPowerAt0m: -18),
                       trajectory: Trajectory(fixed: Position(x: 0, y: 0.3))),
        ]
        try await withNodes(scenario) { sim, daemons in
            daemons["alpha"] = try await sim.startDaemon("alpha")
            daemons["bravo"] = try await sim.startDaemon("bravo")
            let bravo = try await sim.identifier("bravo")
            let door = "ibeacon:\(ibeaconUUID):7:42"
            let desk = "eddystone:00010203040506070809:0a0b0c0d0e0f"
            try await sim.waitRanging("alpha", "alpha ranges both beacons and bravo", timeout: .seconds(30)) { Set($0.keys) == [door, desk, bravo] }
            #expect(try await sim.peerProperty("alpha", door, ["Kind", "Major", "Minor", "MeasuredPower", "Address"])
                        == "s \"ibeacon\"\nq 7\nq 42\nn -59\ns \"C0:00:00:00:00:01\"")
            #expect(try await sim.peerProperty("alpha", desk, ["Kind", "Namespace", "Instance", "MeasuredPower"])
                        == "s \"eddystone\"\ns \"00010203040506070809\"\ns \"0a0b0c0d0e0f\"\nn -59")
            let introspect = try await sim.busctl("alpha", ["introspect", "--xml-interface", "org.proximityd",
                                                            "/org/proximityd/peers/\(escaped(door))"])
            let file = try String(contentsOf: repositoryRoot.appendingPathComponent("dbus/org.proximityd.Peer1.xml"), encoding: .utf8)
            #expect(interfaceElement(introspect.stdout, "org.proximityd.Peer1")
                        == interfaceElement(file, "org.proximityd.Peer1", dropping: ["Namespace", "Instance", "URL"]), "\(introspect.stdout)")
            #expect(!(try await sim.busctl("alpha", ["tree", "org.proximityd"]).stdout.contains("Namespace")))

            // The door is 2 m away (near). Said to be 20 dB stronger at 1 m, it is computed far.
            @Sendable func distance() async throws -> Double {
                let text = try await sim.peerProperty("alpha", door, ["Distance"])
                return Double(text.dropFirst(2)) ?? -1
            }
            let before = try await distance()
            #expect(before > 1 && before < 3, "\(before)")
            let set = try await sim.node("alpha", ["SetMeasuredPower", "sn", door, "--", "-39"])
            #expect(set.status == 0, "\(set)")
            try await sim.until("alpha", "the override is used", timeout: .seconds(10)) {
                try await sim.peerProperty("alpha", door, ["MeasuredPower"]) == "n -39"
            }
            try await sim.until("alpha", "the door is computed far", timeout: .seconds(10)) { try await distance() > 10 }
            #expect(try await sim.ranging("alpha")[door] == "far")

            // Bad overrides are refused with a named error; nothing changes.
            let client = try await sim.buses["alpha"]!.connect()
            let cases: [(String, [DBusValue], ErrorName)] = [
                ("SetMeasuredPower", [.string(""), .int16(-59)], ProximityBus.Errors.invalidArguments),
                ("SetMeasuredPower", [.string(door), .int16(50)], ProximityBus.Errors.invalidArguments),
                ("SetMeasuredPower", [.string(door), .int16(-300)], ProximityBus.Errors.invalidArguments),
                ("SetMeasuredPower", [.string("a\u{1}b"), .int16(-59)], ProximityBus.Errors.invalidArguments),
                ("SetMeasuredPower", [.string(door)], "org.freedesktop.DBus.Error.InvalidArgs"),
                ("ResetMeasuredPower", [.string("ibeacon:nobody")], ProximityBus.Errors.doesNotExist),
            ]
            for (method, arguments, expected) in cases {
                do {
                    _ = try await client.call(destination: "org.proximityd", path: ProximityBus.rootPath, interface: ProximityBus.Node1.interface,
                                              member: try MemberName(method), arguments)
                    Issue.record("\(method)\(arguments) was accepted")
                } catch let error as DBusError {
                    #expect(error.name == expected, "\(method)\(arguments): \(error)")
                }
            }
            await client.close()
            #expect(try await sim.peerProperty("alpha", door, ["MeasuredPower"]) == "n -39")
            let settings = try String(contentsOf: sim.stateDirectory("alpha").appendingPathComponent("settings.json"), encoding: .utf8)
            #expect(settings.contains("\"\(door)\" : -39"), "\(settings)")

            // Kept across a restart (settings.json), then reset.
            await daemons["alpha"]!.stop()
            daemons["alpha"] = try await sim.startDaemon("alpha")
            try await sim.until("alpha", "the override survives a restart", timeout: .seconds(30)) {
                try await sim.peerProperty("alpha", door, ["MeasuredPower"]) == "n -39"
            }
            #expect(try await sim.node("alpha", ["ResetMeasuredPower", "s", door]).status == 0)
            try await sim.until("alpha", "the frame's measured power is used again", timeout: .seconds(10)) {
                try await sim.peerProperty("alpha", door, ["MeasuredPower"]) == "n -59"
            }
            // --path-loss-exponent 4: the same RSSI gives the square root of the free-space distance.
            await daemons["alpha"]!.stop()
            daemons["alpha"] = try await sim.startDaemon("alpha", ["--path-loss-exponent", "4"])
            try await sim.until("alpha", "alpha ranges the door with exponent 4", timeout: .seconds(30)) {
                let d = try await distance()
                return d > 0 && d < 1.9
            }
            // --no-beacons: nodes only. The beacons advertise more often than bravo, so by the time
            // bravo is ranged they would have been too.
            await daemons["alpha"]!.stop()
            daemons["alpha"] = try await sim.startDaemon("alpha", ["--no-beacons"])
            try await sim.waitRanging("alpha", "alpha ranges bravo", timeout: .seconds(30)) { $0[bravo] != nil }
            #expect(try await sim.ranging("alpha").keys.sorted() == [bravo])
        }
    }

    @Test("with every advertising instance taken the node says so and retries, and advertises once one is free")
    func instancesExhausted() async throws {
        let scenario = Self.scenario(seed: 4, [(0, 0), (1, 0)])
        try await withNodes(scenario) { sim, daemons in
            // Another program on alpha holds all five instances.
            let hog = try await sim.buses["alpha"]!.connect()
            for i in 0..<5 {
                let path = try ObjectPath("/org/test/hog/ad\(i)")
                _ = try await hog.export([DBusInterface("org.bluez.LEAdvertisement1", methods: [DBusMethod("Release") { _ in [] }],
                                                        properties: [
                                                            DBusProperty("Type", .string, .string("broadcast"), changeSignal: .const),
                                                            DBusProperty("LocalName", .string, .string("hog\(i)"), changeSignal: .const),
                                                        ])], at: path)
                _ = try await hog.call(destination: "org.bluez", path: "/org/bluez/hci0", interface: "org.bluez.LEAdvertisingManager1",
                                       member: "RegisterAdvertisement", [.objectPath(path), .vardict([:])])
            }
            daemons["alpha"] = try await sim.startDaemon("alpha")
            daemons["bravo"] = try await sim.startDaemon("bravo")
            let alpha = try await sim.identifier("alpha")
            let bravo = try await sim.identifier("bravo")
            try await daemons["alpha"]!.waitForOutput(containing: "Maximum advertisements reached", inStderr: true)
            #expect(daemons["alpha"]!.stderr.contains("cannot register the advertisement or the GATT application; trying again in 1 s"))
            #expect(try await sim.property("alpha", "Advertising") == "b false")
            // Alpha still scans and ranges. Its own advertisement is not on the air: bravo's BlueZ
            // hears alpha's address (the other program's advertisements) without the general UUID.
            // (Bravo knows alpha nonetheless: alpha connected to it and introduced itself.)
            try await sim.waitRanging("alpha", "alpha ranges bravo", timeout: .seconds(60)) { $0[bravo] == "near" }
            let alphaOnBravo = ["get-property", "org.bluez", "/org/bluez/hci0/dev_AA_00_00_00_00_01", "org.bluez.Device1", "UUIDs"]
            let general = NodeConfiguration.defaultServiceUUID.uuidString.lowercased()
            #expect(!(try await sim.busctl("bravo", alphaOnBravo).stdout.contains(general)))

            _ = try await hog.call(destination: "org.bluez", path: "/org/bluez/hci0", interface: "org.bluez.LEAdvertisingManager1",
                                   member: "UnregisterAdvertisement", [.objectPath("/org/test/hog/ad0")])
            try await sim.until("alpha", "alpha advertises", timeout: .seconds(40)) { try await sim.property("alpha", "Advertising") == "b true" }
            #expect(daemons["alpha"]!.stderr.contains("registered the advertisement and the GATT application"))
            try await sim.until("bravo", sender: "org.bluez", "bravo's bluetoothd hears alpha's advertisement", timeout: .seconds(60)) {
                try await sim.busctl("bravo", alphaOnBravo).stdout.contains(general)
            }
            try await sim.waitRanging("bravo", "bravo ranges alpha", timeout: .seconds(60)) { $0[alpha] == "near" }
            await hog.close()
        }
    }

    @Test("proximityctl doctor: the kernel as it is, bluetoothd, the adapter, advertising and proximityd on a box, with a fix for each problem")
    func doctor() async throws {
        let scenario = Self.scenario(seed: 2, [(0, 0)])
        // What this machine's kernel says, asked independently of the tool.
        let probe = socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue), 1)
        let kernelHasBluetooth = probe >= 0 || errno != EAFNOSUPPORT
        if probe >= 0 { close(probe) }
        try await withNodes(scenario) { sim, daemons in
            let ctl = BuiltProducts.path("proximityctl")
            let bus = sim.buses["alpha"]!.address
            func doctor(_ extra: [String] = []) async throws -> CommandResult {
                try await runCommand(ctl, ["doctor", "--bus", bus] + extra, timeout: .seconds(30))
            }
            daemons["alpha"] = try await sim.startDaemon("alpha")
            try await sim.until("alpha", "alpha advertises", timeout: .seconds(20)) { try await sim.property("alpha", "Advertising") == "b true" }
            let healthy = try await doctor()
            let lines = healthy.stdout.split(separator: "\n").map(String.init)
            if kernelHasBluetooth {
                #expect(lines.contains { $0.hasPrefix("ok      kernel:") }, "\(healthy)")
            } else {
                #expect(lines.contains { $0.hasPrefix("FAIL    kernel: no Bluetooth support") }, "\(healthy)")
                #expect(lines.contains { $0.hasPrefix("        fix: load the module (modprobe bluetooth)") }, "\(healthy)")
                #expect(healthy.status == 1, "\(healthy)")
            }
            #expect(lines.contains { $0.hasPrefix("ok      bluetoothd: org.bluez is :") }, "\(healthy)")
            #expect(lines.contains("ok      adapter hci0: AA:00:00:00:00:01 is powered"), "\(healthy)")
            #expect(lines.contains { $0.hasPrefix("ok      advertising: 4 instances free, 1 in use") }, "\(healthy)")
            #expect(lines.contains { $0.hasPrefix("ok      proximityd: org.proximityd runs: advertising yes, discovering yes") }, "\(healthy)")
            #expect(lines.contains("skipped policy: the bus policy matters on the system bus only"), "\(healthy)")
            // BlueZ's privacy, from the main.conf named: off (the default, commented out), then on.
            let conf = sim.buses["alpha"]!.directory.appendingPathComponent("main.conf").path
            try "[General]\n#Privacy = off\n".write(toFile: conf, atomically: true, encoding: .utf8)
            let privacyOff = try await doctor(["--bluez-config", conf])
            #expect(privacyOff.stdout.contains("warn    privacy: Privacy is not set (off) in \(conf): the adapter advertises from its public address"), "\(privacyOff)")
            #expect(privacyOff.stdout.contains("fix: set Privacy = device under [General] in \(conf), then systemctl restart bluetooth"), "\(privacyOff)")
            try "[Policy]\nPrivacy = off\n[General]\nName = box\nPrivacy = device\n".write(toFile: conf, atomically: true, encoding: .utf8)
            let privacyOn = try await doctor(["--bluez-config", conf])
            #expect(privacyOn.stdout.contains("ok      privacy: Privacy = device in \(conf): the adapter advertises from resolvable private addresses"), "\(privacyOn)")
            let json = try await doctor(["--json"])
            let checks = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]], "\(json)")
            #expect(checks.first { $0["check"] as? String == "adapter hci0" }?["status"] as? String == "ok")

            // The adapter off: a failure with its fix; proximityd says it is not fully up.
            #expect(try await sim.control(["SetPowered", "sb", "alpha", "false"]).status == 0)
            try await sim.until("alpha", "alpha stops advertising", timeout: .seconds(10)) { try await sim.property("alpha", "Advertising") == "b false" }
            let off = try await doctor()
            #expect(off.status == 1)
            #expect(off.stdout.contains("FAIL    adapter hci0: AA:00:00:00:00:01 is powered off\n        fix: bluetoothctl power on"), "\(off)")
            #expect(off.stdout.contains("warn    proximityd: org.proximityd runs but is not fully up: advertising no"), "\(off)")
            let unknown = try await doctor(["--adapter", "hci3"])
            #expect(unknown.stdout.contains("FAIL    adapter hci3: bluetoothd has no hci3; it has hci0\n        fix: use proximityd run --adapter hci0"), "\(unknown)")

            // No bluetoothd, and no proximityd.
            await daemons["alpha"]!.stop()
            await sim.simulator.stop()
            let none = try await doctor()
            #expect(none.status == 1)
            #expect(none.stdout.contains("FAIL    bluetoothd: org.bluez is not on the bus"), "\(none)")
            #expect(none.stdout.contains("skipped adapter hci0: needs bluetoothd"), "\(none)")
            #expect(none.stdout.contains("FAIL    proximityd: org.proximityd is not on the bus"), "\(none)")
            #expect(!none.stderr.contains("Fatal error") && !none.stderr.contains("Backtrace"), "\(none)")
        }
    }
}
