import DBusKit
import Foundation
import ProximityNode

/// One peer as `org.proximityd.Peer1` shows it.
struct PeerRow: Sendable {
    var path: String
    var identifier: String
    var kind: String
    var name: String
    var address: String
    var proximity: String
    var distance: Double
    var rssi: Int64
    var smoothedRSSI: Double
    /// Microseconds since the Unix epoch.
    var lastSeen: UInt64

    init(path: ObjectPath, _ p: [String: DBusValue]) {
        self.path = path.rawValue
        identifier = p["Identifier"]?.string ?? ""
        kind = p["Kind"]?.string ?? ""
        name = p["Name"]?.string ?? ""
        address = p["Address"]?.string ?? ""
        proximity = p["Proximity"]?.string ?? "unknown"
        distance = p["Distance"]?.double ?? 0
        rssi = p["RSSI"]?.integer ?? 0
        smoothedRSSI = p["SmoothedRSSI"]?.double ?? 0
        if case .uint64(let t)? = p["LastSeen"] { lastSeen = t } else { lastSeen = 0 }
    }

    var json: [String: Any] {
        ["path": path, "identifier": identifier, "kind": kind, "name": name, "address": address,
         "proximity": proximity, "distance": distance, "rssi": rssi, "smoothed_rssi": smoothedRSSI,
         "last_seen_us": lastSeen]
    }
}

enum PeerTable {
    /// `GetPeers`, then each peer's `Peer1` properties. A peer that vanishes in between is skipped.
    static func fetch(_ connection: DBusConnection, _ name: BusName) async throws -> [PeerRow] {
        let paths = try await connection.call(destination: name, path: NodeAPI.rootPath, interface: NodeAPI.node1,
                                              member: "GetPeers").first?.arrayElements?.compactMap(\.objectPath) ?? []
        var rows: [PeerRow] = []
        for path in paths {
            guard let properties = try? await connection.getAllProperties(destination: name, path: path, interface: NodeAPI.peer1)
            else { continue }
            rows.append(PeerRow(path: path, properties))
        }
        let order = ["immediate": 0, "near": 1, "far": 2, "unknown": 3]
        return rows.sorted { (order[$0.proximity] ?? 4, $0.distance, $0.identifier) < (order[$1.proximity] ?? 4, $1.distance, $1.identifier) }
    }

    /// A fixed-width table, nearest first.
    static func render(_ rows: [PeerRow], now: Date = Date()) -> String {
        func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
        var out = pad("IDENTIFIER", 38) + pad("NAME", 14) + pad("KIND", 10) + pad("ZONE", 10) + pad("DISTANCE", 10)
            + pad("RSSI", 6) + pad("SMOOTHED", 10) + "SEEN\n"
        for r in rows {
            let seen = r.lastSeen == 0 ? "-" : String(format: "%.1fs ago", max(0, now.timeIntervalSince1970 - Double(r.lastSeen) / 1e6))
            out += pad(r.identifier, 38) + pad(String(r.name.prefix(13)), 14) + pad(r.kind, 10) + pad(r.proximity, 10)
                + pad(String(format: "%.2f m", r.distance), 10) + pad("\(r.rssi)", 6) + pad(String(format: "%.1f", r.smoothedRSSI), 10)
                + seen + "\n"
        }
        if rows.isEmpty { out += "(no peers)\n" }
        return out
    }
}
