#!/usr/bin/env python3
"""vclock.py - the virtual clock's communication model against real links.

    python3 bench/vclock.py BINARY [--workers 4] [--latency-ms 5] [--mbps 100]
                            [--seconds 20] [--rounds 3]

As root with network namespaces: the daemon in one namespace, N
`stalelab worker` processes in N others, each joined to the daemon's by a
veth link shaped with tc tbf to --mbps in both directions and, where the
kernel has sch_netem, `netem delay` --latency-ms; else a relay in the
worker's namespace holds every byte for --latency-ms (bench/delayline.py).
The run: asgd, the MLP 784-128-10 at batch 32, remote workers only.
Measured over --seconds after a warm-up: updates/s and the mean staleness
(from /metrics, the window's own). Predicted: the same run on the virtual
clock with "link": {"latency_ms", "bandwidth_mbps"} set to the link's.
Prints both, their ratio, and a JSON line. Says why and exits 0 where it
cannot run (not root, no ip/tc, namespaces it cannot enter).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

RUN = {"model": "mlp:784-128-10", "dataset": "fashion-mnist", "lr": 0.05, "batch": 32,
       "threads": 1, "rule": "asgd", "eval_every": 0}
TAG = "slv%d" % os.getpid()
HERE = os.path.dirname(os.path.abspath(__file__))


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode


def can_run():
    if os.geteuid() != 0:
        return "needs root"
    if not shutil.which("ip") or not shutil.which("tc"):
        return "needs ip and tc (iproute2)"
    if shutil.which("mountpoint") and sh("mountpoint", "-q", "/", check=False) != 0:
        return "/ is no mount point (a chroot): network namespaces cannot be entered"
    p = TAG + "-probe"
    if sh("ip", "netns", "add", p, check=False) != 0:
        return "cannot make a network namespace"
    ok = sh("ip", "netns", "exec", p, "true", check=False) == 0
    sh("ip", "netns", "del", p, check=False)
    return None if ok else "cannot enter a network namespace"


class Net:
    def __init__(self, n, mbps, latency_ms):
        self.n, self.ps = n, TAG + "-ps"
        self.ws = ["%s-w%d" % (TAG, i) for i in range(1, n + 1)]
        self.relays = []
        self.netem = False
        for ns in [self.ps] + self.ws:
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        for i, w in enumerate(self.ws, 1):
            a, b = "vp%d%s" % (i, TAG[-6:]), "vw%d%s" % (i, TAG[-6:])
            sh("ip", "link", "add", a, "netns", self.ps, "type", "veth", "peer", "name", b,
               "netns", w)
            sh("ip", "-n", self.ps, "addr", "add", "10.78.%d.1/24" % i, "dev", a)
            sh("ip", "-n", w, "addr", "add", "10.78.%d.2/24" % i, "dev", b)
            sh("ip", "-n", self.ps, "link", "set", a, "up")
            sh("ip", "-n", w, "link", "set", b, "up")
            for ns, dev in ((self.ps, a), (w, b)):
                # netem delay with its own rate where the kernel has it; else tbf
                if sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root",
                      "netem", "delay", "%gms" % latency_ms, "rate", "%dmbit" % mbps,
                      "limit", "100000", check=False) == 0:
                    self.netem = True
                else:
                    sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root",
                       "tbf", "rate", "%dmbit" % mbps, "burst", "32kb", "latency", "500ms")
        self.latency_ms = latency_ms

    def url(self, i):
        """where worker i (1-based) connects: a relay holding the bytes, or the link"""
        if self.netem:
            return "tcp://10.78.%d.1:8473" % i
        return "tcp://127.0.0.1:9000"

    def start_relays(self):
        if self.netem:
            return
        for i, w in enumerate(self.ws, 1):
            self.relays.append(subprocess.Popen(
                ["ip", "netns", "exec", w, sys.executable, os.path.join(HERE, "delayline.py"),
                 "--listen", "127.0.0.1:9000", "--to", "10.78.%d.1:8473" % i,
                 "--delay-ms", str(self.latency_ms)]))
        time.sleep(0.5)

    def close(self):
        for p in self.relays:
            p.kill()
            p.wait()
        for ns in [self.ps] + self.ws:
            sh("ip", "netns", "del", ns, check=False)


def measured(binary, net, n, secs, tmp):
    cfg = dict(RUN, workers=0)
    path = os.path.join(tmp, "real.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    err = open(os.path.join(tmp, "serve.err"), "w+")
    serve = subprocess.Popen(["ip", "netns", "exec", net.ps, binary, "serve", "--listen",
                              "127.0.0.1:0", "--bus", "none", "--workers-listen",
                              "tcp://0.0.0.0:8473", "--quiet", "--config", path],
                             stderr=err)
    workers = []
    try:
        url = None
        for _ in range(300):
            err.seek(0)
            for line in err:
                if "listening on http://" in line:
                    url = line.split("listening on ")[1].split()[0].rstrip("/")
            if url:
                break
            time.sleep(0.1)
        if not url:
            raise RuntimeError("the daemon did not start")

        # the daemon listens in its namespace's loopback: ask through it
        def ask(fn):
            out = subprocess.run(["ip", "netns", "exec", net.ps, sys.executable, "-c",
                                  "import json,sys,urllib.request as u;"
                                  "print(u.urlopen(sys.argv[1],timeout=10).read().decode())",
                                  url + fn], check=True, capture_output=True, text=True)
            return out.stdout
        net.start_relays()
        for i in range(1, n + 1):
            workers.append(subprocess.Popen(
                ["ip", "netns", "exec", net.ws[i - 1], binary, "worker", "--connect",
                 net.url(i), "--threads", "1", "--give-up", "60", "-q"]))
        until = time.time() + 90
        while time.time() < until:
            st = json.loads(ask("/api/v1/status"))
            if sum(1 for w in st["workers"] if w["remote"] and w["iterations"] > 5) == n:
                break
            time.sleep(0.5)
        else:
            raise RuntimeError("the workers did not join")
        time.sleep(3)  # warm-up: every worker in its steady state

        def m():
            out = {}
            for line in ask("/metrics").splitlines():
                for k, key in (("stalelab_updates_total ", "v"),
                               ("stalelab_staleness_sum ", "sum"),
                               ("stalelab_staleness_count ", "count")):
                    if line.startswith(k):
                        out[key] = float(line.split()[1])
            out["t"] = time.monotonic()
            return out
        a = m()
        time.sleep(secs)
        b = m()
        ups = (b["v"] - a["v"]) / (b["t"] - a["t"])
        stale = (b["sum"] - a["sum"]) / max(1.0, b["count"] - a["count"])
        return ups, stale
    finally:
        for w in workers:
            w.terminate()
        for w in workers:
            try:
                w.wait(10)
            except subprocess.TimeoutExpired:
                w.kill()
        serve.terminate()
        serve.wait()
        for p in net.relays:
            p.kill()
            p.wait()
        net.relays = []


def predicted(binary, n, latency_ms, mbps, tmp):
    cfg = dict(RUN, workers=n, clock="virtual",
               link={"latency_ms": latency_ms, "bandwidth_mbps": mbps},
               stop={"seconds": 30})
    path = os.path.join(tmp, "virtual.json")
    log = os.path.join(tmp, "virtual.jsonl")
    with open(path, "w") as f:
        json.dump(cfg, f)
    subprocess.run([binary, "run", "--config", path, "--log", log, "-q"], check=True)
    end = [json.loads(l) for l in open(log) if '"event":"end"' in l][-1]
    # in virtual seconds (the record's *_per_s are per second of the
    # simulation's own run time)
    return end["v"] / end["t"], end["staleness"]["mean"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--latency-ms", type=float, default=5)
    ap.add_argument("--mbps", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    why = can_run()
    if why:
        print("vclock: skipped: %s" % why)
        return 0
    tmp = tempfile.mkdtemp(prefix="sl-vclock-")
    net = Net(a.workers, a.mbps, a.latency_ms)
    try:
        p_ups, p_stale = predicted(a.binary, a.workers, a.latency_ms, a.mbps, tmp)
        runs = [measured(a.binary, net, a.workers, a.seconds, tmp) for _ in range(a.rounds)]
    finally:
        net.close()
        shutil.rmtree(tmp, ignore_errors=True)
    m_ups = statistics.median(r[0] for r in runs)
    m_stale = statistics.median(r[1] for r in runs)
    how = "netem delay + rate" if net.netem else "tc tbf rate + a %g ms relay" % a.latency_ms
    print("vclock: %d remote workers, link %g ms one way, %d Mbit/s (%s)" %
          (a.workers, a.latency_ms, a.mbps, how))
    print("  updates/s  measured %8.2f  predicted %8.2f  measured/predicted %.3f" %
          (m_ups, p_ups, m_ups / p_ups))
    print("  staleness  measured %8.3f  predicted %8.3f  measured/predicted %.3f" %
          (m_stale, p_stale, m_stale / p_stale if p_stale else float("nan")))
    print(json.dumps({"bench": "vclock", "workers": a.workers, "latency_ms": a.latency_ms,
                      "mbps": a.mbps, "shaping": how,
                      "measured": {"updates_per_s": [r[0] for r in runs],
                                   "staleness": [r[1] for r in runs]},
                      "predicted": {"updates_per_s": p_ups, "staleness": p_stale}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
