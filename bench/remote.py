#!/usr/bin/env python3
"""remote.py - remote workers against in-process ones, on loopback.

    python3 bench/remote.py BINARY [--workers 1,2,4] [--seconds 5] [--rounds 3]

For each worker count N, interleaved round by round: a daemon whose run
(asgd, wall clock, the MLP 784-256-128-10 at batch 64, one thread a worker)
has N in-process workers; then the same run with its one local worker
paused and N `stalelab worker` processes on tcp://127.0.0.1. Each measures
updates/s and the bytes/s the workers moved (GET /api/v1/status, over
--seconds after a warm-up). Prints one line per N: the medians and the
ratio remote / in-process, and one JSON line each.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

RUN = {"model": "mlp:784-256-128-10", "dataset": "fashion-mnist", "lr": 0.05, "batch": 64,
       "threads": 1, "rule": "asgd", "eval_every": 0}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def status(url):
    with urllib.request.urlopen(url + "/api/v1/status", timeout=10) as r:
        return json.load(r)


def moved(st):
    return sum(w["bytes_sent"] + w["bytes_recv"] for w in st["workers"])


def measure(binary, n, remote, secs, tmp):
    cfg = dict(RUN, workers=1 if remote else n)
    if remote:
        cfg["worker_overrides"] = [{"id": 0, "paused": True}]
    path = os.path.join(tmp, "run.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    wport = free_port()
    serve = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--bus", "none",
                              "--workers-listen", "tcp://127.0.0.1:%d" % wport, "--quiet",
                              "--config", path], stderr=subprocess.PIPE, text=True)
    url = None
    while url is None:
        line = serve.stderr.readline()
        if not line:
            sys.exit("bench/remote: the daemon did not start")
        if "listening on " in line:
            url = line.split("listening on ")[1].split()[0].rstrip("/")
    workers = []
    try:
        if remote:
            for _ in range(n):
                workers.append(subprocess.Popen(
                    [binary, "worker", "--connect", "tcp://127.0.0.1:%d" % wport, "--threads", "1",
                     "-q", "--give-up", "30"]))
        deadline = time.time() + 60
        while True:  # every worker computing, then a warm-up
            st = status(url)
            busy = [w for w in st["workers"] if w["iterations"] > 0]
            if len(busy) >= n:
                break
            if time.time() > deadline:
                sys.exit("bench/remote: %d workers never all computed" % n)
            time.sleep(0.2)
        time.sleep(1)
        a, t0 = status(url), time.time()
        time.sleep(secs)
        b, t1 = status(url), time.time()
        return (b["version"] - a["version"]) / (t1 - t0), (moved(b) - moved(a)) / (t1 - t0)
    finally:
        for w in workers:
            w.terminate()
        for w in workers:
            w.wait()
        serve.terminate()
        serve.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    counts = [int(x) for x in a.workers.split(",")]
    res = {(n, r): [] for n in counts for r in (False, True)}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.rounds):
            for n in counts:
                for remote in (False, True):
                    res[(n, remote)].append(measure(a.binary, n, remote, a.seconds, tmp))
    print("%-8s %14s %14s %8s %14s" % ("workers", "in-process u/s", "remote u/s", "ratio",
                                        "remote MB/s"))
    for n in counts:
        loc = statistics.median(u for u, _ in res[(n, False)])
        rem = statistics.median(u for u, _ in res[(n, True)])
        mb = statistics.median(b for _, b in res[(n, True)]) / 1e6
        print("%-8d %14.1f %14.1f %8.2f %14.1f" % (n, loc, rem, rem / loc if loc else 0, mb))
        print(json.dumps({"bench": "remote", "workers": n, "local_updates_per_s": loc,
                          "remote_updates_per_s": rem, "ratio": rem / loc if loc else None,
                          "remote_bytes_per_s": mb * 1e6, "rounds": a.rounds,
                          "seconds": a.seconds}))


if __name__ == "__main__":
    main()
