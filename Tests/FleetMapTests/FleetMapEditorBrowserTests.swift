import Foundation
import ProximityCore
import ProximityFleet
import ProximityMQTT
import ProximityTesting
import Testing
import BrowserTesting

/// The plan editor in headless Chromium (issue 31, item 5): `proximity-fleet run --plan --http
/// --edit`, a person drawing a room with clicks on the map, saving it, and the fleet's plan (and
/// the file) changing; a wrong token and a bad plan refused at the element concerned.
@Suite("the plan editor in headless Chromium", .serialized)
struct FleetMapEditorBrowserTests {
    /// JavaScript: clicks the map at plan points (metres), as a person's clicks land.
    static func clicks(_ points: [(Double, Double)]) -> String {
        let list = points.map { "[\($0.0), \($0.1)]" }.joined(separator: ", ")
        return """
            (() => {
              const svg = document.getElementById("map");
              for (const [x, y] of [\(list)]) {
                const p = new DOMPoint(sx(x), sy(y)).matrixTransform(svg.getScreenCTM());
                svg.dispatchEvent(new MouseEvent("click", { clientX: p.x, clientY: p.y, bubbles: true }));
              }
              return true;
            })()
            """
    }

    static func press(_ id: String) -> String { "(() => { document.getElementById(\"\(id)\").click(); return true; })()" }
    static func type(_ id: String, _ text: String) -> String {
        "(() => { document.getElementById(\"\(id)\").value = \(MQTTJSON.encode([text]).dropFirst().dropLast()); return true; })()"
    }

    @Test("draw a room, add a floor with a room and a node at a height, save with the token: the file holds them, check-plan accepts it, the fleet's plan has them; a wrong token is refused in words; a room named twice is refused and drawn as the problem")
    func drawAndSave() async throws {
        guard HeadlessChromium.executable() != nil else {
            Issue.record("no chromium: install Debian's chromium package (scripts/setup.sh does)")
            return
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-editor-\(getpid())-\(UInt32.random(in: 0 ... .max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let planFile = directory.appendingPathComponent("plan.yaml").path, tokenFile = directory.appendingPathComponent("edit-token").path
        try FleetMapBrowserTests.plan.write(toFile: planFile, atomically: true, encoding: .utf8)
        let fleet = try ManagedProcess(BuiltProducts.path("proximity-fleet"),
                                       ["run", "--broker", "mqtt://127.0.0.1:1", "--plan", planFile, "--http", "127.0.0.1:0", "--edit", "--edit-token", tokenFile])
        defer { fleet.signal(SIGKILL) }
        try await fleet.waitForOutput(containing: "map listening", inStderr: true, timeout: .seconds(30))
        let line = try #require(fleet.stderr.split(separator: "\n").first { $0.contains("map listening") })
        let url = String(try #require(line.split(separator: " ").first { $0.hasPrefix("url=") }).dropFirst("url=".count))
        let token = try String(contentsOfFile: tokenFile, encoding: .utf8).trimmingCharacters(in: .newlines)

        let browser = try HeadlessChromium(width: 1280, height: 900)
        do {
            let page = try await browser.open(url)
            try await page.waitUntil("!document.getElementById('editor').hidden && document.querySelectorAll('polygon.room').length === 2")
            _ = try await page.evaluate(Self.press("edit-start"), as: Bool.self)

            // A wrong token: refused, in words; nothing saved.
            _ = try await page.evaluate(Self.type("edit-token", "not-the-token"), as: Bool.self)
            _ = try await page.evaluate(Self.type("edit-name", "study"), as: Bool.self)
            _ = try await page.evaluate(Self.clicks([(0.5, 0.5), (2, 0.5), (2, 2), (0.5, 2)]), as: Bool.self)
            _ = try await page.evaluate(Self.press("edit-finish"), as: Bool.self)
            try (try await page.screenshot()).write(to: FleetMapBrowserTests.artifacts.appendingPathComponent("fleet-map-editor.png"))
            _ = try await page.evaluate(Self.press("edit-save"), as: Bool.self)
            try await page.waitUntil("document.getElementById('edit-message').textContent.includes('token')")
            #expect(try String(contentsOfFile: planFile, encoding: .utf8) == FleetMapBrowserTests.plan)

            // A second room named kitchen: refused, the problem named and drawn at the room.
            _ = try await page.evaluate(Self.type("edit-token", token), as: Bool.self)
            _ = try await page.evaluate(Self.type("edit-name", "kitchen"), as: Bool.self)
            _ = try await page.evaluate(Self.clicks([(6, 0.5), (7, 0.5), (7, 1.5)]), as: Bool.self)
            _ = try await page.evaluate(Self.press("edit-finish"), as: Bool.self)
            _ = try await page.evaluate(Self.press("edit-save"), as: Bool.self)
            try await page.waitUntil("document.querySelectorAll('#edit-problems li').length > 0")
            struct Refused: Decodable, Sendable { var problems: [String]; var marked: [String] }
            let refused = try await page.evaluate("""
                ({ problems: [...document.querySelectorAll('#edit-problems li')].map(li => li.textContent),
                   marked: [...document.querySelectorAll('polygon.room.problem')].map(p => p.dataset.room) })
                """, as: Refused.self)
            #expect(refused.problems.contains { $0.hasPrefix("room kitchen:") && $0.contains("given twice") } && refused.marked.contains("kitchen"), "\(refused)")
            #expect(try String(contentsOfFile: planFile, encoding: .utf8) == FleetMapBrowserTests.plan)

            // Delete that room, save: the study is in the file, the plan check takes it, and the
            // fleet's plan (what the page reads again) has it.
            _ = try await page.evaluate(Self.press("tool-delete"), as: Bool.self)
            _ = try await page.evaluate("""
                (() => {
                  const rooms = [...document.querySelectorAll('polygon.room[data-room="kitchen"]')];
                  const small = rooms.sort((a, b) => a.getBBox().width - b.getBBox().width)[0];
                  const box = small.getBoundingClientRect();
                  // A point of the small triangle: near its right-angle corner.
                  const svg = document.getElementById("map");
                  const p = new DOMPoint(sx(6.8), sy(0.7)).matrixTransform(svg.getScreenCTM());
                  document.elementFromPoint(p.x, p.y).dispatchEvent(new MouseEvent("click", { clientX: p.x, clientY: p.y, bubbles: true }));
                  return box.width > 0;
                })()
                """, as: Bool.self)
            // A picture of the plan, sent, then scaled: what it shows as 10 m is 20 m.
            let png = FleetMapBackgroundTests.png.map(String.init).joined(separator: ",")
            #expect(try await page.evaluate("uploadBackground(new Blob([new Uint8Array([\(png)])], { type: 'image/png' }))", as: Bool.self))
            try await page.waitUntil("document.querySelector('#map image.background') !== null")
            _ = try await page.evaluate(Self.press("tool-scale"), as: Bool.self)
            _ = try await page.evaluate(Self.type("edit-distance", "20"), as: Bool.self)
            _ = try await page.evaluate(Self.clicks([(0, 0), (10, 0)]), as: Bool.self)
            #expect(try await page.evaluate("plan.background.width", as: Double.self) == 20)
            #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("plan.background.png").path))

            // A floor upstairs, 3 to 6 m, with a room and a node 4.5 m up.
            _ = try await page.evaluate(Self.type("edit-name", "upstairs"), as: Bool.self)
            _ = try await page.evaluate(Self.type("edit-floor-low", "3"), as: Bool.self)
            _ = try await page.evaluate(Self.type("edit-floor-high", "6"), as: Bool.self)
            _ = try await page.evaluate(Self.press("edit-floor"), as: Bool.self)
            try await page.waitUntil("document.querySelectorAll('#floors button').length === 2 && document.querySelector('#floors button.current').textContent === 'upstairs'")
            // Its heights changed: 3 to 7 m.
            _ = try await page.evaluate(Self.type("edit-floor-high", "7"), as: Bool.self)
            _ = try await page.evaluate(Self.press("edit-floor"), as: Bool.self)
            #expect(try await page.evaluate("document.querySelectorAll('#floors button').length === 2 && plan.floors[1].z[1] === 7", as: Bool.self))
            _ = try await page.evaluate(Self.press("tool-room"), as: Bool.self)
            _ = try await page.evaluate(Self.type("edit-name", "loft"), as: Bool.self)
            _ = try await page.evaluate(Self.clicks([(0, 0), (10, 0), (10, 4), (0, 4)]), as: Bool.self)
            _ = try await page.evaluate(Self.press("edit-finish"), as: Bool.self)
            _ = try await page.evaluate(Self.press("tool-node"), as: Bool.self)
            _ = try await page.evaluate(Self.type("edit-name", "delta"), as: Bool.self)
            _ = try await page.evaluate(Self.type("edit-height", "4.5"), as: Bool.self)
            _ = try await page.evaluate(Self.clicks([(5, 2)]), as: Bool.self)
            _ = try await page.evaluate(Self.press("edit-save"), as: Bool.self)
            try await page.waitUntil("document.getElementById('edit-message').textContent.startsWith('Saved')")
            // The page read the fleet's plan again: the study drawn from it, the editor closed.
            try await page.waitUntil("document.getElementById('edit-start').hidden === false && document.querySelectorAll('#floors button').length === 2")
            let saved = try FloorPlanFile.load(path: planFile)
            let text = try String(contentsOfFile: planFile, encoding: .utf8)
            #expect(saved.rooms.map(\.name) == ["living", "kitchen", "study", "loft"] && saved.floors.map(\.name) == ["ground", "upstairs"], "\(text)")
            #expect(saved.rooms[2].polygon == [PlanPoint(x: 0.5, y: 0.5), PlanPoint(x: 2, y: 0.5), PlanPoint(x: 2, y: 2), PlanPoint(x: 0.5, y: 2)], "\(text)")
            #expect(saved.rooms.map(\.floor) == [0, 0, 0, 1] && saved.floors[1].z == 3 ... 7, "\(text)")
            #expect(saved.nodes.map(\.name) == ["alpha", "bravo", "charlie", "delta"] && saved.nodes[3].position == PlanPoint(x: 5, y: 2, z: 4.5), "\(text)")
            #expect(saved.background == .init(image: "plan.background.png", corner: PlanPoint(x: 0, y: 0), width: 20, floor: 0), "\(text)")
            let check = try await runCommand(BuiltProducts.path("proximity-fleet"), ["check-plan", planFile])
            #expect(check.status == 0, "\(check)")
            try (try await page.screenshot()).write(to: FleetMapBrowserTests.artifacts.appendingPathComponent("fleet-map-edited.png"))
            // The ground floor again: its rooms, the study among them.
            _ = try await page.evaluate("(() => { [...document.querySelectorAll('#floors button')].find(b => b.textContent === 'ground').click(); return true; })()", as: Bool.self)
            try await page.waitUntil("[...document.querySelectorAll('polygon.room')].map(p => p.dataset.room).join() === 'living,kitchen,study'")
            // The saved picture, served by the fleet, under the ground floor's rooms.
            try await page.waitUntil("document.querySelector('#map image.background')?.getAttribute('href').startsWith('api/plan/background') === true")
            try (try await page.screenshot()).write(to: FleetMapBrowserTests.artifacts.appendingPathComponent("fleet-map-edited-ground.png"))
        } catch {
            await browser.close()
            throw error
        }
        await browser.close()
        #expect(fleet.stderr.contains("floor plan saved from the map") && !fleet.stderr.contains(token), "\(fleet.stderr)")
    }
}
