// workers.js - the worker table: one row per worker, updated in place from
// each snapshot; each row's delay (distribution, a slider and a field for
// the mean, where it is slept), spb_depth and pause go to PATCH
// /api/v1/workers/{id}; add and remove go to PUT /api/v1/workers. Each
// row's data: the class counts of the worker's part (its data_split; iid:
// the whole set) as a bar per class, the counts in its title.

import { fmt } from "./charts.js";
import { el } from "./dom.js";

const DISTS = ["none", "const", "uniform", "exp", "lognormal", "pareto", "version"];
const SLIDER_MAX = 1000; // ms; the field takes more
const HOLD_MS = 1500;    // a control just changed is not overwritten for this long

function bytes(n) {
  if (!(n >= 0)) return "–";
  const u = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1000 && i < u.length - 1) {
    n /= 1000;
    i++;
  }
  return `${n.toFixed(n < 10 && i ? 1 : 0)} ${u[i]}`;
}


function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

// the class counts of a worker's part as a bar per class (heights to the
// largest), into cell; text data (no classes): the part's size
function fillClasses(cell, w) {
  const cls = w.classes || [];
  const key = `${w.part}:${cls.join(",")}`;
  if (cell.dataset.key === key) return;
  cell.dataset.key = key;
  const top = Math.max(1, ...cls);
  const bars = cls.map((n, k) => {
    const b = el("span", { className: "bar", title: `class ${k}: ${n}` });
    b.style.height = `${n ? Math.max(8, Math.round((100 * n) / top)) : 0}%`;
    return b;
  });
  const what = cls.length ? `${w.part} samples; per class: ${cls.join(", ")}` : `${w.part} samples`;
  const hist = el("span", { className: "hist", title: what }, ...bars);
  hist.setAttribute("aria-label", `worker ${w.id}'s data: ${what}`);
  cell.replaceChildren(cls.length ? hist : el("span", { textContent: String(w.part ?? "–") }));
}

// patch(id, body) -> Promise; setCount(n) -> Promise; select(id|null, sticky)
// when a row is hovered (sticky false) or chosen (sticky true); error(e).
export class WorkerTable {
  constructor(root, { patch, setCount, select, error }) {
    this.root = root;
    this.patch = patch;
    this.setCount = setCount;
    this.select = select;
    this.error = error;
    this.rows = new Map(); // id -> row parts
    this.selected = null;
    this.build();
  }

  build() {
    const head = ["worker", "state", "delay", "mean (ms)", "where", "spb depth",
      "H", "iterations", "staleness", "samples/s", "sent", "received", "device", "data (classes)", ""];
    this.tbody = el("tbody");
    const table = el("table", { className: "workers" },
      el("thead", {}, el("tr", {}, ...head.map((h) => el("th", { scope: "col", textContent: h })))),
      this.tbody);
    this.count = el("span", { className: "count" });
    const add = el("button", { type: "button", textContent: "Add worker", id: "add-worker" });
    const remove = el("button", { type: "button", textContent: "Remove worker", id: "remove-worker" });
    add.addEventListener("click", () => this.resize(+1));
    remove.addEventListener("click", () => this.resize(-1));
    // the depths spb_depth takes on this model (model_summary.spb_depths:
    // on a residual net, block boundaries), offered by each row's field
    this.depths = el("datalist", { id: "spb-depths" });
    this.depthsKey = "";
    this.depthsNote = "";
    this.root.replaceChildren(el("div", { className: "table-scroll" }, table),
      el("div", { className: "buttons" }, add, remove, this.count), this.depths);
  }

  resize(d) {
    const n = this.rows.size + d;
    if (n < 1) return;
    this.setCount(n).catch(this.error);
  }

  send(r, body) {
    r.hold = performance.now() + HOLD_MS;
    this.patch(r.id, body).catch((e) => {
      r.hold = 0;
      this.error(e);
    });
  }

  delayBody(r, mean) {
    // a worker without a delay needs a distribution: const
    const dist = r.dist.value === "none" ? "const" : r.dist.value;
    if (dist !== r.dist.value) r.dist.value = dist;
    return { delay: { dist, mean_ms: mean } };
  }

  makeRow(id) {
    const r = { id, hold: 0 };
    const name = `w${id}`;
    r.tr = el("tr", { tabIndex: -1 });
    r.tr.dataset.worker = id;
    r.state = el("td");
    r.dist = el("select", { title: `worker ${id}: delay distribution`, name: `${name}-dist` });
    for (const d of DISTS) r.dist.add(new Option(d, d));
    r.slider = el("input", { type: "range", min: 0, max: SLIDER_MAX, step: 1, name: `${name}-mean-slider` });
    r.slider.setAttribute("aria-label", `worker ${id}: mean delay (ms)`);
    r.mean = el("input", { type: "number", min: 0, step: "any", name: `${name}-mean`, className: "mean" });
    r.mean.setAttribute("aria-label", `worker ${id}: mean delay in ms`);
    r.where = el("select", { name: `${name}-where` });
    r.where.setAttribute("aria-label", `worker ${id}: delay slept by`);
    for (const w of ["worker", "server"]) r.where.add(new Option(w, w));
    r.spb = el("input", { type: "number", min: 0, max: 64, step: 1, name: `${name}-spb`, className: "spb" });
    r.spb.setAttribute("aria-label", `worker ${id}: spb depth (0 = full backprop)`);
    r.spb.setAttribute("list", "spb-depths");
    r.spb.title = this.depthsNote;
    // the local steps of its current phase (a rule with local phases:
    // localsgd, easgd, diloco, async-diloco with dylu's H for this phase)
    r.h = el("td", { className: "num h" });
    r.iter = el("td", { className: "num" });
    r.stale = el("td", { className: "num" });
    r.sps = el("td", { className: "num" });
    r.sent = el("td", { className: "num" });
    r.recv = el("td", { className: "num" });
    r.dev = el("td", { className: "device" });
    r.cls = el("td", { className: "classes" });
    r.pause = el("button", { type: "button" });
    const idCell = el("th", { scope: "row" });
    r.pick = el("button", { type: "button", className: "pick", textContent: String(id) });
    r.pick.setAttribute("aria-label", `show worker ${id} in the histogram`);
    r.host = el("span", { className: "host" }); // a remote worker's host
    idCell.append(r.pick, r.host);
    r.tr.append(idCell, r.state, el("td", {}, r.dist), el("td", {}, el("div", { className: "delay" }, r.slider, r.mean)),
      el("td", {}, r.where), el("td", {}, r.spb), r.h, r.iter, r.stale, r.sps, r.sent, r.recv, r.dev, r.cls,
      el("td", {}, r.pause));

    r.slider.addEventListener("input", () => {
      r.hold = performance.now() + HOLD_MS;
      r.mean.value = r.slider.value;
    });
    r.slider.addEventListener("change", () => this.send(r, this.delayBody(r, Number(r.slider.value))));
    r.mean.addEventListener("change", () => {
      const v = r.mean.value.trim() === "" ? r.mean.value : Number(r.mean.value);
      this.send(r, this.delayBody(r, v));
    });
    r.dist.addEventListener("change", () => this.send(r, r.dist.value === "none"
      ? { delay: { dist: "none" } }
      : { delay: { dist: r.dist.value, mean_ms: Number(r.mean.value) || 0 } }));
    r.where.addEventListener("change", () => this.send(r, { delay: { where: r.where.value } }));
    r.spb.addEventListener("change", () => this.send(r, { spb_depth: r.spb.value === "" ? "" : Number(r.spb.value) }));
    r.pause.addEventListener("click", () => this.send(r, { paused: r.pause.dataset.paused !== "true" }));
    r.pick.addEventListener("click", () => this.select(this.selected === id ? null : id, true));
    r.tr.addEventListener("mouseenter", () => this.select(id, false));
    r.tr.addEventListener("mouseleave", () => this.select(null, false));
    return r;
  }

  // the model's spb depths into the datalist and the fields' titles
  setDepths(ms) {
    const list = (ms && ms.spb_depths) || [];
    const key = list.join(",");
    if (key === this.depthsKey) return;
    this.depthsKey = key;
    this.depths.replaceChildren(...list.map((d) => el("option", { value: String(d) })));
    const blocks = ms && list.length < Math.min(ms.param_layers, 65);
    this.depthsNote = blocks ? `spb depth at a block boundary: ${list.join(", ")} (0 = full backprop)` : "";
    for (const r of this.rows.values()) r.spb.title = this.depthsNote;
  }

  // one snapshot's worker table (ms: its model_summary)
  update(workers, ms) {
    this.setDepths(ms);
    const seen = new Set();
    for (const w of workers) {
      seen.add(w.id);
      let r = this.rows.get(w.id);
      if (!r) {
        r = this.makeRow(w.id);
        this.rows.set(w.id, r);
        const after = [...this.tbody.children].find((tr) => Number(tr.dataset.worker) > w.id);
        this.tbody.insertBefore(r.tr, after || null);
      }
      this.fillRow(r, w);
    }
    for (const [id, r] of this.rows) {
      if (!seen.has(id)) {
        r.tr.remove();
        this.rows.delete(id);
      }
    }
    setText(this.count, `${workers.length} worker${workers.length === 1 ? "" : "s"}`);
  }

  fillRow(r, w) {
    setText(r.state, w.state);
    const rtt = w.remote && w.rtt_ms > 0 ? ` ${w.rtt_ms < 10 ? w.rtt_ms.toFixed(2) : w.rtt_ms.toFixed(0)} ms` : "";
    setText(r.host, w.remote ? ` @${w.host}${rtt}` : "");
    r.host.title = w.remote ? "a remote worker (stalelab worker) on this host; its link's round trip, by its heartbeats" : "";
    r.state.className = `state ${w.state}`;
    const d = w.delay || { dist: "none" };
    const held = performance.now() < r.hold;
    const edit = (inp) => !held && document.activeElement !== inp;
    if (edit(r.dist) && r.dist.value !== d.dist) r.dist.value = d.dist;
    const mean = d.mean_ms ?? 0;
    if (edit(r.slider)) {
      const s = String(Math.min(Math.round(mean), SLIDER_MAX));
      if (r.slider.value !== s) r.slider.value = s;
    }
    if (edit(r.mean) && Number(r.mean.value) !== mean) r.mean.value = String(mean);
    const where = d.where || "worker";
    if (edit(r.where) && r.where.value !== where) r.where.value = where;
    if (edit(r.spb) && r.spb.value !== String(w.spb_depth)) r.spb.value = String(w.spb_depth);
    setText(r.h, w.h > 0 ? String(w.h) : "–");
    r.h.title = w.h > 0 ? `worker ${w.id}: ${w.h} local steps in its current phase` : "";
    setText(r.iter, String(w.iterations));
    setText(r.stale, fmt(w.staleness_mean, 2));
    setText(r.sps, fmt(w.samples_per_s, 0));
    setText(r.sent, bytes(w.bytes_sent));
    setText(r.recv, bytes(w.bytes_recv));
    // where it computes, and the memory its model and state hold there
    setText(r.dev, w.device ? `${w.device} · ${bytes(w.mem_bytes || 0)}` : "–");
    fillClasses(r.cls, w);
    const paused = w.state === "paused";
    r.pause.dataset.paused = String(paused);
    setText(r.pause, paused ? "Resume" : "Pause");
    r.pause.setAttribute("aria-label", `${paused ? "resume" : "pause"} worker ${w.id}`);
  }

  markSelected(id) {
    this.selected = id;
    for (const [wid, r] of this.rows) {
      const on = wid === id;
      r.tr.classList.toggle("selected", on);
      r.pick.setAttribute("aria-pressed", String(on));
    }
  }
}
