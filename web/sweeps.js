// sweeps.js - the Sweeps view: the finished sweeps the daemon was pointed at
// (stalelab serve --sweeps DIR, GET /api/v1/sweeps), one opened: the figures
// `stalelab plot` drew (loss, accuracy, staleness, slowdown, as SVG images;
// a click opens one full size), its results.csv as a table, its summary
// over seeds when written, and the sweep file it ran.

import { api } from "./api.js";
import { el } from "./dom.js";

const ROWS_MAX = 500; // results shown; the rest are in results.csv
// results.csv's columns worth a glance, after the axes
const SHOWN = ["final_acc", "best_acc", "updates_to_target", "virtual_s_to_target", "stale_mean",
  "stale_p99", "bytes_sent", "coherence", "diverged"];
const METRICS = new Set(["final_acc", "best_acc", "test_loss", "updates", "samples", "epochs", "virtual_s",
  "updates_to_target", "virtual_s_to_target", "epochs_to_target", "stale_mean", "stale_p50", "stale_p99",
  "stale_max", "bytes_sent", "bytes_recv", "comm_s", "coherence", "step_flops", "bwd_flops", "bwd_flops_saved",
  "stop", "diverged", "train_s", "samples_per_s"]);


// a number as text: at most 4 significant digits, integers whole
function num(s) {
  if (s === "" || s === undefined) return "";
  const x = Number(s);
  if (!Number.isFinite(x)) return s;
  if (Number.isInteger(x)) return String(x);
  return String(Number(x.toPrecision(4)));
}

const enc = encodeURIComponent;

// state: {name(): the sweep open (or ""), setName(n)}
export class SweepsView {
  constructor(root, state, onError) {
    this.root = root;
    this.state = state;
    this.onError = onError;
    this.list = el("ul", { className: "sweep-list" });
    this.body = el("div", { className: "sweep-body" });
    const refresh = el("button", { type: "button", textContent: "Refresh" });
    refresh.addEventListener("click", () => this.load());
    this.dir = el("p", { className: "hint" });
    // a figure full size, over the page: Escape or a click closes it
    this.full = el("dialog", { className: "figure-full" });
    this.full.addEventListener("click", () => this.full.close());
    root.replaceChildren(el("div", { className: "sweep-head" }, el("h2", { textContent: "Sweeps" }), refresh),
      this.dir, this.list, this.body, this.full);
  }

  async load() {
    let d;
    try {
      d = await api("GET", "/api/v1/sweeps");
    } catch (e) {
      if (e.status === 404) {
        this.dir.textContent = "This daemon serves no sweeps: start it with stalelab serve --sweeps DIR "
          + "(a sweep's --out, or a directory of them).";
        this.list.replaceChildren();
        this.body.replaceChildren();
        return;
      }
      this.onError(e);
      return;
    }
    this.sweeps = d.sweeps || [];
    this.dir.textContent = `${this.sweeps.length} sweep${this.sweeps.length === 1 ? "" : "s"} in ${d.dir}`;
    this.list.replaceChildren(...this.sweeps.map((s) => {
      const b = el("button", { type: "button", className: "sweep-pick", textContent: s.name });
      b.dataset.sweep = s.name;
      b.setAttribute("aria-pressed", String(s.name === this.state.name()));
      b.addEventListener("click", () => this.open(s.name));
      return el("li", {}, b, el("span", { className: "hint",
        textContent: ` ${s.cells} cell${s.cells === 1 ? "" : "s"} · ${s.figures.length} figure${s.figures.length === 1 ? "" : "s"}` }));
    }));
    const want = this.state.name();
    if (want && this.sweeps.some((s) => s.name === want)) this.open(want);
    else if (this.sweeps.length) this.open(this.sweeps[0].name);
    else this.body.replaceChildren();
  }

  async open(name) {
    this.state.setName(name);
    for (const b of this.list.querySelectorAll(".sweep-pick")) b.setAttribute("aria-pressed", String(b.dataset.sweep === name));
    // the last one asked for wins (an earlier answer arriving late is dropped)
    const ask = (this.asked = (this.asked || 0) + 1);
    let s;
    try {
      s = await api("GET", `/api/v1/sweeps/${enc(name)}`);
    } catch (e) {
      if (ask === this.asked) this.onError(e);
      return;
    }
    if (ask !== this.asked) return;
    const figs = s.figures.length
      ? el("div", { className: "sweep-figures" }, ...s.figures.map((f) => this.figure(name, f)))
      : el("p", { className: "hint", textContent: `No figures yet: stalelab plot DIR draws them (DIR/figures).` });
    const parts = [el("h2", { textContent: name }), figs];
    if (s.summary && s.summary.rows) parts.push(el("h3", { textContent: "Summary over seeds" }), this.table(s.summary, null));
    if (s.results && s.results.rows) {
      const n = s.results.rows.length;
      parts.push(el("h3", { textContent: `Results: ${n} cell${n === 1 ? "" : "s"}${n > ROWS_MAX ? ` (the first ${ROWS_MAX})` : ""}` }),
        this.table(s.results, SHOWN));
    }
    if (s.spec) parts.push(el("h3", { textContent: "The sweep file" }), el("pre", { className: "sweep-spec", textContent: JSON.stringify(s.spec, null, 1) }));
    this.body.replaceChildren(...parts);
  }

  // a figure as a card, the image a button that opens it full size
  figure(name, f) {
    const src = `/api/v1/sweeps/${enc(name)}/figures/${enc(f)}`;
    const what = f.replace(/\.svg$/, "");
    const alt = `${what} of sweep ${name}`;
    const open = el("button", { type: "button", className: "figure-open", title: "Open full size" },
      el("img", { src, alt }));
    open.addEventListener("click", () => {
      this.full.replaceChildren(el("h3", { textContent: `${what} · ${name}` }), el("img", { src, alt }),
        el("p", { className: "hint", textContent: "Escape or a click closes it." }));
      this.full.showModal();
    });
    return el("figure", { className: "chart" },
      el("figcaption", {}, el("h3", { textContent: what }),
        el("a", { href: src, download: `${name}-${f}`, textContent: "SVG" })),
      open);
  }

  // a CSV as a table; shown: the metric columns to keep (null: all),
  // after the axes (every column that is not a metric)
  table(csv, shown) {
    const cols = csv.columns.map((c, i) => [c, i]).filter(([c]) => c !== "cell"
      && (!shown || !METRICS.has(c) || shown.includes(c)));
    const head = el("tr", {}, ...cols.map(([c]) => el("th", { scope: "col", textContent: c })));
    const rows = csv.rows.slice(0, ROWS_MAX).map((r) => el("tr", {},
      ...cols.map(([, i]) => el("td", { textContent: num(r[i] ?? "") }))));
    return el("div", { className: "table-scroll" },
      el("table", { className: "compare sweep-table" }, el("thead", {}, head), el("tbody", {}, ...rows)));
  }
}
