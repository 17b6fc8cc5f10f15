import Foundation
import ProximityTesting
import Testing
import BrowserTesting

/// A white page with a red 200×200 square at (100, 100), a paragraph added after 300 ms, and a
/// flag set after 500 ms without touching the DOM.
private let testPage = """
    <!doctype html>
    <html><body style="margin:0; background:#ffffff">
    <div id="red" style="position:absolute; left:100px; top:100px; width:200px; height:200px; background:#ff0000"></div>
    <script>
    window.answer = 42;
    setTimeout(() => { window.flag = true; }, 500);
    setTimeout(() => {
      const p = document.createElement("p");
      p.id = "late";
      p.textContent = "added later";
      document.body.appendChild(p);
    }, 300);
    </script>
    </body></html>
    """

private var testPageURL: String {
    "data:text/html," + testPage.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
}

/// Throws, naming the Debian package, when there is no Chromium.
private func startBrowser() throws -> HeadlessChromium {
    try HeadlessChromium(width: 1000, height: 700)
}

@Suite("HeadlessChromium")
struct HeadlessChromiumTests {
    private struct Box: Decodable, Equatable {
        let id: String
        let width: Double
        let tags: [String]
        let missing: Int?
    }

    @Test("a page: waits for an element added later, evaluates values, objects and exceptions")
    func page() async throws {
        let browser = try startBrowser()
        let clock = ContinuousClock()
        let start = clock.now
        let page = try await browser.open(testPageURL)
        let opened = clock.now

        try await page.waitUntil("document.getElementById('late') !== null", timeout: .seconds(10))
        // Set after the paragraph, with no DOM mutation: seen on an animation frame.
        try await page.waitUntil("window.flag === true", timeout: .seconds(10))
        #expect(try await page.evaluate("document.getElementById('late').textContent", as: String.self) == "added later")

        #expect(try await page.evaluate("window.answer * 2", as: Int.self) == 84)
        #expect(try await page.evaluate("1.5 + 1", as: Double.self) == 2.5)
        #expect(try await page.evaluate("'a' + 'b'", as: String.self) == "ab")
        #expect(try await page.evaluate("document.readyState === 'complete'", as: Bool.self))
        #expect(try await page.evaluate("undefined", as: Int?.self) == nil)
        #expect(try await page.evaluate("Promise.resolve(7)", as: Int.self) == 7)
        let box = try await page.evaluate("""
            (() => { const r = document.getElementById('red').getBoundingClientRect();
                     return { id: 'red', width: r.width, tags: ['a', 'b'] }; })()
            """, as: Box.self)
        #expect(box == Box(id: "red", width: 200, tags: ["a", "b"], missing: nil))

        let thrown = await #expect(throws: TestKitError.self) {
            try await page.evaluate("throw new Error('boom in the page')", as: Int.self)
        }
        #expect(thrown?.description.contains("boom in the page") == true)
        let rejected = await #expect(throws: TestKitError.self) {
            try await page.evaluate("Promise.reject(new TypeError('rejected here'))", as: Int.self)
        }
        #expect(rejected?.description.contains("TypeError: rejected here") == true)
        let notDecodable = await #expect(throws: TestKitError.self) {
            try await page.evaluate("'text'", as: Int.self)
        }
        #expect(notDecodable?.description.contains("is not a Int") == true)

        let waitStart = clock.now
        let never = await #expect(throws: TestKitError.self) {
            try await page.waitUntil("false", timeout: .seconds(1))
        }
        let waited = waitStart.duration(to: clock.now)
        #expect(never?.description.contains("waitUntil `false`") == true)
        #expect(never?.description.contains("not true within 1000 ms") == true)
        // The page's own timer gave up (the text says so), not before its time; how long after
        // is the machine's speed.
        #expect(waited >= .milliseconds(900), "\(waited)")
        let throwing = await #expect(throws: TestKitError.self) {
            try await page.waitUntil("document.getElementById('nothing').textContent === 'x'", timeout: .milliseconds(200))
        }
        #expect(throwing?.description.contains("it last threw TypeError") == true)

        await browser.close()
        print("HeadlessChromium page: opened in \(start.duration(to: opened)), all in \(start.duration(to: clock.now))")
    }

    @Test("a screenshot of the window's size: the red square on white")
    func screenshot() async throws {
        let browser = try startBrowser()
        let page = try await browser.open(testPageURL)
        try await page.waitUntil("document.getElementById('late') !== null", timeout: .seconds(10))
        let png = try await page.screenshot()
        let image = try PNGImage(data: png)
        #expect(image.width == 1000 && image.height == 700, "\(image.width)×\(image.height)")
        let inside = image.pixel(x: 200, y: 200)
        #expect(inside.r > 200 && inside.g < 60 && inside.b < 60, "\(inside)")
        let background = image.pixel(x: 0, y: 0)
        #expect(background.r > 240 && background.g > 240 && background.b > 240, "\(background)")
        let share = image.shareDifferingFromBackground()
        #expect(share > 0.02 && share < 0.5, "\(share)")
        #expect(image.distinctColours() >= 2)
        await browser.close()
    }

    @Test("when the browser dies, a command waiting fails at once with how it ended; so do later ones")
    func browserDies() async throws {
        let browser = try startBrowser()
        let page = try await browser.open("data:text/html,<p>waiting</p>")
        let clock = ContinuousClock()
        async let pending: Int = page.evaluate("window.started = true; new Promise(() => {})", timeout: .seconds(60))
        try await page.waitUntil("window.started === true", timeout: .seconds(10))
        let killed = clock.now
        kill(browser.pid, SIGKILL)
        do {
            _ = try await pending
            Issue.record("a promise that never resolves resolved")
        } catch {
            #expect("\(error)".contains("Chromium was killed by signal 9"), "\(error)")
        }
        // It failed on the death (the text names the signal), before its own timeout.
        let failedAfter = killed.duration(to: clock.now)
        #expect(failedAfter < .seconds(60), "\(failedAfter)")
        let later = await #expect(throws: TestKitError.self) {
            try await page.evaluate("1", as: Int.self)
        }
        #expect(later?.description.contains("killed by signal 9") == true)
        await browser.close()
        print("HeadlessChromium killed: the waiting command failed after \(failedAfter), closed after \(killed.duration(to: clock.now))")
    }
}
