// schema.js - the run controls, built from GET /api/v1/schema (every field
// with its type, range, default and whether it changes mid-run; every rule
// with its parameters). Values go to the API as typed: the daemon's own
// message explains a value it refuses.

import { api, ApiError } from "./api.js";
import { el } from "./dom.js";
import { modelInput } from "./model.js";

// GET /api/v1/schema: every field and rule, as the daemon that serves this
// page defines them (it always has the endpoint: the page is embedded in
// the binary). The one description of a field is engine/run/fields.c's.
export async function loadSchema() {
  const s = await api("GET", "/api/v1/schema");
  if (!s || !Array.isArray(s.fields) || !Array.isArray(s.rules))
    throw new ApiError(200, "schema", "GET /api/v1/schema: not a schema (fields, rules)");
  return s;
}

// the fields the run controls offer, in the schema's order (a field shows
// only while its "when" holds: beta1 for adam and adamw)
const CONTROL_KEYS = ["model", "dataset", "device", "rule", "lr", "optimizer", "beta1", "beta2", "eps",
  "momentum", "weight_decay", "clip", "lr_schedule", "batch", "eval_every", "clock"];

// "(0, 100]" from a field's bounds
export function rangeText(f) {
  if (f.enum || (f.type !== "number" && f.type !== "integer")) return "";
  const lo = f.min == null ? "−∞" : f.min;
  const hi = f.max == null ? "∞" : f.max;
  return `${f.min_open || f.min == null ? "(" : "["}${lo}, ${hi}${f.max_open || f.max == null ? ")" : "]"}`;
}

// text from an input as it goes to the API: a number when it reads as one,
// else the text itself (the daemon says what it expected)
export function parseValue(f, text) {
  if (f.type === "boolean") return !!text;
  if (f.type !== "number" && f.type !== "integer") return text;
  const t = String(text).trim();
  return /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(t) ? Number(t) : t;
}

let uid = 0;

// one labelled input for a schema field; returns {row, input, error, field}
function fieldInput(f, prefix) {
  const id = `ctl-${prefix}${f.key}-${++uid}`;
  const row = document.createElement("div");
  row.className = "field";
  row.dataset.key = prefix + f.key;
  const label = document.createElement("label");
  label.htmlFor = id;
  label.textContent = f.key;
  let input;
  if (f.enum) {
    input = document.createElement("select");
    for (const v of f.enum) input.add(new Option(v, v));
  } else if (f.type === "boolean") {
    input = document.createElement("input");
    input.type = "checkbox";
  } else {
    input = document.createElement("input");
    input.type = "text";
    input.inputMode = f.type === "integer" ? "numeric" : f.type === "number" ? "decimal" : "text";
    input.autocomplete = "off";
    input.spellcheck = false;
  }
  input.id = id;
  input.name = prefix + f.key;
  const hint = document.createElement("span");
  hint.className = "hint";
  hint.textContent = [rangeText(f), f.doc].filter(Boolean).join(" · ");
  hint.id = id + "-hint";
  const error = document.createElement("span");
  error.className = "error";
  error.setAttribute("role", "alert");
  error.id = id + "-err";
  input.setAttribute("aria-describedby", `${hint.id} ${error.id}`);
  row.append(label, input, hint, error);
  return { row, input, error, field: f };
}

function setInput(inp, f, v) {
  if (f.type === "boolean") inp.checked = !!v;
  else inp.value = v == null ? "" : String(v);
  // a value the list does not offer (the device "ref" of a test run) shows
  // blank and goes back as it was, until another is chosen
  if (inp.tagName === "SELECT" && v != null && inp.value !== String(v)) inp.dataset.keep = String(v);
  else delete inp.dataset.keep;
}

function readInput(inp, f) {
  if (inp.tagName === "SELECT" && inp.value === "" && inp.dataset.keep != null) return inp.dataset.keep;
  return f.type === "boolean" ? inp.checked : parseValue(f, inp.value);
}

// a field's value as it goes to the API, and back (the model chooser and
// object fields have their own)
function readField(fi) {
  return fi.read ? fi.read() : readInput(fi.input, fi.field);
}

function writeField(fi, v) {
  if (fi.write) fi.write(v);
  else setInput(fi.input, fi.field, v);
}

// true while the field's "when" holds among its siblings (group: key -> field)
function applies(fi, group) {
  return Object.entries(fi.field.when || {}).every(([k, vals]) => !group[k] || vals.includes(readField(group[k])));
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// an object field (lr_schedule): its fields in a group of their own, each
// shown while it applies; what it sends is those that apply
function objectInput(f) {
  const subs = {};
  const grid = el("div", { className: "fields" });
  for (const sf of f.fields) {
    subs[sf.key] = fieldInput(sf, f.key + ".");
    grid.append(subs[sf.key].row);
  }
  const error = el("span", { className: "error" });
  error.setAttribute("role", "alert");
  const row = el("fieldset", { className: "object-field" }, el("legend", {}, f.key),
    el("span", { className: "hint" }, f.doc || ""), grid, error);
  row.dataset.key = f.key;
  const first = Object.values(subs)[0];
  const fi = { row, input: first ? first.input : row, error, field: f, subs };
  fi.read = () => {
    const o = {};
    for (const [k, sf] of Object.entries(subs)) if (applies(sf, subs)) o[k] = readField(sf);
    return o;
  };
  fi.write = (v) => {
    for (const [k, sf] of Object.entries(subs)) writeField(sf, (v || {})[k] ?? sf.field.default);
  };
  return fi;
}

function controlInput(f) {
  if (f.key === "model" && f.specs) return modelInput(f, `ctl-model-${++uid}`);
  if (f.type === "object" && f.fields) return objectInput(f);
  return fieldInput(f, "");
}

// The run controls form. apply(body) sends PATCH /api/v1/run; newRun(body)
// POST /api/v1/run; both throw ApiError.
export class Controls {
  constructor(root, schema, { apply, newRun }) {
    this.root = root;
    this.schema = schema;
    this.apply = apply;
    this.newRun = newRun;
    this.inputs = {}; // key -> {input, error, field}
    this.params = {}; // rule -> {key -> {input, error, field}}
    this.config = null;
    this.dirty = false;
    this.touched = new Set(); // the fields edited since the form was filled
    this.build();
  }

  build() {
    const form = document.createElement("form");
    form.noValidate = true;
    form.className = "controls-form";
    const grid = document.createElement("div");
    grid.className = "fields";
    for (const f of this.schema.fields) {
      if (!CONTROL_KEYS.includes(f.key)) continue;
      const fi = controlInput(f);
      if (!f.mutable) {
        fi.row.classList.add("new-run-only");
        if (!fi.read) fi.row.querySelector(".hint").textContent += " · new runs only";
      }
      this.inputs[f.key] = fi;
      grid.append(fi.row);
    }
    const pbox = document.createElement("fieldset");
    pbox.className = "rule-params";
    const legend = document.createElement("legend");
    legend.textContent = "rule parameters";
    pbox.append(legend);
    this.none = document.createElement("p");
    this.none.className = "hint";
    this.none.textContent = "this rule has no parameters";
    pbox.append(this.none);
    for (const r of this.schema.rules) {
      this.params[r.name] = {};
      for (const p of r.params || []) {
        const fi = fieldInput(p, "rule_params.");
        fi.row.dataset.rule = r.name;
        this.params[r.name][p.key] = fi;
        pbox.append(fi.row);
      }
    }
    const buttons = document.createElement("div");
    buttons.className = "buttons";
    const applyBtn = document.createElement("button");
    applyBtn.type = "submit";
    applyBtn.textContent = "Apply to this run";
    applyBtn.id = "apply";
    const newBtn = document.createElement("button");
    newBtn.type = "button";
    newBtn.textContent = "Start a new run with these";
    newBtn.id = "new-run";
    const revert = document.createElement("button");
    revert.type = "button";
    revert.textContent = "Revert";
    this.msg = document.createElement("p");
    this.msg.className = "form-msg";
    this.msg.setAttribute("role", "status");
    buttons.append(applyBtn, newBtn, revert);
    form.append(grid, pbox, buttons, this.msg);
    this.root.replaceChildren(form);

    const edited = (e) => {
      this.dirty = true;
      const k = e.target.closest("[data-key]");
      if (k) this.touched.add(k.dataset.key.split(".")[0]);
      this.showParams();
    };
    form.addEventListener("input", edited);
    form.addEventListener("change", edited);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.submit(false);
    });
    newBtn.addEventListener("click", () => this.submit(true));
    revert.addEventListener("click", () => {
      this.dirty = false;
      this.touched.clear();
      this.clearErrors();
      this.fill(this.config, true);
    });
    this.showParams();
  }

  rule() {
    const r = this.inputs.rule;
    return r ? r.input.value : this.config && this.config.rule;
  }

  showParams() {
    const rule = this.rule();
    let any = false;
    for (const [name, ps] of Object.entries(this.params)) {
      for (const fi of Object.values(ps)) {
        fi.row.hidden = name !== rule;
        any = any || name === rule;
      }
    }
    this.none.hidden = any;
    for (const fi of Object.values(this.inputs)) {
      fi.row.hidden = !applies(fi, this.inputs);
      for (const sf of Object.values(fi.subs || {})) sf.row.hidden = !applies(sf, fi.subs);
    }
  }

  // show the run's current values, unless the person is editing
  fill(config, force) {
    this.config = config;
    if (!config || (this.dirty && !force)) return;
    this.touched.clear();
    // a field at its default may be left out of the config (optimizer, clip)
    for (const [k, fi] of Object.entries(this.inputs)) writeField(fi, config[k] ?? fi.field.default);
    const rp = config.rule_params || {};
    for (const ps of Object.values(this.params))
      for (const [k, fi] of Object.entries(ps)) setInput(fi.input, fi.field, rp[k] ?? fi.field.default);
    this.showParams();
  }

  clearErrors() {
    for (const fi of this.allInputs()) {
      fi.error.textContent = "";
      for (const x of fi.row.querySelectorAll("[aria-invalid]")) x.removeAttribute("aria-invalid");
    }
    this.msg.textContent = "";
    this.msg.classList.remove("bad");
  }

  *allInputs() {
    for (const fi of Object.values(this.inputs)) {
      yield fi;
      yield* Object.values(fi.subs || {});
    }
    for (const ps of Object.values(this.params)) yield* Object.values(ps);
  }

  // the changed mutable fields (apply) or the whole run object (new run)
  body(newRun) {
    const cur = this.config || {};
    const b = {};
    for (const [k, fi] of Object.entries(this.inputs)) {
      // a new-run-only field is not read for a change (a graph being typed)
      if ((!newRun && !fi.field.mutable) || !applies(fi, this.inputs)) continue;
      const v = readField(fi);
      if (newRun || !same(v, cur[k] ?? fi.field.default)) b[k] = v;
    }
    const rule = this.rule();
    const ps = this.params[rule] || {};
    const rp = {};
    const curRp = cur.rule_params || {};
    for (const [k, fi] of Object.entries(ps)) {
      const v = readInput(fi.input, fi.field);
      if (newRun || b.rule || v !== curRp[k]) rp[k] = v;
    }
    if (Object.keys(rp).length) b.rule_params = rp;
    if (newRun) {
      const full = JSON.parse(JSON.stringify(cur));
      delete full.t;
      delete full.v;
      delete full.run;
      // what does not apply is not sent (beta1 of an adam run, to sgd)
      for (const [k, fi] of Object.entries(this.inputs)) if (!applies(fi, this.inputs)) delete full[k];
      Object.assign(full, b);
      full.rule_params = { ...(cur.rule_params || {}), ...rp };
      return full;
    }
    return b;
  }

  // the fields edited that only a new run takes
  newRunOnly() {
    return [...this.touched].filter((k) => this.inputs[k] && !this.inputs[k].field.mutable);
  }

  async submit(newRun) {
    this.clearErrors();
    let body;
    try {
      body = this.body(newRun); // JSON that does not parse stops here: nothing is sent
    } catch (e) {
      this.showError(e);
      return;
    }
    const later = newRun ? [] : this.newRunOnly();
    const note = later.length ? `${later.join(", ")}: only for a new run (Start a new run with these)` : "";
    if (!newRun && !Object.keys(body).length) {
      this.msg.textContent = note || "nothing changed";
      return;
    }
    try {
      if (newRun) await this.newRun(body);
      else await this.apply(body);
      this.dirty = later.length > 0;
      if (!this.dirty) this.touched.clear();
      this.msg.textContent = newRun ? "new run started" : ["applied: " + JSON.stringify(body), note].filter(Boolean).join("; ");
    } catch (e) {
      this.showError(e);
    }
  }

  // the input a message's field names: "lr", "rule_params.s",
  // "lr_schedule.floor", "model.nodes[2]" (the model's)
  fieldFor(path) {
    const [head, sub] = path.split(".").map((x) => x.replace(/\[.*$/, ""));
    if (head === "rule_params") return sub ? (this.params[this.rule()] || {})[sub] : null;
    const fi = this.inputs[head];
    return (fi && fi.subs && fi.subs[sub]) || fi || null;
  }

  // a message under its field, as the daemon (or the page) wrote it
  showError(e) {
    const msg = e instanceof Error ? e.message : String(e);
    const target = e && e.field ? this.fieldFor(e.field) : null;
    if (target) {
      target.error.textContent = msg;
      (target.target ? target.target() : target.input).setAttribute("aria-invalid", "true");
    }
    this.msg.textContent = msg;
    this.msg.classList.add("bad");
  }
}

// what a rule's parameters are, for the header ("ssp s=3")
export function ruleSummary(schema, config) {
  if (!config) return "";
  const r = schema.rules.find((x) => x.name === config.rule);
  const rp = config.rule_params || {};
  const parts = (r ? r.params : []).map((p) => `${p.key}=${rp[p.key]}`);
  return parts.length ? `${config.rule} (${parts.join(", ")})` : config.rule;
}
