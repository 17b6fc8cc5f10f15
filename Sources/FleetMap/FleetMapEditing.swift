import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ProximityCore
import ProximityFleet
import ProximityMQTT

/// Editing the floor plan from the map (`proximity-fleet run --plan FILE --http … --edit`):
/// `PUT /api/plan` with the plan's YAML as its body, guarded by a bearer token. The plan is
/// checked exactly as `proximity-fleet check-plan` checks it (422 with the problems, at their
/// line and column), written in place of the file atomically (a new file renamed over it, synced
/// first), and handed to the fleet, which takes it as at a reload (SIGHUP).
public struct FleetMapEditing: Sendable {
    /// The plan file the service runs with.
    public let planPath: String
    /// The token a write must carry (`Authorization: Bearer TOKEN`).
    let token: String
    /// Hands a saved plan to the fleet.
    let apply: @Sendable (FloorPlan) async -> Void

    /// The most a plan may weigh, bytes.
    public static let maximumPlan = 1 << 20

    public init(planPath: String, token: String, apply: @escaping @Sendable (FloorPlan) async -> Void) {
        self.planPath = planPath
        self.token = token
        self.apply = apply
    }

    /// A fresh token (32 random bytes from the system's generator, hex), written to `path` alone:
    /// any file there is removed first, the new one created with mode 0600 (exclusively, so
    /// nobody can have it open already).
    public static func writeToken(to path: String) throws -> String {
        var generator = SystemRandomNumberGenerator()
        let token = (0 ..< 32).map { _ in String(format: "%02x", UInt8.random(in: 0 ... 255, using: &generator)) }.joined()
        if unlink(path) != 0, errno != ENOENT { throw FleetMapError.token(path, String(cString: strerror(errno))) }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw FleetMapError.token(path, String(cString: strerror(errno))) }
        defer { close(fd) }
        let line = Array((token + "\n").utf8)
        guard write(fd, line, line.count) == line.count, fsync(fd) == 0 else {
            throw FleetMapError.token(path, String(cString: strerror(errno)))
        }
        return token
    }

    /// Whether `request` carries the token (compared in constant time).
    func authorised(_ request: Request) -> Bool {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else { return false }
        let given = Array(header.dropFirst("Bearer ".count).utf8), expected = Array(token.utf8)
        return given.count == expected.count && zip(given, expected).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// The answer to a write without the token: 401, and how to authenticate.
    static var unauthorised: Response {
        var refused = FleetMapServer.response(MQTTJSON.encode(
            ["error": "editing the plan needs Authorization: Bearer TOKEN (the token proximity-fleet wrote to --edit-token)"]),
                                              type: "application/json", status: .unauthorized)
        refused.headers[.wwwAuthenticate] = "Bearer realm=\"proximity-fleet\""
        return refused
    }

    /// One problem of a plan, as the editor shows it at the element it concerns.
    struct Problem: Codable {
        var line: Int?
        var column: Int?
        var message: String
    }

    func put(_ request: Request, logger: Logger) async -> Response {
        guard authorised(request) else { return Self.unauthorised }
        let body: ByteBuffer
        do { body = try await request.body.collect(upTo: Self.maximumPlan) } catch {
            return FleetMapServer.response(MQTTJSON.encode(["error": "a plan is at most \(Self.maximumPlan) bytes"]),
                                           type: "application/json", status: .contentTooLarge)
        }
        let bytes = Array(body.readableBytesView)
        let plan: FloorPlan
        do throws(FloorPlanFile.Problems) {
            plan = try FloorPlanFile.parse(bytes, path: planPath)
        } catch {
            let problems = error.lines.map(Self.problem)
            struct Refusal: Encodable { var error: String; var problems: [Problem] }
            return FleetMapServer.response(MQTTJSON.encode(Refusal(error: "the plan has problems: not saved", problems: problems)),
                                           type: "application/json", status: .unprocessableContent)
        }
        do { try Self.replace(planPath, with: bytes) } catch {
            logger.error("cannot save the floor plan", metadata: ["plan": "\(planPath)", "error": "\(error)"])
            return FleetMapServer.response(MQTTJSON.encode(["error": "cannot save \(planPath): \(error)"]), type: "application/json",
                                           status: .internalServerError)
        }
        logger.notice("floor plan saved from the map",
                      metadata: ["plan": "\(planPath)", "rooms": "\(plan.rooms.count)", "nodes": "\(plan.nodes.count)"])
        await apply(plan)
        return FleetMapServer.response(MQTTJSON.encode(["saved": planPath]), type: "application/json")
    }

    /// The most a background picture may weigh, bytes.
    public static let maximumBackground = 10 << 20

    /// `PUT /api/plan/background`: a PNG, JPEG or SVG (by its `Content-Type`, checked against its
    /// first bytes), at most 10 MB, stored beside the plan as `<plan>.background.<ext>`; the plan
    /// names it once saved with it (`background: {image: …}`).
    func putBackground(_ request: Request, logger: Logger) async -> Response {
        guard authorised(request) else { return Self.unauthorised }
        let types = ["image/png": "png", "image/jpeg": "jpg", "image/svg+xml": "svg"]
        let given = request.headers[.contentType]?.split(separator: ";").first
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        guard let ext = types[given] else {
            return FleetMapServer.response(MQTTJSON.encode(["error": "a background is a PNG, JPEG or SVG (Content-Type image/png, " +
                "image/jpeg or image/svg+xml), not \(given.isEmpty ? "none" : given)"]),
                                           type: "application/json", status: .unsupportedMediaType)
        }
        let body: ByteBuffer
        do { body = try await request.body.collect(upTo: Self.maximumBackground) } catch {
            return FleetMapServer.response(MQTTJSON.encode(["error": "a background is at most 10 MB"]), type: "application/json",
                                           status: .contentTooLarge)
        }
        let bytes = Array(body.readableBytesView)
        let head = String(decoding: bytes.prefix(512), as: UTF8.self)
        let matches = switch ext {
        case "png": bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        case "jpg": bytes.starts(with: [0xFF, 0xD8, 0xFF])
        default: head.contains("<svg")
        }
        guard matches else {
            return FleetMapServer.response(MQTTJSON.encode(["error": "the body is not the \(given) it says it is"]),
                                           type: "application/json", status: .unsupportedMediaType)
        }
        let url = URL(fileURLWithPath: planPath)
        let name = url.deletingPathExtension().lastPathComponent + ".background." + ext
        let path = url.deletingLastPathComponent().path + "/" + name
        do { try Self.replace(path, with: bytes) } catch {
            return FleetMapServer.response(MQTTJSON.encode(["error": "cannot save \(path): \(error)"]), type: "application/json",
                                           status: .internalServerError)
        }
        logger.notice("background picture saved from the map", metadata: ["file": "\(path)", "bytes": "\(bytes.count)"])
        return FleetMapServer.response(MQTTJSON.encode(["image": name]), type: "application/json")
    }

    /// `FILE:LINE:COLUMN: message` (or `FILE:LINE: message`, or a message alone) as a problem.
    static func problem(_ line: String) -> Problem {
        let parts = line.split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
        if parts.count == 4, let l = Int(parts[1]), let c = Int(parts[2]) {
            return Problem(line: l, column: c, message: parts[3].trimmingCharacters(in: .whitespaces))
        }
        if parts.count >= 3, let l = Int(parts[1]) {
            return Problem(line: l, column: nil, message: parts[2...].joined(separator: ":").trimmingCharacters(in: .whitespaces))
        }
        return Problem(line: nil, column: nil, message: line)
    }

    /// Writes `bytes` over `path` atomically: a new file beside it, synced, renamed over it, and
    /// the folder synced. The file keeps its mode (0644 for a new one).
    static func replace(_ path: String, with bytes: [UInt8]) throws {
        let url = URL(fileURLWithPath: path)
        let folder = url.deletingLastPathComponent().path
        let temporary = folder + "/." + url.lastPathComponent + ".saving-\(getpid())"
        var mode: mode_t = 0o644
        var info = stat()
        if stat(path, &info) == 0 { mode = info.st_mode & 0o7777 }
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard fd >= 0 else { throw FleetMapError.save(String(cString: strerror(errno))) }
        var ok = bytes.isEmpty || write(fd, bytes, bytes.count) == bytes.count
        ok = ok && fchmod(fd, mode) == 0 && fsync(fd) == 0
        close(fd)
        guard ok, rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw FleetMapError.save(reason)
        }
        let dir = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 { fsync(dir); close(dir) }
    }
}
