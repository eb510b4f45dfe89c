// model.js - the model chooser of the run controls, from the schema's model
// field: its named specs (one with an argument, resnet:<N>, gets a number
// for N), a spec written out, or a graph given node by node as JSON (a text
// area started from the schema's example). JSON that does not parse is
// flagged as it is typed and never sent; what the daemon refuses in a graph
// it names by node ("model.nodes[2] (conv2d): ..."), and the form shows
// that under the field as written. The lists are the daemon's: nothing here
// names a model.

import { el } from "./dom.js";

const SPEC = "spec"; // the choice "a spec written out"
const GRAPH = "graph"; // the choice "graph (JSON)"

// An error found in the page, before anything is sent: names its field as
// the daemon's messages do.
export class PageError extends Error {
  constructor(field, message) {
    super(message);
    this.field = field;
  }
}

// a graph as people read it: one node a line
export function graphText(m) {
  if (!m || !Array.isArray(m.nodes)) return JSON.stringify(m ?? {}, null, 2);
  const node = (n) => `{${Object.entries(n).map(([k, v]) => `${JSON.stringify(k)}: ${JSON.stringify(v)}`).join(", ")}}`;
  return `{"nodes": [\n${m.nodes.map((n) => "  " + node(n)).join(",\n")}\n]}`;
}

// "resnet:<N>" -> {head: "resnet:", tail: ""}
function argParts(s) {
  const tag = `<${s.arg.key}>`;
  const at = s.spec.indexOf(tag);
  return { head: s.spec.slice(0, at), tail: s.spec.slice(at + tag.length) };
}

// the value of a spec with an argument, or null when v is not one of it
function argValue(s, v) {
  const { head, tail } = argParts(s);
  if (!v.startsWith(head) || !v.endsWith(tail) || v.length <= head.length + tail.length) return null;
  const x = v.slice(head.length, v.length - tail.length);
  return /^\d+$/.test(x) ? x : null;
}

// the page's list of what a graph is made of, from the schema
function graphHelp(g) {
  const ops = (g.ops || []).map((o) => (o.inputs > 1 ? `${o.op} (${o.inputs} inputs)` : o.op)).join(", ");
  const attrs = el("dl", { className: "attrs" });
  for (const a of g.attrs || []) {
    const range = a.type === "boolean" ? "true/false"
      : a.min_open ? `(${a.min}, ${a.max}]` : `${a.min}–${a.max}`;
    attrs.append(el("dt", {}, a.key), el("dd", {}, `${range} · ${a.doc}`));
  }
  return el("details", { className: "hint" }, el("summary", {}, "ops and attributes"),
    el("p", {}, g.doc || ""), el("p", {}, `ops: ${ops}`), attrs);
}

// One labelled chooser for the schema's model field f (with its specs and
// graph); id names its select. Returns what the form keeps of a field:
// {row, input, error, field, read(), write(v), target(), show()}.
export function modelInput(f, id) {
  const specs = f.specs || [];
  const graph = f.graph || null;
  const select = el("select", { id, name: "model" });
  for (const s of specs)
    select.add(new Option(s.arg ? s.spec.replace(`<${s.arg.key}>`, s.arg.key) : s.spec, s.spec));
  select.add(new Option("other spec (written out)", SPEC));
  if (graph) select.add(new Option("graph (JSON)", GRAPH));

  // one number per spec with an argument
  const args = {};
  const argRows = [];
  for (const s of specs.filter((x) => x.arg)) {
    const a = s.arg;
    const input = el("input", { type: "number", id: `${id}-${a.key}`, name: `model.${a.key}`,
      min: a.min, max: a.max, step: a.step, value: a.default ?? a.min, inputMode: "numeric" });
    const r = el("div", { className: "model-part" }, el("label", { htmlFor: input.id }, a.key), input,
      el("span", { className: "hint" }, `${a.min} to ${a.max}, in steps of ${a.step}`));
    r.dataset.for = s.spec;
    args[s.spec] = input;
    argRows.push(r);
  }
  const text = el("input", { type: "text", id: `${id}-spec`, name: "model.spec", autocomplete: "off",
    spellcheck: false });
  text.setAttribute("aria-label", "model spec");
  const textRow = el("div", { className: "model-part" }, text);
  textRow.dataset.for = SPEC;
  const area = el("textarea", { id: `${id}-graph`, name: "model.graph", rows: 9, spellcheck: false,
    value: graph ? graphText(graph.example) : "" });
  area.setAttribute("aria-label", "model graph (JSON)");
  const areaRow = el("div", { className: "model-part" }, area);
  areaRow.dataset.for = GRAPH;
  if (graph) areaRow.append(graphHelp(graph));

  const hint = el("span", { className: "hint", id: `${id}-hint` });
  const error = el("span", { className: "error", id: `${id}-err` });
  error.setAttribute("role", "alert");
  for (const x of [select, text, area, ...Object.values(args)])
    x.setAttribute("aria-describedby", `${hint.id} ${error.id}`);
  const row = el("div", { className: "field model-field" }, el("label", { htmlFor: id }, "model"), select,
    ...argRows, textRow, areaRow, hint, error);
  row.dataset.key = "model";

  const fi = { row, input: select, error, field: f };
  let lastSpec = ""; // the named spec chosen last: where a spec written out starts
  fi.target = () => (select.value === GRAPH ? area : select.value === SPEC ? text : args[select.value] || select);
  fi.show = () => {
    const k = select.value;
    for (const r of [...argRows, textRow, areaRow]) r.hidden = r.dataset.for !== k;
    row.classList.toggle("wide", k === GRAPH);
    const s = specs.find((x) => x.spec === k);
    if (s) lastSpec = fi.read();
    hint.textContent = s ? s.doc : k === GRAPH ? "the model node by node, as JSON (sent as it is)" : f.doc;
  };
  fi.read = () => {
    const k = select.value;
    if (k === GRAPH) return parseGraph(area.value);
    if (k === SPEC) return text.value.trim();
    const s = specs.find((x) => x.spec === k);
    if (s && s.arg) {
      const { head, tail } = argParts(s);
      return head + String(args[k].value).trim() + tail;
    }
    return k;
  };
  fi.write = (v) => {
    if (v && typeof v === "object") {
      select.value = GRAPH;
      area.value = graphText(v);
    } else {
      const s = String(v ?? "");
      const named = specs.find((x) => !x.arg && x.spec === s);
      const withArg = specs.find((x) => x.arg && argValue(x, s) !== null);
      if (named) select.value = named.spec;
      else if (withArg) {
        select.value = withArg.spec;
        args[withArg.spec].value = argValue(withArg, s);
      } else {
        select.value = SPEC;
        text.value = s;
      }
      if (graph) area.value = graphText(graph.example);
    }
    checkJson();
    fi.show();
  };

  // JSON that does not parse is marked as it is typed
  function checkJson() {
    let msg = "";
    if (select.value === GRAPH) {
      try {
        parseGraph(area.value);
      } catch (e) {
        msg = e.message;
      }
    }
    error.textContent = msg;
    if (msg) area.setAttribute("aria-invalid", "true");
    else area.removeAttribute("aria-invalid");
  }
  area.addEventListener("input", checkJson);
  select.addEventListener("change", () => {
    if (select.value === SPEC && !text.value) text.value = lastSpec;
    error.textContent = "";
    checkJson();
    fi.show();
  });
  fi.show();
  return fi;
}

function parseGraph(t) {
  try {
    return JSON.parse(t);
  } catch (e) {
    throw new PageError("model", `model: not valid JSON, not sent (${e.message})`);
  }
}
