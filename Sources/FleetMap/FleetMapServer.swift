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

    public var description: String {
        switch self {
        case .badAddress(let text, let why): "not an address to listen on: \(text): \(why)"
        case .cannotListen(let address, let why): "cannot listen on \(address): \(why)"
        }
    }
}

/// The fleet's live map (`proximity-fleet run --http`): a read-only web page and its JSON, from
/// the fleet service's ``FleetViews``.
///
/// - `GET /`: the page (with `/map.js` and `/map.css`): the plan's floors, rooms and nodes, each
///   device at its position with its uncertainty and name, the devices' and nodes' tables.
/// - `GET /api/plan` (``FleetMapPlan``; 404 without a plan), `GET /api/devices` (``FleetTable``,
///   as `<prefix>/table`), `GET /api/nodes` (``FleetNodes``): JSON.
/// - `GET /events`: server-sent events, `event: state` with a ``FleetMapState`` once a second.
///
/// Nothing changes state; every answer says `Cache-Control: no-store` and a content security
/// policy that allows only the page's own files.
public struct FleetMapServer: Service {
    public let address: FleetMapAddress
    let views: FleetViews
    let logger: Logger

    public init(address: FleetMapAddress, views: FleetViews, logger: Logger) {
        self.address = address
        self.views = views
        self.logger = logger
    }

    public func run() async throws {
        let router = Router()
        let views = self.views
        router.get("/") { _, _ in Self.response(MapPage.html, type: "text/html; charset=utf-8") }
        router.get("/map.js") { _, _ in Self.response(MapPage.script, type: "text/javascript; charset=utf-8") }
        router.get("/map.css") { _, _ in Self.response(MapPage.style, type: "text/css; charset=utf-8") }
        router.get("/api/plan") { _, _ in
            Self.json(views.planJSON, missing: "this fleet has no floor plan (proximity-fleet run --plan FILE)")
        }
        router.get("/api/devices") { _, _ in Self.json(views.devicesJSON, missing: "no state yet: the service is starting") }
        router.get("/api/nodes") { _, _ in Self.json(views.nodesJSON, missing: "no state yet: the service is starting") }
        router.get("/events") { _, _ in Self.events(views) }
        let logger = self.logger, address = self.address
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(address.host, port: address.port), serverName: "proximity-fleet"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? address.port
                let url = "http://\(FleetMapAddress(host: address.host, port: port))/"
                logger.notice("map listening", metadata: ["url": "\(url)"])
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
        headers[.contentSecurityPolicy] = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        return headers
    }

    static func response(_ text: String, type: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: headers(type: type), body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func json(_ text: String?, missing: String) -> Response {
        guard let text else {
            return response(MQTTJSON.encode(["error": missing]), type: "application/json", status: .notFound)
        }
        return response(text, type: "application/json")
    }

    /// The live stream: a state at once (the latest), then each one the service shows, until the
    /// client goes or the service stops; 503 when ``FleetViews/maximumSubscribers`` are live.
    static func events(_ views: FleetViews) -> Response {
        guard let stream = views.subscribe() else {
            return response(MQTTJSON.encode(["error": "too many live maps: at most \(FleetViews.maximumSubscribers)"]), type: "application/json",
                            status: .serviceUnavailable)
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
