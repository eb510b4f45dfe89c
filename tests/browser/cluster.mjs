// cluster.mjs - the browser test of the dashboard's Cluster view: Debian's
// chromium, headless, against a real `stalelab serve --clusters DIR` whose
// DIR holds two real simulations (T3 of docs/cluster.md, and 1500 jobs on
// 64 GPUs whose timelines the daemon reduces). Prints "  ok   NAME" /
// "  FAIL NAME" lines (tests/integration/cluster_view.sh counts them) and
// saves a screenshot.
// Usage: node tests/browser/cluster.mjs BINARY SIMS_DIR RUN.json OUTDIR

import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";

import { checks, finish, launch, serve, sleep, until } from "./lib.mjs";

const BIN = resolve(process.argv[2] || "build/stalelab");
const DIR = resolve(process.argv[3]);
const RUN = resolve(process.argv[4]);
const OUT = resolve(process.argv[5] || "build/dashboard");
mkdirSync(OUT, { recursive: true });

const t = checks();
const check = t.check;

const daemon = await serve(BIN, ["--listen", "127.0.0.1:0", "--bus", "none", "--workers-listen", "none",
  "--clusters", DIR, "--config", RUN]);
const base = `http://127.0.0.1:${daemon.port}`;
const browser = await launch();
const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true })).newPage();
const errors = [];
page.on("pageerror", (e) => errors.push(e.message));
console.log(`integration: the dashboard's cluster view (chromium, daemon on port ${daemon.port})`);
// the data of a chart of the open simulation: [xs, ...series]
const chartData = (key) => page.evaluate((k) => {
  const u = window.stalelab.cluster.byKey[k];
  return u ? { data: u.data, labels: u.series.map((s) => s.label), yRange: [u.scales.y.min, u.scales.y.max] } : null;
}, key);
try {
  await page.goto(`${base}/`);

  await check("a page opened on the Cluster tab still shows the run in its header", async () => {
    await page.goto(`${base}/?view=cluster`);
    await until("the header", async () => (await page.locator("#h-model").innerText()) === "mlp:784-16-10");
    await page.goto(`${base}/`);
  });

  await check("the Cluster tab opens by keyboard and lists the two simulations", async () => {
    await page.click("#tab-live");
    await page.keyboard.press("ArrowRight");
    await page.keyboard.press("ArrowRight");
    await page.keyboard.press("ArrowRight");
    await until("the tab", async () => (await page.getAttribute("#tab-cluster", "aria-selected")) === "true");
    await until("the list", async () => (await page.locator(".cluster-pick").count()) === 2);
    const names = await page.locator(".cluster-pick").allInnerTexts();
    if (names.join() !== "big,t3") throw new Error(`listed: ${names.join()}`);
    const hint = await page.locator(".cluster-list li").nth(1).innerText();
    if (!/2 jobs · 2 GPUs · fifo, srtf, las, gandiva, jigsaw/.test(hint)) throw new Error(hint);
    if (!/view=cluster/.test(page.url())) throw new Error(page.url());
  });

  await check("T3 opens: a row per policy, jigsaw's gain over fifo and over the best other", async () => {
    await page.click('.cluster-pick[data-sim="t3"]');
    await until("its table", async () => (await page.locator(".cluster-body h2", { hasText: /^t3$/ }).count()) === 1);
    const pols = await page.locator(".cluster-summary tbody tr").evaluateAll((rs) => rs.map((r) => r.dataset.policy));
    if (pols.join() !== "fifo,srtf,las,gandiva,jigsaw") throw new Error(pols.join());
    const gain = await page.locator(".cluster-gain").innerText();
    if (!/makespan \+138\.1% over fifo, \+138\.1% over the best other policy \(fifo\)/.test(gain)) throw new Error(gain);
    const j = await page.locator('.cluster-summary tr[data-policy="jigsaw"] td').allInnerTexts();
    if (j[0] !== "16.8 s" || j[3] !== "16.8 s" || j[8] !== "+138.1%") throw new Error(j.join(" | "));
    const marked = await page.locator('.cluster-summary tr[data-policy="jigsaw"] td.best').count();
    const others = await page.locator('.cluster-summary tr[data-policy="fifo"] td.best').count();
    if (marked < 4 || others !== 0) throw new Error(`best cells: jigsaw ${marked}, fifo ${others}`);
  });

  await check("T3's charts: GPUs in use, jobs waiting and the JCTs, a line per policy", async () => {
    const g = await until("the GPUs chart", () => chartData("gpus"));
    if (g.labels.slice(1).join() !== "fifo,srtf,las,gandiva,jigsaw") throw new Error(g.labels.join());
    if (g.yRange[0] !== 0 || g.yRange[1] !== 2) throw new Error(`y range ${g.yRange}`);
    // jigsaw holds both GPUs from 0 to 16.8 s, then none
    const xs = g.data[0], jig = g.data[5];
    const at = (x) => jig[xs.findIndex((v) => Math.abs(v - x) < 1e-9)];
    if (at(0) !== 2 || at(16.8 / 3600) !== 0) throw new Error(`jigsaw: ${JSON.stringify([xs, jig])}`);
    const c = await chartData("jct");
    for (let i = 1; i < c.data.length; i++) {
      const ys = c.data[i].filter((y) => y != null);
      if (ys[ys.length - 1] !== 1) throw new Error(`${c.labels[i]}: ${ys}`);
    }
    if ((await chartData("queued")) === null) throw new Error("no queued chart");
    const titles = await page.locator(".cluster-charts figcaption h3").allInnerTexts();
    if (titles.some((t) => /means over/.test(t))) throw new Error(`T3 is not reduced: ${titles}`);
  });

  await check("T3's schedules and inputs: two halves under jigsaw, the profiles' notes", async () => {
    const row = await page.locator(".cluster-sched tbody tr", { hasText: "jigsaw" }).locator("td").allInnerTexts();
    const head = await page.locator(".cluster-sched thead th").allInnerTexts();
    if (row[head.indexOf("half") - 1] !== "2 (100%)") throw new Error(`${head} / ${row}`);
    const notes = await page.locator(".cluster-notes").allInnerTexts();
    if (!notes.some((n) => /^T3's model/.test(n))) throw new Error(notes.join(" | "));
    const prof = await page.locator(".cluster-profiles tbody tr").count();
    if (prof !== 2) throw new Error(`${prof} schedules`);
    if (!/^stalelab cluster -t /.test(await page.locator(".cluster-command").innerText())) throw new Error("command");
  });

  await check("a file link gives the file", async () => {
    const href = await page.locator(".cluster-files a", { hasText: /^jobs_jigsaw\.csv$/ }).getAttribute("href");
    const r = await page.evaluate(async (h) => {
      const res = await fetch(h);
      return [res.status, res.headers.get("content-type"), await res.text()];
    }, href);
    if (r[0] !== 200 || !/text\/csv/.test(r[1]) || !/^job_id,/.test(r[2])) throw new Error(JSON.stringify(r).slice(0, 200));
  });

  await check("a chart's CSV button downloads its data", async () => {
    const [dl] = await Promise.all([page.waitForEvent("download"),
      page.locator('[data-chart="gpus"] button', { hasText: "CSV" }).click()]);
    if (!/stalelab-t3-gpus\.csv$/.test(dl.suggestedFilename())) throw new Error(dl.suggestedFilename());
  });

  await check("the big one: its reduced timelines said, 1000 JCT points per policy; the URL keeps it", async () => {
    await page.click('.cluster-pick[data-sim="big"]');
    await until("its table", async () => (await page.locator(".cluster-body h2", { hasText: /^big$/ }).count()) === 1);
    const titles = await until("reduced titles", async () => {
      const t = await page.locator(".cluster-charts figcaption h3").allInnerTexts();
      return t.length === 3 && t[0].includes("means over equal spans") ? t : null;
    });
    if (!/^GPUs in use \(of 64\)/.test(titles[0])) throw new Error(titles.join(" | "));
    // every distinct JCT the daemon sent is a point (1000 quantiles; equal
    // ones drawn once), the last at 100%
    const c = await chartData("jct");
    const sent = await page.evaluate(async () => (await (await fetch("/api/v1/clusters/big")).json()).series);
    for (let i = 1; i < c.data.length; i++) {
      const ys = c.data[i].filter((y) => y != null);
      const want = new Set(sent[c.labels[i]].jct.s).size;
      if (sent[c.labels[i]].jct.s.length !== 1000 || ys.length !== want || ys[ys.length - 1] !== 1)
        throw new Error(`${c.labels[i]}: ${ys.length} points, ${want} distinct JCTs`);
    }
    const g = await chartData("gpus");
    if (g.data.slice(1).some((s) => s.some((y) => y != null && (y < 0 || y > 64)))) throw new Error("GPUs out of range");
    if (!/sim=big/.test(page.url())) throw new Error(page.url());
    await page.screenshot({ path: join(OUT, "dashboard-cluster.png"), fullPage: true });
    await page.reload();
    await until("reopened", async () => (await page.getAttribute('.cluster-pick[data-sim="big"]', "aria-pressed")) === "true");
  });

  await check("on a phone's width the charts fit the page", async () => {
    await page.setViewportSize({ width: 400, height: 800 });
    await sleep(300);
    const over = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    const fig = await page.locator('[data-chart="gpus"]').evaluate((f) => f.getBoundingClientRect().width);
    if (fig > 400) throw new Error(`chart ${fig}px wide, page overflows by ${over}px`);
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  await check("no errors on the page", () => {
    if (errors.length) throw new Error(errors.join("\n"));
  });
} finally {
  await finish(t, browser, daemon);
}
