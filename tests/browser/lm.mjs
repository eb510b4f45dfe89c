// lm.mjs - the browser test of a language-model run on the dashboard
// (docs/dashboard.md, "The header"): the accuracy is called next-token
// accuracy and the held-out perplexity shows beside it, and the text
// sampled at the last evaluation above the charts; an image run's header
// and chart say test accuracy, and no sample shows. Debian's chromium, headless, through
// playwright-core, against a real `stalelab serve`. Prints "  ok" /
// "  FAIL" lines (tests/integration/dashboard.sh counts them).
// Usage: node tests/browser/lm.mjs BINARY

import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { checks, launch, runChecks, serve, until } from "./lib.mjs";

const BIN = resolve(process.argv[2] || "build/stalelab");
const tmp = mkdtempSync(join(tmpdir(), "sllm."));

const LM = { model: "gpt:L1-H2-E8-T8", dataset: "synthetic-text:4000", clock: "virtual", threads: 1,
  batch: 8, workers: 2, optimizer: "adamw", lr: 0.01, eval_every: 3, stop: { steps: 6 } };
const IMG = { model: "logreg", dataset: "synthetic:200", clock: "virtual", threads: 1, batch: 8,
  workers: 1, eval_every: 3, stop: { steps: 6 } };
writeFileSync(join(tmp, "run.json"), JSON.stringify(LM));

const daemon = await serve(BIN, ["--listen", "127.0.0.1:0", "--bus", "none", "--workers-listen", "none",
  "--config", join(tmp, "run.json")]);
const base = `http://127.0.0.1:${daemon.port}`;
const status = async () => (await fetch(base + "/api/v1/status")).json();
const browser = await launch();
const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
const pageErrors = [];
page.on("pageerror", (e) => pageErrors.push(e.message));
const t = checks();
const text = (sel) => page.locator(sel).textContent();

await runChecks(t, browser, daemon, pageErrors, async () => {
  console.log(`integration: a language model on the dashboard (chromium, daemon on port ${daemon.port})`);
  const s = await until("the gpt run's end", async () => {
    const x = await status();
    return x.state !== "running" && x.version === 6 && x;
  });
  await page.goto(base + "/");
  await t.check("a gpt run: the header says next-token acc. and the perplexity of /status", async () => {
    const want = `${s.test_acc.toFixed(4)} · ppl ${s.test_ppl.toFixed(2)}`;
    await until("the header", async () => (await text("#h-acc")) === want);
    const label = await text("#h-acc-label");
    if (label !== "next-token acc.") throw new Error(`label ${label}`);
  });
  await t.check("... the accuracy chart is captioned Next-token accuracy", async () => {
    const c = await text("#acc-caption");
    if (c !== "Next-token accuracy") throw new Error(`caption ${c}`);
  });
  await t.check("... and the text sampled at its last evaluation, under its version", async () => {
    const m = await (await fetch(base + "/api/v1/metrics")).json();
    const last = m.series[m.series.length - 1];
    if (typeof last.sample !== "string" || last.sample.length !== 65) throw new Error(`sample ${last.sample}`);
    await until("the sample", async () => (await text("#lm-sample")) === last.sample);
    const v = await text("#lm-sample-v");
    if (v !== `v ${last.v}`) throw new Error(`under ${v}, want v ${last.v}`);
    if (!(await page.locator("#lm-sample").isVisible())) throw new Error("hidden");
  });
  await t.check("an image run: test acc. and Test accuracy, no perplexity, no sample", async () => {
    const r = await fetch(base + "/api/v1/run", { method: "POST", body: JSON.stringify(IMG) });
    if (r.status !== 201) throw new Error(`POST: ${r.status}`);
    await until("the header", async () => (await text("#h-acc-label")) === "test acc.");
    const c = await text("#acc-caption");
    if (c !== "Test accuracy") throw new Error(`caption ${c}`);
    const a = await text("#h-acc");
    if (a.includes("ppl")) throw new Error(`h-acc ${a}`);
    if (await page.locator("#lm-sample").isVisible()) throw new Error("the gpt run's sample still shows");
  });
});
