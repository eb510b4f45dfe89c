// app.js - the stalelab dashboard: one Server-Sent Events stream feeds the
// header, the charts, the worker table and the change markers; the run
// controls, the worker table and the header's buttons call the HTTP API.
// The page's view (tab, x axis, histogram, worker, runs compared, rate)
// lives in the URL, so a link reopens the same view.

import { api, connectEvents, setTokenPrompt } from "./api.js";
import { C, lineChart, histChart, autosize, downloadPNG, downloadCSV, fmt } from "./charts.js";
import { loadSchema, Controls, ruleSummary } from "./schema.js";
import { WorkerTable } from "./workers.js";
import { CompareView } from "./compare.js";
import { SweepsView } from "./sweeps.js";
import { ClusterView } from "./cluster.js";

const $ = (id) => document.getElementById(id);
const WINDOW_MS = 5000;   // per-worker sliding histogram: the last 5 s
const UPS_MAX = 4000;     // updates/s points kept (16 min at 4 Hz)
const UPS_SPAN = 1;       // run seconds an updates/s point averages over
const MARKERS_MAX = 200;
const LINES_MS = 500;     // the line charts redraw at most twice a second

// ---- the view, in the URL ---------------------------------------------

const view = (() => {
  const q = new URLSearchParams(location.search);
  const pick = (k, ok, d) => (ok.includes(q.get(k)) ? q.get(k) : d);
  const worker = q.get("worker");
  const hz = Number(q.get("hz"));
  return {
    tab: pick("view", ["live", "compare", "sweeps", "cluster"], "live"),
    x: pick("x", ["t", "v"], "t"),
    hist: pick("hist", ["window", "cumulative"], "window"),
    worker: worker !== null && /^\d+$/.test(worker) ? Number(worker) : null,
    runs: (q.get("runs") || "").split(",").filter((s) => /^\d+$/.test(s)).map(Number),
    hz: hz >= 0.1 && hz <= 50 ? hz : 4,
    sweep: q.get("sweep") || "",
    sim: q.get("sim") || "",
  };
})();

function saveView() {
  const q = new URLSearchParams();
  if (view.tab !== "live") q.set("view", view.tab);
  if (view.x !== "t") q.set("x", view.x);
  if (view.hist !== "window") q.set("hist", view.hist);
  if (view.worker !== null) q.set("worker", String(view.worker));
  if (view.runs.length) q.set("runs", view.runs.join(","));
  if (view.hz !== 4) q.set("hz", String(view.hz));
  if (view.sweep) q.set("sweep", view.sweep);
  if (view.sim) q.set("sim", view.sim);
  const s = q.toString();
  history.replaceState(null, "", s ? `?${s}` : location.pathname);
}

// ---- what the page knows of the run ----------------------------------

const st = {
  run: null,        // run id
  snap: null,       // the latest snapshot
  series: { t: [], v: [], acc: [], train: [], test: [], coh: [] },
  ups: { t: [], v: [], y: [] },
  upsWin: [],       // [[t, version]] of the last UPS_SPAN run seconds
  history: [],      // [{at, workers: Map(id -> hist)}] for per-worker windows
  markers: [],      // [{x: {t, v}, label, origin, drawn, received, seq}]
  seq: 0,
  hoverWorker: null,
  caption: null,    // the demo caption shown
  lostAt: null,     // run and version when the stream was lost
};

// for the browser test and for curious people: window.stalelab
window.stalelab = { st, view, charts: {}, snapshots: 0, marksDrawn: [] };

// ---- messages -----------------------------------------------------------

function toast(msg, kind = "bad") {
  const box = $("toasts");
  const p = document.createElement("p");
  p.className = `toast ${kind}`;
  p.textContent = msg;
  box.append(p);
  while (box.children.length > 4) box.firstChild.remove();
  setTimeout(() => p.remove(), 8000);
}

const showError = (e) => toast(e instanceof Error ? e.message : String(e));

function setConn(s) {
  const b = $("conn");
  b.dataset.state = s.state;
  if (s.state === "snapshot") { // ?snapshot: drawn once, no stream
    b.textContent = `snapshot at v ${st.snap ? st.snap.version : "?"} (not live)`;
    $("lost").hidden = true;
    return;
  }
  b.textContent = s.state === "open" ? "live" : `connection lost, retrying in ${s.retryIn} s`;
  $("lost").hidden = s.state === "open";
  // what the page had when the stream went: a daemon restarted since
  // has the same run id at a lower version
  if (s.state !== "open" && st.snap && !st.lostAt) st.lostAt = { run: st.run, version: st.snap.version };
  if (s.state === "open") resync();
}

// the token dialog: asked for once, when the daemon first answers 401
function askToken(refused) {
  const dlg = $("token-dialog");
  $("token-refused").hidden = !refused;
  $("token-input").value = "";
  return new Promise((resolve) => {
    dlg.onclose = () => resolve(dlg.returnValue === "ok" ? $("token-input").value.trim() || null : null);
    dlg.showModal();
  });
}

// ---- labels ----------------------------------------------------------------

// a delay as a change record holds it (a change may carry only some fields)
function delayText(d) {
  if (!d || d.dist === "none") return "none";
  const parts = [];
  if (d.dist) parts.push(d.dist === "version" ? `version s=${d.s}` : d.dist);
  if (d.mean_ms != null && d.dist !== "version") parts.push(`${fmt(d.mean_ms, d.mean_ms < 10 ? 1 : 0)} ms`);
  if (d.where) parts.push(`at ${d.where}`);
  return parts.join(" ") || JSON.stringify(d);
}

// "rule ssp (s=2)", "w2 delay const 500 ms", "workers 8", "lr 0.02"
function changeLabel(c) {
  const set = c.set || {};
  const parts = [];
  for (const [k, v] of Object.entries(set)) {
    if (k === "rule_params") continue;
    if (k === "delay") parts.push(`delay ${delayText(v)}`);
    else if (k === "rule") {
      const rp = set.rule_params || {};
      const r = schema && schema.rules.find((x) => x.name === v);
      // the parameters this rule reads, where they differ from its defaults
      const ps = (r ? r.params : []).filter((p) => rp[p.key] !== undefined && rp[p.key] !== p.default)
        .map((p) => `${p.key}=${rp[p.key]}`);
      parts.push(`rule ${v}${ps.length ? ` (${ps.join(", ")})` : ""}`);
    } else if (typeof v === "object") parts.push(`${k} ${JSON.stringify(v)}`);
    else parts.push(`${k} ${v}`);
  }
  if (!set.rule && set.rule_params)
    parts.push(Object.entries(set.rule_params).map(([k, v]) => `${k}=${v}`).join(" "));
  return (c.worker != null ? `w${c.worker} ` : "") + parts.join(", ");
}

// ---- charts -------------------------------------------------------------------

let schema = null;
let charts = {};
let unsize = []; // the charts' autosize stoppers
let controls = null;
let table = null;
let compare = null;
let sweeps = null;
let cluster = null;

const xLabel = () => (view.x === "t" ? "run time (s)" : "version (updates)");

function makeCharts() {
  const markers = () => st.markers;
  const xKey = () => view.x;
  const drawn = window.stalelab.marksDrawn;
  const onDrawn = (m) => {
    drawn.push({ label: m.label, received: m.received, drawn: m.drawn });
    if (drawn.length > MARKERS_MAX) drawn.shift();
  };
  const common = { markers, xKey, onDrawn, xLabel };
  for (const stop of unsize) stop();
  for (const c of Object.values(charts)) c.destroy();
  charts = {
    acc: lineChart($("plot-acc"), { ...common, yLabel: "test accuracy",
      series: [{ label: "test accuracy", stroke: C.blue }] }),
    loss: lineChart($("plot-loss"), { ...common, yLabel: "loss",
      series: [{ label: "training loss", stroke: C.orange }, { label: "test loss", stroke: C.blue, dash: [6, 4] }] }),
    ups: lineChart($("plot-ups"), { ...common, yLabel: "updates/s",
      series: [{ label: "updates/s", stroke: C.green }] }),
    coh: lineChart($("plot-coh"), { ...common, yLabel: "cosine",
      series: [{ label: "gradient coherence", stroke: C.blue }] }),
    hist: histChart($("plot-hist"), () => st.histStats, view.hist === "window"
      ? ["sliding window", "cumulative"] : ["cumulative", "sliding window"]),
  };
  unsize = Object.entries(charts).map(([k, u]) => autosize(u, $(`plot-${k}`)));
  window.stalelab.charts = charts;
}

// the x axis' end: "now", rounded up to a step of about a tenth of it, so
// the accuracy and loss charts redraw when data comes, not at every snapshot
function xEnd(now) {
  if (!(now > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(now)));
  const step = now / p < 2 ? p / 5 : now / p < 5 ? p / 2 : p;
  return Math.ceil((now * 1.0001) / step) * step;
}

function xMax() {
  const k = view.x;
  const last = (a) => (a.length ? a[a.length - 1] : 0);
  let m = Math.max(last(st.series[k]), last(st.ups[k]), st.snap ? (k === "t" ? st.snap.t : st.snap.version) : 0);
  for (const mk of st.markers) m = Math.max(m, mk.x[k] || 0);
  return xEnd(m);
}

function put(u, data, max) {
  u.batch(() => {
    u.setData(data);
    u.setScale("x", { min: 0, max });
  });
}

// redraw what changed: the accuracy and loss charts on evaluations and
// updates/s on snapshots, each at most every LINES_MS (drawing a canvas is
// the page's main cost); a change marker or a new x range redraws at once
let linesAt = 0;
let linesLater = 0;
function drawSeries(d) {
  const s = st.series;
  const x = s[view.x];
  const max = xMax();
  const now = performance.now();
  const urgent = d.markers || d.all || max !== st.drawnMax;
  if (!urgent && !d.series && !d.snap && !d.lines) return;
  if (!urgent && now - linesAt < LINES_MS) {
    if (d.series || d.lines) dirty.series = true; // drawn next time
    if (!linesLater)
      linesLater = setTimeout(() => {
        linesLater = 0;
        schedule("lines");
      }, LINES_MS - (now - linesAt));
    return;
  }
  linesAt = now;
  st.drawnMax = max;
  put(charts.acc, [x, s.acc], max);
  put(charts.loss, [x, s.train, s.test], max);
  put(charts.ups, [st.ups[view.x], st.ups.y], max);
  // gradient coherence: only runs with coherence_every have it
  const coh = document.querySelector('[data-chart="coh"]');
  const any = s.coh.some((c) => c !== null);
  if (coh.hidden === any) coh.hidden = !any;
  if (any) put(charts.coh, [x, s.coh], max);
}

// ---- the staleness histogram -------------------------------------------------

function histOf(a) {
  return a && a.hist ? a.hist : null;
}

// quantile and mean of a bucket histogram (overflow counted as 64)
function histStats(h) {
  let n = 0;
  let sum = 0;
  h.forEach((c, i) => {
    n += c;
    sum += c * i;
  });
  if (!n) return { mean: null, p99: null, count: 0 };
  let acc = 0;
  let p99 = h.length - 1;
  for (let i = 0; i < h.length; i++) {
    acc += h[i];
    if (acc >= 0.99 * n) {
      p99 = i;
      break;
    }
  }
  return { mean: sum / n, p99, count: n };
}

// worker id's histogram over the last WINDOW_MS: now minus then
function workerWindow(id, cur) {
  const now = performance.now();
  let base = null;
  for (const h of st.history) {
    if (h.at >= now - WINDOW_MS && h.workers.has(id)) {
      base = h.workers.get(id);
      break;
    }
  }
  if (!base || base === cur) return null;
  return cur.map((c, i) => Math.max(0, c - (base[i] || 0)));
}

// what the rule's staleness counts ("versions"; "local steps" for
// localsgd, easgd and diloco; "outer versions" for async-diloco) on the
// axis, and in the title when it is not plain versions
function histUnit(u, unit) {
  const label = `staleness (${unit})`;
  const title = unit === "versions" ? "Staleness" : `Staleness in ${unit}`;
  const h = $("hist-caption");
  if (h.textContent !== title) h.textContent = title;
  $("hist-stats").dataset.unit = unit;
  if (u.axes[0].label !== label) {
    u.axes[0].label = label;
    u.redraw(false, true);
  }
}

function drawHist() {
  const d = st.snap && st.snap.staleness;
  if (!d) return;
  const wid = st.hoverWorker !== null ? st.hoverWorker : view.worker;
  let win;
  let cum;
  let winStats;
  let cumStats;
  let who = "all workers";
  const w = wid !== null ? (d.workers || []).find((x) => x.id === wid) : null;
  if (w) {
    who = `worker ${wid}`;
    cum = histOf(w);
    win = workerWindow(wid, cum);
    cumStats = { mean: w.mean, p99: w.p99, count: w.count };
    winStats = win ? histStats(win) : { mean: null, p99: null, count: 0 };
  } else {
    win = histOf(d.window);
    cum = histOf(d.overall);
    winStats = { mean: d.window.mean, p99: d.window.p99, count: d.window.count };
    cumStats = { mean: d.overall.mean, p99: d.overall.p99, count: d.overall.count };
  }
  if (!cum) return;
  const frac = (h) => {
    const n = h ? h.reduce((a, b) => a + b, 0) : 0;
    return h ? h.map((c) => (n ? c / n : 0)) : null;
  };
  const fw = frac(win);
  const fc = frac(cum);
  let top = 8;
  for (let i = cum.length - 1; i > top; i--) {
    if (cum[i] || (win && win[i])) {
      top = i + 1;
      break;
    }
  }
  top = Math.min(top, cum.length - 1);
  const xs = [];
  for (let i = 0; i <= top; i++) xs.push(i);
  const cut = (a) => (a ? a.slice(0, top + 1) : xs.map(() => null));
  // the chosen view is the bars; the other is the step line
  const sliding = view.hist === "window";
  const bars = sliding ? cut(fw) : cut(fc);
  const line = sliding ? cut(fc) : cut(fw);
  const u = charts.hist;
  st.histStats = sliding ? winStats : cumStats;
  u.setData([xs, bars, line]);
  histUnit(u, d.unit || st.snap.staleness_unit || "versions");
  const s = st.histStats;
  const p = $("hist-stats");
  p.textContent = `${who} · ${sliding ? "sliding window (5 s)" : "cumulative"} · mean ${fmt(s.mean, 2)} · p99 ${fmt(s.p99, 0)} · ${s.count} gradients`;
  p.dataset.worker = wid === null ? "all" : String(wid);
  p.dataset.mode = view.hist;
  p.dataset.mean = s.mean == null ? "" : String(s.mean);
  p.dataset.p99 = s.p99 == null ? "" : String(s.p99);
  p.dataset.count = String(s.count);
}

// ---- the header --------------------------------------------------------------

// the BLAS kernel a cpu run uses, and why (GET /api/v1/status "blas")
function blasTitle(b) {
  const why = {
    library: "the library's own choice",
    environment: "set by OPENBLAS_CORETYPE",
    picked: "picked by stalelab for this CPU" + (b.library ? `; the library chose ${b.library}` : ""),
    fallback: "the library's own: ours failed its start-up check",
  }[b.why] || b.why;
  return `OpenBLAS kernel ${b.kernel}: ${why}; our kernels: ${b.isa}`;
}

function setText(id, t) {
  const e = $(id);
  if (e.textContent !== t) e.textContent = t;
}

function drawHeader() {
  const s = st.snap;
  if (!s) return;
  const c = s.config || {};
  // a model given node by node shows as such; its size and cost on hover
  setText("h-model", typeof c.model === "object" && c.model ? `graph of ${(c.model.nodes || []).length} nodes`
    : c.model || "–");
  const ms = s.model_summary;
  $("h-model").title = ms ? `${ms.nodes} nodes, ${ms.params.toLocaleString("en")} parameters in ` +
    `${ms.param_layers} layers, ${(ms.fwd_flops / 1e6).toPrecision(3)} MFLOPs per sample forward, ` +
    `${(ms.step_flops / 1e6).toPrecision(3)} a training step` : "";
  setText("h-dataset", c.dataset || "–");
  const blas = s.blas ? ` · ${s.blas.kernel} (${s.blas.why})` : "";
  setText("h-device", (s.device || c.device || "–") + blas);
  // the backend's own line (a GPU: its name and memory), why auto fell back
  $("h-device").title = [s.device_about, s.device_note, s.blas && s.device !== "cuda" ? blasTitle(s.blas) : ""]
    .filter(Boolean).join("\n");
  setText("h-rule", schema ? ruleSummary(schema, c) : c.rule);
  setText("h-clock", s.clock || c.clock);
  setText("h-state", s.state === "waiting" ? "waiting for workers" : s.state);
  $("h-state").dataset.state = s.state;
  $("h-state").title = s.waiting_for || "";
  setText("h-version", String(s.version));
  setText("h-epoch", fmt(s.epoch, 2));
  // now (the last rate_window_s seconds), the run's average beside it: a
  // stall shows at once instead of hiding in a run-long mean
  setText("h-sps", s.samples_per_s_avg === undefined ? fmt(s.samples_per_s, 0)
    : `${fmt(s.samples_per_s, 0)} · avg ${fmt(s.samples_per_s_avg, 0)}`);
  $("h-sps").title = `samples/s over the last ${fmt(s.rate_window_s, 0)} s of the run, ` +
    `then over its training time; updates/s ${fmt(s.updates_per_s, 1)} now, ` +
    `${fmt(s.updates_per_s_avg, 1)} on average`;
  // the lr of the next update (under an lr_schedule), and the optimiser
  const lrNow = s.lr_now ?? c.lr;
  setText("h-lr", `${Number(lrNow).toPrecision(3)}${c.optimizer && c.optimizer !== "sgd" ? " · " + c.optimizer : ""}`);
  $("h-lr").title = c.lr_schedule ? `lr ${c.lr} under the ${c.lr_schedule.kind || "constant"} schedule` +
    ` (warm-up ${c.lr_schedule.warmup || 0} updates)` : `lr ${c.lr}, no schedule`;
  // a language model (a gpt on text): its accuracy is the next-token
  // accuracy, and its held-out perplexity and bits per byte beside it
  const lm = s.language_model === true;
  setText("h-acc-label", lm ? "next-token acc." : "test acc.");
  setText("acc-caption", lm ? "Next-token accuracy" : "Test accuracy");
  setText("h-acc", lm ? `${fmt(s.test_acc, 4)} · ppl ${fmt(s.test_ppl, 2)}` : fmt(s.test_acc, 4));
  $("h-acc").title = lm ? `held-out loss ${fmt(s.test_loss, 4)} nats per token: perplexity ` +
    `${fmt(s.test_ppl, 3)}, ${fmt(s.test_bpb, 3)} bits per byte` : "";
  setText("h-run", String(s.run));
  const paused = s.state === "paused";
  setText("pause", paused ? "Resume" : "Pause");
  document.title = `stalelab · ${s.rule} · ${s.state}`;
}

// ---- rendering: at most once a frame -----------------------------------------

let frame = 0;
let dirty = { all: true };
// what: "snap", "series", "markers", "hist" or "all" (what needs drawing)
// New evaluations wait for the next frame that draws anyway (a snapshot
// comes 4 times a second) or at most LINES_MS: an evaluation alone does not
// cost a frame.
function schedule(what = "all") {
  dirty[what] = true;
  if (what === "series") {
    if (!linesLater && !frame)
      linesLater = setTimeout(() => {
        linesLater = 0;
        schedule("lines");
      }, LINES_MS);
    return;
  }
  if (!frame) frame = requestAnimationFrame(render);
}

let filledConfig = "";
let tableAt = 0;
function render() {
  frame = 0;
  // the header is on every tab; the rest of the page only on the live one
  if (view.tab !== "live") {
    if (st.snap && (dirty.snap || dirty.all)) drawHeader();
    dirty.snap = false;
    return;
  }
  const d = dirty;
  dirty = {};
  if (st.snap && (d.snap || d.all)) {
    drawHeader();
    // the table's numbers twice a second; a new or removed worker at once
    const ws = st.snap.workers || [];
    const now = performance.now();
    if (d.all || ws.length !== table.rows.size || now - tableAt >= LINES_MS) {
      tableAt = now;
      table.update(ws, st.snap.model_summary);
    }
    const cfg = JSON.stringify(st.snap.config);
    if (controls && cfg !== filledConfig) {
      filledConfig = cfg;
      controls.fill(st.snap.config);
    }
  }
  if (d.snap || d.hist || d.all) {
    table.markSelected(view.worker);
    drawHist();
  }
  drawSeries(d);
}

// ---- events -------------------------------------------------------------------

function resetRun(id) {
  st.run = id;
  st.series = { t: [], v: [], acc: [], train: [], test: [], coh: [] };
  st.ups = { t: [], v: [], y: [] };
  st.upsWin = [];
  st.history = [];
  st.markers = [];
  $("changes").replaceChildren();
  $("lm-sample-box").hidden = true;
}

function addEval(e) {
  const s = st.series;
  if (s.v.length && e.v <= s.v[s.v.length - 1]) return;
  s.t.push(e.t);
  s.v.push(e.v);
  s.acc.push(e.test_acc);
  s.train.push(e.train_loss ?? null);
  s.test.push(e.test_loss ?? null);
  s.coh.push(e.coherence ?? null);
  // a language model's text at this evaluation: what it has learned
  if (typeof e.sample === "string") {
    $("lm-sample").textContent = e.sample;
    $("lm-sample-v").textContent = `v ${e.v}`;
    $("lm-sample-box").hidden = false;
  }
}

// updates/s before the page opened: from the evaluations' versions and
// times (snapshots then add finer points)
function seedUps(series) {
  const first = st.ups.t.length ? st.ups.t[0] : Infinity;
  const seed = { t: [], v: [], y: [] };
  for (let i = 1; i < series.length; i++) {
    const a = series[i - 1];
    const b = series[i];
    if (b.t > a.t && b.t < first) {
      seed.t.push(b.t);
      seed.v.push(b.v);
      seed.y.push((b.v - a.v) / (b.t - a.t));
    }
  }
  for (const k of ["t", "v", "y"]) st.ups[k] = seed[k].concat(st.ups[k]);
}

// after (re)connecting: the series so far, the settings of this run
let resyncing = null;
async function resync() {
  if (resyncing) return resyncing;
  resyncing = (async () => {
    try {
      const status = await api("GET", "/api/v1/status");
      const m = await api("GET", "/api/v1/metrics?since=0");
      // the run's changes so far: a page opened after them (or back after
      // a lost stream) marks them too
      const ch = await api("GET", `/api/v1/runs/${status.run}/changes`).catch(() => null);
      // the same run unless the daemon restarted while the stream was
      // lost (a status older than the snapshots that came meanwhile is
      // the same run: resetting would drop its events)
      const lost = st.lostAt;
      st.lostAt = null;
      const restarted = lost && status.run === lost.run && status.version < lost.version;
      const same = st.run === status.run && st.snap && !restarted;
      if (!same) resetRun(status.run);
      st.series = { t: [], v: [], acc: [], train: [], test: [], coh: [] };
      for (const e of m.series || []) addEval(e);
      seedUps(m.series || []);
      if (!st.snap || !same) st.snap = { ...status, staleness: null };
      for (const c of (ch && ch.changes) || []) onChange({ ...c, run: status.run });
      if (controls) controls.fill(status.config, !same);
      else buildControls();
      schedule();
    } catch (e) {
      // unreachable (the stream says so) or no run yet (snapshots will come)
      if (e.status !== 0 && e.status !== 409) showError(e);
    } finally {
      resyncing = null;
    }
  })();
  return resyncing;
}

function onSnapshot(d) {
  window.stalelab.snapshots++;
  // run ids only grow while the daemon lives: a snapshot of an older run
  // taken as the new one started (a busy machine) is late, not news, and
  // would fill the form with the old run's settings. After a lost stream
  // (a restarted daemon counts from 1 again) every run id is taken.
  if (st.run !== null && d.run < st.run && !st.lostAt) return;
  if (st.run !== null && d.run !== st.run) {
    resetRun(d.run);
    resync();
  }
  st.run = d.run;
  const prev = st.snap;
  // updates/s over the last second or so of run time (a rate from two
  // snapshots 1/4 s apart jumps with every evaluation pause)
  const lastT = st.ups.t.length ? st.ups.t[st.ups.t.length - 1] : -1;
  if (prev && prev.run === d.run && d.t > lastT) {
    const win = st.upsWin;
    win.push([d.t, d.version]);
    while (win.length > 2 && d.t - win[1][0] >= UPS_SPAN) win.shift();
    const [t0, v0] = win[0];
    if (d.t > t0) {
      st.ups.t.push(d.t);
      st.ups.v.push(d.version);
      st.ups.y.push((d.version - v0) / (d.t - t0));
      if (st.ups.y.length > UPS_MAX) for (const k of ["t", "v", "y"]) st.ups[k].splice(0, st.ups[k].length - UPS_MAX);
    }
  }
  st.snap = d;
  drawDiverged();
  if (d.caption && d.caption !== st.caption) showCaption(d.caption);
  if (d.staleness) {
    const now = performance.now();
    st.history.push({ at: now, workers: new Map((d.staleness.workers || []).map((w) => [w.id, w.hist])) });
    while (st.history.length > 2 && st.history[1].at < now - WINDOW_MS) st.history.shift();
  }
  schedule("snap");
}

// a diverged run waits for Recover (POST /api/v1/run/recover): the banner
// says where it diverged and where Recover resumes, with the lr to use
function drawDiverged() {
  const s = st.snap;
  const d = s && s.state === "diverged" ? s.diverged : null;
  $("diverged").hidden = !d;
  if (!d) return;
  const r = s.recover || {};
  const from = r.from === "start" ? "starts it over from v 0 (no good evaluation was kept)"
    : `resumes it from v ${r.from_v}, its last good checkpoint,`;
  setText("diverged-text", `Run ${s.run} diverged at v ${d.v}: worker ${d.worker}'s ${d.what} ` +
    `is not finite (computed on v ${d.v_read}); nothing of it was applied. Recover ${from} with a smaller lr.`);
  const inp = $("recover-lr");
  const key = `${s.run}:${d.v}`;
  if (inp.dataset.for !== key) { // a new divergence: the suggested lr
    inp.dataset.for = key;
    inp.value = r.lr;
  }
  logDiverged({ ...d, run: s.run });
}

// the divergence in the changes list, once, from its event or (should a
// slow page have lost the event in the stream) from the first snapshot
let divLogged = "";
function logDiverged(d) {
  const key = `${d.run}:${d.v}`;
  if (key === divLogged) return;
  divLogged = key;
  logChange(`worker ${d.worker}'s ${d.what} is not finite at v ${d.v}: the run waits`, "diverged");
}

async function recover() {
  const lr = Number($("recover-lr").value);
  try {
    const r = await api("POST", "/api/v1/run/recover", lr > 0 ? { lr } : {});
    const g = r.recovered || {};
    toast(`run ${r.run} goes on from v ${g.from_v} with lr ${g.lr}`, "good");
    $("diverged").hidden = true;
  } catch (e) {
    showError(e);
  }
}

function logChange(text, origin, v) {
  const li = document.createElement("li");
  const t = document.createElement("span");
  t.className = "when";
  const s = st.snap;
  t.textContent = v !== undefined ? `v ${v}` : s ? `v ${s.version}` : "";
  li.append(t, ` ${origin ? origin + ": " : ""}${text}`);
  const ul = $("changes");
  ul.prepend(li);
  while (ul.children.length > 30) ul.lastChild.remove();
}

function onChange(c) {
  if (c.run !== undefined && st.run !== null && c.run !== st.run) return;
  const label = changeLabel(c);
  // once each: the stream and the run's list (a late page) may both bring it
  if (st.markers.some((k) => k.x.t === c.t && k.x.v === c.v && k.label === label)) return;
  const m = { x: { t: c.t, v: c.v }, label, origin: c.origin, received: Date.now(), drawn: 0, seq: ++st.seq };
  // in run order: those a late page fetches come after the live ones
  const at = st.markers.findIndex((k) => k.x.t > c.t);
  if (at < 0) st.markers.push(m);
  else st.markers.splice(at, 0, m);
  if (st.markers.length > MARKERS_MAX) st.markers.shift();
  logChange(m.label, c.origin, c.v);
  schedule("markers");
}

// a demo scene's caption, shown large over the charts until the next one
// (snapshots carry the current one, so a page opened mid-scene shows it)
function showCaption(text) {
  st.caption = text;
  $("caption-text").textContent = text;
  $("caption").hidden = false;
}

function onCaption(c) {
  showCaption(c.caption);
  logChange(`scene ${c.scene + 1}: ${c.caption}`, "demo");
}

const handlers = {
  snapshot: onSnapshot,
  change: onChange,
  eval: (e) => {
    if (e.run !== undefined && e.run !== st.run) return;
    addEval(e);
    schedule("series");
  },
  run: (r) => {
    resetRun(r.run);
    logChange(`new run ${r.run}: ${r.rule}, ${r.workers} workers`, "");
    resync();
  },
  diverged: logDiverged,
  end: (e) => logChange(`run finished (${e.stop}), test accuracy ${fmt(e.test_acc, 4)}`, ""),
  caption: onCaption,
  checkpoint: (c) => logChange(`checkpoint ${c.path}`, "schedule"),
};

// ---- actions ----------------------------------------------------------------------

async function patchRun(body) {
  return api("PATCH", "/api/v1/run", body);
}

function bindToolbar() {
  const seg = (name, key, redraw) => {
    for (const b of document.querySelectorAll(`[data-${name}]`)) {
      b.setAttribute("aria-pressed", String(b.dataset[name] === view[key]));
      b.addEventListener("click", () => {
        view[key] = b.dataset[name];
        for (const o of document.querySelectorAll(`[data-${name}]`))
          o.setAttribute("aria-pressed", String(o === b));
        saveView();
        redraw();
      });
    }
  };
  seg("xaxis", "x", () => {
    makeCharts();
    schedule();
    if (compare && view.tab === "compare") compare.render();
  });
  seg("histmode", "hist", () => {
    makeCharts(); // the legend names the bars
    schedule();
  });
  $("pause").addEventListener("click", () =>
    patchRun({ paused: !(st.snap && st.snap.state === "paused") }).catch(showError));
  $("reset").addEventListener("click", async () => {
    try {
      const status = await api("GET", "/api/v1/status");
      await api("POST", "/api/v1/run", status.config);
      toast("a fresh run with the same settings started", "good");
    } catch (e) {
      showError(e);
    }
  });
  $("checkpoint").addEventListener("click", async () => {
    try {
      const r = await api("POST", "/api/v1/checkpoint", {});
      toast(`checkpoint written: ${r.path} (${(r.bytes / 1e6).toFixed(1)} MB, v ${r.version})`, "good");
    } catch (e) {
      showError(e);
    }
  });
  $("fullscreen").addEventListener("click", toggleProjector);
  $("recover").addEventListener("click", recover);
  $("caption-close").addEventListener("click", () => ($("caption").hidden = true));
  document.addEventListener("keydown", (e) => {
    const typing = e.target.closest && e.target.closest("input, select, textarea, dialog");
    if (!typing && (e.key === "f" || e.key === "F") && !e.ctrlKey && !e.metaKey && !e.altKey) toggleProjector();
  });
  document.addEventListener("fullscreenchange", () => {
    if (!document.fullscreenElement && document.body.classList.contains("projector")) toggleProjector();
  });
  for (const fig of document.querySelectorAll("figure[data-chart]")) {
    const k = fig.dataset.chart;
    const title = fig.querySelector("h2").textContent;
    fig.querySelector(".png").addEventListener("click", () => downloadPNG(charts[k], title, `stalelab-${k}.png`));
    fig.querySelector(".csv").addEventListener("click", () =>
      downloadCSV(charts[k], k === "hist" ? "staleness" : view.x === "t" ? "t" : "v", `stalelab-${k}.csv`));
  }
  $("worker-pick").addEventListener("change", (e) => selectWorker(e.target.value === "" ? null : Number(e.target.value), true));
  // the tabs: click, or the arrow keys once one has the focus
  const tabs = [...document.querySelectorAll("[role=tab]")];
  for (const b of tabs) {
    b.addEventListener("click", () => showTab(b.dataset.tab));
    b.addEventListener("keydown", (e) => {
      const d = e.key === "ArrowRight" ? 1 : e.key === "ArrowLeft" ? -1 : 0;
      if (!d) return;
      e.preventDefault();
      const next = tabs[(tabs.indexOf(b) + d + tabs.length) % tabs.length];
      showTab(next.dataset.tab);
      next.focus();
    });
  }
}

function toggleProjector() {
  const on = !document.body.classList.contains("projector");
  document.body.classList.toggle("projector", on);
  if (on && document.documentElement.requestFullscreen)
    document.documentElement.requestFullscreen().catch(() => {});
  else if (!on && document.fullscreenElement) document.exitFullscreen().catch(() => {});
  $("fullscreen").setAttribute("aria-pressed", String(on));
  makeCharts(); // larger type, taller charts
  schedule();
}

function selectWorker(id, sticky) {
  if (sticky) {
    view.worker = id;
    saveView();
    syncWorkerPick();
  } else {
    st.hoverWorker = id;
  }
  schedule("hist");
}

function syncWorkerPick() {
  const sel = $("worker-pick");
  const ids = st.snap && st.snap.workers ? st.snap.workers.map((w) => w.id) : [];
  if (view.worker !== null && !ids.includes(view.worker)) ids.push(view.worker);
  const want = ["", ...ids.map(String)];
  if ([...sel.options].map((o) => o.value).join() !== want.join()) {
    sel.replaceChildren(new Option("all workers", ""), ...ids.map((i) => new Option(`worker ${i}`, String(i))));
  }
  sel.value = view.worker === null ? "" : String(view.worker);
}

function showTab(tab) {
  view.tab = tab;
  saveView();
  for (const b of document.querySelectorAll("[role=tab]")) {
    const on = b.dataset.tab === tab;
    b.setAttribute("aria-selected", String(on));
    b.tabIndex = on ? 0 : -1;
    $(b.getAttribute("aria-controls")).hidden = !on;
  }
  if (tab === "compare") compare.load();
  else if (tab === "sweeps") sweeps.load();
  else if (tab === "cluster") cluster.load();
  else schedule();
}

// ---- start ----------------------------------------------------------------------

// the run controls, from the daemon's schema; a daemon out of reach at load
// gets asked again when the stream opens (resync)
async function buildControls() {
  if (controls) return;
  try {
    schema = await loadSchema();
    $("schema-source").textContent = "from GET /api/v1/schema";
    controls = new Controls($("controls"), schema, {
      apply: patchRun,
      newRun: (body) => api("POST", "/api/v1/run", body),
    });
    if (st.snap) controls.fill(st.snap.config);
  } catch (e) {
    if (e.status !== 0) showError(e);
  }
}

// ?snapshot: the run as it is now, drawn once with no live stream, for a
// screenshot or a printed report (chromium --headless --screenshot ends:
// nothing stays open); body[data-ready] says when it is drawn
const SNAPSHOT = new URLSearchParams(location.search).has("snapshot");

async function drawOnce() {
  try {
    const [status, staleness] = await Promise.all([api("GET", "/api/v1/status"),
      api("GET", "/api/v1/staleness")]);
    onSnapshot({ ...status, staleness });
    await resync();
    setConn({ state: "snapshot" });
  } catch (e) {
    showError(e);
  }
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  document.body.dataset.ready = "1";
}

async function main() {
  setTokenPrompt(askToken);
  makeCharts();
  table = new WorkerTable($("workers"), {
    patch: (id, body) => api("PATCH", `/api/v1/workers/${id}`, body),
    setCount: (n) => api("PUT", "/api/v1/workers", { count: n }),
    select: selectWorker,
    error: showError,
  });
  compare = new CompareView($("compare-body"), {
    runs: () => view.runs,
    setRuns: (r) => {
      view.runs = r;
      saveView();
    },
    xKey: () => view.x,
  }, showError);
  sweeps = new SweepsView($("sweeps-body"), {
    name: () => view.sweep,
    setName: (n) => {
      view.sweep = n;
      saveView();
    },
  }, showError);
  cluster = new ClusterView($("cluster-body"), {
    name: () => view.sim,
    setName: (n) => {
      view.sim = n;
      saveView();
    },
  }, showError);
  window.stalelab.cluster = cluster;
  bindToolbar();
  showTab(view.tab);
  if (SNAPSHOT) await drawOnce();
  else connectEvents(view.hz, handlers, setConn);
  await buildControls();
  // the worker picker follows the worker count
  setInterval(syncWorkerPick, 1000);
  syncWorkerPick();
}

main();
