// dashboard.mjs - the browser test of the web dashboard: Debian's chromium,
// headless, driven by playwright-core (npm, web/node_modules), against a
// real `stalelab serve` on a free port. Prints "  ok   NAME" / "  FAIL NAME"
// lines (tests/integration/dashboard.sh counts them), the two measurements,
// and saves screenshots into OUTDIR.
// Usage: node tests/browser/dashboard.mjs BINARY OUTDIR

import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { launch, serve, stop } from "./lib.mjs";

const BIN = resolve(process.argv[2] || "build/stalelab");
const OUT = resolve(process.argv[3] || "build/dashboard");
mkdirSync(OUT, { recursive: true });
const tmp = mkdtempSync(join(tmpdir(), "sldash."));

let pass = 0;
let fail = 0;
function ok(name) {
  pass++;
  console.log(`  ok   ${name}`);
}
function bad(name, why) {
  fail++;
  console.log(`  FAIL ${name}${why ? `\n       ${String(why).split("\n").join("\n       ")}` : ""}`);
}
async function check(name, fn) {
  try {
    const r = await fn();
    if (r === false) bad(name);
    else ok(name);
  } catch (e) {
    bad(name, e && e.message ? e.message.split("\n").slice(0, 4).join("\n") : e);
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// a small run that trains fast on any machine: synthetic data, one thread
// per worker, wall clock (the delays are real sleeps)
const RUN = {
  model: "mlp:784-32-10", dataset: "synthetic:6000", lr: 0.01, batch: 16,
  workers: 3, threads: 1, eval_every: 50, delay: { dist: "exp", mean_ms: 5 },
};
writeFileSync(join(tmp, "run.json"), JSON.stringify(RUN));
writeFileSync(join(tmp, "demo.json"), JSON.stringify({
  run: RUN,
  scenes: [{ seconds: 600, caption: "Worker 1 straggles: watch its staleness", workers: [{ id: 1, set: { delay: { dist: "const", mean_ms: 40 } } }] }],
}));

let base = "";
let token = "";
async function call(method, path, body) {
  const headers = { "Content-Type": "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  const r = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await r.json();
  return { status: r.status, data };
}

// poll fn() until it returns a truthy value; a throw counts as not yet (the
// page may still be loading its module). Throws after ms, and never before
// 30 s: the ms below are what an idle machine needs times a few, a loaded
// CI machine may take longer, the deadline costs nothing when the page is
// on time, and what a check measures is asserted apart
const UNTIL_MIN_MS = 30000;
async function until(what, fn, ms = 10000, every = 100) {
  const end = Date.now() + Math.max(ms, UNTIL_MIN_MS);
  for (;;) {
    let v, err;
    try {
      v = await fn();
    } catch (e) {
      err = e;
    }
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${err ? ` (last: ${err.message})` : ""}`);
    await sleep(every);
  }
}

// the top-level tasks of the renderer's main thread in a trace:
// {wall, cpu} microseconds
function mainThreadBusy(trace) {
  const ev = Array.isArray(trace) ? trace : trace.traceEvents;
  const main = new Set(ev.filter((e) => e.name === "thread_name" && e.args.name === "CrRendererMain")
    .map((e) => `${e.pid}:${e.tid}`));
  const tasks = ev.filter((e) => e.name === "RunTask" && e.ph === "X" && main.has(`${e.pid}:${e.tid}`))
    .sort((a, b) => a.ts - b.ts);
  let wall = 0;
  let cpu = 0;
  let end = -Infinity;
  for (const e of tasks) {
    if (e.ts < end) continue; // nested
    end = e.ts + e.dur;
    wall += e.dur;
    cpu += e.tdur ?? e.dur;
  }
  return { wall, cpu };
}

const started = Date.now();
let daemon = await serve(BIN, ["--listen", "127.0.0.1:0", "--config", join(tmp, "run.json"), "--checkpoint-dir", tmp]);
const port = daemon.port;
base = `http://127.0.0.1:${port}`;

const browser = await launch();
const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true });
const page = await ctx.newPage();
const pageErrors = [];
page.on("pageerror", (e) => pageErrors.push(e.message));
const stat = (sel, key) => page.$eval(sel, (e, k) => e.dataset[k], key);
const chartLen = (k) => page.evaluate((c) => window.stalelab.charts[c].data[0].length, k);

try {
  console.log(`integration: dashboard (chromium, daemon on port ${port})`);
  await page.goto(base + "/");

  await check("the page is the dashboard (HTML from the binary)", async () =>
    (await page.title()).startsWith("stalelab") && (await page.locator("#plot-acc canvas").count()) === 1);

  await check("charts draw: accuracy, loss, staleness, updates/s", async () => {
    await until("evaluations and snapshots", async () =>
      (await chartLen("acc")) > 1 && (await chartLen("ups")) > 1 && (await chartLen("hist")) > 1);
    // the canvases hold drawn pixels (not a blank chart)
    return page.evaluate(() => ["acc", "loss", "hist", "ups"].every((k) => {
      const c = window.stalelab.charts[k].ctx.canvas;
      const px = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      let ink = 0;
      for (let i = 3; i < px.length; i += 4) if (px[i]) ink++;
      return ink > 1000;
    }));
  });

  await check("charts update live", async () => {
    const a = await chartLen("acc");
    const u = await chartLen("ups");
    await until("more points", async () => (await chartLen("acc")) > a && (await chartLen("ups")) > u, 8000);
  });

  await check("header shows the run", async () => {
    const txt = await page.locator("header.top").innerText();
    return /mlp:784-32-10/.test(txt) && /synthetic:6000/.test(txt) && /asgd/.test(txt) && /running/.test(txt);
  });

  await check("worker table: one row per worker", async () =>
    until("3 rows", async () => (await page.locator("table.workers tbody tr").count()) === 3));

  await check("worker table: each worker's device and its memory there", async () =>
    until("a device cell", async () => {
      const cell = await page.locator('tr[data-worker="1"] td.device').innerText();
      return /^cpu · [0-9.]+ (KB|MB)$/.test(cell);
    }));

  await check("worker table: each worker's data, a bar per class (iid: the whole set)", async () =>
    until("class bars", async () => {
      const bars = await page.locator('tr[data-worker="1"] td.classes .bar').count();
      const title = await page.locator('tr[data-worker="1"] td.classes .hist').getAttribute("title");
      const st = (await call("GET", "/api/v1/status")).data;
      const w = st.workers.find((x) => x.id === 1);
      return bars === 10 && w && w.classes.length === 10 &&
        title === `${w.part} samples; per class: ${w.classes.join(", ")}`;
    }));

  await check("the device line's tooltip is the backend's own line", async () =>
    /OpenBLAS .*threads?/.test(await page.locator("#h-device").getAttribute("title")));

  await page.screenshot({ path: join(OUT, "dashboard-1280x800.png") });

  // ---- a worker's delay slider, its staleness in the histogram -------------
  await check("worker 0's delay slider raises its staleness in the histogram", async () => {
    await page.selectOption("#worker-pick", "0");
    await until("worker 0's window", async () => (await stat("#hist-stats", "worker")) === "0" && Number(await stat("#hist-stats", "count")) > 0);
    const before = Number(await stat("#hist-stats", "mean"));
    const slider = page.locator('tr[data-worker="0"] input[type=range]');
    await slider.focus();
    await page.keyboard.press("End"); // keyboard: 1000 ms
    await until("the API to have the new delay", async () =>
      (await call("GET", "/api/v1/status")).data.workers[0].delay.mean_ms === 1000, 5000);
    const after = await until("a higher window mean for worker 0", async () => {
      const m = Number(await stat("#hist-stats", "mean"));
      return m > Math.max(3 * before, before + 5) ? m : 0;
    }, 15000, 250);
    console.log(`       worker 0 sliding-window staleness: mean ${before.toFixed(2)} before, ${after.toFixed(2)} after (delay 5 -> 1000 ms)`);
    await page.evaluate(() => window.scrollTo(0, 0));
    await sleep(300);
    await page.screenshot({ path: join(OUT, "dashboard-straggler.png") });
  });
  await call("PATCH", "/api/v1/workers/0", { delay: { dist: "exp", mean_ms: 5 } });

  await check("URL keeps the view: x axis, histogram, worker", async () => {
    await page.click('[data-xaxis="v"]');
    await page.click('[data-histmode="cumulative"]');
    const u = new URL(page.url());
    if (u.searchParams.get("x") !== "v" || u.searchParams.get("hist") !== "cumulative" || u.searchParams.get("worker") !== "0")
      throw new Error(`url ${page.url()}`);
    await page.reload();
    await until("restored view", async () =>
      (await page.getAttribute('[data-xaxis="v"]', "aria-pressed")) === "true" &&
      (await page.getAttribute('[data-histmode="cumulative"]', "aria-pressed")) === "true" &&
      (await stat("#hist-stats", "worker")) === "0");
    // the histogram's legend names the bars: now the cumulative histogram
    const legend = await page.locator('figure[data-chart="hist"] .u-legend .u-series .u-label').allInnerTexts();
    if (legend[1] !== "cumulative" || legend[2] !== "sliding window") throw new Error(`legend ${legend}`);
    await page.click('[data-xaxis="t"]');
    await page.click('[data-histmode="window"]');
    await page.selectOption("#worker-pick", "");
  });

  // ---- run controls --------------------------------------------------------
  await check("switching the rule: a marker on the charts and the rule in /api/v1/status", async () => {
    await until("the controls", () => page.locator("#apply").count());
    await page.selectOption('select[name="rule"]', "ssp");
    await page.fill('input[name="rule_params.s"]', "5");
    await page.click("#apply");
    await until("a drawn marker for the rule", () =>
      page.evaluate(() => window.stalelab.marksDrawn.some((m) => m.label.startsWith("rule ssp (s=5"))), 5000);
    // the status snapshot follows the change event within moments
    let s = null;
    await until("the rule in /api/v1/status", async () => {
      s = (await call("GET", "/api/v1/status")).data;
      return s.rule === "ssp" && s.config.rule_params.s === 5;
    }, 3000).catch(() => {
      throw new Error(`status says ${s.rule}, s=${s.config.rule_params.s}`);
    });
    await until("the header's rule", async () => (await page.locator("#h-rule").innerText()).startsWith("ssp (s=5"), 3000);
  });

  await check("the form's fields come from GET /api/v1/schema (no copy of them in the page)", async () => {
    const src = await page.locator("#schema-source").innerText();
    if (!/from GET \/api\/v1\/schema/.test(src)) throw new Error(`page says: ${src}`);
    const rules = (await call("GET", "/api/v1/schema")).data.rules.length;
    return (await page.locator('select[name="rule"] option').count()) === rules;
  });

  await check("an invalid lr shows the API's own message", async () => {
    const api = (await call("PATCH", "/api/v1/run", { lr: -1 })).data.error.message;
    await page.fill('input[name="lr"]', "-1");
    await page.click("#apply");
    const shown = await until("the field's error", async () => {
      const t = await page.locator('input[name="lr"] ~ .error').innerText();
      return t || "";
    }, 5000);
    if (shown !== api) throw new Error(`shown "${shown}", API says "${api}"`);
    if ((await page.getAttribute('input[name="lr"]', "aria-invalid")) !== "true") throw new Error("not marked invalid");
    await page.click("text=Revert");
  });

  await check("adding a worker adds a row", async () => {
    await page.click("#add-worker");
    await until("4 rows", async () => (await page.locator("table.workers tbody tr").count()) === 4, 5000);
    return (await call("GET", "/api/v1/status")).data.workers.length === 4;
  });

  await check("removing a worker removes its row", async () => {
    await page.click("#remove-worker");
    await until("3 rows", async () => (await page.locator("table.workers tbody tr").count()) === 3, 5000);
    await page.click("#add-worker");
    await until("4 rows again", async () => (await page.locator("table.workers tbody tr").count()) === 4, 5000);
  });

  await check("Checkpoint writes one and says where", async () => {
    await page.click("#checkpoint");
    const t = await until("the message", async () => {
      const m = await page.locator(".toast").allInnerTexts();
      return m.find((x) => x.startsWith("checkpoint written: "));
    }, 8000);
    const path = /^checkpoint written: (\S+) /.exec(t)[1];
    if (!path.startsWith(tmp) || readFileSync(path).length < 1000) throw new Error(t);
  });

  // ---- measurements --------------------------------------------------------
  await check("PATCH from another client to its marker drawn: under 500 ms at 4 Hz", async () => {
    const lat = [];
    for (const lr of [0.0123, 0.0124, 0.0125]) {
      const t0 = Date.now();
      const r = await call("PATCH", "/api/v1/run", { lr });
      if (r.status !== 202) throw new Error(JSON.stringify(r.data));
      const m = await until("the marker", () => page.evaluate((l) =>
        window.stalelab.marksDrawn.find((x) => x.label === `lr ${l}`), lr), 5000, 10);
      lat.push(m.drawn - t0);
      await sleep(300);
    }
    lat.sort((a, b) => a - b);
    console.log(`dashboard: PATCH-to-marker latency ${lat.join(", ")} ms (median ${lat[1]} ms; SSE at 4 Hz)`);
    return lat[1] < 500;
  });

  await check("16 workers: the page's main thread busy under 20% of the time (its CPU time)", async () => {
    // a delay on every worker and the default evaluation interval, so the
    // daemon leaves the (shared) CPUs to the browser being measured
    await call("PATCH", "/api/v1/run", { delay: { dist: "const", mean_ms: 20 }, eval_every: 200 });
    await call("PUT", "/api/v1/workers", { count: 16 });
    await until("16 rows", async () => (await page.locator("table.workers tbody tr").count()) === 16, 8000);
    // a trace of 5 s: the tasks of the page's main thread, in wall time
    // (dur) and in the thread's own CPU time (tdur: not counting the time
    // the OS gave the core to someone else, here the daemon's 16 workers)
    const snaps = await page.evaluate(() => window.stalelab.snapshots);
    const file = join(tmp, "trace.json");
    await browser.startTracing(page, { path: file, categories: ["disabled-by-default-devtools.timeline"] });
    const t0 = Date.now();
    await sleep(5000);
    const span = (Date.now() - t0) * 1000;
    await browser.stopTracing();
    const snaps2 = await page.evaluate(() => window.stalelab.snapshots);
    const { wall, cpu } = mainThreadBusy(JSON.parse(readFileSync(file, "utf8")));
    const busy = wall / span;
    const busyCpu = cpu / span;
    console.log(`dashboard: 16 workers, page main thread busy ${(100 * busy).toFixed(1)}% of ${(span / 1e6).toFixed(1)} s in wall time, ${(100 * busyCpu).toFixed(1)}% in its own CPU time (${snaps2 - snaps} snapshots at 4 Hz)`);
    if (snaps2 - snaps < 8) throw new Error(`only ${snaps2 - snaps} snapshots`);
    // the limit holds for the page's own work; wall time also counts the
    // moments a loaded machine gave the core to another process
    return busyCpu < 0.2;
  });

  for (const [w, h] of [[1280, 800], [1920, 1080], [390, 844]]) {
    await page.setViewportSize({ width: w, height: h });
    await page.evaluate(() => document.activeElement && document.activeElement.blur());
    await page.evaluate(() => window.scrollTo(0, 0));
    await sleep(600);
    await page.screenshot({ path: join(OUT, `dashboard-${w}x${h}.png`) });
  }
  await page.setViewportSize({ width: 1280, height: 800 });
  await check("no horizontal overflow at phone width", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await sleep(300);
    const over = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    await page.setViewportSize({ width: 1280, height: 800 });
    if (over > 1) throw new Error(`page is ${over} px wider than the screen`);
  });

  await check("PNG and CSV downloads of a chart", async () => {
    const fig = page.locator('figure[data-chart="acc"]');
    const [csv] = await Promise.all([page.waitForEvent("download"), fig.locator(".csv").click()]);
    const text = readFileSync(await csv.path(), "utf8");
    if (!/^t,test accuracy\n[\d.e-]+,[\d.e-]+\n/.test(text)) throw new Error(`csv: ${text.slice(0, 80)}`);
    const [png] = await Promise.all([page.waitForEvent("download"), fig.locator(".png").click()]);
    const head = readFileSync(await png.path()).subarray(0, 8).toString("hex");
    if (head !== "89504e470d0a1a0a") throw new Error(`not a PNG: ${head}`);
  });

  await check("Reset starts a fresh run with the same settings", async () => {
    const before = (await call("GET", "/api/v1/status")).data;
    await page.click("#reset");
    await until("the next run in the header", async () =>
      (await page.locator("#h-run").innerText()) === String(before.run + 1), 8000);
    let after = null;
    await until("the new run's workers", async () => {
      after = (await call("GET", "/api/v1/status")).data;
      return after.workers.length === before.workers.length;
    }, 5000).catch(() => {});
    if (after.rule !== before.rule || after.workers.length !== before.workers.length || after.config.lr !== before.config.lr)
      throw new Error(`before ${before.rule}/${before.workers.length}/${before.config.lr}, after ${after.rule}/${after.workers.length}/${after.config.lr}`);
  });

  await check("compare view: earlier runs overlaid, settings side by side", async () => {
    const r = await call("POST", "/api/v1/run", { ...RUN, rule: "sasgd", workers: 2 });
    if (r.status !== 201) throw new Error(JSON.stringify(r.data));
    await sleep(1200);
    await page.focus("#tab-live");
    await page.keyboard.press("ArrowRight"); // the tabs work from the keyboard
    await until("two runs", async () => (await page.locator(".run-pick").count()) >= 2, 5000);
    await until("the chart", () => page.locator("#compare-body .plot canvas").count(), 5000);
    const differs = await page.locator("table.compare tr.differs th").allInnerTexts();
    await page.screenshot({ path: join(OUT, "dashboard-compare.png") });
    if (!differs.some((t) => t.startsWith("rule")) || !differs.some((t) => t.startsWith("workers")))
      throw new Error(`differing rows: ${differs.join(" | ")}`);
    if (!/view=compare/.test(page.url())) throw new Error(`url ${page.url()}`);
    await page.click("#tab-live");
  });

  await check("run controls follow GET /api/v1/schema when the daemon has it", async () => {
    // a daemon with the endpoint, played by the test: the same shape as the
    // page's built-in table, with marks to recognise
    const p2 = await ctx.newPage();
    await p2.route("**/api/v1/schema", (route) => route.fulfill({
      contentType: "application/json",
      body: JSON.stringify({
        fields: [{ key: "rule", type: "string", enum: ["asgd", "ssp"], default: "asgd", mutable: true, doc: "update rule" },
          { key: "lr", type: "number", min: 0, min_open: true, max: 42, default: 0.05, mutable: true, doc: "step size (schema)" }],
        worker_fields: [],
        rules: [{ name: "asgd", sync: false, doc: "", params: [] },
          { name: "ssp", sync: false, doc: "", params: [{ key: "s", type: "integer", min: 0, max: 9, default: 3, doc: "bound (schema)" }] }],
      }),
    }));
    await p2.goto(base + "/");
    await until("the form", () => p2.locator('input[name="lr"]').count(), 5000);
    const src = await p2.locator("#schema-source").innerText();
    const lrHint = await p2.locator('input[name="lr"] ~ .hint').innerText();
    const rules = await p2.locator('select[name="rule"] option').allInnerTexts();
    const none = await p2.locator('input[name="momentum"]').count();
    await p2.close();
    if (!/from GET \/api\/v1\/schema/.test(src)) throw new Error(`source: ${src}`);
    if (lrHint !== "(0, 42] · step size (schema)") throw new Error(`lr hint: ${lrHint}`);
    if (rules.join() !== "asgd,ssp" || none !== 0) throw new Error(`rules ${rules}, momentum fields ${none}`);
  });

  // ---- the daemon goes away and comes back (in demo mode, with a token) ------
  await check("a lost connection is shown, and the page reconnects to a restarted daemon", async () => {
    const ex = await stop(daemon);
    if (ex.code !== 0) throw new Error(`the daemon exited ${ex.code ?? ex.signal}:\n${ex.err.slice(-1500)}`);
    await until("the lost banner", () => page.isVisible("#lost"), 8000);
    const conn = await page.getAttribute("#conn", "data-state");
    if (conn !== "lost") throw new Error(`conn state ${conn}`);
    await page.screenshot({ path: join(OUT, "dashboard-lost.png") });
    daemon = await serve(BIN, ["--listen", `127.0.0.1:${port}`, "--token", "sekrit", "--demo", join(tmp, "demo.json")]);
    await until("live again", async () => (await page.getAttribute("#conn", "data-state")) === "open", 15000);
    await until("the new daemon's run", async () => (await page.locator("#h-run").innerText()) === "1", 8000);
    const n = await page.evaluate(() => window.stalelab.snapshots);
    await until("snapshots flowing", async () => (await page.evaluate(() => window.stalelab.snapshots)) > n + 2, 5000);
  });

  await check("demo caption shown large, full-screen view", async () => {
    await until("the caption", () => page.isVisible("#caption"), 5000);
    const t = await page.locator("#caption-text").innerText();
    if (t !== "Worker 1 straggles: watch its staleness") throw new Error(`caption "${t}"`);
    await page.keyboard.press("f");
    await until("projector view", () => page.evaluate(() => document.body.classList.contains("projector")), 3000);
    const size = await page.$eval("#caption-text", (e) => parseFloat(getComputedStyle(e).fontSize));
    await page.setViewportSize({ width: 1920, height: 1080 });
    await page.evaluate(() => window.scrollTo(0, 0));
    await sleep(600);
    await page.screenshot({ path: join(OUT, "dashboard-projector-1920x1080.png") });
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.keyboard.press("f");
    if (size < 40) throw new Error(`caption font ${size}px`);
  });

  await check("token asked once on 401, then the change goes through", async () => {
    await page.click("#pause");
    await until("the token dialog", () => page.isVisible("#token-dialog"), 5000);
    await page.fill("#token-input", "sekrit");
    await page.click("#token-ok");
    token = "sekrit";
    await until("paused", async () => (await call("GET", "/api/v1/status")).data.state === "paused", 5000);
    await until("a Resume button", async () => (await page.locator("#pause").innerText()) === "Resume", 3000);
    await page.click("#pause"); // no second question: the token is kept
    await until("running", async () => (await call("GET", "/api/v1/status")).data.state === "running", 5000);
    return !(await page.isVisible("#token-dialog"));
  });

  await check("a diverged run: a banner says where, Recover resumes it with the lr given", async () => {
    // a second daemon; its run trains, then an lr of 100 with momentum
    // 0.9 makes it diverge within a few steps
    writeFileSync(join(tmp, "diverge.json"), JSON.stringify({
      model: "mlp:784-256-128-10", dataset: "synthetic:6000", lr: 0.01, batch: 16,
      workers: 2, threads: 1, clock: "virtual", eval_every: 10,
    }));
    const d2 = await serve(BIN, ["--listen", "127.0.0.1:0", "--config", join(tmp, "diverge.json")]);
    const b2 = `http://127.0.0.1:${d2.port}`;
    const st2 = async () => (await fetch(`${b2}/api/v1/status`)).json();
    const p2 = await ctx.newPage();
    p2.on("pageerror", (e) => pageErrors.push(e.message));
    try {
      await p2.goto(b2 + "/");
      await until("a few evaluations", async () => (await st2()).version >= 30, 15000);
      // the page's event stream live (a first snapshot came) before the
      // divergence: a stream opened later does not get its event
      await until("the page's event stream", () => p2.evaluate(() => window.stalelab.snapshots > 0));
      if (await p2.isVisible("#diverged")) throw new Error("a banner before any divergence");
      const r = await fetch(`${b2}/api/v1/run`, {
        method: "PATCH", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ lr: 100, momentum: 0.9 }),
      });
      if (r.status !== 202) throw new Error(`PATCH lr: HTTP ${r.status}`);
      await until("the diverged banner", () => p2.isVisible("#diverged"), 15000);
      const text = await p2.locator("#diverged-text").innerText();
      if (!/^Run 1 diverged at v \d+: worker [01]'s (loss|gradient) is not finite .* resumes it from v \d+, its last good checkpoint/.test(text))
        throw new Error(`banner "${text}"`);
      if ((await p2.inputValue("#recover-lr")) !== "50") throw new Error(`suggested lr ${await p2.inputValue("#recover-lr")}`);
      // the banner may come from the event, a snapshot before the header
      await until("the header says diverged", async () =>
        (await p2.getAttribute("#h-state", "data-state")) === "diverged", 10000);
      await until("the event in the changes list", async () =>
        /diverged: worker [01]'s (loss|gradient) is not finite at v \d+/.test(await p2.locator("#changes").textContent()), 5000)
        .catch(async (e) => {
          throw new Error(`${e.message}: the list holds "${(await p2.locator("#changes").textContent()).slice(0, 300)}"`);
        });
      await p2.screenshot({ path: join(OUT, "dashboard-diverged.png") });
      await p2.fill("#recover-lr", "0.005");
      await p2.click("#recover");
      await until("run 2 training at lr 0.005", async () => {
        const s = await st2();
        return s.run === 2 && s.state === "running" && s.config.lr === 0.005 && Number.isFinite(s.train_loss);
      }, 15000);
      await until("the banner gone", async () => !(await p2.isVisible("#diverged")), 5000);
    } finally {
      await p2.close();
      const ex = await stop(d2);
      if (ex.code !== 0) throw new Error(`the second daemon exited ${ex.code ?? ex.signal}:\n${ex.err.slice(-1500)}`);
    }
  });

  await check("no script errors on the page", () => {
    if (pageErrors.length) throw new Error(pageErrors.join("\n"));
  });
} catch (e) {
  bad("browser test", e.stack || e);
} finally {
  await browser.close().catch(() => {});
  const ex = await stop(daemon);
  if (ex.code === 0) ok("the daemon shuts down cleanly");
  else bad("the daemon shuts down cleanly", `exit ${ex.code ?? ex.signal}\n${ex.err.slice(-1500)}`);
  rmSync(tmp, { recursive: true, force: true });
}
console.log(`dashboard browser test: ${((Date.now() - started) / 1000).toFixed(1)} s, screenshots in ${OUT}`);
process.exit(fail ? 1 : 0);
