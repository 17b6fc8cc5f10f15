import FleetMap
import Foundation
import ProximityCore
import ProximityFleet
import ProximityMQTT
import ProximityTesting
import Testing

/// The map's pieces without a browser: the address `--http` takes, the views' live streams and
/// their bounds, the plan as the page reads it, and `proximity-fleet --http`'s errors.
@Suite("the fleet map's address, views and errors")
struct FleetMapTests {
    @Test("--http's address: host and port, IPv6 in brackets, port 0; clear errors for the rest")
    func address() throws {
        #expect(try FleetMapAddress(parsing: "127.0.0.1:8080") == FleetMapAddress(host: "127.0.0.1", port: 8080))
        #expect(try FleetMapAddress(parsing: "[::1]:0") == FleetMapAddress(host: "::1", port: 0))
        #expect(try FleetMapAddress(parsing: "map.lan:65535").description == "map.lan:65535")
        #expect(FleetMapAddress(host: "::1", port: 80).description == "[::1]:80")
        for (text, says) in [("8080", "expected ADDRESS:PORT"), (":8080", "the address is missing"), ("127.0.0.1:65536", "0...65535"),
                             ("127.0.0.1:http", "0...65535"), ("::1:8080", "[ADDRESS]:PORT"), ("[::1]8080", "[ADDRESS]:PORT"),
                             ("a b:80", "not a host name"), ("127.0.0.1:-1", "0...65535")] {
            #expect(throws: FleetMapError.self) { try FleetMapAddress(parsing: text) }
            do { _ = try FleetMapAddress(parsing: text) } catch { #expect(error.description.contains(says), "\(text): \(error)") }
        }
    }

    static let plan = FloorPlan(
        floors: [.init(name: "ground", z: 0 ... 3), .init(name: "upstairs", z: 3 ... 6)],
        nodes: [.init(name: "alpha", position: PlanPoint(x: 0.5, y: 0.5, z: 1)), .init(name: "bravo", position: PlanPoint(x: 4.5, y: 3.5, z: 4))],
        rooms: [.init(name: "living", floor: 0, polygon: [PlanPoint(x: 0, y: 0), PlanPoint(x: 5, y: 0), PlanPoint(x: 5, y: 4)]),
                .init(name: "bedroom", floor: 1, polygon: [PlanPoint(x: 0, y: 0), PlanPoint(x: 5, y: 0), PlanPoint(x: 5, y: 4)])])

    static func table(_ t: Double, room: String) -> FleetTable {
        FleetTable(time: t, rule: "fleet", devices: [.init(id: "tag", name: "Anna", room: room, readings: [.init(node: "alpha", distance: 1, age: 0)])])
    }

    static let status = FleetStatus(time: 1, live: true, broker: .init(state: "connected", since: 0), nodes: .init(online: 1, total: 1),
                                    newestReport: 1, newestReportAge: 0)
    static let nodes = FleetNodes(time: 1, exponent: nil, rms: nil, nodes: [FleetNodeHealth(name: "alpha", inPlan: true, status: "online", mobile: false,
                                                                                            lastHeard: 1, devices: 1)])

    @Test("the plan as the page reads it: floors by name, each room on its floor, each node on the floor its height is in; the version goes up at each plan shown")
    func plan() throws {
        let views = FleetViews()
        #expect(views.planJSON == nil && views.devicesJSON == nil && views.nodesJSON == nil)
        views.show(plan: Self.plan)
        views.show(plan: Self.plan)
        let plan = try #require(MQTTJSON.decode(FleetMapPlan.self, from: Array((views.planJSON ?? "").utf8)))
        #expect(plan.version == 2)
        #expect(plan.floors.map(\.name) == ["ground", "upstairs"] && plan.floors[1].z == [3, 6])
        #expect(plan.rooms.map(\.floor) == ["ground", "upstairs"] && plan.rooms[0].polygon == [[0, 0], [5, 0], [5, 4]])
        #expect(plan.nodes.map(\.floor) == ["ground", "upstairs"] && plan.nodes[1].position == [4.5, 3.5, 4])
        views.show(plan: nil)
        #expect(views.planJSON == nil)
    }

    @Test("a live stream starts with the latest state, gets each one shown after, keeps only the newest it has not taken, and ends when the views finish; at most 64 at once")
    func streams() async throws {
        let views = FleetViews()
        views.show(plan: Self.plan)
        views.show(devices: Self.table(1, room: "living"), nodes: Self.nodes, status: Self.status)
        let stream = try #require(views.subscribe())
        var iterator = stream.makeAsyncIterator()
        let first = try #require(MQTTJSON.decode(FleetMapState.self, from: Array((await iterator.next() ?? "").utf8)))
        #expect(first.planVersion == 1 && first.devices.devices.first?.room == "living" && first.nodes.nodes.first?.name == "alpha")
        // Three states while the client is busy: it gets the last, whole.
        for (t, room) in [(2.0, "a"), (3.0, "b"), (4.0, "kitchen")] { views.show(devices: Self.table(t, room: room), nodes: Self.nodes, status: Self.status) }
        let next = try #require(MQTTJSON.decode(FleetMapState.self, from: Array((await iterator.next() ?? "").utf8)))
        #expect(next.devices.time == 4 && next.devices.devices.first?.room == "kitchen")
        #expect(MQTTJSON.decode(FleetTable.self, from: Array((views.devicesJSON ?? "").utf8))?.time == 4)
        #expect(MQTTJSON.decode(FleetNodes.self, from: Array((views.nodesJSON ?? "").utf8)) == Self.nodes)

        var more: [AsyncStream<String>] = []
        for _ in 1 ..< FleetViews.maximumSubscribers { more.append(try #require(views.subscribe())) }
        #expect(views.subscribers == FleetViews.maximumSubscribers)
        #expect(views.subscribe() == nil)
        views.finish()
        #expect(await iterator.next() == nil)
        #expect(views.subscribers == 0 && views.subscribe() == nil)
        _ = more
    }

    @Test("proximity-fleet --http: a bad address is a usage error (64) naming the form; an address in use ends the service with 69 and says so")
    func errors() async throws {
        let bad = try await runCommand(BuiltProducts.path("proximity-fleet"), ["run", "--broker", "mqtt://127.0.0.1:1", "--http", "8080"])
        #expect(bad.status == 64, "\(bad)")
        #expect(bad.stderr.hasPrefix("proximity-fleet: error: --http: not an address to listen on: 8080: expected ADDRESS:PORT"), "\(bad)")
        // A port taken by another listener.
        let holder = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(holder) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(holder, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        #expect(bound == 0 && listen(holder, 1) == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(holder, $0, &length) } }
        let port = Int(UInt16(bigEndian: address.sin_port))
        let taken = try await runCommand(BuiltProducts.path("proximity-fleet"),
                                         ["run", "--broker", "mqtt://127.0.0.1:1", "--http", "127.0.0.1:\(port)"])
        #expect(taken.status == 69, "\(taken)")
        #expect(taken.stderr.contains("proximity-fleet: error: --http: cannot listen on 127.0.0.1:\(port): Address already in use"), "\(taken)")
    }

    @Test("a live stream open when the service stops: SIGTERM ends it, and the service exits 0 at once; without a plan /api/plan is 404 with the reason, and the JSON answers say no-store and nosniff")
    func stopsWithAStreamOpen() async throws {
        let fleet = try ManagedProcess(BuiltProducts.path("proximity-fleet"), ["run", "--broker", "mqtt://127.0.0.1:1", "--http", "127.0.0.1:0"])
        try await fleet.waitForOutput(containing: "map listening", inStderr: true, timeout: .seconds(30))
        let line = try #require(fleet.stderr.split(separator: "\n").first { $0.contains("map listening") })
        let port = try #require(Int(line.split(separator: ":").last?.filter(\.isNumber) ?? ""), "\(line)")

        let plan = try RawHTTP.connect(port: port, request: "GET /api/plan HTTP/1.1\r\nHost: map\r\nConnection: close\r\n\r\n")
        let answer = RawHTTP.read(plan) { _ in false }
        close(plan)
        #expect(answer.text.hasPrefix("HTTP/1.1 404"), "\(answer)")
        #expect(answer.text.contains("{\"error\":\"this fleet has no floor plan (proximity-fleet run --plan FILE)\"}"), "\(answer)")
        #expect(answer.text.lowercased().contains("cache-control: no-store") && answer.text.lowercased().contains("x-content-type-options: nosniff"))

        let events = try RawHTTP.connect(port: port, request: "GET /events HTTP/1.1\r\nHost: map\r\n\r\n")
        defer { close(events) }
        // The first state comes within a tick of the service's (in HTTP/1.1 chunks).
        let first = RawHTTP.read(events) { $0.contains("event: state\ndata: {") && $0.contains("}\n\n") }
        #expect(first.text.contains("text/event-stream") && first.text.contains("retry: 2000"), "\(first)")
        let state = try #require(first.text.components(separatedBy: "data: ").last?.components(separatedBy: "\n\n").first)
        #expect(MQTTJSON.decode(FleetMapState.self, from: Array(state.utf8))?.planVersion == 1, "\(state)")

        kill(fleet.pid, SIGTERM)
        // The response ends (its last chunk, 0) or the connection closes.
        let rest = RawHTTP.read(events) { $0.contains("\r\n0\r\n\r\n") || $0.hasPrefix("0\r\n\r\n") }
        #expect(rest.closed || rest.text.contains("0\r\n\r\n"), "the stream stays open after SIGTERM: \(rest.text.suffix(200))")
        // At once: it exits while this side still holds the stream open (closed only at the end);
        // a service that waited for it would not exit at all.
        #expect(try await fleet.waitForExit(timeout: .seconds(15)) == 0, "\(fleet.stderr)")
    }
}
