/// The map page's three files, served as they are (no build step, no library, nothing fetched
/// from elsewhere). The script reads `/api/plan` and then follows `/events`; it draws the plan in
/// SVG with metres as units, y up (the plan's y grows towards the top of the page).
///
/// What the tests and users can rely on in the DOM: the list of who is where first,
/// `#rooms li[data-room]` holding `span.who[data-device]` (`data-room="home"` for a device home in
/// no room, `"not_home"` for one away); each room a `polygon.room[data-room]` (on its floor's
/// `g.floor[data-floor]`) with its name once, `text.room-label`; each node a `g.node[data-node]`
/// (a diamond, its label `text.node-label`); each placed device a `g.device[data-device]` holding
/// `circle.uncertainty` (radius: its uncertainty, clipped to the rooms), `circle.dot` (its
/// position) and its name `text.device-label`, with `data-x`, `data-y` and `data-room`; labels are
/// placed so that none overlaps another or a marker, and one that cannot be is hidden
/// (`display: none`, its name in the marker's tooltip and the list); the tables
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
        <title>proximity-fleet — who is where</title>
        <link rel="stylesheet" href="map.css">
        <script src="map.js" defer></script>
        </head>
        <body>
        <header>
          <h1>proximity-fleet</h1>
          <span id="status" class="down">connecting</span>
          <span id="health"></span>
          <span id="clock"></span>
        </header>
        <main>
          <section id="who">
            <h2>Who is where</h2>
            <ul id="rooms"></ul>
          </section>
          <section id="map-section">
            <nav id="floors" aria-label="floors"></nav>
            <svg id="map" role="img" aria-label="floor plan"></svg>
            <p id="no-plan" hidden>No floor plan: devices have the nearest node's room (proximity-fleet run --plan FILE places them).</p>
            <div id="legend">
              <span><svg viewBox="-1 -1 2 2"><circle r="0.7" class="legend-device"/></svg> a device (its colour), its name beside it</span>
              <span><svg viewBox="-1 -1 2 2"><circle r="0.9" class="legend-uncertainty"/></svg> where it may be</span>
              <span><svg viewBox="-1 -1 2 2"><rect x="-0.6" y="-0.6" width="1.2" height="1.2" transform="rotate(45)" class="legend-node"/></svg> a node: online, <b class="late">late</b>, <b class="off">offline</b></span>
              <span><svg viewBox="-1 -1 2 2"><rect x="-0.9" y="-0.9" width="1.8" height="1.8" class="legend-occupied"/></svg> a room with someone in it</span>
              <label><input type="checkbox" id="trails"> trails (5 min)</label>
            </div>
            <div id="editor" hidden>
              <button id="edit-start">Edit the plan</button>
              <span id="edit-tools" hidden>
                <label>Name <input id="edit-name" size="12" placeholder="room or node" list="edit-node-names"></label>
                <datalist id="edit-node-names"></datalist>
                <button id="tool-room" data-tool="room">Draw a room</button>
                <button id="tool-node" data-tool="node">Place a node</button>
                <button id="tool-delete" data-tool="delete">Delete</button>
                <button id="edit-finish" hidden>Finish the room</button>
                <label>Height <input id="edit-height" size="4" inputmode="decimal" placeholder="m"></label>
                <button id="edit-floor">Add or change a floor</button>
                <label>Picture <input type="file" id="edit-background" accept="image/png,image/jpeg,image/svg+xml"></label>
                <button id="tool-scale" data-tool="scale">Scale the picture</button>
                <label>Distance <input id="edit-distance" size="4" inputmode="decimal" placeholder="m"></label>
                <button id="tool-move" data-tool="move">Move the picture</button>
                <label>from <input id="edit-floor-low" size="3" inputmode="decimal"></label>
                <label>to <input id="edit-floor-high" size="3" inputmode="decimal"> m</label>
                <label>Token <input id="edit-token" type="password" size="14" autocomplete="off" placeholder="from --edit-token"></label>
                <button id="edit-save">Save</button>
                <button id="edit-cancel">Cancel</button>
              </span>
              <p id="edit-message" role="status"></p>
              <ul id="edit-problems"></ul>
            </div>
          </section>
          <section id="details">
            <details open>
              <summary>Devices</summary>
              <table id="devices">
                <thead><tr><th>Name</th><th>Room</th><th>x, y (m)</th><th>Floor</th><th>± m</th><th>Heard by (m)</th><th>Identifier</th></tr></thead>
                <tbody></tbody>
              </table>
            </details>
            <details open>
              <summary>Nodes</summary>
              <p id="calibration"></p>
              <table id="nodes">
                <thead><tr><th>Node</th><th>Status</th><th>Heard</th><th>Devices</th><th title="fitted receive offset">Rx dB</th><th title="fitted transmit power at 1 m">Tx dBm</th><th title="calibration residual">Resid. dB</th><th>Drift</th></tr></thead>
                <tbody></tbody>
              </table>
            </details>
          </section>
        </main>
        </body>
        </html>

        """

    static let style = """
        :root { font-family: system-ui, sans-serif; color: #1d2428; background: #f6f7f8; }
        body { margin: 0; }
        header { display: flex; flex-wrap: wrap; gap: 0.3em 1em; align-items: baseline; padding: 0.5em 1em; background: #23313a; color: #fff; }
        header h1 { font-size: 1.1em; margin: 0; }
        #status { padding: 0 0.5em; border-radius: 0.3em; font-size: 0.9em; }
        #status.live { background: #2e7d32; }
        #status.down { background: #b23b3b; }
        #status.stale { background: #c98a1b; }
        #health, #clock { font-size: 0.9em; opacity: 0.8; }
        body.stale #map, body.stale #rooms, body.stale table { filter: grayscale(1); opacity: 0.55; }
        main { display: grid; grid-template-columns: minmax(14em, 1fr) minmax(0, 3fr); grid-template-areas: "who map" "details details"; gap: 1em; padding: 1em; }
        #who { grid-area: who; }
        #map-section { grid-area: map; min-width: 0; }
        #details { grid-area: details; min-width: 0; overflow-x: auto; }
        @media (max-width: 700px) {
          main { grid-template-columns: minmax(0, 1fr); grid-template-areas: "who" "map" "details"; padding: 0.5em; }
          /* On a phone the tables keep what a person reads: who, where, heard by; node, status, heard, devices. */
          #devices th:nth-child(3), #devices td:nth-child(3), #devices th:nth-child(4), #devices td:nth-child(4),
          #devices th:nth-child(7), #devices td:nth-child(7),
          #nodes th:nth-child(n+5), #nodes td:nth-child(n+5) { display: none; }
        }
        h2 { font-size: 1em; margin: 0 0 0.5em; }
        #rooms { list-style: none; margin: 0; padding: 0; display: grid; gap: 0.4em; }
        #rooms li { background: #fff; border: 1px solid #dde; border-radius: 0.4em; padding: 0.35em 0.6em; }
        #rooms li.empty { color: #7b8892; background: transparent; }
        #rooms .room-name { font-weight: 600; margin-right: 0.5em; }
        #rooms li.away .room-name, #rooms li[data-room="home"] .room-name { font-weight: 500; font-style: italic; }
        .who { display: inline-flex; align-items: center; gap: 0.25em; margin: 0.1em 0.6em 0.1em 0; white-space: nowrap; }
        .who .chip { width: 0.7em; height: 0.7em; border-radius: 50%; display: inline-block; }
        .who .note { color: #66737d; font-size: 0.85em; }
        nav#floors { display: flex; gap: 0.3em; margin-bottom: 0.4em; }
        nav#floors button { border: 1px solid #9aa6af; background: #fff; border-radius: 0.3em 0.3em 0 0; padding: 0.2em 0.8em; }
        nav#floors button.current { background: #23313a; color: #fff; }
        #map { box-sizing: border-box; display: block; width: 100%; height: auto; max-height: 75vh; background: #fff; border: 1px solid #ccd; }
        .room { fill: #eef2f5; fill-opacity: 0.7; stroke: #5b6b78; stroke-width: 0.06; }
        .room.occupied { fill: #dcefe0; }
        #map text { dominant-baseline: hanging; text-anchor: start; }
        .room-label { font-size: 0.4px; fill: #5b6b78; pointer-events: none; }
        .node rect { fill: #4f6b7e; stroke: #fff; stroke-width: 0.04; }
        .node.stale rect { fill: #c98a1b; }
        .node.offline rect { fill: #b23b3b; }
        .node-label { font-size: 0.3px; fill: #66737d; paint-order: stroke; stroke: #fff; stroke-width: 0.06; }
        .uncertainty { fill-opacity: 0.12; stroke-width: 0.03; stroke-opacity: 0.5; pointer-events: none; }
        .dot { stroke: #fff; stroke-width: 0.06; cursor: pointer; }
        .device-label { font-size: 0.36px; font-weight: 600; fill: #1d2428; paint-order: stroke; stroke: #fff; stroke-width: 0.08; }
        .trail { fill: none; stroke-width: 0.06; stroke-opacity: 0.5; stroke-linejoin: round; }
        #legend { display: flex; flex-wrap: wrap; gap: 0.3em 1.2em; font-size: 0.85em; color: #4a565f; margin-top: 0.4em; align-items: center; }
        #legend svg { width: 1em; height: 1em; vertical-align: -0.15em; }
        .legend-device { fill: hsl(210 70% 40%); stroke: #fff; stroke-width: 0.15; }
        .legend-uncertainty { fill: hsl(210 70% 40%); fill-opacity: 0.15; stroke: hsl(210 70% 40%); stroke-width: 0.1; }
        .legend-node { fill: #4f6b7e; }
        .legend-occupied { fill: #dcefe0; stroke: #5b6b78; stroke-width: 0.1; }
        #legend b.late { color: #c98a1b; } #legend b.off { color: #b23b3b; }
        #editor { margin-top: 0.5em; font-size: 0.9em; }
        #editor button.current { background: #23313a; color: #fff; }
        #edit-message { margin: 0.3em 0; }
        #edit-problems { color: #b23b3b; margin: 0; }
        body.editing #map { cursor: crosshair; }
        body.editing.stale #map { filter: none; opacity: 1; }
        .room.problem, .node.problem rect { stroke: #b23b3b; stroke-width: 0.15; }
        .draft { fill: none; stroke: #b23b3b; stroke-width: 0.06; stroke-dasharray: 0.15 0.1; }
        .draft-point { fill: #b23b3b; }
        .background { opacity: 0.45; pointer-events: none; }
        details { margin-bottom: 0.8em; }
        summary { font-weight: 600; cursor: pointer; margin-bottom: 0.3em; }
        table { border-collapse: collapse; width: 100%; font-size: 0.9em; background: #fff; }
        th, td { text-align: left; padding: 0.2em 0.5em; border-bottom: 1px solid #dde; vertical-align: top; }
        td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
        td.drift { max-width: 12em; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; color: #b23b3b; }
        tr.offline td, tr.stale td { color: #b23b3b; }

        """

    static let script = #"""
        "use strict";
        // proximity-fleet's live map: /api/plan once (and again when the state's plan_version
        // changes), then /events: a whole state each second.
        const svgNS = "http://www.w3.org/2000/svg";
        const margin = 0.8;
        let plan = null, planVersion = -1, floor = null, latest = null, loadingPlan = null;
        const trails = new Map();   // device → [[t, x, y, floor]], the last 5 minutes

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
        function colour(id) { return `hsl(${hue(id)} 70% 40%)`; }
        function shortID(id) { return id.length > 13 ? id.slice(0, 8) + "…" : id; }
        function nameOf(d) { return d.name ?? shortID(d.id); }
        function ago(seconds) {
          if (seconds < 90) return `${Math.round(seconds)} s`;
          if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
          return `${Math.round(seconds / 3600)} h`;
        }
        // The plan's bounds, with a margin: the SVG's viewBox, in metres.
        function bounds() {
          let minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
          const take = (x, y) => { minX = Math.min(minX, x); maxX = Math.max(maxX, x); minY = Math.min(minY, y); maxY = Math.max(maxY, y); };
          for (const r of plan.rooms) for (const [x, y] of r.polygon) take(x, y);
          for (const n of plan.nodes) take(n.position[0], n.position[1]);
          const bg = plan.background, aspect = bg ? aspects.get(backgroundURL(bg)) : undefined;
          if (bg && aspect) { take(bg.corner[0], bg.corner[1]); take(bg.corner[0] + bg.width, bg.corner[1] + bg.width * aspect); }
          if (!isFinite(minX)) { minX = 0; minY = 0; maxX = 10; maxY = 10; }
          return { minX: minX - margin, minY: minY - margin, maxX: maxX + margin, maxY: maxY + margin };
        }
        let box = null;
        // The plan's picture: a draft's freshly sent file, else the saved one; its height over its
        // width, once the browser has read it.
        const aspects = new Map();
        function backgroundURL(bg) { return bg.data ?? `api/plan/background?v=${planVersion}`; }
        function drawBackground(g) {
          const bg = plan.background;
          if (!bg || (bg.floor ?? "") !== (floor ?? "")) return;
          const url = backgroundURL(bg);
          const aspect = aspects.get(url);
          if (aspect === undefined) {
            aspects.set(url, null);
            const image = new Image();
            image.onload = () => { aspects.set(url, image.naturalWidth ? image.naturalHeight / image.naturalWidth : 1); redrawAll(); };
            image.onerror = () => aspects.set(url, 0);
            image.src = url;
            return;
          }
          if (!aspect) return;
          const height = bg.width * aspect;
          const picture = el("image", { class: "background", href: url, x: sx(bg.corner[0]), y: sy(bg.corner[1] + height), width: bg.width, height,
                                        preserveAspectRatio: "none" });
          g.insertBefore(picture, g.firstChild);
        }
        function redrawAll() { drawPlan(); if (latest) drawState(latest); if (typeof drawDraft === "function") drawDraft(); }
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
            document.getElementById("legend").hidden = true;
            return;
          }
          svg.hidden = false;
          document.getElementById("no-plan").hidden = true;
          document.getElementById("legend").hidden = false;
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
          const rooms = plan.rooms.filter(r => r.floor === floor);
          // The house's outline: what an uncertainty is drawn within.
          const clip = el("clipPath", { id: "house" }, el("defs", {}, svg));
          const g = el("g", { class: "floor", "data-floor": floor }, svg);
          for (const r of rooms) {
            const points = r.polygon.map(([x, y]) => `${sx(x)},${sy(y)}`).join(" ");
            el("polygon", { points }, clip);
            const p = el("polygon", { class: "room", "data-room": r.name, "data-index": plan.rooms.indexOf(r), points }, g);
            el("title", {}, p).textContent = r.name;
          }
          drawBackground(g);
          el("g", { id: "trails-layer" }, g);
          el("g", { id: "uncertainty-layer", "clip-path": "url(#house)" }, g);
          el("g", { id: "nodes-layer" }, g);
          el("g", { id: "devices-layer" }, g);
          el("g", { id: "labels-layer" }, g);
          for (const r of rooms) {
            const label = el("text", { class: "room-label", "data-room": r.name }, document.getElementById("labels-layer"));
            label.textContent = r.name;
          }
          for (const n of plan.nodes.filter(n => n.floor === floor)) {
            const ng = el("g", { class: "node", "data-node": n.name, transform: `translate(${sx(n.position[0])} ${sy(n.position[1])})` },
                          document.getElementById("nodes-layer"));
            el("rect", { x: -0.14, y: -0.14, width: 0.28, height: 0.28, transform: "rotate(45)" }, ng);
            el("title", {}, ng).textContent = `node ${n.name}`;
            const t = el("text", { class: "node-label", "data-node": n.name, "data-x": sx(n.position[0]), "data-y": sy(n.position[1]) },
                         document.getElementById("labels-layer"));
            t.textContent = n.name;
          }
        }

        // Places every label where it overlaps no other label and no marker: device names first,
        // then node names, then room names (inside their room); a label with no such place is
        // hidden (the list and the marker's tooltip still name it).
        function placeLabels() {
          const svg = document.getElementById("map");
          // Labels the same size on the screen however wide the plan is drawn: CSS pixels in metres.
          // (The drawing's own scale: a map held to its height is drawn narrower than its box.)
          const perMetre = svg.getScreenCTM()?.a || 40;
          const sizes = { "room-label": 15, "device-label": 14, "node-label": 11 };
          for (const [cls, px] of Object.entries(sizes)) for (const t of svg.querySelectorAll(`text.${cls}`)) t.style.fontSize = `${px / perMetre}px`;
          const taken = [];
          const overlaps = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
          const free = r => !taken.some(t => overlaps(r, t));
          for (const dot of svg.querySelectorAll("circle.dot")) {
            const r = Number(dot.getAttribute("r")), cx = Number(dot.getAttribute("cx")), cy = Number(dot.getAttribute("cy"));
            taken.push({ x: cx - r, y: cy - r, width: 2 * r, height: 2 * r });
          }
          // A node's box in the plan's units: its diamond's box moved by the node's own translation
          // (getCTM would also scale to the screen's pixels).
          for (const n of svg.querySelectorAll("g.node")) {
            const b = n.getBBox(), m = n.transform.baseVal.consolidate()?.matrix ?? { e: 0, f: 0 };
            taken.push({ x: b.x + m.e, y: b.y + m.f, width: b.width, height: b.height });
          }
          function place(label, candidates) {
            label.style.display = "";
            const size = label.getBBox();
            for (const [x, y] of candidates(size.width, size.height)) {
              const r = { x, y, width: size.width, height: size.height };
              if (r.x < box.minX || r.y < box.minY || r.x + r.width > box.maxX || r.y + r.height > box.maxY) continue;
              if (!free(r)) continue;
              label.setAttribute("x", x); label.setAttribute("y", y);
              const placed = label.getBBox();
              const actual = { x: placed.x, y: placed.y, width: placed.width, height: placed.height };
              if (!free(actual) || actual.x < box.minX || actual.y < box.minY || actual.x + actual.width > box.maxX || actual.y + actual.height > box.maxY) continue;
              taken.push(actual);
              return true;
            }
            label.style.display = "none";
            return false;
          }
          const around = (px, py, d) => (w, h) => [[px + d, py - d - h], [px + d, py + d], [px - d - w, py - d - h], [px - d - w, py + d],
                                                   [px - w / 2, py - d - h], [px - w / 2, py + d], [px + 2 * d, py - h / 2], [px - 2 * d - w, py - h / 2]];
          for (const label of svg.querySelectorAll("text.device-label")) {
            const g = label.closest("g.device");
            const dot = g.querySelector("circle.dot");
            place(label, around(Number(dot.getAttribute("cx")), Number(dot.getAttribute("cy")), 0.22));
          }
          for (const label of svg.querySelectorAll("text.node-label")) place(label, around(Number(label.dataset.x), Number(label.dataset.y), 0.2));
          for (const label of svg.querySelectorAll("text.room-label")) {
            const room = svg.querySelector(`polygon.room[data-room="${CSS.escape(label.dataset.room)}"]`);
            const b = room.getBBox();
            place(label, (w, h) => {
              const spots = [];
              for (let j = 0; j < 8; j++) for (let i = 0; i < 8; i++) {
                const x = b.x + 0.15 + (b.width - w - 0.3) * i / 7, y = b.y + 0.15 + (b.height - h - 0.3) * j / 7;
                const corners = [[x, y], [x + w, y], [x, y + h], [x + w, y + h]].map(([cx, cy]) => new DOMPoint(cx, cy));
                if (corners.every(c => room.isPointInFill(c))) spots.push([x, y]);
              }
              return spots;
            });
          }
        }

        function drawState(state) {
          latest = state;
          document.getElementById("clock").textContent = new Date(state.devices.time * 1000).toLocaleTimeString();
          const devices = state.devices.devices;
          const now = state.devices.time;
          // Who is where: every room of the plan (or every room a device is in, without one),
          // then home in no room, then away.
          const list = document.getElementById("rooms");
          list.replaceChildren();
          const roomNames = plan ? plan.rooms.map(r => r.name) : [];
          for (const d of devices) if (!roomNames.includes(d.room) && d.room !== "home" && d.room !== "not_home") roomNames.push(d.room);
          const groups = [...roomNames.map(r => [r, r]), ["home", "Home, room not known"], ["not_home", "Away"]];
          for (const [key, title] of groups) {
            const here = devices.filter(d => d.room === key);
            if (here.length === 0 && (key === "home" || key === "not_home")) continue;
            const li = document.createElement("li");
            li.dataset.room = key;
            if (key === "not_home") li.className = "away";
            if (here.length === 0) li.classList.add("empty");
            const name = document.createElement("span");
            name.className = "room-name";
            name.textContent = title;
            li.appendChild(name);
            if (here.length === 0) li.appendChild(document.createTextNode("nobody"));
            for (const d of here) {
              const who = document.createElement("span");
              who.className = "who";
              who.dataset.device = d.id;
              const chip = document.createElement("span");
              chip.className = "chip";
              chip.style.background = colour(d.id);
              who.append(chip, document.createTextNode(nameOf(d)));
              const heard = d.readings.length ? Math.min(...d.readings.map(r => r.age)) : null;
              if (key === "not_home" || (heard !== null && heard > 60)) {
                const note = document.createElement("span");
                note.className = "note";
                note.textContent = heard === null ? "not seen lately" : `not seen for ${ago(heard)}`;
                who.appendChild(note);
              }
              who.title = `${nameOf(d)} (${d.id})` + (typeof d.since === "number" ? `, here since ${new Date(d.since * 1000).toLocaleTimeString()}` : "");
              li.appendChild(who);
            }
            list.appendChild(li);
          }
          // The map: each placed device on the floor shown.
          if (plan) {
            const layer = document.getElementById("devices-layer");
            const uncertainties = document.getElementById("uncertainty-layer");
            const labels = document.getElementById("labels-layer");
            const shown = new Set();
            const occupied = new Set();
            for (const d of devices) {
              const p = d.position;
              if (!p) { trails.delete(d.id); continue; }
              const trail = trails.get(d.id) ?? [];
              trail.push([now, p.x, p.y, p.floor ?? ""]);
              while (trail.length && now - trail[0][0] > 300) trail.shift();
              trails.set(d.id, trail);
              if ((p.floor ?? "") !== floor) continue;
              shown.add(d.id);
              if (p.room) occupied.add(p.room);
              const id = CSS.escape(d.id);
              let g = layer.querySelector(`g.device[data-device="${id}"]`);
              if (!g) {
                g = el("g", { class: "device", "data-device": d.id }, layer);
                el("circle", { class: "uncertainty", fill: colour(d.id), stroke: colour(d.id), "data-device": d.id }, uncertainties);
                el("circle", { class: "dot", r: 0.17, fill: colour(d.id) }, g);
                el("title", {}, g);
                el("text", { class: "device-label" }, g);
              }
              const [x, y] = [sx(p.x), sy(p.y)];
              g.setAttribute("data-x", p.x);
              g.setAttribute("data-y", p.y);
              g.setAttribute("data-room", p.room ?? "");
              const u = uncertainties.querySelector(`circle[data-device="${id}"]`);
              u.setAttribute("cx", x); u.setAttribute("cy", y); u.setAttribute("r", Math.max(0.2, p.uncertainty));
              const dot = g.querySelector(".dot");
              dot.setAttribute("cx", x); dot.setAttribute("cy", y);
              g.querySelector("text").textContent = nameOf(d);
              const heard = d.readings.map(r => `${r.node} ${fixed(r.distance, 1)} m (${fixed(r.age, 0)} s ago)`).join(", ");
              const since = typeof d.since === "number" ? ` since ${new Date(d.since * 1000).toLocaleTimeString()}` : "";
              const proof = d.verified === true ? " (verified with the fleet's key)" : d.verified === false ? " (not verified with the fleet's key)" : "";
              g.querySelector("title").textContent = `${nameOf(d)}${proof}: ${p.room ?? "in no room"}${since}, at ${fixed(p.x, 1)}, ${fixed(p.y, 1)} m ± ${fixed(p.uncertainty, 1)} m; heard by ${heard || "no node"}`;
            }
            for (const g of [...layer.querySelectorAll("g.device")]) if (!shown.has(g.dataset.device)) {
              uncertainties.querySelector(`circle[data-device="${CSS.escape(g.dataset.device)}"]`)?.remove();
              g.remove();
            }
            for (const r of document.querySelectorAll("polygon.room")) r.classList.toggle("occupied", occupied.has(r.dataset.room));
            const nodeTime = state.nodes.time;
            for (const g of document.querySelectorAll("g.node")) {
              const n = state.nodes.nodes.find(n => n.name === g.dataset.node);
              g.classList.toggle("offline", n?.status === "offline");
              g.classList.toggle("stale", !n || n.last_heard === undefined || nodeTime - n.last_heard > 30);
              const age = n?.last_heard === undefined ? "never heard" : `heard ${ago(Math.max(0, nodeTime - n.last_heard))} ago`;
              g.querySelector("title").textContent = `node ${g.dataset.node}: ${n?.status ?? "no status"}, ${age}, reports ${n?.devices ?? 0} device(s)`;
            }
            // Trails, on request.
            const trailLayer = document.getElementById("trails-layer");
            trailLayer.replaceChildren();
            if (document.getElementById("trails").checked) {
              for (const [id, points] of trails) {
                const here = points.filter(q => q[3] === floor);
                if (here.length < 2) continue;
                el("polyline", { class: "trail", stroke: colour(id), points: here.map(q => `${sx(q[1])},${sy(q[2])}`).join(" ") }, trailLayer);
              }
            }
            placeLabels();
          }
          // The devices' table.
          const body = document.querySelector("#devices tbody");
          body.replaceChildren();
          for (const d of devices) {
            const row = body.insertRow();
            row.dataset.device = d.id;
            const p = d.position;
            cell(row, nameOf(d));
            cell(row, d.room);
            cell(row, p ? `${fixed(p.x, 1)}, ${fixed(p.y, 1)}` : "–", "num");
            cell(row, p ? (p.floor ?? "") : "–");
            cell(row, p ? fixed(p.uncertainty, 1) : "–", "num");
            cell(row, d.readings.map(r => `${r.node} ${fixed(r.distance, 1)}`).join(", "));
            cell(row, shortID(d.id)).title = d.id;
          }
          // The nodes that report, for the editor to place.
          const names = document.getElementById("edit-node-names");
          if (names.options.length !== state.nodes.nodes.length) {
            names.replaceChildren(...state.nodes.nodes.map(n => Object.assign(document.createElement("option"), { value: n.name })));
          }
          // The nodes' health.
          const nodes = document.querySelector("#nodes tbody");
          nodes.replaceChildren();
          const nodeTime = state.nodes.time;
          for (const n of state.nodes.nodes) {
            const row = nodes.insertRow();
            row.dataset.node = n.name;
            const age = n.last_heard === undefined ? null : nodeTime - n.last_heard;
            if (n.status === "offline") row.className = "offline";
            else if (age === null || age > 30) row.className = "stale";
            cell(row, n.name + (n.in_plan ? "" : " (not in the plan)") + (n.mobile ? " (mobile)" : ""));
            cell(row, n.status ?? "–");
            cell(row, age === null ? "never" : `${ago(Math.max(0, age))} ago`, "num");
            cell(row, String(n.devices), "num");
            cell(row, fixed(n.rx_offset, 1), "num");
            cell(row, fixed(n.tx_power, 1), "num");
            cell(row, fixed(n.residual, 1), "num");
            const drift = cell(row, n.drift ? "drifting" : "", "drift");
            if (n.drift) drift.title = n.drift;
          }
          document.getElementById("calibration").textContent = typeof state.nodes.exponent === "number"
            ? `Calibration: path-loss exponent ${fixed(state.nodes.exponent, 2)}, RMS residual ${fixed(state.nodes.rms, 1)} dB.`
            : "Calibration: not fitted yet (the plan's nodes fit it from hearing each other).";
        }

        async function loadPlan(version) {
          const answer = await fetch("api/plan", { cache: "no-store" });
          if (editing) return;   // the draft stays on screen until saved or cancelled
          plan = answer.ok ? await answer.json() : null;
          planVersion = version;
          drawPlan();
          document.getElementById("editor").hidden = !(plan && plan.editable);
        }

        // The editor (proximity-fleet run --edit): a draft of the plan drawn in place of it; rooms
        // drawn corner by corner, nodes placed, either deleted; saved as the plan's YAML with
        // PUT /api/plan and the token, checked by the service as check-plan checks it.
        let editing = false, tool = null, corners = [];
        const tokenKey = "proximity-fleet-edit-token";
        function message(text) { document.getElementById("edit-message").textContent = text; }
        function setTool(name) {
          tool = name;
          corners = [];
          for (const b of document.querySelectorAll("#edit-tools button[data-tool]")) b.classList.toggle("current", b.dataset.tool === tool);
          document.getElementById("edit-finish").hidden = true;
          drawDraft();
          message({ room: "Click each corner of the room, then Finish the room.", node: "Click where the node stands.",
                    delete: "Click a room or a node to delete it.",
                    scale: "Give a length you know (Distance), then click its two ends on the picture.",
                    move: "Click a point of the picture, then where it belongs on the plan." }[tool] ?? "");
        }
        function planPoint(event) {
          const svg = document.getElementById("map");
          const p = new DOMPoint(event.clientX, event.clientY).matrixTransform(svg.getScreenCTM().inverse());
          const snap = v => Math.round(v * 10) / 10;
          return [snap(p.x), snap(box.maxY + box.minY - p.y)];
        }
        function drawDraft() {
          document.getElementById("draft-layer")?.remove();
          if (!editing || !plan || corners.length === 0) return;
          const layer = el("g", { id: "draft-layer" }, document.querySelector("#map g.floor"));
          el("polyline", { class: "draft", points: corners.map(([x, y]) => `${sx(x)},${sy(y)}`).join(" ") }, layer);
          for (const [x, y] of corners) el("circle", { class: "draft-point", cx: sx(x), cy: sy(y), r: 0.08 }, layer);
        }
        function redraw() { drawPlan(); if (latest) drawState(latest); drawDraft(); }
        function floorZ() {
          const f = plan.floors.find(f => f.name === floor);
          return f && f.z[0] > -999 ? f.z[0] + 2 : 2;
        }
        document.getElementById("map").addEventListener("click", event => {
          if (!editing || !tool) return;
          const name = document.getElementById("edit-name").value.trim();
          if (tool === "room") {
            corners.push(planPoint(event));
            document.getElementById("edit-finish").hidden = corners.length < 3;
            drawDraft();
          } else if (tool === "node") {
            if (!name) { message("Give the node its name first (the name it publishes under)."); return; }
            const [x, y] = planPoint(event);
            const old = plan.nodes.find(n => n.name === name);
            const height = Number(document.getElementById("edit-height").value);
            const z = document.getElementById("edit-height").value.trim() !== "" && isFinite(height) ? height
                    : old && old.floor === floor ? old.position[2] : floorZ();
            plan.nodes = plan.nodes.filter(n => n.name !== name);
            plan.nodes.push({ name, floor, position: [x, y, z], rx_offset: old?.rx_offset, tx_power: old?.tx_power });
            message(`Node ${name} at ${x}, ${y}.`);
            redraw();
          } else if (tool === "scale" || tool === "move") {
            const bg = plan.background;
            if (!bg) { message("Send a picture first (Picture)."); return; }
            corners.push(planPoint(event));
            drawDraft();
            if (corners.length < 2) {
              message(tool === "scale" ? "Now click the other end of a length you know." : "Now click where that point belongs.");
              return;
            }
            const [[x1, y1], [x2, y2]] = corners;
            corners = [];
            if (tool === "move") {
              bg.corner = [bg.corner[0] + x2 - x1, bg.corner[1] + y2 - y1];
              message(`Picture moved by ${(x2 - x1).toFixed(1)}, ${(y2 - y1).toFixed(1)} m.`);
            } else {
              const known = Number(document.getElementById("edit-distance").value), measured = Math.hypot(x2 - x1, y2 - y1);
              if (!(known > 0) || !(measured > 0)) { message("Give the distance between the two points (Distance, metres), then click them again."); drawDraft(); return; }
              const f = known / measured;
              bg.width *= f;
              bg.corner = [x1 + (bg.corner[0] - x1) * f, y1 + (bg.corner[1] - y1) * f];
              message(`Picture scaled: ${bg.width.toFixed(2)} m wide.`);
            }
            redraw();
          } else if (tool === "delete") {
            const target = event.target.closest("[data-room], [data-node]");
            if (!target) return;
            if (target.dataset.node) plan.nodes = plan.nodes.filter(n => n.name !== target.dataset.node);
            else plan.rooms.splice(Number(target.dataset.index), 1);
            message(`Deleted ${target.dataset.node ? "node " + target.dataset.node : "room " + target.dataset.room}.`);
            redraw();
          }
        });
        document.getElementById("edit-finish").addEventListener("click", () => {
          const name = document.getElementById("edit-name").value.trim() || `room ${plan.rooms.length + 1}`;
          plan.rooms.push({ name, floor, polygon: corners });
          message(`Room ${name}: ${corners.length} corners.`);
          corners = [];
          document.getElementById("edit-finish").hidden = true;
          redraw();
        });
        document.getElementById("edit-start").addEventListener("click", () => {
          editing = true;
          plan = JSON.parse(JSON.stringify(plan));
          document.body.classList.add("editing");
          document.getElementById("edit-start").hidden = true;
          document.getElementById("edit-tools").hidden = false;
          document.getElementById("edit-token").value = sessionStorage.getItem(tokenKey) ?? "";
          setTool("room");
        });
        async function stopEditing() {
          editing = false;
          tool = null;
          corners = [];
          document.body.classList.remove("editing");
          document.getElementById("edit-start").hidden = false;
          document.getElementById("edit-tools").hidden = true;
          await loadPlan(planVersion);
          if (latest) drawState(latest);
        }
        // The plan's picture: sent at once (stored beside the plan), named in the plan when saved;
        // placed over the rooms drawn so far, to be scaled and moved.
        async function uploadBackground(blob) {
          const token = document.getElementById("edit-token").value.trim();
          const answer = await fetch("api/plan/background", { method: "PUT", body: blob, headers: { "Authorization": `Bearer ${token}`, "Content-Type": blob.type } });
          const reply = await answer.json().catch(() => ({}));
          if (answer.status !== 200) { message(answer.status === 401 ? "Not sent: the token is not the one in the --edit-token file." : `Not sent: ${reply.error ?? answer.status}`); return false; }
          const xs = plan.rooms.flatMap(r => r.polygon.map(p => p[0])), ys = plan.rooms.flatMap(r => r.polygon.map(p => p[1]));
          const corner = xs.length ? [Math.min(...xs), Math.min(...ys)] : [0, 0];
          const width = xs.length ? Math.max(...xs) - corner[0] || 10 : 10;
          plan.background = { image: reply.image, corner, width, floor, data: URL.createObjectURL(blob) };
          message(`Picture ${reply.image} sent: scale it with a length you know, and move it onto the rooms.`);
          redraw();
          return true;
        }
        document.getElementById("edit-background").addEventListener("change", event => {
          const file = event.target.files[0];
          if (file) uploadBackground(file);
        });

        // A floor: its name (the Name field) and the heights it spans; shown at once, to draw on.
        document.getElementById("edit-floor").addEventListener("click", () => {
          const name = document.getElementById("edit-name").value.trim();
          const low = Number(document.getElementById("edit-floor-low").value), high = Number(document.getElementById("edit-floor-high").value);
          if (!name || !isFinite(low) || !isFinite(high) || document.getElementById("edit-floor-low").value.trim() === "" || !(high > low)) {
            message("A floor needs a name and the heights it spans, from below to above (metres).");
            return;
          }
          // A floor of that name already: its heights change (its rooms and nodes stay on it).
          const existing = plan.floors.find(f => f.name === name);
          if (existing) {
            existing.z = [low, high];
            floor = name;
            message(`Floor ${name} now ${low} to ${high} m.`);
            redraw();
            return;
          }
          // A plan without floors has one unnamed floor: it becomes the ground floor.
          if (plan.floors.length === 1 && plan.floors[0].name === "") {
            plan.floors[0] = { name: "ground", z: [Math.min(0, low), Math.min(3, low)] };
            for (const r of plan.rooms) r.floor = "ground";
            for (const n of plan.nodes) n.floor = "ground";
          }
          plan.floors.push({ name, z: [low, high] });
          floor = name;
          message(`Floor ${name}, ${low} to ${high} m: draw its rooms.`);
          redraw();
        });
        document.getElementById("edit-cancel").addEventListener("click", () => { message(""); document.getElementById("edit-problems").replaceChildren(); stopEditing(); });
        for (const b of document.querySelectorAll("#edit-tools button[data-tool]")) b.addEventListener("click", () => setTool(b.dataset.tool));

        // The draft as the plan file's YAML (docs/positioning.md, The floor plan), and which
        // element each line belongs to, so that a problem is shown at its element.
        function yaml() {
          const q = s => JSON.stringify(String(s));
          const n = v => Number(v.toFixed(3));
          const lines = [], owner = [];
          const add = (text, who) => { lines.push(text); owner.push(who); };
          const named = plan.floors.length > 1 || (plan.floors[0] && plan.floors[0].name !== "");
          if (named) {
            add("floors:", null);
            for (const f of plan.floors) add(`  - {name: ${q(f.name)}, z: [${n(f.z[0])}, ${n(f.z[1])}]}`, null);
          }
          add("nodes:", null);
          for (const node of plan.nodes) {
            let line = `  - {name: ${q(node.name)}, position: [${node.position.map(n).join(", ")}]`;
            if (typeof node.rx_offset === "number") line += `, rx-offset: ${n(node.rx_offset)}`;
            if (typeof node.tx_power === "number") line += `, tx-power: ${n(node.tx_power)}`;
            add(line + "}", { node: node.name });
          }
          add("rooms:", null);
          for (const room of plan.rooms) {
            add(`  - {name: ${q(room.name)}${named ? ", floor: " + q(room.floor) : ""}, polygon: [${room.polygon.map(([x, y]) => `[${n(x)}, ${n(y)}]`).join(", ")}]}`,
                { room: room.name });
          }
          if (typeof plan.path_loss_exponent === "number") { add("calibration:", null); add(`  path-loss-exponent: ${n(plan.path_loss_exponent)}`, null); }
          const bg = plan.background;
          if (bg) add(`background: {image: ${q(bg.image)}, corner: [${n(bg.corner[0])}, ${n(bg.corner[1])}], width: ${n(bg.width)}${named ? ", floor: " + q(bg.floor) : ""}}`, null);
          return { text: lines.join("\n") + "\n", owner };
        }
        document.getElementById("edit-save").addEventListener("click", async () => {
          const token = document.getElementById("edit-token").value.trim();
          sessionStorage.setItem(tokenKey, token);
          const problems = document.getElementById("edit-problems");
          problems.replaceChildren();
          for (const e of document.querySelectorAll(".problem")) e.classList.remove("problem");
          const { text, owner } = yaml();
          const answer = await fetch("api/plan", { method: "PUT", body: text, headers: { "Authorization": `Bearer ${token}`, "Content-Type": "application/yaml" } });
          if (answer.status === 200) {
            message("Saved: the fleet uses the new plan now.");
            await stopEditing();
            return;
          }
          const reply = await answer.json().catch(() => ({}));
          if (answer.status === 401) { message("Not saved: the token is not the one in the --edit-token file."); return; }
          message(`Not saved: ${reply.error ?? answer.status}`);
          for (const p of reply.problems ?? []) {
            const who = p.line ? owner[p.line - 1] : null;
            const li = document.createElement("li");
            li.textContent = (who ? (who.room ? `room ${who.room}: ` : `node ${who.node}: `) : "") + p.message;
            problems.appendChild(li);
            const target = who?.room ? document.querySelector(`polygon.room[data-room="${CSS.escape(who.room)}"]`)
                         : who?.node ? document.querySelector(`g.node[data-node="${CSS.escape(who.node)}"]`) : null;
            target?.classList.add("problem");
          }
        });

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

        document.getElementById("trails").addEventListener("change", () => { if (latest) drawState(latest); });
        // Labels keep their size on the screen: placed again when the map is drawn at another
        // width (a phone turned, a scrollbar come).
        let labelledWidth = 0;
        new ResizeObserver(() => {
          const width = document.getElementById("map").getBoundingClientRect().width;
          if (plan && latest && width !== labelledWidth) { labelledWidth = width; placeLabels(); }
        }).observe(document.getElementById("map"));

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
