// models.mjs - the browser test of the new-run form's models, optimizers
// and lr schedules (docs/dashboard.md, "Run controls"): Debian's chromium,
// headless, through playwright-core, against a real `stalelab serve`.
// Everything is done as a person would (select, type, click); the daemon's
// /api/v1/status says what it got. Prints "  ok" / "  FAIL" lines
// (tests/integration/dashboard.sh counts them); a screenshot goes to OUTDIR.
// Usage: node tests/browser/models.mjs BINARY [OUTDIR]

import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { checks, launch, runChecks, serve, sleep, until } from "./lib.mjs";

const BIN = resolve(process.argv[2] || "build/stalelab");
const OUT = resolve(process.argv[3] || "build/dashboard");
mkdirSync(OUT, { recursive: true });
const tmp = mkdtempSync(join(tmpdir(), "slmodels."));

// one worker, one thread: the runs this test starts (a resnet among them)
// keep one core busy at most
const RUN = { model: "mlp:784-32-10", dataset: "synthetic:2000", lr: 0.01, batch: 16,
  workers: 1, threads: 1, eval_every: 100 };
writeFileSync(join(tmp, "run.json"), JSON.stringify(RUN));

const daemon = await serve(BIN, ["--listen", "127.0.0.1:0", "--bus", "none", "--workers-listen", "none",
  "--config", join(tmp, "run.json")]);
const base = `http://127.0.0.1:${daemon.port}`;
const get = async (path) => (await fetch(base + path)).json();
const status = () => get("/api/v1/status");

const browser = await launch();
const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
const pageErrors = [];
page.on("pageerror", (e) => pageErrors.push(e.message));
let posts = 0; // POST /api/v1/run the page sent
page.on("request", (r) => {
  if (r.method() === "POST" && r.url().endsWith("/api/v1/run")) posts++;
});

const t = checks();
const MODEL = ".model-field";
const visible = (sel) => page.locator(sel).isVisible();
const modelError = () => page.locator(`${MODEL} > .error`).innerText();
const area = 'textarea[name="model.graph"]';

// a new run from the form: click, then the daemon's next run
async function startFromForm() {
  const before = (await status()).run;
  await page.click("#new-run");
  return until("the next run", async () => {
    const s = await status();
    return s.run === before + 1 && s;
  });
}

await runChecks(t, browser, daemon, pageErrors, async () => {
  console.log(`integration: the new-run form's models (chromium, daemon on port ${daemon.port})`);
  await page.goto(base + "/");
  await until("the form", () => page.locator('select[name="model"]').count());
  const schema = await get("/api/v1/schema");
  const mf = schema.fields.find((f) => f.key === "model");

  await t.check("the model chooser offers the schema's models, a spec written out and a graph", async () => {
    const want = mf.specs.map((s) => (s.arg ? s.spec.replace(`<${s.arg.key}>`, s.arg.key) : s.spec))
      .concat(["other spec (written out)", "graph (JSON)"]);
    const got = await page.locator('select[name="model"] option').allInnerTexts();
    if (got.join() !== want.join()) throw new Error(`options ${got}, schema ${want}`);
    if (!want.includes("resnet:N") || !want.includes("lenet5")) throw new Error(`schema's specs: ${want}`);
    // the run's own model, not a named one, shows written out
    const shown = [await page.inputValue('select[name="model"]'), await page.inputValue('input[name="model.spec"]')];
    if (shown.join() !== "spec,mlp:784-32-10") throw new Error(`the run's model shows as ${shown}`);
  });

  await t.check("optimizer and lr_schedule fields show only where they apply", async () => {
    const seen = async () => ({
      beta1: await visible('input[name="beta1"]'),
      eps: await visible('input[name="eps"]'),
      decay: await visible('input[name="lr_schedule.decay_updates"]'),
      step: await visible('input[name="lr_schedule.step_every"]'),
      warmup: await visible('input[name="lr_schedule.warmup"]'),
    });
    const a = await seen();
    await page.selectOption('select[name="optimizer"]', "adamw");
    await page.selectOption('select[name="lr_schedule.kind"]', "step");
    const b = await seen();
    await page.selectOption('select[name="lr_schedule.kind"]', "cosine");
    const c = await seen();
    await page.click("text=Revert");
    const d = await seen();
    const got = JSON.stringify([a, b, c, d]);
    const want = JSON.stringify([
      { beta1: false, eps: false, decay: false, step: false, warmup: true },
      { beta1: true, eps: true, decay: false, step: true, warmup: true },
      { beta1: true, eps: true, decay: true, step: false, warmup: true },
      { beta1: false, eps: false, decay: false, step: false, warmup: true }]);
    if (got !== want) throw new Error(`shown ${got}`);
  });

  await t.check("a schedule the daemon refuses: its message under that field of lr_schedule", async () => {
    const before = (await status()).run;
    await page.selectOption('select[name="lr_schedule.kind"]', "cosine");
    await page.fill('input[name="lr_schedule.decay_updates"]', "0");
    const answer = page.waitForResponse((r) => r.request().method() === "POST" && r.url().endsWith("/api/v1/run"));
    await page.click("#new-run");
    const said = (await (await answer).json()).error.message;
    if (!said.startsWith("lr_schedule.decay_updates: ")) throw new Error(`daemon: ${said}`);
    const shown = await until("the field's error", () =>
      page.locator('[data-key="lr_schedule.decay_updates"] .error').innerText());
    if (shown !== said) throw new Error(`shown "${shown}", daemon said "${said}"`);
    if ((await status()).run !== before) throw new Error("a run started");
    await page.click("text=Revert");
  });

  let resnet = null;
  await t.check("a resnet:8 run with adam and a cosine schedule, started from the form", async () => {
    await page.selectOption('select[name="model"]', "resnet:<N>");
    await page.fill('input[name="model.N"]', "8");
    await page.fill('input[name="dataset"]', "synthetic:1200");
    await page.fill('input[name="lr"]', "0.002");
    await page.fill('input[name="batch"]', "8");
    await page.selectOption('select[name="optimizer"]', "adam");
    await page.fill('input[name="beta1"]', "0.85");
    await page.selectOption('select[name="lr_schedule.kind"]', "cosine");
    await page.fill('input[name="lr_schedule.warmup"]', "20");
    await page.fill('input[name="lr_schedule.decay_updates"]', "400");
    await page.fill('input[name="lr_schedule.floor"]', "0.05");
    const s = await startFromForm();
    resnet = s;
    const c = s.config;
    const got = JSON.stringify([c.model, c.dataset, c.optimizer, c.beta1, c.lr, c.batch, c.lr_schedule]);
    const want = JSON.stringify(["resnet:8", "synthetic:1200", "adam", 0.85, 0.002, 8,
      { kind: "cosine", warmup: 20, decay_updates: 400, floor: 0.05 }]);
    if (got !== want) throw new Error(`status says ${got}`);
    await until("the form's word", async () => (await page.locator(".form-msg").innerText()) === "new run started");
  });

  await t.check("the header shows the resnet's size and cost (model_summary)", async () => {
    const ms = resnet.model_summary;
    if (!(ms.params > 70000 && ms.nodes === 19)) throw new Error(`model_summary ${JSON.stringify(ms)}`);
    await until("resnet:8 in the header", async () => (await page.locator("#h-model").innerText()) === "resnet:8");
    const title = await page.getAttribute("#h-model", "title");
    const want = `${ms.nodes} nodes, ${ms.params.toLocaleString("en")} parameters in ${ms.param_layers} layers, ` +
      `${(ms.fwd_flops / 1e6).toPrecision(3)} MFLOPs per sample forward`;
    if (!title.startsWith(want)) throw new Error(`title "${title}", want "${want}..."`);
    // the form follows the run: resnet:<N> with N = 8
    const form = [await page.inputValue('select[name="model"]'), await page.inputValue('input[name="model.N"]')];
    if (form.join() !== "resnet:<N>,8") throw new Error(`the form shows ${form}`);
    await page.screenshot({ path: join(OUT, "dashboard-models.png"), fullPage: true });
  });

  await t.check("graph (JSON) starts from the schema's example, which trains as sent", async () => {
    await page.selectOption('select[name="model"]', "graph");
    const text = await page.inputValue(area);
    if (JSON.stringify(JSON.parse(text)) !== JSON.stringify(mf.graph.example))
      throw new Error(`textarea holds ${text}`);
    const s = await startFromForm();
    if (JSON.stringify(s.config.model) !== JSON.stringify(mf.graph.example))
      throw new Error(`status model ${JSON.stringify(s.config.model)}`);
    await until("the graph in the header", async () => (await page.locator("#h-model").innerText()) === "graph of 7 nodes");
  });

  await t.check("a graph the daemon refuses: its message, as written, under the model field", async () => {
    const before = (await status()).run;
    await page.selectOption('select[name="model"]', "graph");
    await page.fill(area, '{"nodes": [\n  {"op": "dense", "units": 64},\n  {"op": "relu"},\n' +
      '  {"op": "conv2d", "units": 8, "k": 3},\n  {"op": "flatten"},\n  {"op": "dense", "units": 10}\n]}');
    const answer = page.waitForResponse((r) => r.request().method() === "POST" && r.url().endsWith("/api/v1/run"));
    await page.click("#new-run");
    const r = await answer;
    const said = (await r.json()).error.message;
    if (r.status() !== 400 || !/^model\.nodes\[2\] \(conv2d\): /.test(said)) throw new Error(`daemon: ${r.status()} ${said}`);
    const shown = await until("the model's error", modelError);
    if (shown !== said) throw new Error(`shown "${shown}", daemon said "${said}"`);
    if ((await page.getAttribute(area, "aria-invalid")) !== "true") throw new Error("the graph is not marked invalid");
    await page.locator("#controls").screenshot({ path: join(OUT, "dashboard-models-graph.png") });
    if ((await status()).run !== before) throw new Error("a run started");
  });

  await t.check("JSON that does not parse is flagged as typed, and never sent", async () => {
    const before = (await status()).run;
    const sent = posts;
    await page.fill(area, JSON.stringify(mf.graph.example));
    await page.focus(area);
    await page.keyboard.press("Control+End");
    await page.keyboard.press("Backspace"); // the last brace
    const flagged = await until("the flag", modelError);
    if (!/^model: not valid JSON/.test(flagged)) throw new Error(`flag: ${flagged}`);
    await page.click("#new-run");
    await sleep(1000);
    const after = await modelError();
    if (posts !== sent) throw new Error(`${posts - sent} POST sent`);
    if (!/^model: not valid JSON/.test(after)) throw new Error(`after the click: ${after}`);
    if ((await status()).run !== before) throw new Error("a run started");
    await page.focus(area);
    await page.keyboard.press("Control+End");
    await page.keyboard.type("}"); // put back, the flag goes
    await until("no flag", async () => (await modelError()) === "", 5000).catch(async (e) => {
      throw new Error(`${e.message}: ${await page.inputValue(area)} | ${await modelError()}`);
    });
  });

  await t.check("a spec written out; Apply says a model waits for a new run", async () => {
    await page.selectOption('select[name="model"]', "spec");
    await page.fill('input[name="model.spec"]', "mlp:784-48-10");
    await page.fill('input[name="dataset"]', "synthetic:2000");
    await page.click("#apply");
    const msg = await page.locator(".form-msg").innerText();
    if (!/^model, dataset: only for a new run/.test(msg)) throw new Error(`Apply says: ${msg}`);
    const s = await startFromForm();
    if (s.config.model !== "mlp:784-48-10" || s.config.dataset !== "synthetic:2000")
      throw new Error(`status: ${s.config.model} on ${s.config.dataset}`);
  });

  await t.check("a value the schema does not list (device refdev) goes back as the run has it", async () => {
    const r = await fetch(base + "/api/v1/run", { method: "POST", body: JSON.stringify({ ...RUN, device: "refdev" }) });
    if (r.status !== 201) throw new Error(`POST: ${r.status}`);
    await until("the run in the header", async () => (await page.locator("#h-model").innerText()) === RUN.model);
    await until("the form filled", async () => (await page.inputValue('input[name="model.spec"]')) === RUN.model);
    const s = await startFromForm();
    if (s.config.device !== "refdev") throw new Error(`device ${s.config.device}`);
  });

});
