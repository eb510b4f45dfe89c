// lib.mjs - helpers of the browser tests: a `stalelab serve` on a port,
// Debian's chromium (headless) through playwright-core from web/node_modules.

import { spawn } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const { chromium } = await import(pathToFileURL(join(root, "web/node_modules/playwright-core/index.mjs")));

export const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

export function launch() {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
}

// start `stalelab serve`; resolves with {proc, port} once it listens
export function serve(bin, args) {
  return new Promise((res, rej) => {
    const p = spawn(bin, ["serve", "--quiet", ...args], { stdio: ["ignore", "ignore", "pipe"] });
    const d = { proc: p, port: 0, err: "" };
    const t = setTimeout(() => rej(new Error(`daemon did not start: ${d.err}`)), 15000);
    p.stderr.on("data", (chunk) => {
      d.err += chunk;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)\//.exec(d.err);
      if (m && !d.port) {
        clearTimeout(t);
        d.port = Number(m[1]);
        res(d);
      }
    });
    p.on("exit", (code) => rej(new Error(`daemon exited ${code}: ${d.err}`)));
  });
}

// SIGTERM; resolves with the exit status (0 after a clean shutdown; a
// sanitizer's report makes it non-zero) and everything the daemon said
export function stop(d) {
  return new Promise((res) => {
    const done = () => res({ code: d.proc.exitCode, signal: d.proc.signalCode, err: d.err });
    if (d.proc.exitCode !== null || d.proc.signalCode !== null) return done();
    d.proc.on("exit", done);
    d.proc.kill("SIGTERM");
  });
}


export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// fn() until it gives something truthy (errors count as nothing), at most
// ms; throws naming what was awaited
export async function until(what, fn, ms = 30000, every = 100) {
  const end = Date.now() + ms;
  for (;;) {
    let v;
    try {
      v = await fn();
    } catch {
      v = null;
    }
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(every);
  }
}

// the checks of a test: check(name, fn) prints "  ok   NAME" or "  FAIL
// NAME" and the reason (fn threw or gave false); fail counts the failures
export function checks() {
  const t = {
    fail: 0,
    async check(name, fn) {
      try {
        if ((await fn()) === false) throw new Error("false");
        console.log(`  ok   ${name}`);
      } catch (e) {
        t.fail++;
        console.log(`  FAIL ${name}\n       ${String(e && e.message ? e.message : e).split("\n").slice(0, 4).join("\n       ")}`);
      }
    },
  };
  return t;
}

// the end of a test: the browser closed, the daemon stopped, which must
// exit 0 (a sanitizer's report fails the test), the exit status set
export async function finish(t, browser, daemon) {
  await browser.close();
  const r = await stop(daemon);
  if (r.code !== 0) {
    t.fail++;
    console.log(`  FAIL the daemon exits 0 (got ${r.code} ${r.signal})\n${r.err}`);
  }
  process.exit(t.fail ? 1 : 0);
}

// a test's checks: body(), then that the page threw no script error; a
// throw out of body counts as a failure; then finish (the exit status)
export async function runChecks(t, browser, daemon, pageErrors, body) {
  try {
    await body();
    await t.check("no script errors on the page", () => {
      if (pageErrors.length) throw new Error(pageErrors.join("\n"));
    });
  } catch (e) {
    t.fail++;
    console.log(`  FAIL the test stopped: ${e.message}`);
  }
  await finish(t, browser, daemon);
}
