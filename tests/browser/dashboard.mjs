// Drives the admin dashboard in real Chromium (Debian's, headless) for
// tests/dashboard.rs: opens N idle keep-alive connections to the server,
// waits until the page's text shows the keep-alive list holding N, closes
// some and waits for the count to follow, checks the console stayed clean,
// and saves a screenshot.
//
// node dashboard.mjs ADMIN_URL SERVER_PORT N CLOSE SCREENSHOT
import { chromium } from "playwright-core";
import net from "node:net";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const [adminUrl, serverPort, nArg, closeArg, screenshot] = process.argv.slice(2);
const N = Number(nArg), CLOSE = Number(closeArg);
const TIMEOUT = 30_000;

/// One persistent connection that has had `GET /` answered.
function idleConnection() {
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(serverPort), "127.0.0.1");
    let got = "";
    socket.setEncoding("latin1");
    socket.on("error", reject);
    socket.on("connect", () => socket.write("GET / HTTP/1.1\r\nHost: t\r\n\r\n"));
    socket.on("data", (chunk) => {
      got += chunk;
      if (got.includes("Hello, World!")) resolve(socket);
    });
  });
}

/// A connection that sends `bytes` (maybe nothing) and then waits.
function rawConnection(bytes) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(serverPort), "127.0.0.1");
    socket.on("error", reject);
    socket.on("connect", () => {
      if (bytes) socket.write(bytes);
      resolve(socket);
    });
  });
}

/// A client at `from` that keeps its idle connection past the server's
/// (a `ka=500ms` control) and reuses it 40 ms late: a late request.
function lateRequest(from) {
  return new Promise((resolve, reject) => {
    // Half-open allowed: like a pool that has not noticed the server's FIN.
    const socket = net.connect({ port: Number(serverPort), host: "127.0.0.1", localAddress: from, allowHalfOpen: true });
    socket.setEncoding("latin1");
    socket.on("error", () => resolve());
    socket.on("close", () => resolve());
    socket.on("connect", () => socket.write("GET /?ka=500ms HTTP/1.1\r\nHost: t\r\n\r\n"));
    socket.once("data", () => {
      setTimeout(() => socket.write("GET / HTTP/1.1\r\nHost: t\r\n\r\n"), 540);
      setTimeout(() => socket.destroy(), 900);
    });
  });
}

/// A client at `from` that closes its idle connection after `ms`.
function closeAfter(from, ms) {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port: Number(serverPort), host: "127.0.0.1", localAddress: from });
    socket.on("error", reject);
    socket.on("connect", () => socket.write("GET / HTTP/1.1\r\nHost: t\r\n\r\n"));
    socket.once("data", () => setTimeout(() => { socket.end(); resolve(); }, ms));
  });
}

/// The verdict the "Who closes first" table shows for `addr`, or null.
async function verdictOf(page, addr) {
  return page.evaluate((addr) => {
    const row = document.querySelector(`table.peers tr[data-addr="${addr}"]`);
    return row ? row.querySelector(".verdict").textContent : null;
  }, addr);
}

/// The text of the all-workers keep-alive row's length cell, or null.
async function keepAliveLength(page) {
  return page.evaluate(() => {
    const row = document.querySelector('tr[data-scope="total"][data-label="keep-alive"]');
    return row ? row.querySelector("td.length").textContent : null;
  });
}

async function waitForLength(page, want) {
  const deadline = Date.now() + TIMEOUT;
  let last = null;
  while (Date.now() < deadline) {
    last = await keepAliveLength(page);
    if (last === String(want)) return;
    await page.waitForTimeout(100);
  }
  throw new Error(`keep-alive list shows ${last}, wanted ${want}`);
}

const profile = fs.mkdtempSync(path.join(os.tmpdir(), "kas-chromium-"));
// A fresh profile (--user-data-dir) each run, so nothing carries over.
const browser = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  viewport: { width: 1280, height: 1000 },
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});
const problems = [];
try {
  const page = browser.pages()[0] || (await browser.newPage());
  page.on("console", (msg) => {
    if (msg.type() === "error" || msg.type() === "warning") problems.push(`console ${msg.type()}: ${msg.text()}`);
  });
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  page.on("requestfailed", (req) => {
    // The event stream is cut when the page closes; anything else failing is a problem.
    if (!req.url().includes("/events")) problems.push(`request failed: ${req.url()}`);
  });
  // A picture at load: the first snapshot alone (the next is 5 s away)
  // already draws the connection states, and the rate charts say when
  // they will have something to draw.
  // One idle connection first, so the idle dot stands above the others.
  const early = await idleConnection();
  await page.goto(`${adminUrl}?interval=5000`, { waitUntil: "load", timeout: TIMEOUT });
  await page.waitForFunction(() => /updated/.test(document.getElementById("status").textContent), null, { timeout: TIMEOUT });
  await page.waitForTimeout(100); // a frame or two
  const atLoad = await page.evaluate(() => {
    // Pixels near a colour (canvas anti-aliasing), in a chart's canvas.
    const near = (id, [r, g, b]) => {
      const canvas = document.getElementById(`chart-${id}`);
      const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
      let n = 0;
      for (let i = 0; i < data.length; i += 4) {
        if (Math.abs(data[i] - r) + Math.abs(data[i + 1] - g) + Math.abs(data[i + 2] - b) < 40 && data[i + 3] > 200) n++;
      }
      return n;
    };
    // #3fb950: the writing line (at 0, above reading's dot; idle's is at
    // 1); #8b949e: axis labels and the waiting text.
    return { writing: near("states", [0x3f, 0xb9, 0x50]), rpsText: near("rps", [0x8b, 0x94, 0x9e]) };
  });
  early.destroy();
  if (atLoad.writing < 4) throw new Error(`at load the states chart draws nothing: ${JSON.stringify(atLoad)}`);
  console.log("shown: charts drawn from the first snapshot");
  await page.goto(adminUrl, { waitUntil: "load", timeout: TIMEOUT });

  // Spread over a couple of seconds, so the marks spread along the track.
  const sockets = [];
  for (let i = 0; i < N; i++) {
    sockets.push(await idleConnection());
    await new Promise((done) => setTimeout(done, 50));
  }
  // Something in the other lists too: accepted but silent (headers), a
  // head cut short (headers + the request deadline), a /delay in flight
  // (ref'd: it would keep a draining server alive).
  const others = [
    await rawConnection(""),
    await rawConnection(""),
    await rawConnection("GET / HTTP/1.1\r\nHo"),
    await rawConnection("GET /delay/30000 HTTP/1.1\r\nHost: t\r\n\r\n"),
  ];
  await waitForLength(page, N);
  const text = (await page.innerText("body")).toLowerCase();
  for (const needle of ["keep-alive", "unref'd", "stays alive", "effective timeouts", "cached date", "requests per second"]) {
    if (!text.includes(needle)) throw new Error(`page text lacks ${JSON.stringify(needle)}`);
  }
  console.log(`shown: keep-alive list holding ${N}`);

  for (const socket of sockets.splice(0, CLOSE)) socket.destroy();
  await waitForLength(page, N - CLOSE);
  console.log(`shown: keep-alive list holding ${N - CLOSE} after closing ${CLOSE}`);

  // One time convention (24-hour UTC, as the Date header) and one colour
  // per close cause, whichever causes are on screen.
  const status = await page.innerText("#status");
  if (!/updated \d\d:\d\d:\d\d UTC/.test(status)) throw new Error(`status reads ${JSON.stringify(status)}`);
  console.log("shown: updated in 24-hour UTC");
  const keyDeadline = Date.now() + TIMEOUT;
  let clientKey = null;
  while (Date.now() < keyDeadline && !clientKey) {
    clientKey = await page.evaluate(() => {
      const span = [...document.querySelectorAll("#keys-closes span")].find((s) => s.textContent === "client");
      return span ? span.style.getPropertyValue("--key") : null;
    });
    if (!clientKey) await page.waitForTimeout(100);
  }
  if (clientKey !== "#d2a8ff") throw new Error(`the client close cause is coloured ${clientKey}`);
  console.log("shown: client closes in their own colour");

  // Who closes first: a proxy-like client that closes idle connections at
  // 1.2 s (well before the server), and one that races the server's close.
  await Promise.all([
    ...[0, 1, 2].map(() => closeAfter("127.0.0.3", 1200)),
    ...[0, 1, 2].map(() => lateRequest("127.0.0.2")),
  ]);
  const deadline = Date.now() + TIMEOUT;
  let verdict = null;
  while (Date.now() < deadline && verdict !== "race") {
    verdict = await verdictOf(page, "127.0.0.2");
    await page.waitForTimeout(100);
  }
  if (verdict !== "race") throw new Error(`127.0.0.2 shows verdict ${verdict}, wanted race`);
  if ((await verdictOf(page, "127.0.0.3")) !== "ok") throw new Error("127.0.0.3 is not ok");
  console.log("shown: race verdict for 127.0.0.2");

  // The Date header's tick is one `date` row (docs/metrics.md's and
  // /timers' label) however many lists (workers, durations) hold it.
  const tickDeadline = Date.now() + TIMEOUT;
  let ticks = null;
  while (Date.now() < tickDeadline) {
    (await idleConnection()).destroy(); // a response keeps the Date tick armed
    ticks = await page.evaluate(() => ({
      date: document.querySelectorAll('#scope-total tr[data-label="date"]').length,
      labels: [...document.querySelectorAll("#scope-total tr[data-label]")].map((r) => r.dataset.label),
    }));
    if (ticks.date > 0) break;
    await page.waitForTimeout(100);
  }
  if (!ticks || ticks.date !== 1) throw new Error(`date rows: ${JSON.stringify(ticks)}`);
  if (ticks.labels.some((l) => /tick/i.test(l))) throw new Error(`labels: ${JSON.stringify(ticks.labels)}`);
  console.log("shown: one date row");

  // Usable at phone width: nothing runs off the right edge.
  await page.setViewportSize({ width: 420, height: 900 });
  await page.waitForTimeout(500);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  if (overflow > 0) throw new Error(`at 420 px the page is ${overflow} px too wide`);
  console.log("shown: no overflow at 420 px");
  // ... and every timer track is in view, most of the width, not behind a
  // scrollbar.
  const tracks = await page.evaluate(() => {
    const width = document.documentElement.clientWidth;
    return [...document.querySelectorAll("#scope-total canvas.track")].map((c) => {
      const r = c.getBoundingClientRect();
      const scroller = c.closest("table");
      return { left: r.left, right: r.right, width, scrolls: scroller.scrollWidth > scroller.clientWidth };
    });
  });
  const hidden = tracks.filter((t) => t.left < 0 || t.right > t.width || t.right - t.left < t.width * 0.6 || t.scrolls);
  if (!tracks.length || hidden.length) throw new Error(`tracks at 420 px: ${JSON.stringify(tracks)}`);
  console.log("shown: timer tracks in view at 420 px");
  await page.setViewportSize({ width: 1280, height: 1000 });

  // Let the charts gather a few seconds before the picture.
  await page.waitForTimeout(3000);
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(`screenshot: ${screenshot}`);
  for (const socket of [...sockets, ...others]) socket.destroy();
} finally {
  await browser.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
if (problems.length) {
  console.error(problems.join("\n"));
  process.exit(1);
}
console.log("console: clean");
