// sweeps.mjs - the browser test of the dashboard's Sweeps view and its
// gradient-coherence chart: Debian's chromium, headless, against a real
// `stalelab serve --sweeps DIR` whose DIR holds two real sweeps (one with
// `stalelab plot`'s figures; at 1400x1000 one opens full size on a click
// or Enter). Prints "  ok   NAME" / "  FAIL NAME" lines
// (tests/integration/sweeps_view.sh counts them) and saves screenshots.
// Usage: node tests/browser/sweeps.mjs BINARY SWEEPS_DIR OUTDIR

import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";

import { checks, finish, launch, serve, until } from "./lib.mjs";

const BIN = resolve(process.argv[2] || "build/stalelab");
const DIR = resolve(process.argv[3]);
const OUT = resolve(process.argv[4] || "build/dashboard");
mkdirSync(OUT, { recursive: true });

const t = checks();
const check = t.check;

// a virtual-clock run with gradient coherence, slowed by nothing: it trains
// until stopped, its evaluations carry "coherence"
const daemon = await serve(BIN, ["--listen", "127.0.0.1:0", "--bus", "none", "--sweeps", DIR,
  "--config", join(DIR, "..", "live.json")]);
const base = `http://127.0.0.1:${daemon.port}`;
const browser = await launch();
const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
const errors = [];
page.on("pageerror", (e) => errors.push(e.message));
console.log(`integration: the dashboard's sweeps (chromium, daemon on port ${daemon.port})`);
try {
  await page.goto(`${base}/?view=sweeps`);

  await check("the Sweeps tab lists the two sweeps", async () => {
    await until("the list", async () => (await page.locator(".sweep-pick").count()) === 2);
    const names = await page.locator(".sweep-pick").allInnerTexts();
    if (names.join() !== "grid,plain") throw new Error(`listed: ${names.join()}`);
    const sel = await page.getAttribute("#tab-sweeps", "aria-selected");
    if (sel !== "true") throw new Error(`tab selected: ${sel}`);
  });

  await check("the first sweep opens with its figures drawn", async () => {
    await until("the figures", async () => (await page.locator(".sweep-figures img").count()) >= 3);
    const imgs = page.locator(".sweep-figures img");
    await until("the images loaded", () => imgs.evaluateAll((a) => a.every((i) => i.complete && i.naturalWidth > 100)));
    const alts = await imgs.evaluateAll((a) => a.map((i) => i.alt));
    for (const f of ["loss", "accuracy", "staleness"])
      if (!alts.some((a) => a.startsWith(f))) throw new Error(`figures: ${alts.join(" | ")}`);
    await page.screenshot({ path: join(OUT, "dashboard-sweeps.png"), fullPage: true });
  });

  await check("at 1400x1000 a figure opens full size on a click; Escape closes it", async () => {
    await page.setViewportSize({ width: 1400, height: 1000 });
    const card = page.locator(".sweep-figures img").first();
    const small = await card.evaluate((i) => i.getBoundingClientRect().width);
    await card.click();
    const big = page.locator("dialog.figure-full[open] img");
    await until("the figure full size", async () => (await big.count()) === 1);
    await until("its image loaded", () => big.evaluate((i) => i.complete && i.naturalWidth > 100));
    const r = await big.evaluate((i) => {
      const b = i.getBoundingClientRect();
      return { w: b.width, left: b.left, top: b.top, right: b.right, bottom: b.bottom, nw: i.naturalWidth, alt: i.alt };
    });
    await page.screenshot({ path: join(OUT, "dashboard-sweeps-figure.png") });
    // its own size at least (the card shrinks it), all of it in the window
    if (!(r.w >= r.nw && r.w > small * 1.5)) throw new Error(`${r.w} px wide, the card ${small}, its own ${r.nw}`);
    if (r.left < 0 || r.top < 0 || r.right > 1400 || r.bottom > 1000) throw new Error(`outside the window: ${JSON.stringify(r)}`);
    if (!/ of sweep grid$/.test(r.alt)) throw new Error(`alt: ${r.alt}`);
    await page.keyboard.press("Escape");
    await until("closed", async () => (await page.locator("dialog.figure-full[open]").count()) === 0);
  });

  await check("from the keyboard: a figure is a button, Enter opens it", async () => {
    const second = page.locator(".sweep-figures button.figure-open").nth(1);
    await second.focus();
    await page.keyboard.press("Enter");
    const big = page.locator("dialog.figure-full[open] img");
    await until("the figure full size", async () => (await big.count()) === 1);
    const alts = await page.locator(".sweep-figures img").evaluateAll((a) => a.map((i) => i.alt));
    const alt = await big.getAttribute("alt");
    if (alt !== alts[1]) throw new Error(`opened ${alt}, not ${alts[1]}`);
    await page.keyboard.press("Escape");
    await until("closed", async () => (await page.locator("dialog.figure-full[open]").count()) === 0);
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  await check("its results table has a row per cell, the axes and metrics", async () => {
    const rows = await page.locator(".sweep-table tbody tr").count();
    const head = await page.locator(".sweep-table thead th").allInnerTexts();
    if (rows !== 4) throw new Error(`${rows} rows`);
    for (const h of ["rule", "seed", "final_acc", "stale_mean"])
      if (!head.includes(h)) throw new Error(`columns: ${head.join(",")}`);
    const cell = await page.locator(".sweep-table tbody tr").first().locator("td").allInnerTexts();
    if (!cell.some((t) => /^0\.\d+$/.test(t))) throw new Error(`first row: ${cell.join(",")}`);
  });

  await check("the sweep file is shown", async () => {
    const spec = JSON.parse(await page.locator(".sweep-spec").innerText());
    if (JSON.stringify(spec.rule) !== JSON.stringify(["ssgd", "asgd"])) throw new Error(JSON.stringify(spec));
  });

  await check("another sweep: no figures yet, says how to draw them; the URL keeps it", async () => {
    await page.click('.sweep-pick[data-sweep="plain"]');
    await until("its table", async () => (await page.locator("h2", { hasText: /^plain$/ }).count()) === 1);
    const hint = await page.locator(".sweep-body .hint").first().innerText();
    if (!/stalelab plot/.test(hint)) throw new Error(hint);
    if (!/sweep=plain/.test(page.url())) throw new Error(page.url());
    await page.reload();
    await until("reopened", async () => (await page.getAttribute('.sweep-pick[data-sweep="plain"]', "aria-pressed")) === "true");
  });

  await check("the live view charts gradient coherence", async () => {
    await page.click("#tab-live");
    const fig = page.locator('[data-chart="coh"]');
    await until("the chart shown", async () => !(await fig.evaluate((f) => f.hidden)));
    const n = await until("points", () => page.evaluate(() => {
      const d = window.stalelab.charts.coh.data;
      const ys = d[1].filter((y) => y !== null);
      return ys.length >= 2 && ys.every((y) => y >= -1 && y <= 1) ? ys.length : 0;
    }));
    if (!(n >= 2)) throw new Error(`${n} points`);
  });

  await check("no errors on the page", () => {
    if (errors.length) throw new Error(errors.join("\n"));
  });
} finally {
  await finish(t, browser, daemon);
}
