// compare.js - the compare view: this run's test accuracy overlaid with the
// daemon's earlier runs (GET /api/v1/runs), and their run objects side by
// side with the differing settings marked.

import { api } from "./api.js";
import { el } from "./dom.js";
import { C, RUN_COLOURS, fmt, downloadPNG, downloadCSV } from "./charts.js";

const uPlot = window.uPlot;

// {"a": {"b": 1}} -> {"a.b": 1}; arrays as JSON
function flatten(o, prefix = "", out = {}) {
  for (const [k, v] of Object.entries(o || {})) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v && typeof v === "object" && !Array.isArray(v)) flatten(v, key, out);
    else out[key] = Array.isArray(v) ? JSON.stringify(v) : v;
  }
  return out;
}

// merge several runs' series onto one x axis (uPlot's data layout)
export function alignSeries(runs, xKey, yKey) {
  const xs = [...new Set(runs.flatMap((r) => (r.series || []).map((p) => p[xKey])))].sort((a, b) => a - b);
  const index = new Map(xs.map((x, i) => [x, i]));
  const cols = runs.map((r) => {
    const col = new Array(xs.length).fill(null);
    for (const p of r.series || []) col[index.get(p[xKey])] = p[yKey];
    return col;
  });
  return [xs, ...cols];
}


// state: {get runs(): ids chosen (array), set, xKey(): "t"|"v"}
export class CompareView {
  constructor(root, state, onError) {
    this.root = root;
    this.state = state;
    this.onError = onError;
    this.runs = [];
    this.chart = null;
    this.list = el("fieldset", { className: "run-list" }, el("legend", { textContent: "runs of this daemon" }));
    this.plotBox = el("div", { className: "plot" });
    const png = el("button", { type: "button", textContent: "PNG" });
    const csv = el("button", { type: "button", textContent: "CSV" });
    png.addEventListener("click", () => this.chart && downloadPNG(this.chart, "Test accuracy by run", "stalelab-compare.png"));
    csv.addEventListener("click", () => this.chart && downloadCSV(this.chart, this.state.xKey(), "stalelab-compare.csv"));
    const refresh = el("button", { type: "button", textContent: "Refresh" });
    refresh.addEventListener("click", () => this.load());
    this.figure = el("figure", { className: "chart wide" },
      el("figcaption", {}, el("h2", { textContent: "Test accuracy by run" }),
        el("span", { className: "tools" }, refresh, png, csv)),
      this.plotBox);
    this.table = el("div", { className: "table-scroll" });
    root.replaceChildren(this.list, this.figure, el("h2", { textContent: "Settings side by side" }), this.table);
    new ResizeObserver(() => {
      const w = Math.floor(this.plotBox.clientWidth);
      if (this.chart && w > 0 && w !== this.chart.width) this.chart.setSize({ width: w, height: 320 });
    }).observe(this.plotBox);
  }

  async load() {
    try {
      const d = await api("GET", "/api/v1/runs");
      this.runs = d.runs || [];
    } catch (e) {
      this.onError(e);
      return;
    }
    let chosen = this.state.runs().filter((id) => this.runs.some((r) => r.run === id));
    if (!chosen.length) chosen = this.runs.slice(-4).map((r) => r.run);
    this.state.setRuns(chosen);
    this.render();
  }

  chosen() {
    const ids = this.state.runs();
    return this.runs.filter((r) => ids.includes(r.run));
  }

  label(r) {
    const c = r.config || {};
    return `run ${r.run}: ${c.rule}, ${c.workers} workers`;
  }

  render() {
    const ids = new Set(this.state.runs());
    const boxes = this.runs.map((r) => {
      const cb = el("input", { type: "checkbox", checked: ids.has(r.run), value: String(r.run) });
      cb.addEventListener("change", () => {
        const now = new Set(this.state.runs());
        if (cb.checked) now.add(r.run);
        else now.delete(r.run);
        this.state.setRuns([...now].sort((a, b) => a - b));
        this.render();
      });
      return el("label", { className: "run-pick" }, cb,
        ` ${this.label(r)} · ${r.state} · best ${fmt(r.best_acc, 4)} · staleness ${fmt(r.staleness_mean, 2)}`);
    });
    this.list.replaceChildren(this.list.firstChild, ...(boxes.length ? boxes : [el("p", { textContent: "no runs yet" })]));
    this.drawChart();
    this.drawTable();
  }

  drawChart() {
    const runs = this.chosen();
    const xKey = this.state.xKey();
    if (this.chart) {
      this.chart.destroy();
      this.chart = null;
    }
    if (!runs.length) return;
    const opts = {
      width: this.plotBox.clientWidth || 600,
      height: 320,
      scales: { x: { time: false } },
      series: [{ label: xKey === "t" ? "seconds" : "version" },
        ...runs.map((r, i) => ({ label: this.label(r), stroke: RUN_COLOURS[i % RUN_COLOURS.length], width: 2,
          dash: i >= RUN_COLOURS.length ? [6, 3] : undefined, spanGaps: true, points: { show: false } }))],
      axes: [{ label: xKey === "t" ? "run time (s)" : "version (updates)", stroke: C.ink, grid: { stroke: C.grid } },
        { label: "test accuracy", stroke: C.ink, grid: { stroke: C.grid }, size: 56 }],
      cursor: { drag: { x: true, y: false } },
    };
    this.chart = new uPlot(opts, alignSeries(runs, xKey, "test_acc"), this.plotBox);
  }

  drawTable() {
    const runs = this.chosen();
    if (!runs.length) {
      this.table.replaceChildren();
      return;
    }
    const flat = runs.map((r) => flatten(r.config));
    const keys = [...new Set(flat.flatMap((f) => Object.keys(f)))];
    const head = el("tr", {}, el("th", { scope: "col", textContent: "setting" }),
      ...runs.map((r, i) => {
        const th = el("th", { scope: "col", textContent: `run ${r.run}` });
        th.style.borderBottom = `4px solid ${RUN_COLOURS[i % RUN_COLOURS.length]}`;
        return th;
      }));
    const result = [["state", (r) => r.state], ["version", (r) => r.version], ["epoch", (r) => fmt(r.epoch, 2)],
      ["test_acc", (r) => fmt(r.test_acc, 4)], ["best_acc", (r) => fmt(r.best_acc, 4)],
      ["staleness_mean", (r) => fmt(r.staleness_mean, 2)]];
    const rows = result.map(([k, f]) => el("tr", { className: "result" }, el("th", { scope: "row", textContent: k }),
      ...runs.map((r) => el("td", { textContent: String(f(r)) }))));
    for (const k of keys) {
      const vals = flat.map((f) => (f[k] === undefined ? "" : String(f[k])));
      const differs = new Set(vals).size > 1;
      rows.push(el("tr", { className: differs ? "differs" : "" },
        el("th", { scope: "row", textContent: k + (differs ? " ≠" : "") }),
        ...vals.map((v) => el("td", { textContent: v }))));
    }
    this.table.replaceChildren(el("table", { className: "compare" }, el("thead", {}, head), el("tbody", {}, ...rows)));
  }
}
