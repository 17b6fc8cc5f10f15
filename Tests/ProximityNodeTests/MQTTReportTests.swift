import BlueZSim
import DBusKit
import Foundation
import ProximityCore
import ProximityNode
import NodeTesting
import ProximityTesting
import Testing

/// Peer reports on a real broker, the node on bluez-sim's simulated clock: the rate control
/// (at most one report per interval per peer unless it moved), and the ESPresense and `mqtt_room`
/// forms, checked with `mosquitto_sub`.
@Suite("MQTT peer reports in simulated time", .serialized)
struct MQTTReportTests {
    struct Report {
        var time: Double
        var distance: Double
    }

    static func json(_ text: Substring) -> [String: Any]? {
        try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
    }

    @Test("a peer standing still is reported once per report-interval; one that moves is reported at once; ESPresense's and mqtt_room's payloads carry the same reports")
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
                var waited = 0.0
                while !sub.stdout.contains(topic + "|"), waited < 120 {
                    await boxes.advance(0.1)
                    waited += 0.1
                }
                #expect(sub.stdout.contains(topic + "|"), "no report of beta after \(waited) s")
                for _ in 0..<400 { await boxes.advance(0.1) }
                let moved = boxes.simulator.clock.now
                _ = try await boxes.control("MoveBox", [.string("beta"), .double(7), .double(0), .double(0)])
                for _ in 0..<200 { await boxes.advance(0.1) }
                // The last reports have gone out once one from after the move is here.
                let origin = alpha.log.clock.epoch(0)
                let arrived = await sub.waitForOutput(timeout: .seconds(20)) { out in
                    out.split(separator: "\n").contains { line in
                        line.hasPrefix(topic + "|") && (Self.json(line.dropFirst(topic.count + 1))?["time"] as? Double).map {
                            $0 - origin > moved + 15
                        } == true
                    }
                }
                #expect(arrived)
                let lines = sub.stdout.split(separator: "\n")
                func payloads(_ t: String) -> [[String: Any]] {
                    lines.filter { $0.hasPrefix(t + "|") }.compactMap { Self.json($0.dropFirst(t.count + 1)) }
                }
                let native = payloads(topic)
                let reports = native.compactMap { p -> Report? in
                    guard let time = p["time"] as? Double, let distance = p["distance"] as? Double else { return nil }
                    return Report(time: time - origin, distance: distance)
                }
                #expect(reports.count == native.count, "\(native)")
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
                let espresense = payloads("espresense/devices/\(peer)/alpha")
                #expect(espresense.count == native.count)
                if let e = espresense.first {
                    #expect(e["id"] as? String == peer)
                    #expect(e["rssi@1m"] as? Int == -59)
                    #expect(e["rssi"] is Int && e["distance"] is Double && e["name"] is String)
                }
                let room = payloads("room_presence/alpha")
                #expect(room.count == native.count)
                if let r = room.first { #expect(Set(r.keys) == ["id", "name", "distance"] && r["id"] as? String == peer) }
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
