import BlueZSim
import DBusKit
import Foundation
import ProximityCore
import ProximityAPI
import ProximityNode
import ProximityTesting
import Testing
import SimTesting

/// Polls `condition` until it holds, bounded by `timeout` (a bounded condition wait). Only for
/// state nothing announces (a file appearing, another process's own state); where the node sends
/// a signal, wait on it (``SimBoxes/waitRanging(_:_:timeout:_:)``, ``SimBoxes/until(_:sender:_:timeout:_:)``).
func eventually(_ what: String, timeout: Duration, every: Duration = .milliseconds(200),
                _ condition: @Sendable () async throws -> Bool) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: timeout)
    while clock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: every)
    }
    throw TestKitError("timed out after \(timeout) waiting for \(what)")
}

/// GATT connections made from a box, as the device path of each: `ServicesResolved` becoming
/// true, as BlueZ announces it. (`Connected` would also count the peers connecting *to* the box:
/// bluez-sim, like BlueZ, shows the central as a connected device on the peripheral's side,
/// without services.)
func gattConnections(_ signals: DBusSignalStream) -> EventRecorder<String> {
    EventRecorder(recording: signals) { signal in
        guard signal.body.count >= 2, signal.body[0].string == "org.bluez.Device1",
              let changed = signal.body[1].stringKeyedDictionary,
              case .variant(.boolean(true))? = changed["ServicesResolved"], let path = signal.path else { return nil }
        return path.rawValue
    }
}

/// Connections by device path.
func perDevice(_ connections: EventRecorder<String>) -> [String: Int] {
    connections.events.reduce(into: [:]) { $0[$1, default: 0] += 1 }
}

@Suite("proximityd end to end on bluez-sim", .serialized)
struct NodeEndToEndTests {
    static func scenario() -> Scenario {
        var radio = RadioParameters()
        radio.shadowingSigma = 1
        radio.packetLoss = 0
        return Scenario(seed: 42, radio: radio, boxes: [
            BoxSpec(name: "alpha", address: "AA:00:00:00:00:01", trajectory: Trajectory(fixed: Position(x: 0, y: 0))),
            BoxSpec(name: "bravo", address: "AA:00:00:00:00:02", trajectory: Trajectory(fixed: Position(x: 1.5, y: 0))),
            BoxSpec(name: "charlie", address: "AA:00:00:00:00:03", trajectory: Trajectory(fixed: Position(x: 6, y: 0))),
        ])
    }

    @Test("three nodes identify each other once and range each other into the zones their positions give")
    func threeNodes() async throws {
        let sim = try await SimBoxes.start(Self.scenario())
        var daemons: [String: ManagedProcess] = [:]
        var observers: [DBusConnection] = []
        do {
            let boxes = ["alpha", "bravo", "charlie"]
            var counters: [String: EventRecorder<String>] = [:]
            var identified: [String: SignalLog] = [:]
            for box in boxes {
                let observer = try await sim.buses[box]!.connect()
                observers.append(observer)
                let signals = try await observer.subscribe(MatchRule(sender: "org.bluez", interface: .properties, member: "PropertiesChanged"))
                counters[box] = gattConnections(signals)
                identified[box] = SignalLog(try await observer.subscribe(MatchRule(interface: ProximityBus.Node1.interface,
                                                                                   member: ProximityBus.Node1.peerIdentified)))
            }
            for box in boxes { daemons[box] = try await sim.startDaemon(box) }
            var ids: [String: String] = [:]
            for box in boxes { ids[box] = try await sim.identifier(box) }
            let expected: [String: [String: String]] = [
                "alpha": [ids["bravo"]!: "near", ids["charlie"]!: "far"],
                "bravo": [ids["alpha"]!: "near", ids["charlie"]!: "far"],
                "charlie": [ids["alpha"]!: "far", ids["bravo"]!: "far"],
            ]
            for box in boxes {
                try await sim.waitRanging(box, "\(box) ranges its peers as \(expected[box]!)", timeout: .seconds(60)) { $0 == expected[box]! }
            }
            for box in boxes {
                #expect(try await sim.property(box, "Advertising") == "b true")
                #expect(try await sim.property(box, "Discovering") == "b true")
                let peers = try await sim.node(box, ["GetPeers"]).stdout.trimmed
                #expect(peers.hasPrefix("ao 2 "), "\(peers)")
                // Each peer is learnt once (read over GATT, or from the peer's own hello), and on
                // disk before the node says so.
                _ = try await identified[box]!.wait(from: 1, timeout: .seconds(10), "\(box)'s second PeerIdentified") { _ in true }
                let learnt = identified[box]!.messages.compactMap { $0.body.first?.string }
                #expect(learnt.sorted() == boxes.filter { $0 != box }.map { ids[$0]! }.sorted(), "\(box) learnt \(learnt)")
                let file = try String(contentsOf: sim.stateDirectory(box).appendingPathComponent("peers.json"), encoding: .utf8)
                for other in boxes where other != box { #expect(file.contains(ids[other]!), "\(file)") }
            }
            // proximityctl shows the same peers, nearest first.
            let ctl = BuiltProducts.path("proximityctl")
            let alphaBus = sim.buses["alpha"]!.address
            let peersJSON = try await runCommand(ctl, ["peers", "--json", "--bus", alphaBus])
            #expect(peersJSON.status == 0, "\(peersJSON)")
            let listed = try #require(try JSONSerialization.jsonObject(with: Data(peersJSON.stdout.utf8)) as? [[String: Any]])
            #expect(listed.map { $0["identifier"] as? String } == [ids["bravo"]!, ids["charlie"]!], "\(peersJSON)")
            #expect(listed.map { $0["proximity"] as? String } == ["near", "far"])
            #expect(listed.map { $0["kind"] as? String } == ["node", "node"])
            let table = try await runCommand(ctl, ["peers", "--bus", alphaBus])
            #expect(table.stdout.hasPrefix("IDENTIFIER"), "\(table)")
            #expect(table.stdout.contains(ids["bravo"]!) && table.stdout.contains("near"), "\(table)")
            let watch = try await runCommand(ctl, ["watch", "--count", "2", "--interval", "0.2", "--bus", alphaBus], timeout: .seconds(20))
            #expect(watch.status == 0, "\(watch)")
            #expect(watch.stdout.components(separatedBy: ids["charlie"]!).count - 1 == 2, "\(watch)")
            #expect(watch.stdout.contains("2 peers"), "\(watch)")
            let badWatch = try await runCommand(ctl, ["watch", "--interval", "0", "--bus", alphaBus])
            #expect(badWatch.status == 64, "\(badWatch)")

            // One GATT connection per pair: the node the ordering picks (a coin per pair, the same on
            // both sides: PairHashOrdering) connects to the other once and introduces itself in
            // that connection; the other never connects back.
            let counts = counters.mapValues(perDevice)
            for box in sim.scenario.boxes {
                let expected = sim.scenario.boxes.filter { $0.address != box.address && PairHashOrdering().connectsFirst(own: box.address, peer: $0.address) }.map {
                    ("/org/bluez/hci0/dev_" + $0.address.replacingOccurrences(of: ":", with: "_"), 1)
                }
                #expect(counts[box.name]! == Dictionary(uniqueKeysWithValues: expected), "\(box.name): \(counts[box.name]!)")
            }
            let path = try await sim.busctl("alpha", ["get-property", "org.proximityd",
                                                      "/org/proximityd/peers/\(escaped(ids["bravo"]!))", "org.proximityd.Peer1", "Proximity", "Kind"])
            #expect(path.stdout.trimmed == "s \"near\"\ns \"node\"", "\(path)")
            let introspect = try await sim.busctl("alpha", ["introspect", "--xml-interface", "org.proximityd",
                                                            "/org/proximityd/peers/\(escaped(ids["bravo"]!))"])
            let file = try String(contentsOf: repositoryRoot.appendingPathComponent("dbus/org.proximityd.Peer1.xml"), encoding: .utf8)
            #expect(interfaceElement(introspect.stdout, "org.proximityd.Peer1") != nil, "\(introspect)")
            // A node peer has every property but the beacons' own.
            let beaconOnly = Set(PeerProperties.Key.allCases.filter(\.isOptional).map(\.rawValue))
            #expect(interfaceElement(introspect.stdout, "org.proximityd.Peer1")
                        == interfaceElement(file, "org.proximityd.Peer1", dropping: beaconOnly), "\(introspect.stdout)")

            // A restart uses the identities kept in peers.json: ranging again, no new connection.
            await daemons["alpha"]!.stop()
            #expect(daemons["alpha"]!.exitStatus == 0, "\(daemons["alpha"]!.stderr)")
            #expect(daemons["alpha"]!.stderr.contains("unregistered the advertisement and the GATT application"))
            daemons["alpha"] = try await sim.startDaemon("alpha")
            try await sim.waitRanging("alpha", "alpha ranges its peers again after a restart", timeout: .seconds(60)) { $0 == expected["alpha"]! }
            #expect(counters["alpha"]!.count == 2, "\(perDevice(counters["alpha"]!))")
            #expect(identified["alpha"]!.count == 2, "a peer identified again after the restart: \(identified["alpha"]!.messages)")
        } catch {
            for daemon in daemons.values { await daemon.stop() }
            for observer in observers { await observer.close() }
            await sim.stop()
            throw error
        }
        for (box, daemon) in daemons {
            await daemon.stop()
            #expect(daemon.exitStatus == 0, "\(box): \(daemon.stderr)")
        }
        for observer in observers { await observer.close() }
        await sim.stop()
    }
}

@Suite("proximityd and bluetoothd coming and going", .serialized)
struct NodeBlueZLifecycleTests {
    @Test("nodes started before bluetoothd start once it appears, and register again after a bluetoothd restart and an adapter power cycle")
    func lateAndRestartedBlueZ() async throws {
        try await withNodes(NodeAcceptanceTests.scenario(seed: 7, [(0, 0), (1, 0)]), simulate: false) { sim, daemons in
            // What alpha learns and how often it connects to identify, across the restarts below.
            let observer = try await sim.buses["alpha"]!.connect()
            let identified = SignalLog(try await observer.subscribe(MatchRule(interface: ProximityBus.Node1.interface,
                                                                              member: ProximityBus.Node1.peerIdentified)))
            let connections = gattConnections(try await observer.subscribe(MatchRule(sender: "org.bluez", interface: .properties,
                                                                                     member: "PropertiesChanged")))
            for box in ["alpha", "bravo"] { daemons[box] = try await sim.startDaemon(box) }
            try await daemons["alpha"]!.waitForOutput(containing: "waiting for bluetoothd (org.bluez)", inStderr: true)
            #expect(try await sim.property("alpha", "Advertising") == "b false")
            try await sim.simulate()
            let bravo = try await sim.identifier("bravo")
            try await sim.waitRanging("alpha", "alpha ranges bravo once bluetoothd appeared", timeout: .seconds(60)) { $0 == [bravo: "near"] }
            #expect(try await sim.property("alpha", "Advertising") == "b true")

            let restart = try await sim.control(["RestartBluetoothd", "s", "alpha"])
            #expect(restart.status == 0, "\(restart)")
            try await daemons["alpha"]!.waitForOutput(containing: "bluetoothd restarted", inStderr: true)
            try await sim.until("alpha", "alpha advertises and discovers again", timeout: .seconds(30)) {
                let advertising = try await sim.property("alpha", "Advertising")
                let discovering = try await sim.property("alpha", "Discovering")
                return advertising == "b true" && discovering == "b true"
            }
            let state = try await sim.control(["GetState"])
            #expect(state.stdout.contains("advertisement0"), "\(state)")
            // Both keep ranging each other: alpha hears bravo again (its identity cached), bravo hears alpha's new advertisement.
            try await sim.waitRanging("alpha", "alpha ranges bravo after the restart", timeout: .seconds(60)) { $0 == [bravo: "near"] }
            try await sim.waitRanging("bravo", "bravo ranges alpha after the restart", timeout: .seconds(60)) { $0.values.first == "near" }
            // Bravo was learnt once, over one connection: the identity kept across bluetoothd's restart.
            #expect(identified.messages.compactMap { $0.body.first?.string } == [bravo], "\(identified.messages)")
            #expect(connections.count == 1, "\(perDevice(connections))")

            // An adapter power cycle: both flags drop, then come back with the adapter.
            let off = try await sim.control(["SetPowered", "sb", "alpha", "false"])
            #expect(off.status == 0, "\(off)")
            try await sim.until("alpha", "alpha sees its adapter off", timeout: .seconds(30)) {
                let advertising = try await sim.property("alpha", "Advertising")
                let discovering = try await sim.property("alpha", "Discovering")
                return advertising == "b false" && discovering == "b false"
            }
            let on = try await sim.control(["SetPowered", "sb", "alpha", "true"])
            #expect(on.status == 0, "\(on)")
            try await sim.until("alpha", "alpha advertises and discovers after the power cycle", timeout: .seconds(30)) {
                let advertising = try await sim.property("alpha", "Advertising")
                let discovering = try await sim.property("alpha", "Discovering")
                return advertising == "b true" && discovering == "b true"
            }
            try await sim.waitRanging("alpha", "alpha ranges bravo after the power cycle", timeout: .seconds(60)) { $0 == [bravo: "near"] }
            await observer.close()
        }
    }
}

extension NodeBlueZLifecycleTests {
    @Test("a peer that goes silent is dropped (ClearInterval set to 1 s): InterfacesRemoved, gone from GetRanging and GetPeers")
    func silentPeerIsDropped() async throws {
        var radio = RadioParameters()
        radio.shadowingSigma = 1
        radio.packetLoss = 0
        let scenario = Scenario(seed: 11, radio: radio, boxes: [
            BoxSpec(name: "alpha", address: "AA:00:00:00:00:01", trajectory: Trajectory(fixed: Position(x: 0, y: 0))),
            BoxSpec(name: "bravo", address: "AA:00:00:00:00:02", trajectory: Trajectory(fixed: Position(x: 1, y: 0))),
        ])
        let sim = try await SimBoxes.start(scenario)
        var daemons: [String: ManagedProcess] = [:]
        var observer: DBusConnection?
        do {
            for box in ["alpha", "bravo"] { daemons[box] = try await sim.startDaemon(box) }
            let bravo = try await sim.identifier("bravo")
            try await sim.waitRanging("alpha", "alpha ranges bravo", timeout: .seconds(60)) { $0 == [bravo: "near"] }
            let set = try await sim.busctl("alpha", ["set-property", "org.proximityd", "/org/proximityd", "org.proximityd.Node1",
                                                     "ClearInterval", "d", "1"])
            #expect(set.status == 0, "\(set)")
            let connection = try await sim.buses["alpha"]!.connect()
            observer = connection
            let removals = try await connection.subscribe(MatchRule(sender: "org.proximityd", interface: "org.freedesktop.DBus.ObjectManager",
                                                                    member: "InterfacesRemoved"))
            let peerPath = "/org/proximityd/peers/\(escaped(bravo))"
            let removed = Task { () -> Bool in
                for await signal in removals where signal.body.first == .objectPath(ObjectPath(stringLiteral: peerPath)) { return true }
                return false
            }
            // Bravo's adapter goes off: it stops advertising and alpha stops hearing it.
            let off = try await sim.control(["SetPowered", "sb", "bravo", "false"])
            #expect(off.status == 0, "\(off)")
            try await sim.waitRanging("alpha", "alpha drops bravo", timeout: .seconds(30)) { $0.isEmpty }
            let gotSignal = try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask { await removed.value }
                group.addTask { try await Task.sleep(for: .seconds(10)); return false }
                defer { group.cancelAll(); removed.cancel() }
                return try await group.next() ?? false
            }
            #expect(gotSignal, "no InterfacesRemoved for \(peerPath)")
            #expect(try await sim.node("alpha", ["GetPeers"]).stdout.trimmed == "ao 0")
        } catch {
            for daemon in daemons.values { await daemon.stop() }
            await observer?.close()
            await sim.stop()
            throw error
        }
        for (box, daemon) in daemons {
            await daemon.stop()
            #expect(daemon.exitStatus == 0, "\(box): \(daemon.stderr)")
        }
        await observer?.close()
        await sim.stop()
    }
}

@Suite("proximityd without BlueZ", .serialized)
struct NodeWithoutBlueZTests {
    @Test("without org.bluez the node serves Node1, says it waits for bluetoothd, and validates ClearInterval")
    func noBlueZ() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            try await daemon.waitForOutput(containing: "waiting for bluetoothd (org.bluez)", inStderr: true)
            let node = ["org.proximityd", "/org/proximityd", "org.proximityd.Node1"]
            let values = try await box.busctl(["get-property"] + node + ["Adapter", "ClearInterval", "MeasuredPower", "Advertising"])
            #expect(values.stdout.trimmed == "s \"hci0\"\nd 10\nn -59\nb false", "\(values)")
            let ranging = try await box.busctl(["call"] + node + ["GetRanging"])
            #expect(ranging.stdout.trimmed == "a{ss} 0", "\(ranging)")
            let set = try await box.busctl(["set-property"] + node + ["ClearInterval", "d", "2.5"])
            #expect(set.status == 0, "\(set)")
            let now = try await box.busctl(["get-property"] + node + ["ClearInterval"])
            #expect(now.stdout.trimmed == "d 2.5", "\(now)")
            for bad in ["0", "3600.5", "1e9"] {
                let refused = try await box.busctl(["set-property"] + node + ["ClearInterval", "d", bad])
                #expect(refused.status != 0 && refused.stderr.contains("ClearInterval must be"), "\(bad): \(refused)")
            }
            #expect(try await box.busctl(["get-property"] + node + ["ClearInterval"]).stdout.trimmed == "d 2.5")
            // Kept across a restart, even a SIGKILL: the reply came after settings.json was written.
            daemon.signal(SIGKILL)
            _ = try await daemon.waitForExit(timeout: .seconds(10))
            let again = try await box.startDaemon()
            #expect(try await box.busctl(["get-property"] + node + ["ClearInterval"]).stdout.trimmed == "d 2.5")
            await again.stop()
            // --clear-interval wins for the run it is given to.
            let overridden = try await box.startDaemon(["--clear-interval", "4"])
            #expect(try await box.busctl(["get-property"] + node + ["ClearInterval"]).stdout.trimmed == "d 4")
            await overridden.stop()
            #expect(overridden.exitStatus == 0, "\(overridden.stderr)")
        }
    }
}

/// One interface element of an introspection document, whitespace-normalised.
func interfaceElement(_ xml: String, _ name: String) -> String? {
    guard let start = xml.range(of: "<interface name=\"\(name)\">"),
          let end = xml.range(of: "</interface>", range: start.upperBound..<xml.endIndex) else { return nil }
    return xml[start.lowerBound..<end.upperBound].split(whereSeparator: \.isWhitespace).joined(separator: " ")
}

/// `interfaceElement` without the `property` elements named in `dropping`.
func interfaceElement(_ xml: String, _ name: String, dropping: Set<String>) -> String? {
    guard var element = interfaceElement(xml, name) else { return nil }
    for property in dropping {
        for pattern in ["<property name=\"\(property)\" [^>]*/> ", "<property name=\"\(property)\" [^>/]*>.*?</property> "] {
            element = element.replacingOccurrences(of: pattern, with: "", options: .regularExpression)
        }
    }
    return element
}

/// The path element DBusKit makes of a string (`ObjectPath.appending(escaped:)`).
func escaped(_ s: String) -> String {
    ObjectPath.root.appending(escaped: s).rawValue.dropFirst().description
}

/// A hostile "node": advertises the general UUID and serves `value` as its identity, exported by
/// hand on a box's bus (as any program could), registered with the box's BlueZ.
func serveHostileIdentity(_ value: [UInt8], on connection: DBusConnection) async throws {
    let general = NodeConfiguration.defaultServiceUUID.lowercased
    let root: ObjectPath = "/org/test/hostile"
    try await connection.addObjectManager(at: root)
    _ = try await connection.export([DBusInterface("org.bluez.GattService1", properties: [
        DBusProperty("UUID", .string, .string(general)),
        DBusProperty("Primary", .boolean, .boolean(true)),
    ])], at: "/org/test/hostile/service0")
    _ = try await connection.export([DBusInterface("org.bluez.GattCharacteristic1", methods: [
        DBusMethod("ReadValue", inputs: [DBusArgument("options", .dictionary(key: .string, value: .variant))],
                   outputs: [DBusArgument("value", .array(.byte))]) { call in
            var offset = 0
            if case .variant(.uint16(let o))? = call.arguments.first?.stringKeyedDictionary?["offset"] { offset = Int(o) }
            return [.bytes(value.dropFirst(offset))]
        },
    ], properties: [
        DBusProperty("UUID", .string, .string("5830b129-79a9-4a7e-be31-5d76f8856c51")),
        DBusProperty("Service", .objectPath, .objectPath("/org/test/hostile/service0")),
        DBusProperty("Flags", .array(.string), .strings(["read"])),
    ])], at: "/org/test/hostile/service0/char0")
    _ = try await connection.call(destination: "org.bluez", path: "/org/bluez/hci0", interface: "org.bluez.GattManager1",
                                  member: "RegisterApplication", [.objectPath(root), .vardict([:])])
    _ = try await connection.export([DBusInterface("org.bluez.LEAdvertisement1", methods: [
        DBusMethod("Release") { _ in [] },
    ], properties: [
        DBusProperty("Type", .string, .string("peripheral"), changeSignal: .const),
        DBusProperty("ServiceUUIDs", .array(.string), .strings([general]), changeSignal: .const),
    ])], at: "/org/test/hostile/advertisement0")
    _ = try await connection.call(destination: "org.bluez", path: "/org/bluez/hci0", interface: "org.bluez.LEAdvertisingManager1",
                                  member: "RegisterAdvertisement", [.objectPath("/org/test/hostile/advertisement0"), .vardict([:])])
}

@Suite("proximityd against hostile peers", .serialized)
struct NodeHostilePeerTests {
    @Test("an oversized identity and one that is not a UUID are rejected and logged; the node keeps ranging nothing and runs on")
    func hostileIdentities() async throws {
        var radio = RadioParameters()
        radio.shadowingSigma = 1
        radio.packetLoss = 0
        let scenario = Scenario(seed: 3, radio: radio, boxes: [
            BoxSpec(name: "alpha", address: "AA:00:00:00:00:01", trajectory: Trajectory(fixed: Position(x: 0, y: 0))),
            BoxSpec(name: "bravo", address: "AA:00:00:00:00:02", trajectory: Trajectory(fixed: Position(x: 1, y: 0))),
            BoxSpec(name: "charlie", address: "AA:00:00:00:00:03", trajectory: Trajectory(fixed: Position(x: 2, y: 0))),
        ])
        let sim = try await SimBoxes.start(scenario)
        var connections: [DBusConnection] = []
        var daemon: ManagedProcess?
        do {
            let bravo = try await sim.buses["bravo"]!.connect()
            let charlie = try await sim.buses["charlie"]!.connect()
            connections = [bravo, charlie]
            try await serveHostileIdentity([UInt8](repeating: 0x41, count: 300), on: bravo)
            try await serveHostileIdentity(Array("not-a-uuid-but-exactly-36-bytes-long".utf8), on: charlie)
            let alpha = try await sim.startDaemon("alpha")
            daemon = alpha
            // No bus signal says a peer's identity was rejected: its log line is the event.
            let rejected = await alpha.waitForOutput(inStderr: true, timeout: .seconds(60)) {
                $0.components(separatedBy: "rejected a peer's identity").count - 1 == 2
            }
            #expect(rejected, "alpha did not reject both identities: \(alpha.stderr)")
            let log = alpha.stderr
            let lines = log.split(separator: "\n").filter { $0.contains("rejected a peer's identity") }
            #expect(lines.contains { $0.contains("AA:00:00:00:00:02") && $0.contains("longer than 64 bytes") }, "\(log)")
            #expect(lines.contains { $0.contains("AA:00:00:00:00:03") && $0.contains("are not a UUID") }, "\(log)")
            #expect(!log.contains("identified a peer"), "\(log)")
            #expect(try await sim.ranging("alpha").isEmpty)
            #expect(try await sim.node("alpha", ["GetPeers"]).stdout.trimmed == "ao 0")
            let file = sim.stateDirectory("alpha").appendingPathComponent("peers.json")
            #expect(!FileManager.default.fileExists(atPath: file.path))
            #expect(alpha.isRunning)
        } catch {
            await daemon?.stop()
            for connection in connections { await connection.close() }
            await sim.stop()
            throw error
        }
        await daemon?.stop()
        #expect(daemon?.exitStatus == 0, "\(daemon?.stderr ?? "")")
        for connection in connections { await connection.close() }
        await sim.stop()
    }
}
