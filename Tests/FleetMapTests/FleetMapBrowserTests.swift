import BlueZSim
import FleetMap
import Foundation
import MQTTKit
import NodeTesting
import ProximityCore
import ProximityFleet
import ProximityMQTT
import ProximityNode
import ProximityTesting
import Testing
import SimTesting
import BrowserTesting

/// The live map in a real browser: three proximityd nodes on bluez-sim publish to a real
/// Mosquitto, `proximity-fleet run --plan --http` places the fourth box (a tag), and headless
/// Chromium loads the page. The DOM must put the tag's marker inside its room's outline, follow
/// it when it walks to the other room, and the screenshot must show the map.
@Suite("the live map in headless Chromium, on bluez-sim and Mosquitto", .serialized)
struct FleetMapBrowserTests {
    /// Two rooms of 5 × 4 m side by side, the three nodes in corners; the sim's boxes stand at
    /// the same places, 1 m up as the plan's nodes are.
    static let plan = """
        floors:
          - name: ground
            z: [0, 3]
        nodes:
          - name: alpha
            position: [0.5, 0.5, 1]
          - name: bravo
            position: [5, 3.5, 1]
          - name: charlie
            position: [9.5, 0.5, 1]
        rooms:
          - name: living
            polygon: [[0, 0], [5, 0], [5, 4], [0, 4]]
          - name: kitchen
            polygon: [[5, 0], [10, 0], [10, 4], [5, 4]]

        """

    static func scenario() -> Scenario {
        var radio = RadioParameters()
        radio.shadowingSigma = 0
        radio.packetLoss = 0
        func box(_ name: String, _ n: Int, _ x: Double, _ y: Double) -> BoxSpec {
            BoxSpec(name: name, address: "AA:00:00:00:00:0\(n)", trajectory: Trajectory(fixed: Position(x: x, y: y, z: 1)))
        }
        return Scenario(seed: 7, radio: radio, boxes: [box("alpha", 1, 0.5, 0.5), box("bravo", 2, 5, 3.5), box("charlie", 3, 9.5, 0.5),
                                                       box("tag", 4, 1.5, 1.5)])
    }

    /// Where screenshots are kept for a person to look at: `$PROXIMITYD_TEST_ARTIFACTS`, else
    /// the temporary directory's `proximityd-test-artifacts`.
    static var artifacts: URL {
        let directory = ProcessInfo.processInfo.environment["PROXIMITYD_TEST_ARTIFACTS"].map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("proximityd-test-artifacts")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// JavaScript: whether the tag's marker is drawn inside `room`'s outline (the SVG's own
    /// geometry: the room polygon's fill holds the marker's centre) and no other room's.
    static func markerIn(_ device: String, _ room: String) -> String {
        """
        (() => {
          const g = document.querySelector('g.device[data-device="\(device)"]');
          if (!g || g.dataset.room !== "\(room)") return false;
          const dot = g.querySelector("circle.dot");
          const p = new DOMPoint(Number(dot.getAttribute("cx")), Number(dot.getAttribute("cy")));
          const rooms = [...document.querySelectorAll("polygon.room")];
          return rooms.some(r => r.dataset.room === "\(room)" && r.isPointInFill(p))
            && !rooms.some(r => r.dataset.room !== "\(room)" && r.isPointInFill(p));
        })()
        """
    }

    /// JavaScript: whether the page is live and its nodes' table shows alpha, bravo and charlie,
    /// each online and heard from, one of them reporting a device.
    static let nodesOnline = """
        (() => {
          const rows = [...document.querySelectorAll("#nodes tr[data-node]")];
          return document.getElementById("status").textContent === "live"
            && rows.map(r => r.dataset.node).sort().join() === "alpha,bravo,charlie"
            && rows.every(r => r.cells[1].textContent === "online" && r.cells[2].textContent !== "never")
            && rows.some(r => Number(r.cells[3].textContent) >= 1);
        })()
        """

    struct Marker: Decodable, Sendable {
        var x: Double
        var y: Double
        /// The dot's centre on the screen, CSS pixels, and its fill as the browser computes it.
        var screenX: Double
        var screenY: Double
        var fill: String
        var label: String
        var row: String?
        var status: String
        var nodes: [String]
        /// A point of the kitchen on the screen where nothing is drawn over it (the first of a
        /// grid over its box whose topmost element is the kitchen's polygon), and its fill.
        var kitchenX: Double
        var kitchenY: Double
        var kitchenFill: String
    }

    static func marker(_ device: String) -> String {
        """
        (() => {
          const g = document.querySelector('g.device[data-device="\(device)"]');
          const dot = g.querySelector("circle.dot");
          const box = dot.getBoundingClientRect();
          const row = document.querySelector('#devices tr[data-device="\(device)"]');
          const room = document.querySelector('polygon.room[data-room="kitchen"]');
          const kitchen = room.getBoundingClientRect();
          // A point of the kitchen that shows its own fill: the room on top there, and outside
          // every device's uncertainty, which is drawn over the rooms (tinting them) but takes
          // no pointer events, so that elementFromPoint sees through it.
          const spreads = [...document.querySelectorAll("circle.uncertainty")].map(c => c.getBoundingClientRect());
          const underSpread = (x, y) => spreads.some(r => Math.hypot(x - (r.x + r.width / 2), y - (r.y + r.height / 2)) <= r.width / 2 + 2);
          let clear = [-1, -1];
          for (let i = 9; i >= 1 && clear[0] < 0; i--) for (let j = 1; j < 10 && clear[0] < 0; j++) {
            const [x, y] = [kitchen.x + kitchen.width * i / 10, kitchen.y + kitchen.height * j / 10];
            if (document.elementFromPoint(x, y) === room && !underSpread(x, y)) clear = [x, y];
          }
          return { x: Number(g.dataset.x), y: Number(g.dataset.y), screenX: box.x + box.width / 2, screenY: box.y + box.height / 2,
                   fill: getComputedStyle(dot).fill, label: g.querySelector("text").textContent,
                   row: row ? row.cells[1].textContent : null, status: document.getElementById("status").textContent,
                   nodes: [...document.querySelectorAll("#nodes tr[data-node]")].map(r => r.dataset.node),
                   kitchenX: clear[0], kitchenY: clear[1], kitchenFill: getComputedStyle(room).fill };
        })()
        """
    }

    /// JavaScript: the page as a person reads it: the labels drawn on the map (their boxes on the
    /// screen, those shown) that intersect each other or a marker (pairs, named), how many are
    /// shown, whether the list of who is where puts `device` in the room the devices' table says,
    /// and where the list and the map are on the screen.
    static func reading(_ device: String) -> String {
        """
        (() => {
          const box = e => e.getBoundingClientRect();
          const labels = [...document.querySelectorAll("#map text")].filter(t => getComputedStyle(t).display !== "none" && t.textContent);
          const marks = [...document.querySelectorAll("#map circle.dot, #map g.node rect")];
          const hit = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
          const clashes = [];
          for (let i = 0; i < labels.length; i++) {
            for (let j = i + 1; j < labels.length; j++) if (hit(box(labels[i]), box(labels[j]))) clashes.push(labels[i].textContent + "/" + labels[j].textContent);
            for (const m of marks) if (hit(box(labels[i]), box(m))) clashes.push(labels[i].textContent + "/marker");
          }
          const row = document.querySelector('#devices tr[data-device="\(device)"]');
          const room = row ? row.cells[1].textContent : null;
          const listed = document.querySelector(`#rooms li[data-room="${room}"] span.who[data-device="\(device)"]`) !== null;
          const rooms = [...document.querySelectorAll("polygon.room")].map(r => r.dataset.room);
          const roomLabels = [...document.querySelectorAll("#map text.room-label")].map(t => t.textContent);
          return { clashes, shown: labels.length, listed, room,
                   roomLabelsOnce: rooms.every(r => roomLabels.filter(l => l === r).length === 1),
                   listTop: box(document.getElementById("who")).top, mapTop: box(document.getElementById("map")).top,
                   mapWidth: box(document.getElementById("map")).width, pageWidth: document.documentElement.scrollWidth };
        })()
        """
    }

    struct Reading: Decodable, Sendable {
        var clashes: [String]
        var shown: Int
        var listed: Bool
        var room: String?
        var roomLabelsOnce: Bool
        var listTop: Double
        var mapTop: Double
        var mapWidth: Double
        var pageWidth: Double
    }

    /// `rgb(r, g, b)` as numbers.
    static func rgb(_ css: String) -> [Int] {
        css.filter { $0.isNumber || $0 == "," }.split(separator: ",").compactMap { Int($0) }
    }

    @Test("a device beside a node: its label covers neither the node's diamond nor its own dot, at 1280 and 412 px; the map drawn narrower, the labels keep their size on the screen")
    func labelBesideNode() async throws {
        guard HeadlessChromium.executable() != nil else {
            Issue.record("no chromium: install Debian's chromium package (scripts/setup.sh does)")
            return
        }
        // The label's first place (up and right of the dot) is where bravo's diamond is.
        let plan = FloorPlan(nodes: [.init(name: "alpha", position: PlanPoint(x: 0.5, y: 0.5, z: 1)),
                                     .init(name: "bravo", position: PlanPoint(x: 2.3, y: 2.0, z: 1))],
                             rooms: [.init(name: "living", floor: 0, polygon: [PlanPoint(x: 0, y: 0), PlanPoint(x: 5, y: 0),
                                                                              PlanPoint(x: 5, y: 4), PlanPoint(x: 0, y: 4)])])
        let views = FleetViews()
        views.show(plan: plan)
        let position = FleetPosition(x: 1.85, y: 1.55, z: 1, floor: nil, uncertainty: 0.5, room: "living", time: 1)
        views.show(devices: FleetTable(time: 1, rule: "fleet", devices: [.init(id: "tag", name: "Anna", room: "living",
                                                                              readings: [.init(node: "bravo", distance: 0.6, age: 0)],
                                                                              position: position)]),
                   nodes: FleetNodes(time: 1, exponent: nil, rms: nil, nodes: ["alpha", "bravo"].map {
                       FleetNodeHealth(name: $0, inPlan: true, status: "online", mobile: false, lastHeard: 1, devices: 1)
                   }),
                   status: FleetStatus(time: 1, live: true, broker: .init(state: "connected", since: 0), nodes: .init(online: 2, total: 2),
                                       newestReport: 1, newestReportAge: 0))
        try await FleetMapHTTPTests.withServer(views) { port in
            for width in [1280, 412] {
                let browser = try HeadlessChromium(width: width, height: 900)
                do {
                    let page = try await browser.open("http://127.0.0.1:\(port)/")
                    let labelled = "(() => { const t = document.querySelector('g.device[data-device=\"tag\"] text'); return t !== null && t.getAttribute('x') !== null && getComputedStyle(t).display !== 'none'; })()"
                    try await page.waitUntil(labelled, timeout: .seconds(30))
                    let read = try await page.evaluate(Self.reading("tag"), as: Reading.self)
                    try (try await page.screenshot()).write(to: Self.artifacts.appendingPathComponent("fleet-map-label-beside-node-\(width).png"))
                    #expect(read.clashes.isEmpty && read.shown == 4 && read.listed, "\(width) px: \(read)")
                    // Drawn at 60 % of its width, the map's labels are placed again at their size.
                    let height = "document.querySelector('g.device[data-device=\"tag\"] text').getBoundingClientRect().height"
                    let before = try await page.evaluate(height, as: Double.self)
                    _ = try await page.evaluate("(() => { document.getElementById('map').style.width = '60%'; return true; })()", as: Bool.self)
                    try await page.waitUntil("Math.abs(\(height) - \(before)) < \(before) * 0.1", timeout: .seconds(10))
                    let narrow = try await page.evaluate(Self.reading("tag"), as: Reading.self)
                    #expect(narrow.clashes.isEmpty && narrow.listed, "\(width) px at 60 %: \(narrow)")
                } catch {
                    await browser.close()
                    throw error
                }
                await browser.close()
            }
        }
    }

    @Test("the page on a live fleet: the tag's marker inside its room's outline, named, in the devices' table; it follows the tag into the kitchen; the nodes' health; the API's JSON decodes as the fleet's own types; the screenshot shows the map with the marker where the DOM says")
    func liveMap() async throws {
        guard HeadlessChromium.executable() != nil else {
            Issue.record("no chromium: install Debian's chromium package (scripts/setup.sh does)")
            return
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-map-\(getpid())-\(UInt32.random(in: 0 ... .max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let planFile = directory.appendingPathComponent("plan.yaml").path
        try Self.plan.write(toFile: planFile, atomically: true, encoding: .utf8)

        try await withSimBoxes(Self.scenario(), time: .real) { boxes in
            try await MosquittoBroker.with { broker in
                var settings = MQTTSettings(broker: .init(host: "127.0.0.1", port: broker.port))
                settings.reportInterval = 1
                settings.reportMoved = 0.3
                settings.discovery = false
                var nodes: [NodeRunner] = []
                for box in ["alpha", "bravo", "charlie"] {
                    nodes.append(try await NodeRunner.startInProcess(box, on: boxes) { $0.mqtt = settings })
                }
                let tag = try await NodeRunner.startInProcess("tag", on: boxes)
                let device = tag.engine.identity.uuidString.lowercased()
                let fleet = try ManagedProcess(BuiltProducts.path("proximity-fleet"),
                                               ["run", "--broker", "mqtt://127.0.0.1:\(broker.port)", "--plan", planFile, "--http", "127.0.0.1:0",
                                                "--stale-after", "5", "--track", device])
                try await fleet.waitForOutput(containing: "map listening", inStderr: true, timeout: .seconds(30))
                let line = try #require(fleet.stderr.split(separator: "\n").first { $0.contains("map listening") })
                let url = try #require(line.split(separator: " ").first { $0.hasPrefix("url=") }).dropFirst("url=".count)
                #expect(url.hasPrefix("http://127.0.0.1:") && url.hasSuffix("/"), "\(line)")

                let browser = try HeadlessChromium(width: 1280, height: 900)
                do {
                    let page = try await browser.open(String(url))
                    // The tag stands in the living room: once the nodes have identified and ranged
                    // it, its marker is inside the living room's outline. A marker may be placed
                    // before every node said it is online: the page shows both.
                    try await page.waitUntil(Self.markerIn(device, "living") + " && " + Self.nodesOnline, timeout: .seconds(120))
                    let living = try await page.evaluate(Self.marker(device), as: Marker.self)
                    #expect(living.status == "live" && living.row == "living" && ["tag", String(device.prefix(8))].contains(living.label), "\(living)")
                    #expect(living.x < 5 && living.y > 0 && living.y < 4, "\(living)")
                    #expect(Set(living.nodes) == ["alpha", "bravo", "charlie"], "\(living)")

                    // The screenshot: a map, not a blank page, with the marker's colour where the
                    // DOM puts it.
                    let shot = try await page.screenshot()
                    let saved = Self.artifacts.appendingPathComponent("fleet-map-living.png")
                    try shot.write(to: saved)
                    let image = try PNGImage(data: shot)
                    #expect(image.width == 1280 && image.height == 900, "\(image.width)×\(image.height)")
                    #expect(image.distinctColours() > 16, "\(saved.path)")
                    // The header's colour (top left) is not the page's: well over a tenth differs.
                    #expect(image.shareDifferingFromBackground() > 0.1, "\(saved.path)")
                    // The kitchen drawn in its colour, where the DOM has it (an empty room).
                    let kitchenFill = Self.rgb(living.kitchenFill)
                    try #require(living.kitchenX >= 0, "no point of the kitchen outside every uncertainty: \(saved.path)")
                    let kitchenPixel = image.pixel(x: Int(living.kitchenX.rounded()), y: Int(living.kitchenY.rounded()))
                    #expect(kitchenFill.count == 3 && zip(kitchenFill, [kitchenPixel.r, kitchenPixel.g, kitchenPixel.b]).allSatisfy { abs($0 - Int($1)) <= 12 },
                            "kitchen \(living.kitchenFill) but the screenshot has \(kitchenPixel): \(saved.path)")
                    let fill = Self.rgb(living.fill)
                    let pixel = image.pixel(x: Int(living.screenX.rounded()), y: Int(living.screenY.rounded()))
                    #expect(fill.count == 3 && zip(fill, [pixel.r, pixel.g, pixel.b]).allSatisfy { abs($0 - Int($1)) <= 12 },
                            "marker \(living.fill) but the screenshot has \(pixel) at (\(living.screenX), \(living.screenY)): \(saved.path)")

                    // As a person reads it: no label over another or over a marker, each room
                    // named once, the list of who is where agreeing with the table.
                    let read = try await page.evaluate(Self.reading(device), as: Reading.self)
                    #expect(read.clashes.isEmpty && read.shown >= 3 && read.roomLabelsOnce, "\(read): \(saved.path)")
                    #expect(read.listed && read.room == "living", "\(read)")

                    // The API, as the page reads it: the fleet's own types.
                    struct Texts: Decodable, Sendable { var plan: String; var devices: String; var nodes: String }
                    let texts = try await page.evaluate("""
                        Promise.all(["api/plan", "api/devices", "api/nodes"].map(p => fetch(p).then(r => r.text())))
                          .then(([plan, devices, nodes]) => ({ plan, devices, nodes }))
                        """, as: Texts.self)
                    let plan = try #require(MQTTJSON.decode(FleetMapPlan.self, from: Array(texts.plan.utf8)))
                    #expect(plan.rooms.map(\.name) == ["living", "kitchen"] && plan.nodes.count == 3)
                    let table = try #require(MQTTJSON.decode(FleetTable.self, from: Array(texts.devices.utf8)))
                    #expect(table.devices.first { $0.id == device }?.position?.room != nil, "\(texts.devices)")
                    let health = try #require(MQTTJSON.decode(FleetNodes.self, from: Array(texts.nodes.utf8)))
                    #expect(health.nodes.filter(\.inPlan).map(\.name) == ["alpha", "bravo", "charlie"], "\(texts.nodes)")
                    #expect(health.nodes.allSatisfy { $0.status == "online" && $0.lastHeard != nil } && health.nodes.contains { $0.devices >= 1 },
                            "\(texts.nodes)")

                    // The tag walks into the kitchen: the marker follows it there.
                    _ = try await boxes.control("MoveBox", [.string("tag"), .double(8.5), .double(1.5), .double(1)])
                    try await page.waitUntil(Self.markerIn(device, "kitchen"), timeout: .seconds(90))
                    let kitchen = try await page.evaluate(Self.marker(device), as: Marker.self)
                    #expect(kitchen.x > 5 && kitchen.x - living.x > 2.5 && kitchen.row == "kitchen", "\(living) → \(kitchen)")
                    #expect(kitchen.screenX > living.screenX, "\(living) → \(kitchen)")
                    try (try await page.screenshot()).write(to: Self.artifacts.appendingPathComponent("fleet-map-kitchen.png"))
                    let after = try await page.evaluate(Self.reading(device), as: Reading.self)
                    #expect(after.clashes.isEmpty && after.listed && after.room == "kitchen", "\(after)")
                } catch {
                    await browser.close()
                    throw error
                }
                await browser.close()

                // At a phone's width: the list first, the plan the screen's width, nothing wider
                // than the screen, no label over another.
                let phone = try HeadlessChromium(width: 412, height: 900)
                do {
                    let page = try await phone.open(String(url))
                    try await page.waitUntil(Self.markerIn(device, "kitchen"), timeout: .seconds(60))
                    let read = try await page.evaluate(Self.reading(device), as: Reading.self)
                    let shot = try await page.screenshot()
                    let saved = Self.artifacts.appendingPathComponent("fleet-map-phone.png")
                    try shot.write(to: saved)
                    #expect(read.listTop < read.mapTop && read.mapWidth > 300 && read.mapWidth <= 412 && read.pageWidth <= 412, "\(read): \(saved.path)")
                    #expect(read.clashes.isEmpty && read.listed && read.room == "kitchen", "\(read): \(saved.path)")
                    let image = try PNGImage(data: shot)
                    #expect(image.width == 412 && image.distinctColours() > 16, "\(saved.path)")
                } catch {
                    await phone.close()
                    throw error
                }
                await phone.close()
                await fleet.stop()
                #expect(fleet.exitStatus == 0, "\(fleet.stderr)")
                for node in nodes { _ = await node.stop() }
                _ = await tag.stop()
            }
        }
    }
}
