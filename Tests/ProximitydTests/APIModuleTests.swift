import DBusKit
import Foundation
import ProximityAPI
import ProximityNode
import ProximityTesting
import Testing

/// ProximityAPI: the names and typed properties the daemon and its clients share, against the
/// introspection files, and its client side (NodeProxy, LivePeerTable) against a stand-in node.
@Suite("ProximityAPI: names, typed properties, proxies and the live peer table")
struct APIModuleTests {
    static let node = PeerProperties(
        identifier: "f713b801-f018-4592-851d-722230701152", kind: "node", address: "AA:00:00:00:00:02", name: "box2",
        rssi: -62, smoothedRSSI: -62.69, measuredPower: -59, distance: 1.53, proximity: "near",
        firstSeen: 1_795_247_982_348_055, lastSeen: 1_795_248_010_049_066)
    static let iBeacon = PeerProperties(
        identifier: "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2", kind: "ibeacon", address: "C0:00:00:00:00:10",
        rssi: -76, smoothedRSSI: -74.4, measuredPower: -59, distance: 5.87, proximity: "far",
        firstSeen: 1_795_249_953_878_380, lastSeen: 1_795_249_962_689_013, major: 1, minor: 2)

    /// `<property name="…" type="…" access="…">` of one interface of a file in `dbus/`, with
    /// whether it is annotated const.
    static func declaredProperties(_ file: String) throws -> [String: (type: String, access: String, const: Bool)] {
        let xml = try String(contentsOf: repositoryRoot.appendingPathComponent("dbus/\(file)"), encoding: .utf8)
        let regex = try NSRegularExpression(pattern: #"<property name="(\w+)" type="([^"]+)" access="(\w+)"(/>|>\s*<annotation name="org.freedesktop.DBus.Property.EmitsChangedSignal" value="(\w+)"/>)"#)
        var out: [String: (String, String, Bool)] = [:]
        for match in regex.matches(in: xml, range: NSRange(xml.startIndex..., in: xml)) {
            func group(_ i: Int) -> String? { Range(match.range(at: i), in: xml).map { String(xml[$0]) } }
            out[group(1)!] = (group(2)!, group(3)!, group(5) == "const")
        }
        return out
    }

    @Test("the names are the node's: bus name, the service UUID, peer paths that decode to the identifier")
    func names() {
        #expect(ProximityBus.defaultBusName == NodeConfiguration.defaultBusName)
        #expect(ProximityBus.defaultServiceUUID == NodeConfiguration.defaultServiceUUID)
        for identifier in [Self.node.identifier, Self.iBeacon.identifier, "35b639de-a46c-45e4-8206-ab21ecfd26b3", "eddystone-url:https://x.y/z"] {
            #expect(ProximityBus.peerPath(identifier).decodedLastElement == identifier)
        }
        #expect(ProximityBus.peerPath("35b6").rawValue == "/org/proximityd/peers/_335b6")
    }

    @Test("PeerProperties encodes exactly the types of dbus/org.proximityd.Peer1.xml, and decodes what it encodes")
    func peerProperties() throws {
        let declared = try Self.declaredProperties("org.proximityd.Peer1.xml")
        #expect(Set(declared.keys) == Set(PeerProperties.Key.allCases.map(\.rawValue)))
        for key in PeerProperties.Key.allCases {
            let d = key.descriptor
            #expect(declared[key.rawValue]?.type == d.type.description, "\(key)")
            #expect(declared[key.rawValue]?.const == d.isConst, "\(key)")
            #expect(declared[key.rawValue]?.access == "read" && !d.isWritable, "\(key)")
        }
        var eddystone = Self.node
        eddystone.identifier = "eddystone:00112233445566778899:aabbccddeeff"
        eddystone.kind = "eddystone"
        eddystone.namespace = "00112233445566778899"
        eddystone.instance = "aabbccddeeff"
        var url = Self.node
        url.kind = "eddystone"
        url.url = "https://example.com"
        for peer in [Self.node, Self.iBeacon, eddystone, url] {
            let values = peer.values
            #expect(PeerProperties(values) == peer)
            // Wrapped in variants, as GetAll and signals carry them.
            #expect(PeerProperties(values.mapValues { .variant($0) }) == peer)
            for (name, value) in values {
                #expect(value.type.description == declared[name]?.type, "\(name)")
            }
            // Optional properties only when set; the others always.
            for key in PeerProperties.Key.allCases {
                #expect((values[key.rawValue] != nil) == (!key.isOptional || peer.value(of: key) != nil), "\(key)")
            }
        }
        #expect(Set(Self.node.values.keys) == Set(PeerProperties.Key.allCases.filter { !$0.isOptional }.map(\.rawValue)))
        #expect(Self.iBeacon.values["Major"] == .uint16(1) && Self.iBeacon.values["Namespace"] == nil)
        // Lenient: wrong types and missing values read as empty, never trap.
        let odd = PeerProperties(["RSSI": .string("x"), "Distance": .int32(3), "Major": .int64(70000), "LastSeen": .int32(5)])
        #expect(odd.rssi == 0 && odd.distance == 0 && odd.major == nil && odd.lastSeen == 5 && odd.proximity == "unknown")
        // A PropertiesChanged applied.
        var changed = Self.node
        changed.apply(changed: ["Proximity": .variant(.string("far")), "RSSI": .int16(-80)])
        #expect(changed.proximity == "far" && changed.rssi == -80 && changed.identifier == Self.node.identifier)
        #expect(changed.changes(since: Self.node) == ["Proximity": .string("far"), "RSSI": .int16(-80)])
    }

    @Test("NodeProperties encodes exactly the types of dbus/org.proximityd.Node1.xml")
    func nodeProperties() throws {
        let declared = try Self.declaredProperties("org.proximityd.Node1.xml")
        #expect(Set(declared.keys) == Set(NodeProperties.Key.allCases.map(\.rawValue)))
        for key in NodeProperties.Key.allCases {
            let d = key.descriptor
            #expect(declared[key.rawValue]?.type == d.type.description, "\(key)")
            #expect(declared[key.rawValue]?.const == d.isConst, "\(key)")
            #expect(declared[key.rawValue]?.access == (d.isWritable ? "readwrite" : "read"), "\(key)")
        }
        let properties = NodeProperties(identifier: "a069c162-4fb3-47c7-b9fb-de47010f13d7", name: "box1", advertising: true)
        #expect(NodeProperties(properties.values) == properties)
        for (name, value) in properties.values { #expect(value.type.description == declared[name]?.type, "\(name)") }
        #expect(properties.serviceUUID == "b89491c9-43dd-4d75-bf16-dff381aed967")
    }

    @Test("AlertProperties encodes exactly the types of dbus/org.proximityd.Alert1.xml; AlertManager1.xml's properties and AlertStrategy1.xml's Evaluate are ProximityBus's")
    func alertFiles() throws {
        let declared = try Self.declaredProperties("org.proximityd.Alert1.xml")
        #expect(Set(declared.keys) == Set(AlertProperties.Key.allCases.map(\.rawValue)))
        for key in AlertProperties.Key.allCases {
            let d = key.descriptor
            #expect(declared[key.rawValue]?.type == d.type.description, "\(key)")
            #expect(declared[key.rawValue]?.const == d.isConst, "\(key)")
            #expect(declared[key.rawValue]?.access == "read" && !d.isWritable, "\(key)")
        }
        var target = AlertProperties(alert: "beacon1", target: "ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:1")
        target.title = "Beacon1"
        target.extra = ["room": "3"]
        target.actionStatus = "inProgress"
        target.conditionValid = true
        target.proximity = "near"
        target.detected = true
        #expect(AlertProperties(target.values) == target)
        #expect(AlertProperties(target.values.mapValues { .variant($0) }) == target)
        for (name, value) in target.values { #expect(value.type.description == declared[name]?.type, "\(name)") }
        #expect(target.path.rawValue == "/org/proximityd/alerts/beacon1/ibeacon_3af7826da6_2d4fa2_2d4e98_2d8024_2dbc5b71e0893e_3a1_3a1")

        let manager = try Self.declaredProperties("org.proximityd.AlertManager1.xml")
        #expect(manager.mapValues { $0.type } == [ProximityBus.AlertManager1.current: "o", ProximityBus.AlertManager1.strategies: "as"])
        #expect(manager.values.allSatisfy { $0.access == "read" && !$0.const })

        // Clients implement AlertStrategy1: its file must say what the node calls.
        let strategy = try String(contentsOf: repositoryRoot.appendingPathComponent("dbus/org.proximityd.AlertStrategy1.xml"), encoding: .utf8)
        let element = try #require(RegionBusTests.interfaceElement(strategy, ProximityBus.AlertStrategy1.interface.rawValue))
        let evaluate = "<method name=\"\(ProximityBus.AlertStrategy1.evaluate)\">"
            + " <arg name=\"targets\" type=\"\(ProximityBus.AlertStrategy1.targetsType)\" direction=\"in\"/>"
            + " <arg name=\"verdicts\" type=\"\(ProximityBus.AlertStrategy1.verdictsType)\" direction=\"out\"/> </method>"
        #expect(element.contains(evaluate), "\(element)")
        #expect(element.contains("<method name=\"\(ProximityBus.AlertStrategy1.release)\"/>"), "\(element)")
    }

    /// A stand-in node on a private bus: the object manager at /org/proximityd, Peer1 objects
    /// exported from `PeerProperties.interface`, and the name.
    struct StandIn {
        let bus: PrivateBus
        let server: DBusConnection
        var objects: [String: DBusObject] = [:]

        static func start() async throws -> StandIn {
            let bus = try await PrivateBus.start(name: "api")
            let server = try await bus.connect()
            try await server.addObjectManager(at: ProximityBus.rootPath)
            _ = try await server.export([DBusInterface(ProximityBus.Node1.interface, properties: [
                DBusProperty(NodeProperties.Key.name.rawValue, .string, .string("stand-in"), changeSignal: .const),
            ])], at: ProximityBus.rootPath)
            // Something else below the root, as the node's advertisement is: never a peer.
            _ = try await server.export([DBusInterface("org.bluez.LEAdvertisement1", properties: [
                DBusProperty("Type", .string, .string("peripheral")),
            ])], at: "/org/proximityd/advertisement0")
            return StandIn(bus: bus, server: server)
        }

        mutating func add(_ peer: PeerProperties) async throws {
            objects[peer.identifier] = try await server.export([peer.interface], at: peer.path)
        }

        func change(_ old: PeerProperties, to new: PeerProperties) {
            objects[old.identifier]!.set(new.changes(since: old), interface: ProximityBus.Peer1.interface)
        }

        mutating func remove(_ peer: PeerProperties) async {
            await objects.removeValue(forKey: peer.identifier)!.unexport()
        }
    }

    @Test("NodeProxy: a clear error when the node is not there; the peers from one GetManagedObjects")
    func proxy() async throws {
        var standIn = try await StandIn.start()
        let address = standIn.bus.busAddress
        do {
            _ = try await NodeProxy.connect(to: address)
            Issue.record("connected to a node that is not there")
        } catch {
            #expect("\(error)" == "proximityd is not running on the \(standIn.bus.address) bus (org.proximityd has no owner)")
        }
        try await standIn.add(Self.node)
        try await standIn.add(Self.iBeacon)
        _ = try await standIn.server.requestName(ProximityBus.defaultBusName)
        let node = try await NodeProxy.connect(to: address)
        #expect(try await node.properties().name == "stand-in")
        #expect(try await node.peerProperties() == [Self.node.path: Self.node, Self.iBeacon.path: Self.iBeacon])
        #expect(try await node.peer(identifier: Self.iBeacon.identifier).properties() == Self.iBeacon)
        await node.close()
        await standIn.server.close()
        await standIn.bus.stop()
    }

    @Test("LivePeerTable: the snapshot, then peers added, changed and removed from the signals; the node leaving ends it")
    func liveTable() async throws {
        var standIn = try await StandIn.start()
        try await standIn.add(Self.node)
        _ = try await standIn.server.requestName(ProximityBus.defaultBusName)
        let node = try await NodeProxy.connect(to: standIn.bus.busAddress)
        let live = try await LivePeerTable.start(node)
        #expect(await live.peers == [Self.node.path: Self.node])
        let following = Task { () -> NodeConnectionError? in
            do throws(NodeConnectionError) { try await live.follow() } catch { return error }
            return nil
        }

        try await standIn.add(Self.iBeacon)
        try await eventually("the beacon added", timeout: .seconds(5), every: .milliseconds(20)) {
            await live.peers[Self.iBeacon.path] == Self.iBeacon
        }
        let moved = { () -> PeerProperties in
            var peer = Self.node
            peer.proximity = "far"
            peer.distance = 7.5
            peer.rssi = -85
            peer.lastSeen += 1_000_000
            return peer
        }()
        standIn.change(Self.node, to: moved)
        try await eventually("the node's move", timeout: .seconds(5), every: .milliseconds(20)) {
            await live.peers[Self.node.path] == moved
        }
        await standIn.remove(Self.iBeacon)
        try await eventually("the beacon removed", timeout: .seconds(5), every: .milliseconds(20)) {
            await live.peers == [Self.node.path: moved]
        }

        _ = try await standIn.server.releaseName(ProximityBus.defaultBusName)
        let ended = await following.value
        #expect(ended.map { "\($0)" } == "org.proximityd left the \(standIn.bus.address) bus")
        await node.close()
        await standIn.server.close()
        await standIn.bus.stop()
    }
}
