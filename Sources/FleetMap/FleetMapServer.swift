import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ProximityFleet
import ProximityMQTT
import ServiceLifecycle

/// Where the map listens (`--http ADDRESS:PORT`): an address always given (no wildcard by
/// default), a port 0...65535 (0: any free one, logged).
public struct FleetMapAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `127.0.0.1:8080`, `localhost:8080`, `[::1]:8080`, `0.0.0.0:8080`.
    public init(parsing text: String) throws(FleetMapError) {
        let host: Substring, port: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw .badAddress(text, "an IPv6 address is written [ADDRESS]:PORT, e.g. [::1]:8080")
            }
            host = text[text.index(after: text.startIndex)..<close]
            port = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw .badAddress(text, "expected ADDRESS:PORT, e.g. 127.0.0.1:8080") }
            host = text[..<colon]
            port = text[text.index(after: colon)...]
            if host.contains(":") { throw .badAddress(text, "an IPv6 address is written [ADDRESS]:PORT, e.g. [::1]:8080") }
        }
        guard !host.isEmpty else { throw .badAddress(text, "the address is missing: say which, e.g. 127.0.0.1:\(port)") }
        guard host.count <= 253, host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || ".-:%_".contains($0)) }) else {
            throw .badAddress(text, "not a host name or IP address: \(host)")
        }
        guard let number = Int(port), (0 ... 65_535).contains(number), port.allSatisfy(\.isASCII) else {
            throw .badAddress(text, "the port must be a number 0...65535 (0: any free one)")
        }
        self.host = String(host)
        self.port = number
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

public enum FleetMapError: Error, CustomStringConvertible, Sendable {
    case badAddress(String, String)
    case cannotListen(FleetMapAddress, String)
    case token(String, String)
    case save(String)

    public var description: String {
        switch self {
        case .badAddress(let text, let why): "not an address to listen on: \(text): \(why)"
        case .cannotListen(let address, let why): "cannot listen on \(address): \(why)"
        case .token(let path, let why): "cannot write the editing token to \(path): \(why)"
        case .save(let why): why
        }
    }
}

extension FleetMapAddress {
    /// Whether the address is this machine's alone (127.0.0.0/8, ::1, localhost).
    public var isLoopback: Bool { host == "localhost" || host == "::1" || host.hasPrefix("127.") }
}

/// The fleet's live map (`proximity-fleet run --http`): a read-only web page and its JSON, from
/// the fleet service's ``FleetViews``.
///
/// - `GET /`: the page (with `/map.js` and `/map.css`): the plan's floors, rooms and nodes, each
///   device at its position with its uncertainty and name, the devices' and nodes' tables.
/// - `GET /api/plan` (``FleetMapPlan``; 404 without a plan), `GET /api/devices` (``FleetTable``,
///   as `<prefix>/table`), `GET /api/nodes` (``FleetNodes``), `GET /api/status` (``FleetStatus``):
///   JSON; 503 with `Retry-After` while the service starts (before its first state).
/// - `HEAD` wherever `GET` works (but the live stream); the page's files carry an `ETag`.
/// - `GET /events`: server-sent events, `event: state` with a ``FleetMapState`` once a second.
///
/// Nothing changes state; every answer says `Cache-Control: no-store` (the page's files:
/// `no-cache`, revalidated by their `ETag`) and a content security policy that allows only the
/// page's own files.
public struct FleetMapServer: Service {
    public let address: FleetMapAddress
    let views: FleetViews
    let logger: Logger
    let editing: FleetMapEditing?
    /// Told the port it listens on once it does (port 0 in ``address``: the one chosen).
    let listening: (@Sendable (Int) -> Void)?
    /// The plan file's folder: its background picture is there.
    let planFolder: String?

    public init(address: FleetMapAddress, views: FleetViews, logger: Logger, planPath: String? = nil, editing: FleetMapEditing? = nil,
                listening: (@Sendable (Int) -> Void)? = nil) {
        self.address = address
        self.views = views
        self.logger = logger
        self.editing = editing
        self.listening = listening
        planFolder = (planPath ?? editing?.planPath).map { URL(fileURLWithPath: $0).deletingLastPathComponent().path }
    }

    /// The map's routes: the page's files, `/api/*` and `/events` (and, with ``FleetMapEditing``,
    /// the plan's `PUT`s). ``run()`` serves them; the tests drive them with HummingbirdTesting.
    public func router() -> Router<BasicRequestContext> {
        let router = Router()
        let views = self.views
        for file in MapPage.files {
            Self.read(router, RouterPath(file.path)) { request in Self.file(file, request: request) }
        }
        Self.read(router, "/api/plan", writable: editing != nil) { _ in
            Self.json(views.planJSON, missing: "this fleet has no floor plan (proximity-fleet run --plan FILE)", status: .notFound)
        }
        let folder = planFolder
        Self.read(router, "/api/plan/background", writable: editing != nil) { _ in Self.background(views.backgroundImage, folder: folder) }
        if let editing {
            let logger = self.logger
            router.put("/api/plan") { request, _ in await editing.put(request, logger: logger) }
            router.put("/api/plan/background") { request, _ in await editing.putBackground(request, logger: logger) }
        }
        Self.read(router, "/api/devices") { _ in Self.json(views.devicesJSON, missing: Self.starting, status: .serviceUnavailable) }
        Self.read(router, "/api/nodes") { _ in Self.json(views.nodesJSON, missing: Self.starting, status: .serviceUnavailable) }
        Self.read(router, "/api/status") { _ in Self.json(views.statusJSON, missing: Self.starting, status: .serviceUnavailable) }
        router.get("/events") { _, _ in Self.events(views) }
        return router
    }

    public func run() async throws {
        let views = self.views
        let logger = self.logger, address = self.address, listening = self.listening
        let app = Application(
            router: router(),
            configuration: .init(address: .hostname(address.host, port: address.port), serverName: "proximity-fleet"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? address.port
                let url = "http://\(FleetMapAddress(host: address.host, port: port))/"
                logger.notice("map listening", metadata: ["url": "\(url)"])
                listening?(port)
            },
            logger: logger)
        do {
            try await withGracefulShutdownHandler {
                try await app.run()
            } onGracefulShutdown: {
                // The live streams end, so that the server's own shutdown need not wait for them.
                logger.debug("map: ending the live streams", metadata: ["streams": "\(views.subscribers)"])
                views.finish()
            }
        } catch let error as IOError {
            throw FleetMapError.cannotListen(address, String(cString: strerror(error.errnoCode)))
        } catch let error as SocketAddressError {
            throw FleetMapError.cannotListen(address, "\(error)")
        }
    }

    static func headers(type: String) -> HTTPFields {
        var headers = HTTPFields()
        headers[.contentType] = type
        headers[.cacheControl] = "no-store"
        headers[.contentSecurityPolicy] = "default-src 'self'; img-src 'self' data: blob:; frame-ancestors 'none'"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        return headers
    }

    static func response(_ text: String, type: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: headers(type: type), body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static let starting = "no state yet: the service is starting"
    /// Seconds a client is asked to wait while the service starts (its first state comes within a second).
    static let retryAfter = "1"

    /// `path` answers GET and HEAD alike (HEAD: the same status and headers, no body), and a
    /// write with 405 (`Allow: GET, HEAD`): the map changes nothing.
    static func read(_ router: Router<BasicRequestContext>, _ path: RouterPath, writable: Bool = false,
                     _ answer: @escaping @Sendable (Request) -> Response) {
        router.get(path) { request, _ in answer(request) }
        for method in [HTTPRequest.Method.post, .put, .patch, .delete] where !(writable && method == .put) {
            router.on(path, method: method) { _, _ in
                var refused = response(MQTTJSON.encode(["error": "the map is read-only: \(method) is not allowed here"]),
                                       type: "application/json", status: .methodNotAllowed)
                refused.headers[.allow] = "GET, HEAD"
                return refused
            }
        }
        router.head(path) { request, _ in
            var response = answer(request)
            let length = response.body.contentLength
            response.body = .init()
            if let length { response.headers[.contentLength] = "\(length)" }
            return response
        }
    }

    /// A JSON answer, or `status` with the reason when there is none (503 with `Retry-After`
    /// while the service starts).
    static func json(_ text: String?, missing: String, status: HTTPResponse.Status) -> Response {
        guard let text else {
            var answer = response(MQTTJSON.encode(["error": missing]), type: "application/json", status: status)
            if status == .serviceUnavailable { answer.headers[.retryAfter] = retryAfter }
            return answer
        }
        return response(text, type: "application/json")
    }

    /// The plan's picture, as it is on disk; an SVG under a policy that runs nothing of its own
    /// (`sandbox`, no script). 404 without one.
    static func background(_ image: String?, folder: String?) -> Response {
        guard let image, let folder, let type = FloorPlanFile.backgroundTypes[URL(fileURLWithPath: image).pathExtension.lowercased()],
              let data = FileManager.default.contents(atPath: folder + "/" + image) else {
            return response(MQTTJSON.encode(["error": "this plan has no background picture"]), type: "application/json", status: .notFound)
        }
        var headers = headers(type: type)
        headers[.cacheControl] = "no-cache"
        if type == "image/svg+xml" {
            headers[.contentSecurityPolicy] = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox"
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// One of the page's files: with its `ETag`, revalidated by the browser each time
    /// (`Cache-Control: no-cache`), and 304 for a request that has it (`If-None-Match`).
    static func file(_ file: MapPage.File, request: Request) -> Response {
        var headers = headers(type: file.type)
        headers[.cacheControl] = "no-cache"
        headers[.eTag] = file.etag
        if let match = request.headers[.ifNoneMatch], match.split(separator: ",").contains(where: {
            $0.trimmingCharacters(in: .whitespaces) == file.etag || $0.trimmingCharacters(in: .whitespaces) == "*"
        }) {
            return Response(status: .notModified, headers: headers)
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: file.body)))
    }

    /// The live stream: a state at once (the latest), then each one the service shows, until the
    /// client goes or the service stops; 503 when ``FleetViews/maximumSubscribers`` are live.
    static func events(_ views: FleetViews) -> Response {
        guard let stream = views.subscribe() else {
            return response(MQTTJSON.encode(["error": "too many live maps: at most \(FleetViews.maximumSubscribers)"]),
                            type: "application/json", status: .serviceUnavailable)
        }
        return Response(status: .ok, headers: headers(type: "text/event-stream"), body: ResponseBody { writer in
            // A client that lost the stream tries again after 2 s.
            try await writer.write(ByteBuffer(string: "retry: 2000\n\n"))
            for await state in stream {
                try await writer.write(ByteBuffer(string: "event: state\ndata: \(state)\n\n"))
            }
            try await writer.finish(nil)
        })
    }
}
