// The swarm page: reads the peer's /v1/watch stream (Server-Sent Events) and draws it.
// Read-only: it sends nothing but the stream request. Every text another peer wrote (names,
// event lines) is set as textContent, never as markup, and clipped to a width (a 200-character
// name must not widen the table; the whole name is its title). A closed swarm's peer serves
// its figures from elsewhere than this machine only with the swarm's read token: the page takes
// it from its address's #token=... (never sent to the server by the browser) and passes it on.
"use strict";

(function () {
  const MAX_POINTS = 900;  // as the peer keeps (node/web/watch.py HISTORY_FRAMES)
  const MAX_EVENTS = 200;
  const NAME_CHARS = 24;  // as node/cli/status_table.py CLIP["name"]
  const GAP_S = 5;        // frames come every second: a longer pause is a gap, not a line
  const MIN_SPAN_S = 10;  // the time axis of a page with less data than this: its last 10 s
  const TOKEN = new URLSearchParams(location.hash.slice(1)).get("token");
  const PALETTE = ["#2764c5", "#d9480f", "#2b8a3e", "#ae3ec9", "#e67700", "#0b7285",
                   "#c2255c", "#5f3dc4", "#5c940d", "#862e9c", "#1864ab", "#a61e4d"];
  const SVG = "http://www.w3.org/2000/svg";

  const state = {
    times: [],            // chart x: one per frame (seconds since the epoch)
    series: new Map(),    // peer id -> {acc: [], loss: []}, aligned with `times`
    colors: new Map(),    // peer id -> colour, stable for the page's life
    names: new Map(),     // peer id -> shown name
    chart: null,
    chartKeys: "",
    events: [],
    lastEventSeq: 0,      // the feed's numbers: an event already shown is not shown again
    lastFrameAt: 0,
    self: null,           // the id of the peer serving this page
  };

  const $ = (id) => document.getElementById(id);

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function colorOf(id) {
    if (!state.colors.has(id)) state.colors.set(id, PALETTE[state.colors.size % PALETTE.length]);
    return state.colors.get(id);
  }

  function clip(text, n) {
    const t = String(text ?? "");
    return t.length <= n ? t : t.slice(0, n - 1) + "…";
  }

  function nameEl(cls, text) {
    const e = el("span", cls, clip(text, NAME_CHARS));
    if (String(text ?? "").length > NAME_CHARS) e.title = String(text);
    return e;
  }

  const pct = (x) => (x === null || x === undefined ? "-" : (100 * x).toFixed(1) + "%");
  const fix = (x, d) => (x === null || x === undefined ? "-" : Number(x).toFixed(d));

  function bytes(x) {
    if (x === null || x === undefined) return "-";
    const units = ["B", "kB", "MB", "GB"];
    let i = 0;
    while (x >= 1000 && i < units.length - 1) { x /= 1000; i++; }
    return x.toFixed(x < 10 && i ? 1 : 0) + " " + units[i];
  }

  function age(row) {
    if (row.state === "self") return "now";
    if (row.age_s === null || row.age_s === undefined) return "gossip, ≤ 2 min";
    return row.age_s < 1 ? "< 1 s" : row.age_s.toFixed(0) + " s";
  }

  function nameOf(id) {
    const n = state.names.get(id);
    return clip(n || (id ? id.slice(0, 10) : "?"), NAME_CHARS);
  }

  // --- members ----------------------------------------------------------------------------

  function drawMembers(frame) {
    const body = $("members").tBodies[0];
    const rows = [];
    for (const m of frame.members) {
      const tr = el("tr");
      tr.dataset.peer = m.peer_id;
      tr.dataset.state = m.state;
      if (m.stale) tr.classList.add("stale");
      const who = el("td");
      const sw = el("span", "swatch");
      sw.style.background = colorOf(m.peer_id);
      who.append(sw, nameEl("name", m.name || "-"), el("span", "id", m.peer_id.slice(0, 10)));
      if (m.byzantine) who.append(el("span", "tag bad", "byzantine " + m.byzantine));
      if (m.faults && m.faults !== "none") who.append(nameEl("tag", m.faults));
      const st = el("td", "state " + m.state, m.state);
      if (m.clock && typeof m.clock_s === "number") {  // its clock off ours: said, not hidden
        const off = (m.clock_s > 0 ? "+" : "") + Math.round(m.clock_s) + " s";
        const refused = m.clock === "refused";
        st.append(el("span", refused ? "tag bad" : "tag", "clock " + off + (refused ? " refused" : "")));
      }
      const ageCell = el("td", "num age", age(m));
      if (m.stale && m.why) ageCell.title = "stale: " + m.why;
      if (m.stale) ageCell.append(el("span", "tag", "stale"));
      const addr = el("td");
      addr.append(nameEl(null, m.addr || "-"));
      if (m.reach === "outbound") addr.append(el("span", "tag", "outbound-only"));
      tr.append(who, addr, el("td", null, clip(m.device || "-", 16)), st,
                el("td", "num fig", m.step ?? "-"), el("td", "num fig acc", pct(m.acc)),
                el("td", "num fig", fix(m.loss, 4)), ageCell);
      rows.push(tr);
    }
    body.replaceChildren(...rows);
  }

  function drawSwarm(frame) {
    const s = frame.swarm;
    $("f-live").textContent = s.live + " of " + s.members;
    $("f-acc").textContent = [s.acc_best, s.acc_median, s.acc_worst].map(pct).join(" / ") +
      (s.left_out ? " (" + s.left_out + " left out)" : "");
    $("f-dist").textContent = fix(s.consensus_dist, 3);
    $("f-rounds").textContent = fix(s.rounds_per_s, 1);
    $("f-bytes").textContent = s.bytes_per_s === null ? "-" : bytes(s.bytes_per_s) + "/s";
    const me = frame.members.find((m) => m.state === "self");
    if (me) $("seen-by").textContent = "the swarm as " +
      clip(me.name || me.peer_id.slice(0, 10), NAME_CHARS) + " (" + me.addr + ") sees it";
  }

  // --- chart ------------------------------------------------------------------------------

  function pushRow(t) {
    state.times.push(t);
    for (const s of state.series.values()) { s.acc.push(null); s.loss.push(null); }
  }

  function addPoint(point) {
    const last = state.times[state.times.length - 1];
    if (!point || (state.times.length && point.t <= last)) return;
    // nobody watched for a while (the peer keeps no points then), or a frame came late: a
    // row of nothing between, so that no line bridges the time it does not know
    if (state.times.length && point.t - last > GAP_S) pushRow(last + 1);
    state.times.push(point.t);
    for (const id of Object.keys(point.values)) {
      if (!state.series.has(id)) {
        state.series.set(id, {
          acc: new Array(state.times.length - 1).fill(null),
          loss: new Array(state.times.length - 1).fill(null),
        });
      }
    }
    for (const [id, s] of state.series) {
      const v = point.values[id];
      s.acc.push(v ? 100 * v[0] : null);
      s.loss.push(v ? v[1] : null);
    }
    if (state.times.length > MAX_POINTS) {
      state.times.shift();
      for (const s of state.series.values()) { s.acc.shift(); s.loss.shift(); }
    }
  }

  // The time axis spans the data, never more: a page opened cold has one point, and uPlot's
  // own range for it ran from 2027 to 2029. Under 10 s of data: the last 10 s.
  function timeRange(u, min, max) {
    const t = state.times;
    if (!t.length) { const now = Date.now() / 1000; return [now - MIN_SPAN_S, now]; }
    const lo = t[0], hi = t[t.length - 1];
    return hi - lo >= MIN_SPAN_S ? [lo, hi] : [hi - MIN_SPAN_S, hi];
  }

  function chartData() {
    const data = [state.times];
    for (const s of state.series.values()) data.push(s.acc, s.loss);
    return data;
  }

  function drawChart() {
    const box = $("chart");
    const keys = [...state.series.keys()].join(",") + "|" + [...state.names.values()].join(",");
    const width = Math.max(300, box.clientWidth);
    if (!state.chart || keys !== state.chartKeys) {
      if (state.chart) state.chart.destroy();
      const series = [{}];
      for (const id of state.series.keys()) {
        const c = colorOf(id);
        // no spanGaps: a stale or dead peer's missing figures are a gap in its line
        series.push({ label: nameOf(id) + " acc", stroke: c, width: 2, scale: "%",
                      value: (u, v) => (v === null ? "-" : v.toFixed(1) + "%") });
        series.push({ label: nameOf(id) + " loss", stroke: c, width: 1, dash: [5, 4],
                      scale: "loss", value: (u, v) => (v === null ? "-" : v.toFixed(3)) });
      }
      state.chart = new uPlot({
        width, height: 300, series,
        scales: { x: { time: true, range: timeRange }, "%": { range: [0, 100] },
                  loss: { auto: true } },
        axes: [{}, { scale: "%", label: "accuracy %" },
               { scale: "loss", side: 1, label: "loss", grid: { show: false } }],
        legend: { live: false },
      }, chartData(), box);
      state.chartKeys = keys;
    } else {
      state.chart.setData(chartData());
      if (Math.abs(state.chart.width - width) > 20) state.chart.setSize({ width, height: 300 });
    }
    $("chart-points").textContent = state.times.length + " points";
    $("chart").dataset.points = String(state.times.length);
    const x = state.chart.scales.x;  // what the axis spans, in seconds (the browser test reads it)
    if (x.min !== null && x.max !== null) $("chart").dataset.span = String(Math.round(x.max - x.min));
  }

  // --- exchange graph ---------------------------------------------------------------------

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function freeSpot(p, q, width, placed) {
    let best = null;
    for (const t of [0.5, 0.3, 0.7, 0.2, 0.8]) {
      const x = p[0] + t * (q[0] - p[0]), y = p[1] + t * (q[1] - p[1]);
      const clear = placed.every(([x2, y2, w2]) =>
        Math.abs(x - x2) > (width + w2) / 2 + 4 || Math.abs(y - y2) > 13);
      if (clear) return [x, y];
      if (!best) best = [x, y];
    }
    return best;
  }

  function drawGraph(frame) {
    const g = $("graph");
    const W = 420, H = 320, cx = W / 2, cy = H / 2, r = Math.min(W, H) / 2 - 40;
    const nodes = frame.members;
    const pos = new Map();
    nodes.forEach((m, i) => {
      const a = -Math.PI / 2 + (2 * Math.PI * i) / Math.max(1, nodes.length);
      pos.set(m.peer_id, [cx + r * Math.cos(a), cy + r * Math.sin(a)]);
    });
    const parts = [], labels = [], placed = [];
    for (const e of frame.edges) {
      const p = pos.get(e.a), q = pos.get(e.b);
      if (!p || !q) continue;
      const w = 1 + Math.min(6, Math.log10(1 + (e.bytes_per_s || 0) / 1000));
      const line = svg("line", { x1: p[0], y1: p[1], x2: q[0], y2: q[1], class: "edge",
                                  "stroke-width": w.toFixed(1) });
      const label = [e.rtt_ms !== undefined ? fix(e.rtt_ms, 1) + " ms" : null,
                     e.mbit_s !== undefined ? fix(e.mbit_s, 0) + " Mbit/s" : null,
                     bytes(e.bytes_per_s) + "/s"].filter(Boolean).join(" · ");
      line.append(svg("title", {}, nameOf(e.a) + " ↔ " + nameOf(e.b) + ": " + label +
                      ", last " + fix(e.ago_s, 0) + " s ago"));
      // at the middle of the line, or further along it where that spot is taken: the chords
      // of four peers cross in the middle, and lines from one node start close together
      const width = 5.5 * label.length, spot = freeSpot(p, q, width, placed);
      placed.push([spot[0], spot[1], width]);
      parts.push(line);
      labels.push(svg("text", { x: spot[0], y: spot[1] - 3, "text-anchor": "middle",
                                class: "edge-label" }, label));
    }
    parts.push(...labels);  // over every line
    for (const m of nodes) {
      const [x, y] = pos.get(m.peer_id);
      const dead = m.state === "dead" || m.state === "left";
      parts.push(svg("circle", { cx: x, cy: y, r: 14, fill: dead ? "#fff" : colorOf(m.peer_id),
                                 stroke: dead ? "#c0392b" : "#1d232b",
                                 "stroke-dasharray": dead ? "3 2" : "none" }));
      parts.push(svg("text", { x, y: y + 30, "text-anchor": "middle", class: "node-label" },
                     clip(m.name || m.peer_id.slice(0, 8), 16) + (dead ? " (" + m.state + ")" : "")));
    }
    g.replaceChildren(...parts);
    g.dataset.edges = String(frame.edges.length);
  }

  // --- events -----------------------------------------------------------------------------

  function addEvents(list) {
    const ol = $("events");
    for (const e of list) {
      if (e.seq <= state.lastEventSeq) continue;  // a frame may repeat what the hello had
      state.lastEventSeq = e.seq;
      const li = el("li");
      li.dataset.kind = e.kind;
      li.dataset.peer = e.peer;
      const t = new Date(e.t * 1000).toLocaleTimeString([], { hour12: false });
      li.append(el("span", "time", t), nameEl("who", e.name || nameOf(e.peer)),
                el("span", "what", clip(e.text, 160)));
      if (e.claim) {
        li.classList.add("claim");
        const by = el("span", "by", " (its own claim)");
        by.title = "what that peer reports of itself, not what this peer saw";
        li.append(by);
      } else if (e.at && e.at !== e.peer && e.at !== state.self) {
        li.append(el("span", "by", " (seen by " + (e.at_name || nameOf(e.at)) + ")"));
      }
      ol.prepend(li);
    }
    while (ol.children.length > MAX_EVENTS) ol.lastElementChild.remove();
  }

  // --- the stream -------------------------------------------------------------------------

  function take(frame, hello) {
    state.self = frame.self;
    for (const m of frame.members) state.names.set(m.peer_id, m.name || m.peer_id.slice(0, 10));
    if (hello) {
      state.times = [];
      state.series = new Map();
      state.lastEventSeq = 0;
      $("events").replaceChildren();
      for (const p of frame.history || []) addPoint(p);
    } else {
      addPoint(frame.point);
    }
    drawSwarm(frame);
    drawMembers(frame);
    drawChart();
    drawGraph(frame);
    addEvents(frame.events || []);
    state.lastFrameAt = Date.now();
    setLink(true);
  }

  function setLink(up, why) {
    const link = $("link");
    link.className = "link " + (up ? "up" : "down");
    link.textContent = up ? "live" : (why || "reconnecting…");
  }

  function connect() {
    const source = new EventSource("/v1/watch" + (TOKEN ? "?token=" + encodeURIComponent(TOKEN) : ""));
    source.addEventListener("hello", (ev) => take(JSON.parse(ev.data), true));
    source.onmessage = (ev) => take(JSON.parse(ev.data), false);
    source.onerror = () => { setLink(false); explain(source); };
  }

  // An EventSource does not say why it failed: ask once, to tell a closed swarm (401) or a
  // full house (503) from a peer that is gone.
  function explain(source) {
    const headers = TOKEN ? { Authorization: "Bearer " + TOKEN } : {};
    fetch("/v1/watch/now", { headers }).then((r) => {
      if (r.status === 401) {
        source.close();
        setLink(false, TOKEN ? "wrong read token" : "closed swarm: open this page with " +
                "#token=… (swarmnode status --secret S --token)");
      } else if (r.status === 503) {
        setLink(false, "no seat free: retrying");
      }
    }).catch(() => {});
  }

  // A frame a second: none for 5 s means the peer (or the way to it) is gone.
  setInterval(() => {
    if (state.lastFrameAt && Date.now() - state.lastFrameAt > 5000) {
      setLink(false, "no frame for " + Math.round((Date.now() - state.lastFrameAt) / 1000) + " s");
    }
  }, 1000);
  window.addEventListener("resize", () => state.chart && drawChart());
  connect();
})();
