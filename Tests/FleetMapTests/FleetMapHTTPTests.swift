import FleetMap
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import ProximityCore
import ProximityFleet
import ProximityMQTT
import ProximityTesting
import Synchronization
import Testing

/// The map's HTTP as clients expect it (issue 31, item 4) and its honest state (item 3).
@Suite("the fleet map's HTTP and status")
struct FleetMapHTTPTests {
    /// One request on a fresh connection; the whole answer. The socket's blocking reads run on a
    /// thread of their own: on a two-core machine the tests' blocked threads would otherwise be
    /// all the threads the server in this process has to answer with.
    static func ask(_ port: Int, _ request: String, body: String = "") async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                do {
                    let fd = try RawHTTP.connect(port: port, request: request + "Host: map\r\nConnection: close\r\n\r\n" + body)
                    defer { close(fd) }
                    continuation.resume(returning: RawHTTP.read(fd) { _ in false }.text)
                } catch {
                    continuation.resume(throwing: error)
                }
            }.start()
        }
    }

    static func header(_ answer: String, _ name: String) -> String? {
        answer.components(separatedBy: "\r\n\r\n").first?.split(separator: "\r\n")
            .first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
            .map { $0.split(separator: ":", maxSplits: 1)[1].trimmingCharacters(in: .whitespaces) }
    }

    static func body(_ answer: String) -> String { answer.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n") }

    /// The map's routes over `views` (and `editing`), driven in process by HummingbirdTesting's
    /// router framework: requests go to the router itself, no socket. The tests of a server, a
    /// socket and a browser use ``withServer(_:editing:_:)``.
    static func withRouter(_ views: FleetViews, editing: FleetMapEditing? = nil,
                           _ body: @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        let server = FleetMapServer(address: FleetMapAddress(host: "127.0.0.1", port: 0), views: views, logger: Logger(label: "map"),
                                    editing: editing)
        try await Application(router: server.router()).test(.router, body)
    }

    /// One request through the router: its status, headers and body as text.
    static func ask(_ client: any TestClientProtocol, _ method: HTTPRequest.Method, _ uri: String, headers: HTTPFields = [:],
                    body: [UInt8]? = nil) async throws -> (status: Int, headers: HTTPFields, body: String) {
        try await client.execute(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(bytes: $0) }) { response in
            (response.status.code, response.headers, String(buffer: response.body))
        }
    }

    /// Runs a map server over `views` (and `editing`) on a port it chooses, for `body`.
    static func withServer(_ views: FleetViews, editing: FleetMapEditing? = nil, _ body: (Int) async throws -> Void) async throws {
        let (ports, port) = AsyncStream.makeStream(of: Int.self)
        let server = FleetMapServer(address: FleetMapAddress(host: "127.0.0.1", port: 0), views: views, logger: Logger(label: "map"),
                                    editing: editing, listening: { port.yield($0) })
        let running = Task { try await server.run() }
        defer { running.cancel() }
        let waiting = Task { () -> Int? in
            for await p in ports { return p }
            return nil
        }
        let timeout = Task { try await Task.sleep(for: .seconds(20)); waiting.cancel() }
        defer { timeout.cancel() }
        guard let chosen = await waiting.value else { throw TestKitError("the map did not listen within 20 s") }
        try await body(chosen)
    }

    @Test("before the first state: /api/devices, /api/nodes and /api/status are 503 with Retry-After; then 200; HEAD answers as GET without a body; the page's files carry an ETag and a matching If-None-Match gets 304")
    func http() async throws {
        let views = FleetViews()
        try await Self.withRouter(views) { client in
            for path in ["/api/devices", "/api/nodes", "/api/status"] {
                let answer = try await Self.ask(client, .get, path)
                #expect(answer.status == 503, "\(path): \(answer)")
                #expect(answer.headers[.retryAfter] == "1", "\(path): \(answer)")
                #expect(answer.body.contains("the service is starting"))
            }
            #expect(try await Self.ask(client, .get, "/api/plan").status == 404, "no plan: 404, as before")
            views.show(plan: nil)
            views.show(devices: FleetMapTests.table(1, room: "living"), nodes: FleetMapTests.nodes, status: FleetMapTests.status)
            for path in ["/api/devices", "/api/nodes", "/api/status"] {
                let get = try await Self.ask(client, .get, path), head = try await Self.ask(client, .head, path)
                #expect(get.status == 200 && head.status == 200, "\(path): \(get)\n\(head)")
                #expect(head.body.isEmpty, "HEAD \(path) has a body: \(head)")
                #expect(head.headers[.contentLength] == "\(get.body.utf8.count)", "\(head)")
                #expect(head.headers[.contentType] == "application/json")
            }
            let status = try #require(MQTTJSON.decode(FleetStatus.self, from: Array(try await Self.ask(client, .get, "/api/status").body.utf8)))
            #expect(status == FleetMapTests.status)
            for path in ["/", "/map.js", "/map.css"] {
                let get = try await Self.ask(client, .get, path)
                let tag = try #require(get.headers[.eTag], "\(path): \(get)")
                #expect(tag.hasPrefix("\"") && tag.count > 4 && get.headers[.cacheControl] == "no-cache")
                #expect(try await Self.ask(client, .head, path).status == 200)
                let again = try await Self.ask(client, .get, path, headers: [.ifNoneMatch: tag])
                #expect(again.status == 304 && again.body.isEmpty, "\(path): \(again)")
                #expect(try await Self.ask(client, .get, path, headers: [.ifNoneMatch: "\"other\""]).status == 200)
            }
            for (method, path) in [(HTTPRequest.Method.post, "/api/devices"), (.put, "/api/plan"), (.delete, "/"), (.patch, "/map.js")] {
                let answer = try await Self.ask(client, method, path)
                #expect(answer.status == 405 && answer.headers[.allow] == "GET, HEAD", "\(method) \(path): \(answer)")
            }
        }
    }

    @Test("the status a step shows: connecting, then connected since; down with its reason and since when; stale once devices are tracked and no node reported for 10 s; nodes online of those known")
    func status() throws {
        var configuration = FleetConfiguration()
        configuration.views = FleetViews()
        var step = FleetStep(configuration)
        func shown(_ effects: [FleetEffect]) throws -> FleetStatus {
            try #require(effects.compactMap { if case .show(_, _, let status) = $0 { status } else { nil } }.last)
        }
        var s = try shown(step.tick(at: 100))
        #expect(s.broker == .init(state: "connecting", since: 100) && !s.live)
        _ = step.connection(.connected, at: 101)
        _ = step.receive(.nodeStatus(node: "alpha", status: "online"), at: 101)
        _ = step.receive(.nodeStatus(node: "bravo", status: "offline"), at: 101)
        s = try shown(step.tick(at: 102))
        #expect(s.live && s.broker == .init(state: "connected", since: 101) && s.nodes == .init(online: 1, total: 2), "\(s)")
        var report = PeerReport(id: "tag", kind: "ibeacon", rssi: -60, rssiAt1m: -59, distance: 1.2, proximity: "near", time: nil)
        report.name = "Tag"
        _ = step.receive(.report(node: "alpha", device: "tag", report), at: 103)
        s = try shown(step.tick(at: 104))
        #expect(s.live && s.newestReport == 103 && s.newestReportAge == 1, "\(s)")
        s = try shown(step.tick(at: 114))
        #expect(!s.live && s.broker.state == "connected" && s.newestReportAge == 11, "no report for 11 s: \(s)")
        _ = step.connection(.disconnected(reason: "the connection was lost", tls: false), at: 115)
        _ = step.connection(.disconnected(reason: "connection refused", tls: false), at: 117)
        s = try shown(step.tick(at: 118))
        #expect(!s.live && s.broker == .init(state: "down", since: 115, reason: "the connection was lost"), "down since the first failure: \(s)")
    }

    @Test("a service with a map on a real Mosquitto: /api/status says the broker is down within 5 s of stopping it, and connected again within 5 s of its return; the page is live, then says so in words")
    func brokerDown() async throws {
        try await MosquittoBroker.with { broker in
            let fleet = try ManagedProcess(BuiltProducts.path("proximity-fleet"), ["run", "--broker", "mqtt://127.0.0.1:\(broker.port)", "--http", "127.0.0.1:0"])
            defer { fleet.signal(SIGKILL) }
            try await fleet.waitForOutput(containing: "map listening", inStderr: true, timeout: .seconds(30))
            let line = try #require(fleet.stderr.split(separator: "\n").first { $0.contains("map listening") })
            let port = try #require(Int(line.split(separator: ":").last?.filter(\.isNumber) ?? ""), "\(line)")
            func status() async throws -> FleetStatus? {
                let answer = try await Self.ask(port, "GET /api/status HTTP/1.1\r\n")
                return answer.hasPrefix("HTTP/1.1 200") ? MQTTJSON.decode(FleetStatus.self, from: Array(Self.body(answer).utf8)) : nil
            }
            func until(_ what: String, within seconds: Int, _ condition: (FleetStatus) -> Bool) async throws -> FleetStatus {
                let deadline = ContinuousClock.now + .seconds(seconds)
                while true {
                    if let s = try await status(), condition(s) { return s }
                    guard ContinuousClock.now < deadline else { throw TestKitError("\(what), not within \(seconds) s: \(String(describing: try await status()))") }
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            _ = try await until("connected", within: 30) { $0.broker.state == "connected" && $0.live }
            let stopped = Date().timeIntervalSince1970
            await broker.pause()
            let down = try await until("the broker down", within: 5) { $0.broker.state == "down" }
            #expect(!down.live && down.broker.since >= stopped - 0.5, "\(down)")
            try await broker.resume()
            let back = try await until("connected again", within: 5) { $0.broker.state == "connected" }
            #expect(back.live, "\(back)")
        }
    }
}

/// Editing the plan from the map (issue 31, item 5): `PUT /api/plan` behind a bearer token.
@Suite("the fleet map's plan editing")
struct FleetMapEditingTests {
    static let good = """
        nodes:
          - {name: alpha, position: [0.5, 0.5, 1]}
          - {name: bravo, position: [9.5, 0.5, 1]}
        rooms:
          - {name: living, polygon: [[0, 0], [5, 0], [5, 4], [0, 4]]}
          - {name: kitchen, polygon: [[5, 0], [10, 0], [10, 4], [5, 4]]}

        """

    @Test("a fresh token, mode 0600, replacing any file there; PUT /api/plan: 401 without it or with another, 422 with each problem at its line and column for a bad plan (the file unchanged), 200 for a good one: the file replaced atomically, the fleet handed the plan, check-plan accepts the file")
    func put() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("edit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let planPath = dir.appendingPathComponent("plan.yaml").path, tokenPath = dir.appendingPathComponent("edit-token").path
        let before = Self.good.replacingOccurrences(of: "kitchen", with: "hall")
        try before.write(toFile: planPath, atomically: true, encoding: .utf8)
        try "stale".write(toFile: tokenPath, atomically: true, encoding: .utf8)
        let token = try FleetMapEditing.writeToken(to: tokenPath)
        #expect(token.count == 64 && token.allSatisfy(\.isHexDigit))
        #expect(try String(contentsOfFile: tokenPath, encoding: .utf8) == token + "\n")
        let mode = try FileManager.default.attributesOfItem(atPath: tokenPath)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(try FleetMapEditing.writeToken(to: tokenPath) != token, "a new token at each start")
        let current = try String(contentsOfFile: tokenPath, encoding: .utf8).trimmingCharacters(in: .newlines)

        let applied = Mutex<[FloorPlan]>([])
        let views = FleetViews(editable: true)
        views.show(plan: try FloorPlanFile.load(path: planPath))
        let editing = FleetMapEditing(planPath: planPath, token: current) { plan in applied.withLock { $0.append(plan) } }
        try await FleetMapHTTPTests.withRouter(views, editing: editing) { client in
        func send(_ body: String, auth: String?) async throws -> (status: Int, headers: HTTPFields, body: String) {
            var headers: HTTPFields = [.contentType: "application/yaml"]
            if let auth { headers[.authorization] = auth }
            return try await FleetMapHTTPTests.ask(client, .put, "/api/plan", headers: headers, body: Array(body.utf8))
        }
        let none = try await send(Self.good, auth: nil)
        #expect(none.status == 401 && none.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true, "\(none)")
        #expect(try await send(Self.good, auth: "Bearer \(token)").status == 401, "the first token, replaced")
        #expect(try await send(Self.good, auth: "Basic \(current)").status == 401)

        let bad = Self.good.replacingOccurrences(of: "[10, 4]", with: "[10, four]")
        let refused = try await send(bad, auth: "Bearer \(current)")
        #expect(refused.status == 422, "\(refused)")
        struct Refusal: Decodable { struct P: Decodable { var line: Int?; var column: Int?; var message: String }; var problems: [P] }
        let problems = try #require(MQTTJSON.decode(Refusal.self, from: Array(refused.body.utf8))).problems
        #expect(problems.count >= 1 && problems[0].line == 6 && problems[0].column != nil, "\(problems)")
        #expect(try String(contentsOfFile: planPath, encoding: .utf8) == before, "a bad plan changes nothing")
        #expect(applied.withLock { $0.isEmpty })

        let saved = try await send(Self.good, auth: "Bearer \(current)")
        #expect(saved.status == 200, "\(saved)")
        #expect(try String(contentsOfFile: planPath, encoding: .utf8) == Self.good)
        #expect(applied.withLock { $0.map { $0.rooms.map(\.name) } } == [["living", "kitchen"]])
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["edit-token", "plan.yaml"], "no temporary file left")
        }
        let check = try await runCommand(BuiltProducts.path("proximity-fleet"), ["check-plan", planPath])
        #expect(check.status == 0, "\(check)")
    }

    @Test("proximity-fleet --edit: needs --plan, --http and --edit-token; loopback only unless --edit-remote; --edit-token alone refused; the log says where the token is, never the token")
    func options() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("edit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let planPath = dir.appendingPathComponent("plan.yaml").path, tokenPath = dir.appendingPathComponent("token").path
        try Self.good.write(toFile: planPath, atomically: true, encoding: .utf8)
        let fleet = BuiltProducts.path("proximity-fleet")
        let base = ["run", "--broker", "mqtt://127.0.0.1:1"]
        for (arguments, says) in [(["--edit", "--http", "127.0.0.1:0", "--edit-token", tokenPath], "needs --plan"),
                                  (["--edit", "--plan", planPath, "--http", "127.0.0.1:0"], "needs --edit-token"),
                                  (["--edit", "--plan", planPath, "--http", "0.0.0.0:0", "--edit-token", tokenPath], "only on a loopback address"),
                                  (["--plan", planPath, "--http", "127.0.0.1:0", "--edit-token", tokenPath], "only with --edit")] {
            let result = try await runCommand(fleet, base + arguments)
            #expect(result.status == 64 && result.stderr.contains(says), "\(arguments): \(result)")
        }
        let running = try ManagedProcess(fleet, base + ["--plan", planPath, "--http", "0.0.0.0:0", "--edit", "--edit-remote", "--edit-token", tokenPath])
        defer { running.signal(SIGKILL) }
        try await running.waitForOutput(containing: "map listening", inStderr: true, timeout: .seconds(30))
        let token = try String(contentsOfFile: tokenPath, encoding: .utf8).trimmingCharacters(in: .newlines)
        #expect(running.stderr.contains("token-file=\(tokenPath)") && !running.stderr.contains(token), "\(running.stderr)")
    }
}

/// The plan's background picture (issue 31, item 5): in the plan file, sent from the map, served
/// to the page.
@Suite("the plan's background picture")
struct FleetMapBackgroundTests {
    /// A 2 × 1 PNG (black, white).
    static let png: [UInt8] = Array(Data(base64Encoded: "iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAAAAADRSSBWAAAAC0lEQVR4nGNg+A8AAQIBAEK+vGgAAAAASUVORK5CYII=")!)

    @Test("background: {image, corner, width, floor}: read, drawn again by render, its problems at their line and column (no file, a path out of the folder, another kind of file, no floor of that name, a width of 0)")
    func planFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("background-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data(Self.png).write(to: dir.appendingPathComponent("house.png"))
        let path = dir.appendingPathComponent("plan.yaml").path
        let text = FleetMapEditingTests.good + "background: {image: house.png, corner: [-0.5, 0], width: 12.5}\n"
        let plan = try FloorPlanFile.parse(text, path: path)
        #expect(plan.background == .init(image: "house.png", corner: PlanPoint(x: -0.5, y: 0), width: 12.5, floor: 0))
        #expect(try FloorPlanFile.parse(FloorPlanFile.render(plan), path: path).background == plan.background)
        for (value, says) in [("{image: nothere.png, corner: [0, 0], width: 10}", "background.image: no file \"nothere.png\""),
                              ("{image: ../house.png, corner: [0, 0], width: 10}", "a file beside the plan"),
                              ("{image: plan.yaml, corner: [0, 0], width: 10}", "must be a PNG, JPEG or SVG"),
                              ("{image: house.png, corner: [0, 0], width: 10, floor: attic}", "background.floor: no floor is named \"attic\""),
                              ("{image: house.png, corner: [0, 0], width: 0}", "background.width"),
                              ("{image: house.png, width: 10}", "background: needs corner:")] {
            #expect(throws: FloorPlanFile.Problems.self) { try FloorPlanFile.parse(FleetMapEditingTests.good + "background: \(value)\n", path: path) }
            do { _ = try FloorPlanFile.parse(FleetMapEditingTests.good + "background: \(value)\n", path: path) } catch {
                #expect(error.lines.contains { $0.hasPrefix("\(path):7:") && $0.contains(says) }, "\(value): \(error.lines)")
            }
        }
    }

    @Test("PUT /api/plan/background: 401 without the token; 415 for another type or a body that is not what it says; 200 stores it beside the plan; once the plan names it, GET serves it (an SVG under a policy that runs nothing); 404 before")
    func put() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("background-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let planPath = dir.appendingPathComponent("house.yaml").path
        try FleetMapEditingTests.good.write(toFile: planPath, atomically: true, encoding: .utf8)
        let views = FleetViews(editable: true)
        views.show(plan: try FloorPlanFile.load(path: planPath))
        let editing = FleetMapEditing(planPath: planPath, token: "t0ken") { plan in views.show(plan: plan) }
        try await FleetMapHTTPTests.withRouter(views, editing: editing) { client in
            func send(_ type: String, _ body: [UInt8], auth: String? = "Bearer t0ken") async throws -> (status: Int, headers: HTTPFields, body: String) {
                var headers: HTTPFields = [.contentType: type]
                if let auth { headers[.authorization] = auth }
                return try await FleetMapHTTPTests.ask(client, .put, "/api/plan/background", headers: headers, body: body)
            }
            #expect(try await FleetMapHTTPTests.ask(client, .get, "/api/plan/background").status == 404)
            #expect(try await send("image/png", Array("x".utf8), auth: nil).status == 401)
            #expect(try await send("image/gif", Array("GIF89a".utf8)).status == 415)
            #expect(try await send("image/png", Array("not a png".utf8)).status == 415)
            let svg = #"<svg xmlns="http://www.w3.org/2000/svg" width="20" height="10"><script>alert(1)</script><rect width="20" height="10"/></svg>"#
            let sent = try await send("image/svg+xml", Array(svg.utf8))
            #expect(sent.status == 200 && sent.body == #"{"image":"house.background.svg"}"#, "\(sent)")
            #expect(try String(contentsOfFile: dir.appendingPathComponent("house.background.svg").path, encoding: .utf8) == svg)
            let named = FleetMapEditingTests.good + "background: {image: house.background.svg, corner: [0, 0], width: 10}\n"
            let saved = try await FleetMapHTTPTests.ask(client, .put, "/api/plan", headers: [.authorization: "Bearer t0ken"], body: Array(named.utf8))
            #expect(saved.status == 200, "\(saved)")
            let served = try await FleetMapHTTPTests.ask(client, .get, "/api/plan/background")
            #expect(served.status == 200 && served.headers[.contentType] == "image/svg+xml", "\(served)")
            #expect(served.headers[.contentSecurityPolicy]?.contains("sandbox") == true, "\(served)")
            #expect(served.body == svg)
        }
    }
}
