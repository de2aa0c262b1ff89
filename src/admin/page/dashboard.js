// The live dashboard: subscribes to /events (a snapshot of every worker's
// timer lists, connections and counters, pushed while this page is open),
// draws each timer list as a track of its timers' ages, and keeps 60 s of
// rolling charts. Plain DOM and canvas: no library, nothing fetched from
// elsewhere.
"use strict";

const WINDOW_MS = 60_000;
// Orange (#f0883e) means ref'd and blue (#58a6ff) unref'd, as on the tracks,
// and nothing else; teal is requests (requests/s, reading, reuse gaps).
const COLORS = ["#39c5cf", "#3fb950", "#8b949e", "#d2a8ff", "#bc8cff"];
// One colour per close cause, whichever causes are on screen.
const CAUSE_COLORS = {
  client: "#d2a8ff", keep_alive_timeout: "#79c0ff", headers_timeout: "#e3b341",
  request_timeout: "#db61a2", inactivity: "#a5d6ff", evicted: "#ff7b72",
  bad_request: "#ffa198", reset: "#f85149", done: "#56d364", shutdown: "#8b949e",
  error: "#bc8cff", test_control: "#7ee787",
};
const OTHER_CAUSE_COLOR = "#c9d1d9";

const state = {
  view: null,        // the latest snapshot document
  receivedAt: 0,     // performance.now() when it arrived
  history: [],       // {t, view} over the last WINDOW_MS
  rows: new Map(),   // row key -> {row, canvas, cells}
};

const $ = (id) => document.getElementById(id);

// ---------- formatting ----------

function duration(ms) {
  if (ms === null || ms === undefined) return "off";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${+s.toFixed(s < 10 ? 1 : 0)} s`;
  const m = Math.floor(s / 60), r = Math.round(s % 60);
  return r ? `${m} min ${r} s` : `${m} min`;
}

function plural(n, one, many) { return `${n} ${n === 1 ? one : many}`; }

/// A time as the Date header tells it: 24-hour, UTC, named.
function clock(ms) { return `${new Date(ms).toISOString().slice(11, 19)} UTC`; }

// ---------- the feed ----------

function connect() {
  const query = new URLSearchParams(location.search);
  const interval = query.get("interval");
  const feed = new EventSource(interval ? `/events?interval=${encodeURIComponent(interval)}` : "/events");
  feed.onopen = () => setStatus("live", "live");
  feed.onerror = () => {
    // What is on screen is what the server said last: dim it, say since when.
    document.body.classList.add("stale");
    const since = state.view ? `no answer since ${clock(state.view.at_ms)}; figures below are from then` : "no answer";
    setStatus("down", `reconnecting… ${since}`);
  };
  feed.onmessage = (event) => {
    let view;
    try { view = JSON.parse(event.data); } catch (e) { return; }
    const now = performance.now();
    state.view = view;
    state.receivedAt = now;
    document.body.classList.remove("stale");
    state.history.push({ t: now, view: compact(view) });
    while (state.history.length && now - state.history[0].t > WINDOW_MS + 2000) state.history.shift();
    render(view);
  };
}

function setStatus(kind, text) {
  const status = $("status");
  status.className = `status ${kind}`;
  status.textContent = text;
}

/// What the charts need of a snapshot (the full one is large).
function compact(view) {
  return {
    connections: view.total.connections,
    responses: view.counters.responses,
    closed: view.counters.closed,
    lateness: view.counters.lateness_counts,
  };
}

// ---------- summary cards ----------

function render(view) {
  const total = view.total;
  const workers = view.workers.length;
  $("status").textContent = `live · ${plural(workers, "worker", "workers")} · updated ${clock(view.at_ms)}` +
    (view.stopping ? " · shutting down" : "");

  const listening = total.accepting;
  $("alive").textContent = total.stays_alive
    ? `stays alive: yes (${[listening ? "listener open" : null, total.ref_count ? plural(total.ref_count, "ref'd timer", "ref'd timers") : null].filter(Boolean).join(" + ")})`
    : "stays alive: no (nothing ref'd)";
  $("alive-detail").textContent = `ref count ${total.ref_count} of ${plural(total.timers, "timer", "timers")}. ` +
    (total.ref_count === 0
      ? "Asked to stop now, it would exit at once: idle sockets and the Date tick are unref'd."
      : `Asked to stop now, it would wait until these ${plural(total.ref_count, "ref'd timer is", "ref'd timers are")} gone: each request in flight holds one or two (connections now: ${total.connections.reading} reading, ${total.connections.writing} writing).`);

  const c = total.connections;
  $("connections").textContent = `${c.reading + c.writing + c.idle + c.closing} open`;
  $("connections-detail").textContent = `${c.idle} idle · ${c.reading} reading · ${c.writing} writing · ${c.closing} closing`;

  const t = view.workers.length ? view.workers[0].timeouts : null;
  const dl = $("timeouts");
  dl.replaceChildren();
  if (t) {
    const entries = [
      ["keep-alive", t.keep_alive_advertised_s === null ? "off" : `${t.keep_alive_advertised_s} s advertised, closed at ${duration(t.keep_alive_ms)}`],
      ["headers", duration(t.headers_ms)],
      ["inactivity", duration(t.inactivity_ms)],
      ["request", duration(t.request_ms)],
      ["shutdown", duration(t.shutdown_ms)],
    ];
    for (const [name, value] of entries) {
      const dt = document.createElement("dt"); dt.textContent = name;
      const dd = document.createElement("dd"); dd.textContent = value;
      dl.append(dt, dd);
    }
  }
  const dates = [...new Set(view.workers.map((w) => w.date).filter(Boolean))];
  $("date").textContent = dates.length ? dates.join(" / ") : "none cached (no response in the last second)";

  renderLists(view);
  renderPeers(view.peers);
}

// ---------- timer list rows ----------

/// The Date header's tick re-arms at each second boundary with whatever
/// is left of the second, so it lands in a list of a new duration each
/// time (one per worker, too): shown as one `date` row (the label /timers
/// and the README use), however many lists hold it.
function withOneDateRow(lists) {
  const dates = lists.filter((l) => l.label === "date");
  if (dates.length === 0) return lists;
  const row = {
    ...dates[0],
    label: "date",
    tick: true,
    duration_ms: Math.max(...dates.map((l) => l.duration_ms)),
    length: dates.reduce((n, l) => n + l.length, 0),
    next_expiry_in_ms: Math.min(...dates.map((l) => l.next_expiry_in_ms)),
    ages_ms: dates.flatMap((l) => l.ages_ms),
    holds: [{ kind: "date", count: dates.reduce((n, l) => n + l.length, 0) }],
  };
  return [row, ...lists.filter((l) => l.label !== "date")];
}

function renderLists(view) {
  const scopes = [{ key: "total", title: "All workers", lists: withOneDateRow(view.total.lists) }];
  if (view.workers.length > 1) {
    for (const w of view.workers) scopes.push({ key: `worker-${w.worker}`, title: `Worker ${w.worker}`, lists: withOneDateRow(w.lists) });
  }
  const container = $("lists");
  const seen = new Set();
  for (const scope of scopes) {
    let section = document.getElementById(`scope-${scope.key}`);
    if (!section) {
      section = document.createElement("div");
      section.id = `scope-${scope.key}`;
      const h = document.createElement("h3");
      h.textContent = scope.title;
      const table = document.createElement("table");
      table.className = "lists";
      table.innerHTML = "<thead><tr><th>holds</th><th>duration</th><th>length</th><th>ref</th><th>next expiry in</th><th>timers by age (0 → duration)</th></tr></thead><tbody></tbody>";
      const empty = document.createElement("p");
      empty.className = "empty";
      empty.textContent = "no timers: this loop sleeps until the next event";
      section.append(h, table, empty);
      container.append(section);
    }
    const tbody = section.querySelector("tbody");
    section.querySelector(".empty").hidden = scope.lists.length > 0;
    section.querySelector("table").hidden = scope.lists.length === 0;
    for (const list of scope.lists) {
      const key = `${scope.key}/${list.tick ? "date" : list.duration_ms}`;
      seen.add(key);
      let entry = state.rows.get(key);
      if (!entry) {
        entry = makeRow(scope.key, list);
        state.rows.set(key, entry);
      }
      tbody.append(entry.row); // keeps rows in duration order
      fillRow(entry, list);
    }
  }
  for (const [key, entry] of state.rows) {
    if (!seen.has(key)) {
      entry.row.remove();
      state.rows.delete(key);
    }
  }
}

function makeRow(scope, list) {
  const row = document.createElement("tr");
  row.dataset.scope = scope;
  row.dataset.duration = list.duration_ms;
  const cells = {};
  for (const name of ["label", "duration", "length", "ref", "next", "track"]) {
    const td = document.createElement("td");
    td.className = name;
    row.append(td);
    cells[name] = td;
  }
  cells.length.classList.add("num");
  cells.next.classList.add("num");
  const canvas = document.createElement("canvas");
  canvas.className = "track";
  cells.track.append(canvas);
  return { row, canvas, cells, list };
}

function fillRow(entry, list) {
  entry.list = list;
  const { row, cells } = entry;
  row.dataset.label = list.label;
  cells.label.textContent = list.label;
  cells.label.title = list.holds.map((h) => `${h.kind}: ${h.count}`).join(", ");
  cells.duration.textContent = list.tick ? "to the next second" : duration(list.duration_ms);
  cells.length.textContent = String(list.length);
  cells.ref.textContent = list.refed ? `ref'd (${list.refed_timers})` : "unref'd";
  cells.ref.className = `ref ${list.refed ? "refed" : "unrefed"}`;
}

// ---------- animation: countdowns and tracks ----------

function frame() {
  const elapsed = state.view ? performance.now() - state.receivedAt : 0;
  for (const entry of state.rows.values()) {
    const left = entry.list.next_expiry_in_ms - elapsed;
    entry.cells.next.textContent = left > 0 ? duration(left) : "due";
    drawTrack(entry.canvas, entry.list, elapsed);
  }
  drawCharts();
  requestAnimationFrame(frame);
}

function fitCanvas(canvas) {
  const ratio = window.devicePixelRatio || 1;
  const w = Math.max(1, Math.round(canvas.clientWidth * ratio));
  const h = Math.max(1, Math.round(canvas.clientHeight * ratio));
  if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  return { ctx, w: canvas.clientWidth, h: canvas.clientHeight };
}

function drawTrack(canvas, list, elapsed) {
  const { ctx, w, h } = fitCanvas(canvas);
  ctx.clearRect(0, 0, w, h);
  ctx.fillStyle = "#21262d";
  ctx.fillRect(0, h / 2 - 2, w, 4);
  const span = list.duration_ms || 1;
  // The rest (past the sample): shaded bars by age bucket.
  if (list.rest.length) {
    const most = Math.max(...list.rest);
    const bw = w / list.rest.length;
    list.rest.forEach((count, i) => {
      if (!count) return;
      const bh = Math.max(2, (h - 4) * Math.sqrt(count / most));
      ctx.fillStyle = "rgba(88,166,255,0.28)";
      ctx.fillRect(i * bw, h - bh, Math.max(1, bw - 1), bh);
    });
  }
  // The sample: one mark per timer at its age, aged on between snapshots.
  ctx.fillStyle = list.refed ? "#f0883e" : "#58a6ff";
  for (const age of list.ages_ms) {
    const x = Math.min(w - 1, ((age + elapsed) / span) * w);
    ctx.fillRect(x - 1, 3, 2, h - 6);
  }
  ctx.fillStyle = "#8b949e";
  ctx.fillRect(w - 1, 0, 1, h);
}

// ---------- rolling charts ----------

function series(fn) {
  const points = [];
  const hist = state.history;
  for (let i = 0; i < hist.length; i++) {
    const y = fn(hist, i);
    if (y !== undefined) points.push({ t: hist[i].t, y });
  }
  return points;
}

/// The sample about a second before sample `i` (for rates).
function secondBefore(hist, i) {
  let j = i - 1;
  while (j > 0 && hist[i].t - hist[j].t < 1000) j--;
  return j >= 0 && hist[i].t > hist[j].t ? j : -1;
}

function rate(pick) {
  return (hist, i) => {
    const j = secondBefore(hist, i);
    if (j < 0) return undefined;
    return Math.max(0, (pick(hist[i].view) - pick(hist[j].view)) * 1000 / (hist[i].t - hist[j].t));
  };
}

/// Quantile q of the timers that fired between two snapshots, from the
/// lateness histogram (bucket upper bounds in µs), in ms; null if none fired.
function latenessQuantile(q) {
  return (hist, i) => {
    const j = secondBefore(hist, i);
    if (j < 0) return undefined;
    const bounds = state.view.counters.lateness_bounds_us;
    const a = hist[j].view.lateness, b = hist[i].view.lateness;
    const counts = b.map((n, k) => n - (a[k] || 0));
    const total = counts.reduce((s, n) => s + n, 0);
    if (total <= 0) return null;
    let seen = 0;
    for (let k = 0; k < counts.length; k++) {
      seen += counts[k];
      if (seen >= q * total) {
        const upper = k < bounds.length ? bounds[k] : bounds[bounds.length - 1] * 2;
        const lower = k > 0 ? bounds[k - 1] : 0;
        const within = counts[k] ? (q * total - (seen - counts[k])) / counts[k] : 1;
        return (lower + (upper - lower) * within) / 1000;
      }
    }
    return null;
  };
}

/// One chart: its axes always, its lines as far as they are known (a
/// line of one point, as at page load, is a dot), and while no line has a
/// point, `waiting` in the middle.
function drawChart(id, lines, waiting) {
  const canvas = $(`chart-${id}`);
  const { ctx, w, h } = fitCanvas(canvas);
  ctx.clearRect(0, 0, w, h);
  const now = performance.now();
  const pad = { l: 40, r: 6, t: 6, b: 16 };
  let max = 0;
  for (const line of lines) for (const p of line.points) if (p.y !== null) max = Math.max(max, p.y);
  max = niceCeil(max);
  ctx.strokeStyle = "#30363d"; ctx.fillStyle = "#8b949e"; ctx.font = "11px system-ui, sans-serif";
  ctx.lineWidth = 1;
  for (let k = 0; k <= 2; k++) {
    const y = pad.t + (h - pad.t - pad.b) * (1 - k / 2);
    ctx.beginPath(); ctx.moveTo(pad.l, y); ctx.lineTo(w - pad.r, y); ctx.stroke();
    ctx.fillText(shortNumber(max * k / 2), 2, y + 4);
  }
  ctx.fillText("-60 s", pad.l, h - 3);
  ctx.fillText("now", w - pad.r - 22, h - 3);
  const x = (t) => pad.l + (w - pad.l - pad.r) * (1 - (now - t) / WINDOW_MS);
  const y = (v) => pad.t + (h - pad.t - pad.b) * (1 - (max ? v / max : 0));
  let drawn = 0;
  lines.forEach((line) => {
    ctx.strokeStyle = line.color; ctx.fillStyle = line.color; ctx.lineWidth = 1.6;
    const shown = line.points.filter((p) => p.y !== null && now - p.t <= WINDOW_MS);
    drawn += shown.length;
    if (shown.length === 1) {
      ctx.beginPath(); ctx.arc(x(shown[0].t), y(shown[0].y), 3, 0, 2 * Math.PI); ctx.fill();
      return;
    }
    ctx.beginPath();
    let drawing = false;
    for (const p of line.points) {
      if (p.y === null || now - p.t > WINDOW_MS) { drawing = false; continue; }
      if (drawing) ctx.lineTo(x(p.t), y(p.y)); else ctx.moveTo(x(p.t), y(p.y));
      drawing = true;
    }
    ctx.stroke();
  });
  if (!drawn) {
    ctx.fillStyle = "#8b949e"; ctx.textAlign = "center";
    ctx.fillText(waiting, pad.l + (w - pad.l - pad.r) / 2, pad.t + (h - pad.t - pad.b) / 2);
    ctx.textAlign = "start";
  }
}

function niceCeil(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function shortNumber(v) {
  if (v >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (v >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  return `${+v.toFixed(v < 10 ? 1 : 0)}`;
}

function keys(id, lines) {
  const box = $(`keys-${id}`);
  const text = lines.map((l) => l.name).join("|");
  if (box.dataset.names === text) return;
  box.dataset.names = text;
  box.replaceChildren(...lines.map((l) => {
    const span = document.createElement("span");
    span.textContent = l.name;
    span.style.setProperty("--key", l.color);
    return span;
  }));
}

function drawCharts() {
  if (!state.view) {
    for (const id of ["states", "rps", "closes", "lateness"]) drawChart(id, [], "waiting for the first snapshot");
    return;
  }
  const states = ["reading", "writing", "idle"].map((s, k) => ({
    name: s, color: COLORS[k], points: series((hist, i) => hist[i].view.connections[s]),
  }));
  const rps = [{ name: "requests/s", color: COLORS[0], points: series(rate((v) => v.responses)) }];
  // Causes that happened in the window, or the usual ones.
  const last = state.history[state.history.length - 1].view.closed;
  const first = state.history[0].view.closed;
  const active = Object.keys(last).filter((c) => last[c] > first[c]);
  const causes = (active.length ? active : ["keep_alive_timeout", "client"]).map((cause) => ({
    name: cause.replaceAll("_", " "), color: CAUSE_COLORS[cause] || OTHER_CAUSE_COLOR,
    points: series(rate((v) => v.closed[cause])),
  }));
  const lateness = [
    { name: "p50", color: COLORS[1], points: series(latenessQuantile(0.5)) },
    { name: "p99", color: COLORS[4], points: series(latenessQuantile(0.99)) },
  ];
  // Rates need two snapshots a second apart; lateness, a timer firing.
  const rates = "from a second after load";
  for (const [id, lines, waiting] of [
    ["states", states, ""], ["rps", rps, rates], ["closes", causes, rates],
    ["lateness", lateness, "no timer fired in the window"],
  ]) {
    drawChart(id, lines, waiting);
    keys(id, lines);
  }
}

connect();
requestAnimationFrame(frame);

// ---------- who closes first ----------

const SVG_NS = "http://www.w3.org/2000/svg";

function svgEl(name, attrs) {
  const el = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

/// One peer's idle boundary on a shared axis of `scaleMs`: the server's
/// advertised (dashed) and real (solid) timeouts, the client's estimated
/// timeout (a diamond) and its reuse gaps (a bar from median to longest).
function peerAxis(peer, server, scaleMs) {
  const svg = svgEl("svg", { viewBox: "0 0 400 44", preserveAspectRatio: "none" });
  const x = (ms) => 4 + (392 * Math.min(ms, scaleMs)) / scaleMs;
  svg.append(svgEl("line", { x1: 4, x2: 396, y1: 30, y2: 30, stroke: "#30363d" }));
  const gaps = peer.reuse_gap_ms;
  if (gaps.max !== null) {
    const from = x(gaps.p50 ?? gaps.max), to = x(gaps.max);
    svg.append(svgEl("rect", { x: from, y: 24, width: Math.max(2, to - from), height: 12, fill: "#39c5cf", opacity: 0.7 }));
  }
  if (server.advertised_timeout_s !== null) {
    const at = x(server.advertised_timeout_s * 1000);
    svg.append(svgEl("line", { x1: at, x2: at, y1: 6, y2: 40, stroke: "#8b949e", "stroke-dasharray": "3 3" }));
  }
  const real = x(server.idle_timeout_ms);
  svg.append(svgEl("line", { x1: real, x2: real, y1: 6, y2: 40, stroke: "#e6edf3", "stroke-width": 2 }));
  if (peer.client_idle_timeout_ms !== null) {
    const at = x(peer.client_idle_timeout_ms);
    const color = peer.client_idle_timeout_ms < server.idle_timeout_ms ? "#3fb950" : "#ff7b72";
    svg.append(svgEl("path", { d: `M ${at} 4 L ${at + 6} 12 L ${at} 20 L ${at - 6} 12 Z`, fill: color }));
  }
  const label = svgEl("text", { x: 396, y: 12, "text-anchor": "end", fill: "#8b949e", "font-size": 10 });
  label.textContent = duration(scaleMs);
  svg.append(label);
  return svg;
}

function renderPeers(report) {
  const box = $("peers");
  if (!report || !report.peers.length) {
    box.replaceChildren(Object.assign(document.createElement("p"), { className: "empty", textContent: "no client seen yet" }));
    return;
  }
  const server = report.server;
  let scaleMs = server.idle_timeout_ms;
  for (const p of report.peers) {
    scaleMs = Math.max(scaleMs, p.client_idle_timeout_ms ?? 0, p.reuse_gap_ms.max ?? 0);
  }
  scaleMs = niceCeil(scaleMs * 1.1);
  const table = document.createElement("table");
  table.className = "peers";
  const head = table.createTHead().insertRow();
  for (const title of ["client", "verdict", "idle boundary (0 to the right end)", "closes", "reuses", "advice"]) {
    const th = document.createElement("th");
    th.textContent = title;
    head.append(th);
  }
  const body = table.createTBody();
  for (const p of report.peers) {
    const row = body.insertRow();
    row.dataset.addr = p.addr;
    const who = p.client ? ` · ${p.client}` : "";
    row.insertCell().innerHTML = `<span class="mono">${p.addr}</span><br><span class="dim">${plural(p.connections, "connection", "connections")}, ${plural(p.requests, "request", "requests")}${who}</span>`;
    const verdict = document.createElement("span");
    verdict.className = `verdict ${p.verdict === "at risk" ? "risk" : p.verdict}`;
    verdict.textContent = p.verdict;
    row.insertCell().append(verdict);
    const axis = row.insertCell();
    axis.className = "axis";
    axis.append(peerAxis(p, server, scaleMs));
    const estimate = p.client_idle_timeout_ms !== null
      ? `closes idle at ${p.client_idle_timeout_is_upper_bound ? "most " : ""}~${duration(p.client_idle_timeout_ms)}`
      : p.client_idle_closes > 0 ? "closes idle at no steady age" : "never closed an idle one";
    row.insertCell().innerHTML = `${estimate}<br><span class="dim">client ${p.client_idle_closes} · server ${p.server_idle_closes}</span>`;
    const gap = p.reuse_gap_ms.max === null ? "none" : `waited up to ${duration(p.reuse_gap_ms.max)}`;
    row.insertCell().innerHTML = `${gap}<br><span class="dim">${plural(p.near_misses, "near miss", "near misses")} · ${plural(p.late_requests, "late request", "late requests")}</span>`;
    const advice = row.insertCell();
    advice.className = "advice";
    advice.textContent = p.advice;
  }
  box.replaceChildren(table);
}
