import BlueZSim
import DBusKit
import Foundation
import ProximityCore
import ProximityMQTT
import ProximityNode
import NodeTesting
import ProximityTesting
import Testing
import SimTesting

/// Peer reports on a real broker, the node on bluez-sim's simulated clock: the rate control
/// (at most one report per interval per peer unless it moved), and the ESPresense and `mqtt_room`
/// forms, checked with `mosquitto_sub`.
@Suite("MQTT peer reports in simulated time", .serialized)
struct MQTTReportTests {
    struct Report {
        var time: Double
        var distance: Double
    }

    /// The payloads of `topic` in `mosquitto_sub -F '%t|%p'` lines, as `T`.
    static func payloads<T: Decodable>(_ type: T.Type, _ topic: String, in lines: [Substring]) -> [T] {
        lines.filter { $0.hasPrefix(topic + "|") }.compactMap { MQTTJSON.decode(type, from: Array($0.dropFirst(topic.count + 1).utf8)) }
    }

    @Test("a peer standing still is reported once per report-interval; one that moves is reported at once; ESPresense's and mqtt_room's payloads carry those reports and a heartbeat every 2 s")
    func rateControl() async throws {
        // alpha and beta 2 m apart, no shadowing, no loss: beta's distance holds still.
        try await withSimBoxes(twoBoxes(distance: 2), time: .simulated) { boxes in
            try await MosquittoBroker.with { broker in
                let sub = try ManagedProcess(resolveExecutable("mosquitto_sub"),
                                             broker.clientArguments + ["-t", "#", "-F", "%t|%p"])
                var settings = MQTTSettings(broker: .init(host: "127.0.0.1", port: broker.port))
                settings.reportInterval = 5
                settings.reportMoved = 0.5
                settings.compatibility = [.espresense, .mqttRoom]
                settings.discovery = false
                let alpha = try await NodeRunner.startInProcess("alpha", on: boxes) { $0.mqtt = settings }
                let beta = try await NodeRunner.startInProcess("beta", on: boxes)
                let peer = beta.engine.identity.uuidString.lowercased()
                let topic = "proximityd/alpha/peers/\(peer)"
                #expect(await alpha.log.wait { $0.message == "connected to the MQTT broker" } != nil)

                // Until alpha reports beta (identified over GATT, then ranged).
                #expect(try await boxes.advance(until: 120, keepingUp: [alpha, beta]) { sub.stdout.contains(topic + "|") },
                        "no report of beta after 120 s")
                // Time moves only as fast as alpha hears beta: a busy machine must not make a
                // silence that the air did not (beta stale, reported gone, then again at once).
                try await boxes.advance(40, keepingUp: [alpha])
                let moved = boxes.simulator.clock.now
                _ = try await boxes.control("MoveBox", [.string("beta"), .double(7), .double(0), .double(0)])
                try await boxes.advance(20, keepingUp: [alpha])
                // The last reports have gone out once one from after the move is here.
                let origin = alpha.log.clock.epoch(0)
                let arrived = await sub.waitForOutput(timeout: .seconds(20)) { out in
                    out.split(separator: "\n").contains { line in
                        line.hasPrefix(topic + "|")
                            && (MQTTJSON.decode(PeerReport.self, from: Array(line.dropFirst(topic.count + 1).utf8))?.time).map {
                                $0 - origin > moved + 15
                            } == true
                    }
                }
                #expect(arrived)
                let lines = sub.stdout.split(separator: "\n")
                let native = Self.payloads(PeerReport.self, topic, in: lines)
                #expect(native.count == lines.filter { $0.hasPrefix(topic + "|") }.count, "every payload is a PeerReport")
                let reports = native.compactMap { p -> Report? in
                    guard let time = p.time, let distance = p.distance else { return nil }
                    return Report(time: time - origin, distance: distance)
                }
                #expect(reports.count == native.count, "\(native.filter { $0.time == nil || $0.distance == nil })")
                // Every report came an interval after the one before, or the peer had moved.
                for (a, b) in zip(reports, reports.dropFirst()) {
                    #expect(b.time - a.time >= 5 - 0.001 || abs(b.distance - a.distance) >= 0.5, "\(a) → \(b)")
                }
                // Standing still for 40 s: one report per 5 to 6 s (reports come each second).
                let still = reports.filter { $0.time < moved }
                let span = (still.last?.time ?? 0) - (still.first?.time ?? 0)
                #expect(still.count >= 2 && Double(still.count - 1) <= span / 5 + 0.001 && Double(still.count - 1) >= span / 6 - 1,
                        "\(still.count) reports in \(span) s")
                // Moved from 2 m to 7 m: reported well before the interval would allow.
                let first = reports.first { $0.time > moved && $0.distance > 3 }
                #expect(first.map { $0.time - moved <= 4 } == true, "first report after the move: \(String(describing: first))")

                // ESPresense: espresense/devices/<id>/<room>, with its fields; mqtt_room: {id, name, distance}.
                // Both carry every native report, and more: a present device at least every 2 s
                // (PeerPublishing.compatibilityHeartbeat), so mqtt_room's 5 s timeout never hands it
                // to a farther room.
                let espresense = Self.payloads(ESPresenseReport.self, "espresense/devices/\(peer)/alpha", in: lines)
                let whole = (reports.last?.time ?? 0) - (reports.first?.time ?? 0)
                #expect(Double(espresense.count) >= whole / 2 - 1 && Double(espresense.count) <= whole / 2 + Double(native.count) + 2,
                        "\(espresense.count) ESPresense reports in \(whole) s, \(native.count) native")
                var rest = espresense.map(\.distance)[...]
                for d in native.compactMap(\.distance) {
                    guard let i = rest.firstIndex(of: d) else { Issue.record("native \(d) not in ESPresense's reports"); break }
                    rest = rest[(i + 1)...]
                }
                if let e = espresense.first {
                    #expect(e.id == peer && e.rssiAt1m == -59 && e.raw == e.distance && !e.name.isEmpty)
                }
                let room = Self.payloads(MQTTRoomReport.self, "room_presence/alpha", in: lines)
                #expect(room.count == espresense.count && room.map(\.distance) == espresense.map(\.distance))
                #expect(room.allSatisfy { $0.id == peer })
                // mqtt_room's form has exactly its three fields.
                if let raw = lines.first(where: { $0.hasPrefix("room_presence/alpha|") }),
                   let object = try? JSONSerialization.jsonObject(with: Data(raw.dropFirst("room_presence/alpha|".count).utf8)) as? [String: Any] {
                    #expect(Set(object.keys) == ["id", "name", "distance"])
                }
                #expect(lines.contains("espresense/rooms/alpha/status|online"))
                #expect(lines.contains("proximityd/alpha/status|online"))

                await beta.stop()
                await alpha.stop()
                #expect(await sub.waitForOutput { $0.contains("proximityd/alpha/status|offline") })
                await sub.stop()
            }
        }
    }
}
