import FleetMap
import Foundation
import Logging
import ProximityCore
import ProximityFleet
import ProximityMQTT
import ProximityTesting
import Testing

/// The map's HTTP as clients expect it (issue 31, item 4) and its honest state (item 3).
@Suite("the fleet map's HTTP and status")
struct FleetMapHTTPTests {
    /// One request on a fresh connection; the whole answer.
    static func ask(_ port: Int, _ request: String) throws -> String {
        let fd = try RawHTTP.connect(port: port, request: request + "Host: map\r\nConnection: close\r\n\r\n")
        defer { close(fd) }
        return RawHTTP.read(fd) { _ in false }.text
    }

    static func header(_ answer: String, _ name: String) -> String? {
        answer.components(separatedBy: "\r\n\r\n").first?.split(separator: "\r\n")
            .first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
            .map { $0.split(separator: ":", maxSplits: 1)[1].trimmingCharacters(in: .whitespaces) }
    }

    static func body(_ answer: String) -> String { answer.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n") }

    /// Runs a map server on a free port over `views` for `body`.
    static func withServer(_ views: FleetViews, _ body: (Int) async throws -> Void) async throws {
        let port = try freeTCPPort()
        let server = FleetMapServer(address: FleetMapAddress(host: "127.0.0.1", port: port), views: views, logger: Logger(label: "map"))
        let running = Task { try await server.run() }
        defer { running.cancel() }
        let deadline = ContinuousClock.now + .seconds(20)
        while (try? RawHTTP.connect(port: port, request: "")).map({ close($0) }) == nil {
            guard ContinuousClock.now < deadline else { throw TestKitError("the map did not listen on \(port)") }
            try await Task.sleep(for: .milliseconds(20))
        }
        try await body(port)
    }

    @Test("before the first state: /api/devices, /api/nodes and /api/status are 503 with Retry-After; then 200; HEAD answers as GET without a body; the page's files carry an ETag and a matching If-None-Match gets 304")
    func http() async throws {
        let views = FleetViews()
        try await Self.withServer(views) { port in
            for path in ["/api/devices", "/api/nodes", "/api/status"] {
                let answer = try Self.ask(port, "GET \(path) HTTP/1.1\r\n")
                #expect(answer.hasPrefix("HTTP/1.1 503"), "\(path): \(answer)")
                #expect(Self.header(answer, "Retry-After") == "1", "\(path): \(answer)")
                #expect(Self.body(answer).contains("the service is starting"))
            }
            #expect(try Self.ask(port, "GET /api/plan HTTP/1.1\r\n").hasPrefix("HTTP/1.1 404"), "no plan: 404, as before")
            views.show(plan: nil)
            views.show(devices: FleetMapTests.table(1, room: "living"), nodes: FleetMapTests.nodes, status: FleetMapTests.status)
            for path in ["/api/devices", "/api/nodes", "/api/status"] {
                let get = try Self.ask(port, "GET \(path) HTTP/1.1\r\n"), head = try Self.ask(port, "HEAD \(path) HTTP/1.1\r\n")
                #expect(get.hasPrefix("HTTP/1.1 200") && head.hasPrefix("HTTP/1.1 200"), "\(path): \(get)\n\(head)")
                #expect(Self.body(head).isEmpty, "HEAD \(path) has a body: \(head)")
                #expect(Self.header(head, "Content-Length") == "\(Self.body(get).utf8.count)", "\(head)")
                #expect(Self.header(head, "Content-Type") == "application/json")
            }
            let status = try #require(MQTTJSON.decode(FleetStatus.self, from: Array(Self.body(try Self.ask(port, "GET /api/status HTTP/1.1\r\n")).utf8)))
            #expect(status == FleetMapTests.status)
            for path in ["/", "/map.js", "/map.css"] {
                let get = try Self.ask(port, "GET \(path) HTTP/1.1\r\n")
                let tag = try #require(Self.header(get, "ETag"), "\(path): \(get)")
                #expect(tag.hasPrefix("\"") && tag.count > 4 && Self.header(get, "Cache-Control") == "no-cache")
                #expect(try Self.ask(port, "HEAD \(path) HTTP/1.1\r\n").hasPrefix("HTTP/1.1 200"))
                let again = try Self.ask(port, "GET \(path) HTTP/1.1\r\nIf-None-Match: \(tag)\r\n")
                #expect(again.hasPrefix("HTTP/1.1 304") && Self.body(again).isEmpty, "\(path): \(again)")
                #expect(try Self.ask(port, "GET \(path) HTTP/1.1\r\nIf-None-Match: \"other\"\r\n").hasPrefix("HTTP/1.1 200"))
            }
            for request in ["POST /api/devices", "PUT /api/plan", "DELETE /", "PATCH /map.js"] {
                let answer = try Self.ask(port, "\(request) HTTP/1.1\r\nContent-Length: 0\r\n")
                #expect(answer.hasPrefix("HTTP/1.1 405") && Self.header(answer, "Allow") == "GET, HEAD", "\(request): \(answer)")
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
            func status() throws -> FleetStatus? {
                let answer = try Self.ask(port, "GET /api/status HTTP/1.1\r\n")
                return answer.hasPrefix("HTTP/1.1 200") ? MQTTJSON.decode(FleetStatus.self, from: Array(Self.body(answer).utf8)) : nil
            }
            func until(_ what: String, within seconds: Int, _ condition: (FleetStatus) -> Bool) async throws -> FleetStatus {
                let deadline = ContinuousClock.now + .seconds(seconds)
                while true {
                    if let s = try status(), condition(s) { return s }
                    guard ContinuousClock.now < deadline else { throw TestKitError("\(what), not within \(seconds) s: \(String(describing: try status()))") }
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
