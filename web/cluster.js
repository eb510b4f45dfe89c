// cluster.js - the Cluster view: the finished cluster simulations the
// daemon was pointed at (stalelab serve --clusters DIR, GET
// /api/v1/clusters), one opened: each policy's summary with jigsaw's gain
// over fifo and over the best other policy, the GPUs in use and the jobs
// queued over time, the job completion times' distribution, the schedules
// the jobs finished under, and the inputs with their origin.

import { api } from "./api.js";
import { el } from "./dom.js";
import { C, RUN_COLOURS, downloadPNG, downloadCSV } from "./charts.js";

const uPlot = window.uPlot;
const enc = encodeURIComponent;

// a colour per policy, the same in every chart and table
const POLICY_COLOUR = { fifo: C.ink, srtf: C.sky, las: C.purple, gandiva: C.orange, jigsaw: C.blue };
const colour = (p, i) => POLICY_COLOUR[p] || RUN_COLOURS[i % RUN_COLOURS.length];


// seconds as hours, or as seconds when short
export function dur(s) {
  const x = Number(s);
  if (!Number.isFinite(x)) return "";
  if (Math.abs(x) < 3600) return `${Number(x.toPrecision(3))} s`;
  return `${Number((x / 3600).toPrecision(4))} h`;
}
const pct = (x) => (Number.isFinite(x) ? `${x >= 0 ? "+" : ""}${(100 * x).toFixed(1)}%` : "");
const num = (x, d) => (Number.isFinite(Number(x)) ? Number(x).toFixed(d) : "");

// each policy's summary as numbers: [{policy, jobs, avg, p50, p95, makespan,
// alloc, compute, samples, preemptions, gain}]
export function summaryRows(csv) {
  if (!csv || !csv.rows) return [];
  const at = (name) => csv.columns.indexOf(name);
  const get = (r, name) => (at(name) < 0 ? NaN : Number(r[at(name)]));
  return csv.rows.map((r) => ({
    policy: r[at("policy")],
    jobs: get(r, "jobs"),
    avg: get(r, "avg_jct_s"),
    p50: get(r, "p50_jct_s"),
    p95: get(r, "p95_jct_s"),
    makespan: get(r, "makespan_s"),
    alloc: get(r, "util_alloc"),
    compute: get(r, "util_compute"),
    samples: get(r, "samples_per_gpu_h"),
    preemptions: get(r, "preemptions"),
    gain: get(r, "gain_vs_fifo"),
  }));
}

// jigsaw's gain (a makespan ratio, as the summary's gain_vs_fifo) over
// fifo and over the best other policy; null without jigsaw
export function jigsawGain(rows) {
  const j = rows.find((r) => r.policy === "jigsaw");
  if (!j || !(j.makespan > 0)) return null;
  const others = rows.filter((r) => r.policy !== "jigsaw" && r.makespan > 0);
  const fifo = others.find((r) => r.policy === "fifo");
  const best = others.reduce((b, r) => (!b || r.makespan < b.makespan ? r : b), null);
  return {
    fifo: fifo ? fifo.makespan / j.makespan - 1 : null,
    best: best ? best.policy : null,
    over_best: best ? best.makespan / j.makespan - 1 : null,
    jct_fifo: fifo ? fifo.avg / j.avg - 1 : null,
    jct_best: others.length ? Math.min(...others.map((r) => r.avg)) / j.avg - 1 : null,
  };
}

// [x, y] with x rising and each x once: at equal x the last y (a
// distribution's share after every job done by then; a timeline's state
// after every decision at that time)
export function lastAtEachX(x, y) {
  const xs = [], ys = [];
  for (let i = 0; i < x.length; i++) {
    if (xs.length && x[i] === xs[xs.length - 1]) ys[ys.length - 1] = y[i];
    else {
      xs.push(x[i]);
      ys.push(y[i]);
    }
  }
  return [xs, ys];
}

// several policies' [x, y] columns onto one x axis (uPlot's layout)
function join(cols) {
  return uPlot.join(cols.map(([x, y]) => lastAtEachX(x, y)));
}

// state: {name(): the simulation open (or ""), setName(n)}
export class ClusterView {
  constructor(root, state, onError) {
    this.root = root;
    this.state = state;
    this.onError = onError;
    this.charts = [];
    this.byKey = {}; // the charts drawn, by key (gpus, queued, jct)
    this.list = el("ul", { className: "sweep-list cluster-list" });
    this.body = el("div", { className: "cluster-body" });
    const refresh = el("button", { type: "button", textContent: "Refresh" });
    refresh.addEventListener("click", () => this.load());
    this.dir = el("p", { className: "hint" });
    root.replaceChildren(el("div", { className: "sweep-head" }, el("h2", { textContent: "Cluster simulations" }), refresh),
      this.dir, this.list, this.body);
  }

  async load() {
    let d;
    try {
      d = await api("GET", "/api/v1/clusters");
    } catch (e) {
      if (e.status === 404) {
        this.dir.textContent = "This daemon serves no cluster simulations: start it with stalelab serve --clusters DIR "
          + "(a stalelab cluster --out directory, or a directory of them).";
        this.list.replaceChildren();
        this.clear();
        return;
      }
      this.onError(e);
      return;
    }
    this.sims = d.simulations || [];
    this.dir.textContent = `${this.sims.length} simulation${this.sims.length === 1 ? "" : "s"} in ${d.dir}`;
    this.list.replaceChildren(...this.sims.map((s) => {
      const b = el("button", { type: "button", className: "sweep-pick cluster-pick", textContent: s.name });
      b.dataset.sim = s.name;
      b.setAttribute("aria-pressed", String(s.name === this.state.name()));
      b.addEventListener("click", () => this.open(s.name));
      return el("li", {}, b, el("span", { className: "hint",
        textContent: ` ${s.jobs ?? "?"} jobs · ${s.gpus ?? "?"} GPUs · ${(s.policies || []).join(", ")}` }));
    }));
    const want = this.state.name();
    if (want && this.sims.some((s) => s.name === want)) this.open(want);
    else if (this.sims.length) this.open(this.sims[0].name);
    else this.clear();
  }

  clear() {
    for (const c of this.charts) c.destroy();
    this.charts = [];
    this.byKey = {};
    this.body.replaceChildren();
  }

  async open(name) {
    this.state.setName(name);
    for (const b of this.list.querySelectorAll(".cluster-pick")) b.setAttribute("aria-pressed", String(b.dataset.sim === name));
    // the last one asked for wins: an earlier answer arriving late (a
    // large simulation opened first) is dropped
    const ask = (this.asked = (this.asked || 0) + 1);
    let s;
    try {
      s = await api("GET", `/api/v1/clusters/${enc(name)}`);
    } catch (e) {
      if (ask === this.asked) this.onError(e);
      return;
    }
    if (ask !== this.asked) return;
    this.clear();
    this.sim = s;
    const spec = s.spec || {};
    const rows = summaryRows(s.summary);
    const parts = [el("h2", { textContent: name }),
      el("p", { className: "cluster-about", textContent: `${spec.jobs} jobs on ${spec.gpus} GPUs of ${spec.gpu_mem_gb} GB`
        + `${spec.spb === "best" ? ", every job under its best schedule" : ""}`
        + `${spec.restart_s ? `, ${spec.restart_s} s per restart` : ""}; simulated ${spec.written || "?"} by stalelab ${spec.stalelab || "?"}` })];
    const g = jigsawGain(rows);
    if (g) {
      parts.push(el("p", { className: "cluster-gain", textContent: `jigsaw: makespan ${pct(g.fifo)} over fifo, `
        + `${pct(g.over_best)} over the best other policy (${g.best}); average JCT ${pct(g.jct_fifo)} over fifo's, `
        + `${pct(g.jct_best)} over the best other's. Gains are the other's time over jigsaw's, less 1.` }));
    }
    parts.push(this.summaryTable(rows));
    const figs = el("div", { className: "cluster-charts" });
    parts.push(figs);
    parts.push(el("h3", { textContent: "Schedules the jobs finished under" }), this.schedTable(s));
    parts.push(...this.inputs(spec));
    parts.push(el("h3", { textContent: "Files" }), el("p", { className: "cluster-files" },
      ...(s.files || []).flatMap((f, i) => [i ? " · " : "", el("a", { href: `/api/v1/clusters/${enc(name)}/files/${enc(f)}`,
        download: `${name}-${f}`, textContent: f })])));
    this.body.replaceChildren(...parts);
    this.drawCharts(s, rows, figs);
  }

  summaryTable(rows) {
    const cols = [["policy", (r) => r.policy, null], ["avg JCT", (r) => dur(r.avg), "avg"], ["p50 JCT", (r) => dur(r.p50), "p50"],
      ["p95 JCT", (r) => dur(r.p95), "p95"], ["makespan", (r) => dur(r.makespan), "makespan"],
      ["GPU allocation", (r) => num(r.alloc, 3), null], ["compute utilisation", (r) => num(r.compute, 3), null],
      ["samples / GPU-h", (r) => (Number.isFinite(r.samples) ? Math.round(r.samples).toLocaleString("en") : ""), "-samples"],
      ["preemptions", (r) => String(r.preemptions), null], ["gain vs fifo", (r) => pct(r.gain), "-gain"]];
    // the best of a column: lowest (or highest, "-") marked
    const best = {};
    for (const [, , k] of cols) {
      if (!k) continue;
      const key = k.replace(/^-/, "");
      const vals = rows.map((r) => r[key]).filter(Number.isFinite);
      if (vals.length > 1) best[key] = k.startsWith("-") ? Math.max(...vals) : Math.min(...vals);
    }
    const head = el("tr", {}, ...cols.map(([h]) => el("th", { scope: "col", textContent: h })));
    const body = rows.map((r, i) => {
      const tr = el("tr", {}, ...cols.map(([, f, k], j) => {
        const key = k && k.replace(/^-/, "");
        const td = el(j ? "td" : "th", j ? { textContent: f(r) } : { scope: "row", textContent: f(r) });
        if (key && best[key] === r[key]) td.classList.add("best");
        return td;
      }));
      tr.dataset.policy = r.policy;
      tr.firstChild.style.borderLeft = `6px solid ${colour(r.policy, i)}`;
      return tr;
    });
    return el("div", { className: "table-scroll" },
      el("table", { className: "compare cluster-summary" }, el("thead", {}, head), el("tbody", {}, ...body)));
  }

  schedTable(s) {
    const pols = Object.keys(s.series || {});
    const names = [...new Set(pols.flatMap((p) => Object.keys((s.series[p] || {}).schedules || {})))];
    const head = el("tr", {}, el("th", { scope: "col", textContent: "policy" }),
      ...names.map((n) => el("th", { scope: "col", textContent: n })));
    const body = pols.map((p) => el("tr", {}, el("th", { scope: "row", textContent: p }),
      ...names.map((n) => {
        const x = s.series[p] || {};
        const k = (x.schedules || {})[n] || 0;
        return el("td", { textContent: k ? `${k} (${((100 * k) / (x.jobs || 1)).toFixed(0)}%)` : "" });
      })));
    return el("div", { className: "table-scroll" },
      el("table", { className: "compare cluster-sched" }, el("thead", {}, head), el("tbody", {}, ...body)));
  }

  inputs(spec) {
    const out = [el("h3", { textContent: "Inputs" })];
    const notes = (label, file, list) => el("div", { className: "cluster-input" },
      el("p", {}, el("strong", { textContent: `${label}: ` }), el("code", { textContent: file || "?" })),
      ...(list && list.length ? [el("pre", { className: "cluster-notes", textContent: list.join("\n") })] : []));
    out.push(notes("trace", spec.trace, spec.trace_notes), notes("profiles", spec.profiles, spec.profiles_notes));
    const head = el("tr", {}, ...["model", "schedule", "compute", "comm", "memory GB", "iterations × full"].map((h) =>
      el("th", { scope: "col", textContent: h })));
    const body = (spec.models || []).flatMap((m) => (m.schedules || []).map((x) => el("tr", {},
      el("td", { textContent: m.name }), el("td", { textContent: x.name }),
      el("td", { textContent: `${Number((1000 * x.compute_s).toPrecision(4))} ms` }),
      el("td", { textContent: `${Number((1000 * x.comm_s).toPrecision(4))} ms` }),
      el("td", { textContent: String(Number(Number(x.mem_gb).toPrecision(4))) }),
      el("td", { textContent: String(x.iter_mult) }))));
    out.push(el("div", { className: "table-scroll" },
      el("table", { className: "compare cluster-profiles" }, el("thead", {}, head), el("tbody", {}, ...body))));
    if (spec.command) out.push(el("p", {}, el("strong", { textContent: "command: " }), el("code", { className: "cluster-command", textContent: spec.command })));
    return out;
  }

  figure(key, title, figs) {
    const box = el("div", { className: "plot" });
    const png = el("button", { type: "button", textContent: "PNG" });
    const csv = el("button", { type: "button", textContent: "CSV" });
    const f = el("figure", { className: "chart" }, el("figcaption", {}, el("h3", { textContent: title }),
      el("span", { className: "tools" }, png, csv)), box);
    f.dataset.chart = key;
    figs.append(f);
    return { box, png, csv };
  }

  chart(key, title, xName, figs, build) {
    const { box, png, csv } = this.figure(key, title, figs);
    const [opts, data] = build(box.clientWidth || 560);
    const u = new uPlot(opts, data, box);
    png.addEventListener("click", () => downloadPNG(u, title, `stalelab-${this.state.name()}-${key}.png`));
    csv.addEventListener("click", () => downloadCSV(u, xName, `stalelab-${this.state.name()}-${key}.csv`));
    new ResizeObserver(() => {
      const w = Math.floor(box.clientWidth);
      if (w > 0 && w !== u.width) u.setSize({ width: w, height: u.height });
    }).observe(box);
    this.charts.push(u);
    this.byKey[key] = u;
    return u;
  }

  drawCharts(s, rows, figs) {
    const pols = rows.map((r) => r.policy).filter((p) => s.series && s.series[p] && s.series[p].timeline);
    if (!pols.length) {
      figs.append(el("p", { className: "hint", textContent: "No timelines in this simulation's directory." }));
      return;
    }
    const gpus = (s.spec || {}).gpus || 1;
    const steps = uPlot.paths.stepped({ align: 1 });
    const seriesOf = (fmtV) => pols.map((p, i) => ({ label: p, stroke: colour(p, i), width: 2, paths: steps,
      spanGaps: true, points: { show: false }, value: (u, v) => (v == null ? "" : fmtV(v)) }));
    const axis = (label, extra = {}) => ({ label, stroke: C.ink, grid: { stroke: C.grid }, ticks: { stroke: C.grid }, ...extra });
    const hours = (p, k) => [s.series[p].timeline.t.map((t) => t / 3600), s.series[p].timeline[k]];
    const reduced = pols.some((p) => s.series[p].timeline.spans > 0);
    const over = reduced ? " (means over equal spans)" : "";
    this.chart("gpus", `GPUs in use (of ${gpus})${over}`, "hours", figs, (w) => [{
      width: w, height: 280,
      scales: { x: { time: false }, y: { range: [0, gpus] } },
      series: [{ label: "hours", value: (u, v) => (v == null ? "" : v.toFixed(2)) }, ...seriesOf((v) => v.toFixed(1))],
      axes: [axis("hours"), axis("GPUs in use", { size: 56 })],
      cursor: { drag: { x: true, y: false } },
    }, join(pols.map((p) => hours(p, "in_use")))]);
    this.chart("queued", `Jobs waiting${over}`, "hours", figs, (w) => [{
      width: w, height: 280,
      scales: { x: { time: false } },
      series: [{ label: "hours", value: (u, v) => (v == null ? "" : v.toFixed(2)) }, ...seriesOf((v) => v.toFixed(1))],
      axes: [axis("hours"), axis("jobs waiting", { size: 56 })],
      cursor: { drag: { x: true, y: false } },
    }, join(pols.map((p) => hours(p, "queued")))]);
    const jctCols = pols.map((p) => [s.series[p].jct.s.map((x) => Math.max(x, 1) / 3600), s.series[p].jct.share]);
    this.chart("jct", "Job completion time: share of jobs done within", "hours", figs, (w) => [{
      width: w, height: 280,
      scales: { x: { time: false, distr: 3 }, y: { range: [0, 1] } },
      series: [{ label: "JCT, hours", value: (u, v) => (v == null ? "" : dur(v * 3600)) },
        ...seriesOf((v) => `${(100 * v).toFixed(1)}%`)],
      axes: [axis("job completion time, hours (log)"), axis("share of jobs", { size: 56, values: (u, vs) => vs.map((v) => `${Math.round(100 * v)}%`) })],
      cursor: { drag: { x: true, y: false } },
    }, join(jctCols)]);
  }
}
