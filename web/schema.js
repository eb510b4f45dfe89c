// schema.js - the run controls, built from GET /api/v1/schema (every field
// with its type, range, default and whether it changes mid-run; every rule
// with its parameters). Values go to the API as typed: the daemon's own
// message explains a value it refuses.

import { api, ApiError } from "./api.js";

// GET /api/v1/schema: every field and rule, as the daemon that serves this
// page defines them (it always has the endpoint: the page is embedded in
// the binary). The one description of a field is engine/run/fields.c's.
export async function loadSchema() {
  const s = await api("GET", "/api/v1/schema");
  if (!s || !Array.isArray(s.fields) || !Array.isArray(s.rules))
    throw new ApiError(200, "schema", "GET /api/v1/schema: not a schema (fields, rules)");
  return s;
}

// the fields the run controls offer, in the schema's order
const CONTROL_KEYS = ["rule", "lr", "optimizer", "momentum", "weight_decay", "clip", "batch",
  "eval_every", "clock"];

// "(0, 100]" from a field's bounds
export function rangeText(f) {
  if (f.enum || f.type === "boolean" || f.type === "object") return "";
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
}

function readInput(inp, f) {
  return f.type === "boolean" ? inp.checked : parseValue(f, inp.value);
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
      const fi = fieldInput(f, "");
      if (!f.mutable) {
        fi.row.classList.add("new-run-only");
        fi.row.querySelector(".hint").textContent += " · new runs only";
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

    form.addEventListener("input", () => {
      this.dirty = true;
      this.showParams();
    });
    form.addEventListener("change", () => {
      this.dirty = true;
      this.showParams();
    });
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.submit(false);
    });
    newBtn.addEventListener("click", () => this.submit(true));
    revert.addEventListener("click", () => {
      this.dirty = false;
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
  }

  // show the run's current values, unless the person is editing
  fill(config, force) {
    this.config = config;
    if (!config || (this.dirty && !force)) return;
    // a field at its default may be left out of the config (optimizer, clip)
    for (const [k, fi] of Object.entries(this.inputs)) setInput(fi.input, fi.field, config[k] ?? fi.field.default);
    const rp = config.rule_params || {};
    for (const ps of Object.values(this.params))
      for (const [k, fi] of Object.entries(ps)) setInput(fi.input, fi.field, rp[k] ?? fi.field.default);
    this.showParams();
  }

  clearErrors() {
    for (const fi of this.allInputs()) {
      fi.error.textContent = "";
      fi.input.removeAttribute("aria-invalid");
    }
    this.msg.textContent = "";
    this.msg.classList.remove("bad");
  }

  *allInputs() {
    yield* Object.values(this.inputs);
    for (const ps of Object.values(this.params)) yield* Object.values(ps);
  }

  // the changed mutable fields (apply) or the whole run object (new run)
  body(newRun) {
    const cur = this.config || {};
    const b = {};
    for (const [k, fi] of Object.entries(this.inputs)) {
      const v = readInput(fi.input, fi.field);
      if (newRun ? true : fi.field.mutable && v !== (cur[k] ?? fi.field.default)) b[k] = v;
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
      Object.assign(full, b);
      full.rule_params = { ...(cur.rule_params || {}), ...rp };
      return full;
    }
    return b;
  }

  async submit(newRun) {
    this.clearErrors();
    const body = this.body(newRun);
    if (!newRun && !Object.keys(body).length) {
      this.msg.textContent = "nothing changed";
      return;
    }
    try {
      if (newRun) await this.newRun(body);
      else await this.apply(body);
      this.dirty = false;
      this.msg.textContent = newRun ? "new run started" : "applied: " + JSON.stringify(body);
    } catch (e) {
      this.showError(e);
    }
  }

  showError(e) {
    const msg = e instanceof Error ? e.message : String(e);
    const field = e instanceof ApiError ? e.field : null;
    let target = null;
    if (field) {
      const [head, sub] = field.split(".");
      if (head === "rule_params" && sub) target = (this.params[this.rule()] || {})[sub];
      else target = this.inputs[head];
    }
    if (target) {
      target.error.textContent = msg;
      target.input.setAttribute("aria-invalid", "true");
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
