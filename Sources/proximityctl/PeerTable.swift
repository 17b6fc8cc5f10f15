import DBusKit
import Foundation
import ProximityAPI

/// The peers as `peers` and `watch` show them.
enum PeerTable {
    typealias Row = (path: ObjectPath, peer: PeerProperties)

    /// Nearest first: by zone, then distance, then identifier.
    static func rows(_ peers: [ObjectPath: PeerProperties]) -> [Row] {
        let order = ["immediate": 0, "near": 1, "far": 2, "unknown": 3]
        func key(_ r: Row) -> (Int, Double, String) { (order[r.peer.proximity] ?? 4, r.peer.distance, r.peer.identifier) }
        return peers.map { (path: $0.key, peer: $0.value) }.sorted { key($0) < key($1) }
    }

    static func json(_ row: Row) -> [String: Any] {
        let p = row.peer
        return ["path": row.path.rawValue, "identifier": p.identifier, "kind": p.kind, "name": p.name, "address": p.address,
                "proximity": p.proximity, "distance": p.distance, "rssi": Int(p.rssi), "smoothed_rssi": p.smoothedRSSI,
                "last_seen_us": p.lastSeen]
    }

    /// A fixed-width table, in the rows' order.
    static func render(_ rows: [Row], now: Date = Date()) -> String {
        func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
        var out = pad("IDENTIFIER", 38) + pad("NAME", 14) + pad("KIND", 10) + pad("ZONE", 10) + pad("DISTANCE", 10)
            + pad("RSSI", 6) + pad("SMOOTHED", 10) + "SEEN\n"
        for (_, r) in rows {
            let seen = r.lastSeen == 0 ? "-" : String(format: "%.1fs ago", max(0, now.timeIntervalSince1970 - Double(r.lastSeen) / 1e6))
            out += pad(r.identifier, 38) + pad(String(r.name.prefix(13)), 14) + pad(r.kind, 10) + pad(r.proximity, 10)
                + pad(String(format: "%.2f m", r.distance), 10) + pad("\(r.rssi)", 6) + pad(String(format: "%.1f", r.smoothedRSSI), 10)
                + seen + "\n"
        }
        if rows.isEmpty { out += "(no peers)\n" }
        return out
    }
}
