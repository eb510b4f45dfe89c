// dylu.mjs - the browser test of async-diloco's Dynamic Local Updates on
// the dashboard (docs/dashboard.md, "Workers"): each worker's H in the
// worker table, the staleness histogram titled in outer versions; worker 1
// slowed from its row's mean-delay field (5 -> 50 ms) shows a smaller H and
// the histogram's p99 and worker 1's staleness rise; its delay set back to
// 5 ms, its H rises again. The virtual clock: the same H for the same
// speeds however loaded the machine; every wait polls. Debian's chromium,
// headless, through playwright-core, against a real `stalelab serve`.
// Prints "  ok" / "  FAIL" lines (tests/integration/dashboard.sh counts them).
// Usage: node tests/browser/dylu.mjs BINARY

import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { checks, launch, runChecks, serve, until } from "./lib.mjs";

const BIN = resolve(process.argv[2] || "build/stalelab");
const tmp = mkdtempSync(join(tmpdir(), "sldylu."));

const RUN = { model: "mlp:784-32-10", dataset: "synthetic:6000", rule: "async-diloco",
  rule_params: { H: 8, dn_period: 3, dylu: true }, optimizer: "adamw", lr: 0.001, workers: 3,
  clock: "virtual", threads: 1, batch: 16, eval_every: 500, delay: { dist: "const", mean_ms: 5 },
  stop: { epochs: 1000 } };
writeFileSync(join(tmp, "run.json"), JSON.stringify(RUN));

const daemon = await serve(BIN, ["--listen", "127.0.0.1:0", "--bus", "none", "--workers-listen", "none",
  "--config", join(tmp, "run.json")]);
const base = `http://127.0.0.1:${daemon.port}`;
const browser = await launch();
const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
const pageErrors = [];
page.on("pageerror", (e) => pageErrors.push(e.message));
const t = checks();
const text = (sel) => page.locator(sel).textContent();
// worker id's H as its row shows it
const hOf = async (id) => Number(await page.locator(`tr[data-worker="${id}"] td.h`).textContent());
const p99 = async () => Number(await page.locator("#hist-stats").getAttribute("data-p99"));
const setDelay = async (id, ms) => {
  const f = page.locator(`input[name="w${id}-mean"]`);
  await f.fill(String(ms));
  await f.press("Enter");
  await f.blur();
};
const delayIs = async (id, ms) =>
  (await (await fetch(`${base}/api/v1/workers/${id}`)).json()).delay.mean_ms === ms;

await runChecks(t, browser, daemon, pageErrors, async () => {
  console.log(`integration: async-diloco's H on the dashboard (chromium, daemon on port ${daemon.port})`);
  await page.goto(base + "/");
  let h0 = 0;
  await t.check("each worker's H in the table (8 at equal speeds, 7 by rounding)", async () => {
    h0 = await until("worker 1's H", async () => { const h = await hOf(1); return h >= 7 && h; }, 60000);
  });
  await t.check("the histogram is titled in outer versions", async () => {
    await until("the title", async () => (await text("#hist-caption")) === "Staleness in outer versions");
    const u = await page.locator("#hist-stats").getAttribute("data-unit");
    if (u !== "outer versions") throw new Error(`data-unit ${u}`);
  });
  await t.check("... its axis too", async () => {
    const l = await page.evaluate(() => window.stalelab.charts.hist.axes[0].label);
    if (l !== "staleness (outer versions)") throw new Error(`axis ${l}`);
  });
  await t.check("bytes sent and received shown", async () => {
    const head = await page.locator("table.workers thead").textContent();
    if (!head.includes("sent") || !head.includes("received")) throw new Error(head);
  });
  await page.locator("[data-histmode=cumulative]").click();
  const p0 = await until("a cumulative p99", async () => { const p = await p99(); return p >= 0 && String(p); });
  let hmin = h0;
  await t.check("worker 1 slowed from its row (5 -> 50 ms): its H falls", async () => {
    await setDelay(1, 50);
    await until("the delay applied", () => delayIs(1, 50));
    await until("worker 1's H at 4 or less", async () => {
      hmin = Math.min(hmin, await hOf(1));
      return hmin <= 4;
    }, 120000);
    console.log(`       H ${h0} -> ${hmin}`);
  });
  await t.check("... the outer staleness answers: the cumulative p99 rises", async () => {
    await until("the p99 over its start", async () => (await p99()) > Number(p0), 60000);
    console.log(`       p99 ${p0} -> ${await p99()}`);
  });
  await t.check("its delay back at 5 ms: its H rises", async () => {
    await setDelay(1, 5);
    await until("the delay applied", () => delayIs(1, 5));
    let low = hmin;
    await until("worker 1's H over its lowest", async () => {
      const h = await hOf(1);
      low = Math.min(low, h);
      return h > low;
    }, 120000);
    console.log(`       H ${low} -> ${await hOf(1)}`);
  });
});
