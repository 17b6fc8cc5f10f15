import BlueZSim
import Foundation
import MQTTKit
import ProximityBenchmarking
import ProximityCore
import ProximityFleet
import ProximityMQTT
import ProximityTesting
import Testing
import BrowserTesting

/// tests/fixtures/house, a new user's house, on the map (issue 31, "done when"): a fresh
/// `proximity-fleet run --plan --http` on a real Mosquitto, fed what the house's four boxes hear
/// of Anna and Cleo on bluez-sim's realistic radio (the scenario's seed), each box's messages made
/// by the node's own code (`FleetReplay.nodeMessages`), two simulated seconds a real one; the page
/// read at a desk's width and a phone's.
@Suite("the house fixture on the map, in headless Chromium", .serialized)
struct FleetMapHouseTests {
    static let house = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("tests/fixtures/house")

    @Test("a person can say who is in which room: Cleo in the bedroom and Anna in the living room, in the list and on the plan, at 1280 and 412 px, no label over another; the broker stopped, the page says so within 5 s, and is live again once it is back")
    func house() async throws {
        guard HeadlessChromium.executable() != nil else {
            Issue.record("no chromium: install Debian's chromium package (scripts/setup.sh does)")
            return
        }
        let scenario = try Scenario.load(from: Self.house.appendingPathComponent("scenario.yaml"))
        let boxes = scenario.boxes.map { (name: $0.name, position: $0.trajectory.position(at: 0)) }
        var samples: [TraceSample] = []
        for beacon in scenario.beacons {
            let heard = receptions(of: beacon.name, along: beacon.trajectory, by: boxes, duration: 100, radio: scenario.radioModel,
                                   installation: scenario.seed, rng: scenario.generator.derived("house \(beacon.name)"))
            for (i, list) in heard.enumerated() { for s in list { samples.append(TraceSample(time: s.t, node: boxes[i].name, device: beacon.name, rssi: s.rssi)) } }
        }
        samples.sort { $0.time < $1.time }
        let sorted = samples
        try await MosquittoBroker.with { broker in
            let fleet = try ManagedProcess(BuiltProducts.path("proximity-fleet"),
                                           ["run", "--broker", "mqtt://127.0.0.1:\(broker.port)", "--plan", Self.house.appendingPathComponent("plan.yaml").path,
                                            "--http", "127.0.0.1:0", "--no-discovery"])
            defer { fleet.signal(SIGKILL) }
            try await fleet.waitForOutput(containing: "map listening", inStderr: true, timeout: .seconds(30))
            let line = try #require(fleet.stderr.split(separator: "\n").first { $0.contains("map listening") })
            let url = String(try #require(line.split(separator: " ").first { $0.hasPrefix("url=") }).dropFirst("url=".count))
            let nodes = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "house-nodes"))
            defer { nodes.disconnect() }
            let up = EventRecorder(recording: nodes.events) { event -> Bool? in if case .connected = event { true } else { nil } }
            nodes.connect()
            _ = try await up.require("the nodes' client connected", timeout: .seconds(10)) { $0 }
            let trace = sorted
            let feeding = Task {
                var replay = FleetReplay(FleetConfiguration())
                var i = 0
                let samples = trace
                for t in stride(from: 1.0, through: 100, by: 1) {
                    while i < samples.count, samples[i].time <= t { replay.add(samples[i]); i += 1 }
                    // While the broker is away (below), what the nodes say is lost, as a node's QoS 0 is.
                    for m in replay.nodeMessages(at: t) { try? nodes.send(m.topic, m.payload, qos: 0) }
                    try await Task.sleep(for: .milliseconds(500))
                }
            }
            defer { feeding.cancel() }
            let who = """
                (() => {
                  const inRoom = (d, r) => document.querySelector(`#rooms li[data-room="${r}"] span.who[data-device="${d}"]`) !== null;
                  const onPlan = (d, r) => document.querySelector(`g.device[data-device="${d}"]`)?.dataset.room === r;
                  const tip = d => document.querySelector(`g.device[data-device="${d}"] title`)?.textContent ?? "";
                  return inRoom("cleo", "bedroom") && inRoom("anna", "living") && onPlan("cleo", "bedroom") && onPlan("anna", "living")
                    && tip("cleo").startsWith("cleo: bedroom since ") && tip("cleo").includes("heard by bedroom");
                })()
                """
            for (width, name) in [(1280, "fleet-map-house.png"), (412, "fleet-map-house-phone.png")] {
                let browser = try HeadlessChromium(width: width, height: 900)
                do {
                    let page = try await browser.open(url)
                    try await page.waitUntil(who, timeout: .seconds(60))
                    for device in ["anna", "cleo"] {
                        let read = try await page.evaluate(FleetMapBrowserTests.reading(device), as: FleetMapBrowserTests.Reading.self)
                        #expect(read.clashes.isEmpty && read.listed && read.roomLabelsOnce && read.pageWidth <= Double(width), "\(width) px, \(device): \(read)")
                        if width < 700 { #expect(read.listTop < read.mapTop, "\(read)") }
                    }
                    try (try await page.screenshot()).write(to: FleetMapBrowserTests.artifacts.appendingPathComponent(name))
                    if width < 700 {
                        // The broker stops: within 5 s the page says so in words and greys the map;
                        // back, it is live again.
                        let stopped = ContinuousClock.now
                        await broker.pause()
                        try await page.waitUntil("document.getElementById('status').textContent.startsWith('MQTT broker down') && document.body.classList.contains('stale')",
                                                 timeout: .seconds(10))
                        let took = ContinuousClock.now - stopped
                        #expect(took < .seconds(5), "the page said the broker was down after \(took)")
                        try (try await page.screenshot()).write(to: FleetMapBrowserTests.artifacts.appendingPathComponent("fleet-map-house-broker-down.png"))
                        try await broker.resume()
                        try await page.waitUntil("document.getElementById('status').textContent === 'live' && !document.body.classList.contains('stale')",
                                                 timeout: .seconds(30))
                    }
                } catch {
                    await browser.close()
                    throw error
                }
                await browser.close()
            }
        }
    }
}
