// screenshot.mjs - the dashboard screenshot of README.md and
// docs/dashboard.md (not part of `make test`): Fashion-MNIST, four workers,
// a straggler appears, then the rule changes to dcasgd; the page at 1280x800
// half a minute in. Also writes 1920x1080 and phone-width shots beside it.
// Usage: node tests/browser/screenshot.mjs BINARY OUT.png

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { launch, serve, stop } from "./lib.mjs";

const BIN = resolve(process.argv[2] || "build/stalelab");
const OUT = resolve(process.argv[3] || "build/dashboard/readme.png");
const tmp = mkdtempSync(join(tmpdir(), "slshot."));
writeFileSync(join(tmp, "run.json"), JSON.stringify({
  model: "mlp:784-128-10", dataset: "fashion-mnist", lr: 0.05, batch: 32, workers: 4, threads: 1,
  eval_every: 100, delay: { dist: "exp", mean_ms: 10 },
}));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const d = await serve(BIN, ["--listen", "127.0.0.1:0", "--config", join(tmp, "run.json")]);
const base = `http://127.0.0.1:${d.port}`;
const patch = (path, body) => fetch(base + path, { method: "PATCH", body: JSON.stringify(body) });
const browser = await launch();
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(base + "/");
  await sleep(12000);
  await patch("/api/v1/workers/3", { delay: { dist: "const", mean_ms: 150 } });
  await sleep(10000);
  await patch("/api/v1/run", { rule: "dcasgd", rule_params: { lambda: 0.04 } });
  await sleep(8000);
  await page.screenshot({ path: OUT });
  for (const [w, h] of [[1920, 1080], [390, 844]]) {
    await page.setViewportSize({ width: w, height: h });
    await sleep(800);
    await page.screenshot({ path: OUT.replace(/\.png$/, `-${w}x${h}.png`) });
  }
} finally {
  await browser.close();
  await stop(d);
  rmSync(tmp, { recursive: true, force: true });
}
