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
    let err = "";
    const t = setTimeout(() => rej(new Error(`daemon did not start: ${err}`)), 15000);
    p.stderr.on("data", (d) => {
      err += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)\//.exec(err);
      if (m) {
        clearTimeout(t);
        res({ proc: p, port: Number(m[1]) });
      }
    });
    p.on("exit", (code) => rej(new Error(`daemon exited ${code}: ${err}`)));
  });
}

export function stop(d) {
  return new Promise((res) => {
    if (d.proc.exitCode !== null) return res();
    d.proc.on("exit", () => res());
    d.proc.kill("SIGTERM");
  });
}

