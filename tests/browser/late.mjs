// late.mjs - a dashboard opened after the run's changes: it marks every one
// of them on the charts and lists them in the Changes panel (it showed none:
// the markers came only from the live stream); and ?snapshot draws the run
// once with no stream, so a screenshot finishes.
// Usage: node tests/browser/late.mjs URL COUNT OUTDIR
//   URL: a daemon whose current run had COUNT changes made before the page
//   opens (tests/integration/live.sh makes them)

import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";

import { checks, launch, until } from "./lib.mjs";

const URL = process.argv[2];
const COUNT = Number(process.argv[3]);
const OUT = resolve(process.argv[4] || "build/late");
mkdirSync(OUT, { recursive: true });
const t = checks();
const browser = await launch();

const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
page.on("pageerror", (e) => console.log(`  page error: ${e.message}`));
await page.goto(URL);
await t.check(`the late page marks the ${COUNT} changes made before it opened`, async () => {
  const n = await until("markers", async () => {
    const m = await page.evaluate(() => window.stalelab.st.markers.length);
    return m >= COUNT ? m : 0;
  });
  if (n !== COUNT) throw new Error(`${n} markers, want ${COUNT}`);
});
await t.check("they are in run order", async () => {
  const vs = await page.evaluate(() => window.stalelab.st.markers.map((m) => m.x.v));
  for (let i = 1; i < vs.length; i++) if (vs[i] < vs[i - 1]) throw new Error(`versions ${vs}`);
});
await t.check(`the Changes panel lists ${COUNT} changes, each at its version`, async () => {
  const items = await until("the panel", async () => {
    const li = await page.$$eval("#changes li", (l) => l.map((x) => x.textContent));
    return li.length >= COUNT ? li : null;
  });
  // the rule switch, a pause, a resume and four lr changes
  const lr = items.filter((s) => /api: lr 0\.0/.test(s));
  if (lr.length !== 4) throw new Error(`${lr.length} lr changes:\n${items.join("\n")}`);
  if (!items.some((s) => /api: rule ssp/.test(s))) throw new Error(`no rule switch:\n${items.join("\n")}`);
  if (!items.every((s) => /^v \d+ /.test(s))) throw new Error(items.join("\n"));
});
await t.check("the markers are drawn on the charts", async () => {
  await until("drawn", async () => page.evaluate(() => window.stalelab.st.markers.every((m) => m.drawn > 0)));
});
await page.screenshot({ path: join(OUT, "late.png") });
await page.close();

// ?snapshot: the state drawn once, no stream (the page's requests end)
const snap = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
const streams = [];
snap.on("request", (r) => {
  if (r.url().includes("/api/v1/events")) streams.push(r.url());
});
await snap.goto(`${URL}/?snapshot`);
await t.check("?snapshot: drawn (body[data-ready]) with the changes marked", async () => {
  await until("ready", async () => snap.evaluate(() => document.body.dataset.ready === "1"));
  const n = await snap.evaluate(() => window.stalelab.st.markers.length);
  if (n !== COUNT) throw new Error(`${n} markers`);
});
await t.check("?snapshot: the header says it is a snapshot, not live", async () => {
  const c = await snap.textContent("#conn");
  if (!/^snapshot at v \d+ \(not live\)$/.test(c)) throw new Error(c);
});
await t.check("?snapshot: the accuracy chart has points", async () => {
  const n = await snap.evaluate(() => window.stalelab.st.series.v.length);
  if (!(n > 0)) throw new Error(`${n} points`);
});
await t.check("?snapshot: no event stream was opened", async () => {
  await new Promise((r) => setTimeout(r, 1000));
  if (streams.length) throw new Error(streams.join(" "));
});
await snap.close();
await browser.close();
process.exit(t.fail ? 1 : 0);
