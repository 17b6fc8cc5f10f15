/// The map page's three files, served as they are (no build step, no library, nothing fetched
/// from elsewhere). The script reads `/api/plan` and then follows `/events`; it draws the plan in
/// SVG with metres as units, y up (the plan's y grows towards the top of the page).
///
/// What the tests and users can rely on in the DOM: each room a `polygon.room[data-room]` (on its
/// floor's `g.floor[data-floor]`), each node a `g.node[data-node]`, each placed device a
/// `g.device[data-device]` holding `circle.uncertainty` (radius: its uncertainty) and
/// `circle.dot` (its position), with `data-x`, `data-y` and `data-room`; the tables
/// `#devices tr[data-device]` and `#nodes tr[data-node]`; `#status` says `live` only while the
/// service's states come, its broker is connected and its nodes' reports are fresh, and why not
/// otherwise (the map and tables greyed, `body.stale`).
enum MapPage {
    /// One of the page's files, and its entity tag: FNV-1a (64 bits) of its bytes, which changes
    /// with them (a validator, not a secret).
    struct File: Sendable {
        var path: String
        var type: String
        var body: String
        var etag: String

        init(_ path: String, _ type: String, _ body: String) {
            self.path = path
            self.type = type
            self.body = body
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in body.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
            etag = "\"" + String(hash, radix: 16) + "\""
        }
    }

    static let files = [File("/", "text/html; charset=utf-8", html), File("/map.js", "text/javascript; charset=utf-8", script),
                        File("/map.css", "text/css; charset=utf-8", style)]

    static let html = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>proximity-fleet — live map</title>
        <link rel="stylesheet" href="map.css">
        <script src="map.js" defer></script>
        </head>
        <body>
        <header>
          <h1>proximity-fleet</h1>
          <span id="status" class="down">connecting</span>
          <span id="health"></span>
          <span id="clock"></span>
          <nav id="floors"></nav>
        </header>
        <main>
          <section id="map-section">
            <svg id="map" role="img" aria-label="floor plan"></svg>
            <p id="no-plan" hidden>No floor plan: devices have the nearest node's room (proximity-fleet run --plan FILE places them).</p>
          </section>
          <section>
            <h2>Devices</h2>
            <table id="devices">
              <thead><tr><th>Name</th><th>Room</th><th>x, y (m)</th><th>Floor</th><th>± m</th><th>Heard by (m)</th><th>Identifier</th></tr></thead>
              <tbody></tbody>
            </table>
            <h2>Nodes</h2>
            <p id="calibration"></p>
            <table id="nodes">
              <thead><tr><th>Node</th><th>Status</th><th>Heard</th><th>Devices</th><th title="fitted receive offset">Rx dB</th><th title="fitted transmit power at 1 m">Tx dBm</th><th title="calibration residual">Resid. dB</th><th>Drift</th></tr></thead>
              <tbody></tbody>
            </table>
          </section>
        </main>
        </body>
        </html>

        """

    static let style = """
        :root { font-family: system-ui, sans-serif; color: #1d2428; background: #f6f7f8; }
        body { margin: 0; }
        header { display: flex; gap: 1em; align-items: baseline; padding: 0.5em 1em; background: #23313a; color: #fff; }
        header h1 { font-size: 1.1em; margin: 0; }
        #status { padding: 0 0.5em; border-radius: 0.3em; font-size: 0.9em; }
        #status.live { background: #2e7d32; }
        #status.down { background: #b23b3b; }
        #status.stale { background: #c98a1b; }
        #health { font-size: 0.9em; opacity: 0.8; }
        body.stale #map, body.stale table { filter: grayscale(1); opacity: 0.55; }
        #clock { font-size: 0.9em; opacity: 0.8; }
        nav button { margin-right: 0.3em; }
        nav button.current { font-weight: bold; }
        main { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 1em; padding: 1em; }
        main > section { min-width: 0; overflow-x: auto; }
        @media (max-width: 900px) { main { grid-template-columns: 1fr; } }
        #map { box-sizing: border-box; display: block; width: 100%; height: auto; max-height: 80vh; background: #fff; border: 1px solid #ccd; }
        .room { fill: #e8eef3; stroke: #5b6b78; stroke-width: 0.05; }
        .room.occupied { fill: #d4ecd9; }
        .room-label { font-size: 0.45px; fill: #5b6b78; fill-opacity: 0.7; text-anchor: middle; pointer-events: none; }
        .node rect { fill: #23313a; }
        .node.stale rect { fill: #c98a1b; }
        .node.offline rect { fill: #b23b3b; }
        .node text { font-size: 0.35px; fill: #23313a; }
        .uncertainty { fill-opacity: 0.15; stroke-width: 0.03; stroke-opacity: 0.6; }
        .dot { stroke: #fff; stroke-width: 0.05; }
        .device text { font-size: 0.4px; font-weight: bold; fill: #1d2428; }
        table { border-collapse: collapse; width: 100%; font-size: 0.9em; margin-bottom: 1em; background: #fff; }
        th, td { text-align: left; padding: 0.2em 0.5em; border-bottom: 1px solid #dde; }
        td.num { text-align: right; font-variant-numeric: tabular-nums; }
        tr.offline td, tr.stale td { color: #b23b3b; }
        h2 { font-size: 1em; margin: 0.5em 0; }

        """

    static let script = #"""
        "use strict";
        // proximity-fleet's live map: /api/plan once (and again when the state's plan_version
        // changes), then /events: a whole state each second.
        const svgNS = "http://www.w3.org/2000/svg";
        const margin = 1.2;
        let plan = null, planVersion = -1, floor = null, latest = null, loadingPlan = null;

        function el(name, attributes, parent) {
          const e = document.createElementNS(svgNS, name);
          for (const [k, v] of Object.entries(attributes || {})) e.setAttribute(k, v);
          if (parent) parent.appendChild(e);
          return e;
        }
        function cell(row, text, cls) {
          const td = row.insertCell();
          td.textContent = text;
          if (cls) td.className = cls;
          return td;
        }
        function fixed(v, digits) { return typeof v === "number" ? v.toFixed(digits) : "–"; }
        function hue(id) {
          let h = 0;
          for (const c of id) h = (h * 31 + c.charCodeAt(0)) % 360;
          return h;
        }
        // The plan's bounds, with a margin: the SVG's viewBox, in metres.
        function bounds() {
          let minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
          const take = (x, y) => { minX = Math.min(minX, x); maxX = Math.max(maxX, x); minY = Math.min(minY, y); maxY = Math.max(maxY, y); };
          for (const r of plan.rooms) for (const [x, y] of r.polygon) take(x, y);
          for (const n of plan.nodes) take(n.position[0], n.position[1]);
          if (!isFinite(minX)) { minX = 0; minY = 0; maxX = 10; maxY = 10; }
          return { minX: minX - margin, minY: minY - margin, maxX: maxX + margin, maxY: maxY + margin };
        }
        let box = null;
        // Plan coordinates (y up) to the SVG's (y down).
        function sx(x) { return x; }
        function sy(y) { return box.maxY + box.minY - y; }

        function drawPlan() {
          const svg = document.getElementById("map");
          svg.replaceChildren();
          const nav = document.getElementById("floors");
          nav.replaceChildren();
          if (!plan) {
            svg.hidden = true;
            document.getElementById("no-plan").hidden = false;
            return;
          }
          svg.hidden = false;
          document.getElementById("no-plan").hidden = true;
          box = bounds();
          svg.setAttribute("viewBox", `${box.minX} ${box.minY} ${box.maxX - box.minX} ${box.maxY - box.minY}`);
          const names = plan.floors.map(f => f.name);
          if (floor === null || !names.includes(floor)) floor = names[0] ?? "";
          if (plan.floors.length > 1) {
            for (const name of names) {
              const b = document.createElement("button");
              b.textContent = name;
              b.className = name === floor ? "current" : "";
              b.addEventListener("click", () => { floor = name; drawPlan(); if (latest) drawState(latest); });
              nav.appendChild(b);
            }
          }
          const g = el("g", { class: "floor", "data-floor": floor }, svg);
          for (const r of plan.rooms.filter(r => r.floor === floor)) {
            const points = r.polygon.map(([x, y]) => `${sx(x)},${sy(y)}`).join(" ");
            const p = el("polygon", { class: "room", "data-room": r.name, points }, g);
            const t = el("title", {}, p);
            t.textContent = r.name;
            const cx = r.polygon.reduce((s, [x]) => s + x, 0) / r.polygon.length;
            const cy = r.polygon.reduce((s, [, y]) => s + y, 0) / r.polygon.length;
            const label = el("text", { class: "room-label", x: sx(cx), y: sy(cy) }, g);
            label.textContent = r.name;
          }
          el("g", { id: "nodes-layer" }, g);
          el("g", { id: "devices-layer" }, g);
          for (const n of plan.nodes.filter(n => n.floor === floor)) {
            const ng = el("g", { class: "node", "data-node": n.name, transform: `translate(${sx(n.position[0])} ${sy(n.position[1])})` },
                          document.getElementById("nodes-layer"));
            el("rect", { x: -0.15, y: -0.15, width: 0.3, height: 0.3 }, ng);
            const t = el("text", { x: 0.25, y: -0.2 }, ng);
            t.textContent = n.name;
          }
        }

        function drawState(state) {
          latest = state;
          document.getElementById("clock").textContent = new Date(state.devices.time * 1000).toLocaleTimeString();
          const devices = state.devices.devices;
          // The map: each placed device on the floor shown.
          if (plan) {
            const layer = document.getElementById("devices-layer");
            const shown = new Set();
            const occupied = new Set();
            for (const d of devices) {
              const p = d.position;
              if (!p || (p.floor ?? "") !== floor) continue;
              shown.add(d.id);
              if (p.room) occupied.add(p.room);
              let g = layer.querySelector(`g.device[data-device="${CSS.escape(d.id)}"]`);
              if (!g) {
                g = el("g", { class: "device", "data-device": d.id }, layer);
                const color = `hsl(${hue(d.id)} 70% 40%)`;
                el("circle", { class: "uncertainty", fill: color, stroke: color }, g);
                el("circle", { class: "dot", r: 0.18, fill: color }, g);
                el("text", {}, g);
              }
              const [x, y] = [sx(p.x), sy(p.y)];
              g.setAttribute("data-x", p.x);
              g.setAttribute("data-y", p.y);
              g.setAttribute("data-room", p.room ?? "");
              const u = g.querySelector(".uncertainty");
              u.setAttribute("cx", x); u.setAttribute("cy", y); u.setAttribute("r", Math.max(0.2, p.uncertainty));
              const dot = g.querySelector(".dot");
              dot.setAttribute("cx", x); dot.setAttribute("cy", y);
              const label = g.querySelector("text");
              label.setAttribute("x", x + 0.25); label.setAttribute("y", y - 0.25);
              label.textContent = d.name ?? d.id.slice(0, 8);
            }
            for (const g of [...layer.querySelectorAll("g.device")]) if (!shown.has(g.dataset.device)) g.remove();
            for (const r of document.querySelectorAll("polygon.room")) r.classList.toggle("occupied", occupied.has(r.dataset.room));
            const now = state.nodes.time;
            for (const g of document.querySelectorAll("g.node")) {
              const n = state.nodes.nodes.find(n => n.name === g.dataset.node);
              g.classList.toggle("offline", n?.status === "offline");
              g.classList.toggle("stale", !n || n.last_heard === undefined || now - n.last_heard > 30);
            }
          }
          // The devices' table.
          const body = document.querySelector("#devices tbody");
          body.replaceChildren();
          for (const d of devices) {
            const row = body.insertRow();
            row.dataset.device = d.id;
            const p = d.position;
            cell(row, d.name ?? "–");
            cell(row, d.room);
            cell(row, p ? `${fixed(p.x, 1)}, ${fixed(p.y, 1)}` : "–", "num");
            cell(row, p ? (p.floor ?? "") : "–");
            cell(row, p ? fixed(p.uncertainty, 1) : "–", "num");
            cell(row, d.readings.map(r => `${r.node} ${fixed(r.distance, 1)}`).join(", "));
            cell(row, d.id.length > 13 ? d.id.slice(0, 8) + "…" : d.id).title = d.id;
          }
          // The nodes' health.
          const nodes = document.querySelector("#nodes tbody");
          nodes.replaceChildren();
          const now = state.nodes.time;
          for (const n of state.nodes.nodes) {
            const row = nodes.insertRow();
            row.dataset.node = n.name;
            const age = n.last_heard === undefined ? null : now - n.last_heard;
            if (n.status === "offline") row.className = "offline";
            else if (age === null || age > 30) row.className = "stale";
            cell(row, n.name + (n.in_plan ? "" : " (not in the plan)") + (n.mobile ? " (mobile)" : ""));
            cell(row, n.status ?? "–");
            cell(row, age === null ? "never" : `${fixed(Math.max(0, age), 0)} s ago`, "num");
            cell(row, String(n.devices), "num");
            cell(row, fixed(n.rx_offset, 1), "num");
            cell(row, fixed(n.tx_power, 1), "num");
            cell(row, fixed(n.residual, 1), "num");
            cell(row, n.drift ?? "");
          }
          document.getElementById("calibration").textContent = typeof state.nodes.exponent === "number"
            ? `Calibration: path-loss exponent ${fixed(state.nodes.exponent, 2)}, RMS residual ${fixed(state.nodes.rms, 1)} dB.`
            : "Calibration: not fitted yet (the plan's nodes fit it from hearing each other).";
        }

        async function loadPlan(version) {
          const answer = await fetch("api/plan", { cache: "no-store" });
          plan = answer.ok ? await answer.json() : null;
          planVersion = version;
          drawPlan();
        }

        // Whether what the page shows is live, in words: the service's own status (the broker, how
        // fresh the nodes' reports are), and whether the service's states still come. Anything
        // but live greys the map and the tables.
        let lastState = 0;
        function showStatus(text, cls) {
          const status = document.getElementById("status");
          status.textContent = text;
          status.className = cls;
          document.body.classList.toggle("stale", cls !== "live");
        }
        function describe(s) {
          const since = t => new Date(t * 1000).toLocaleTimeString();
          if (s.broker.state === "connecting") return ["connecting to the MQTT broker", "down"];
          if (s.broker.state !== "connected") return [`MQTT broker down since ${since(s.broker.since)}: positions frozen`, "down"];
          if (!s.live) return [`no node report for ${Math.round(s.newest_report_age ?? 0)} s: positions may be old`, "stale"];
          return ["live", "live"];
        }
        setInterval(() => {
          const quiet = (Date.now() - lastState) / 1000;
          if (lastState && quiet > 3) showStatus(`no update from proximity-fleet for ${Math.round(quiet)} s`, "down");
        }, 1000);

        function connect() {
          const source = new EventSource("events");
          source.addEventListener("error", () => showStatus("lost proximity-fleet: reconnecting", "down"));
          source.addEventListener("state", async event => {
            const state = JSON.parse(event.data);
            lastState = Date.now();
            showStatus(...describe(state.status));
            const n = state.status.nodes;
            document.getElementById("health").textContent = n.total ? `${n.online} of ${n.total} nodes online` : "";
            if (state.plan_version !== planVersion) {
              loadingPlan = loadingPlan ?? loadPlan(state.plan_version).finally(() => { loadingPlan = null; });
              await loadingPlan;
            }
            drawState(state);
          });
        }
        connect();

        """#
}
