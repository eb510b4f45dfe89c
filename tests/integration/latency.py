#!/usr/bin/env python3
"""latency.py - how fast a training daemon answers (standard library only;
the bus through ctypes on libnanomsg.so.5).

Starts `STALELAB serve` on a run that trains at full speed, a busy loop
per core beside it (at the same priority: a loaded machine), then sends
REQUESTS mixed requests one after another, in a fixed order: GET status,
metrics, staleness and /metrics; PATCH /api/v1/run (lr), PATCH
/api/v1/workers/0 (delay), PUT /api/v1/workers; and, over the bus, the
same GETs and PATCHes. Then SIGTERM, and the time until the daemon is
gone. Prints the percentiles per kind and overall, then one JSON line;
exits 1 when a request took over BOUND seconds, got an error status, a
PATCH was not applied, or the exit took over BOUND seconds.

  latency.py STALELAB [--clock virtual|wall] [--workers N] [--eval-every N]
             [--model SPEC] [--requests N] [--bound S] [--busy N] [--label L]
"""
import argparse
import ctypes
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time

AF_SP, NN_REQ = 1, 48
NN_SOL_SOCKET, NN_SNDTIMEO, NN_RCVTIMEO, NN_RCVMAXSIZE = 0, 4, 5, 16
NN_MSG = ctypes.c_size_t(-1).value


def free_pair():
    for _ in range(200):
        p = random.randrange(20000, 60000)
        try:
            for q in (p, p + 1):
                s = socket.socket()
                s.bind(("127.0.0.1", q))
                s.close()
            return p
        except OSError:
            pass
    sys.exit("latency: no free pair of ports")


class Bus:
    """a REQ socket on the daemon's command socket, a fresh one per request
    (so nanomsg never re-sends one that timed out)"""

    def __init__(self, url, timeout):
        self.nn = ctypes.CDLL("libnanomsg.so.5", use_errno=True)
        self.nn.nn_recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self.nn.nn_send.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
        self.nn.nn_freemsg.argtypes = [ctypes.c_void_p]
        self.url, self.timeout, self.n = url.encode(), timeout, 0

    def request(self, method, path, body=None):
        nn = self.nn
        s = nn.nn_socket(AF_SP, NN_REQ)
        try:
            for opt, val in ((NN_SNDTIMEO, int(self.timeout * 1000)),
                             (NN_RCVTIMEO, int(self.timeout * 1000)), (NN_RCVMAXSIZE, -1)):
                v = ctypes.c_int(val)
                nn.nn_setsockopt(s, NN_SOL_SOCKET, opt, ctypes.byref(v), 4)
            if nn.nn_connect(s, self.url) < 0:
                return None
            self.n += 1
            msg = {"id": "lat-%d" % self.n, "method": method, "path": path}
            if body is not None:
                msg["body"] = body
            data = json.dumps(msg).encode()
            if nn.nn_send(s, data, len(data), 0) < 0:
                return None
            buf = ctypes.c_void_p()
            n = nn.nn_recv(s, ctypes.byref(buf), NN_MSG, 0)
            if n < 0:
                return None
            rep = json.loads(ctypes.string_at(buf, n))
            nn.nn_freemsg(buf)
            return rep.get("status"), rep.get("body")
        finally:
            nn.nn_close(s)


def http_request(port, method, path, body, timeout):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        try:
            return r.status, json.loads(data) if data else None
        except ValueError:
            return r.status, None  # /metrics: text
    except (OSError, http.client.HTTPException):
        return None
    finally:
        c.close()


def pct(xs, p):
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(p / 100.0 * len(s) + 0.5)) - 1))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stalelab")
    ap.add_argument("--clock", default="virtual")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--model", default="mlp:784-256-128-10")
    ap.add_argument("--dataset", default="fashion-mnist")
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--bound", type=float, default=2.0)
    ap.add_argument("--busy", type=int, default=os.cpu_count() or 1,
                    help="busy loops beside the daemon (default: one per core)")
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    label = a.label or "%s clock, %d workers, eval_every %d" % (a.clock, a.workers, a.eval_every)

    tmp = tempfile.mkdtemp(prefix="sl-lat.")
    cfg = {"model": a.model, "dataset": a.dataset, "rule": "asgd", "workers": a.workers,
           "clock": a.clock, "eval_every": a.eval_every, "lr": 0.02,
           "delay": {"dist": "exp", "mean_ms": 5}}
    with open(os.path.join(tmp, "run.json"), "w") as f:
        json.dump(cfg, f)
    bus_port = free_pair()
    bus_url = "tcp://127.0.0.1:%d" % bus_port
    err = open(os.path.join(tmp, "serve.err"), "w+")
    d = subprocess.Popen([a.stalelab, "serve", "--listen", "127.0.0.1:0", "--quiet",
                          "--bus", bus_url, "--config", os.path.join(tmp, "run.json")],
                         stdout=subprocess.DEVNULL, stderr=err)
    port = None
    end = time.time() + 60
    while time.time() < end and d.poll() is None:
        err.seek(0)
        for line in err.read().splitlines():
            if "listening on http://127.0.0.1:" in line:
                port = int(line.split("127.0.0.1:")[1].split("/")[0])
        if port:
            break
        time.sleep(0.1)
    if not port:
        err.seek(0)
        sys.exit("latency: the daemon did not listen: " + err.read())
    # training at full speed before the requests start
    end = time.time() + 60
    while time.time() < end:
        st = http_request(port, "GET", "/api/v1/status", None, 30)
        if st and st[0] == 200 and st[1].get("version", 0) > 0:
            break
        time.sleep(0.2)

    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.busy)]
    bus = Bus("tcp://127.0.0.1:%d" % (bus_port + 1), a.bound * 5)
    to = a.bound * 5  # a request is given up after this (and counted at it)
    kinds = [
        ("GET status", lambda i: http_request(port, "GET", "/api/v1/status", None, to)),
        ("GET metrics", lambda i: http_request(port, "GET", "/api/v1/metrics?since=0", None, to)),
        ("GET staleness", lambda i: http_request(port, "GET", "/api/v1/staleness", None, to)),
        ("GET /metrics", lambda i: http_request(port, "GET", "/metrics", None, to)),
        ("PATCH run", lambda i: http_request(port, "PATCH", "/api/v1/run",
                                             {"lr": 0.01 + 0.001 * (i % 20)}, to)),
        ("PATCH worker", lambda i: http_request(port, "PATCH", "/api/v1/workers/0",
                                                {"delay": {"dist": "exp", "mean_ms": 1 + i % 7}}, to)),
        ("PUT workers", lambda i: http_request(port, "PUT", "/api/v1/workers",
                                               {"count": a.workers + (i // 12) % 2}, to)),
        ("bus GET status", lambda i: bus.request("GET", "/api/v1/status")),
        ("bus PATCH run", lambda i: bus.request("PATCH", "/api/v1/run",
                                                {"lr": 0.02 + 0.001 * (i % 20)})),
    ]
    times = {k: [] for k, _ in kinds}
    failures = []
    for i in range(a.requests):
        name, fn = kinds[i % len(kinds)]
        t0 = time.monotonic()
        r = fn(i)
        dt = time.monotonic() - t0
        times[name].append(dt)
        if r is None:
            failures.append("%s #%d: no answer in %.1f s" % (name, i, dt))
        elif not (200 <= r[0] < 300):
            failures.append("%s #%d: status %s %s" % (name, i, r[0], json.dumps(r[1])[:200]))
        elif name.endswith(("PATCH run", "PATCH worker", "PUT workers")) and \
                isinstance(r[1], dict) and r[1].get("applied") is False:
            failures.append("%s #%d: not applied (%.2f s)" % (name, i, dt))
        if dt > a.bound:
            failures.append("%s #%d: %.2f s (bound %.1f s)" % (name, i, dt, a.bound))
    st = http_request(port, "GET", "/api/v1/status", None, to)
    version = st[1].get("version") if st and st[0] == 200 else None

    t0 = time.monotonic()
    d.send_signal(signal.SIGTERM)
    try:
        rc = d.wait(timeout=max(30.0, a.bound * 10))
    except subprocess.TimeoutExpired:
        d.kill()
        rc = d.wait()
    exit_s = time.monotonic() - t0
    for b in busy:
        b.kill()
        b.wait()
    if exit_s > a.bound:
        failures.append("SIGTERM: the daemon took %.2f s to exit (bound %.1f s)" % (exit_s, a.bound))
    if rc != 0:
        failures.append("SIGTERM: exit status %d" % rc)

    allt = [x for v in times.values() for x in v]
    print("latency: %s, %d busy loops, %d requests, training reached v=%s" %
          (label, a.busy, len(allt), version))
    print("  %-16s %5s %8s %8s %8s %8s" % ("request", "n", "p50 ms", "p90 ms", "p99 ms", "max ms"))
    for k, _ in kinds + [("all", None)]:
        v = allt if k == "all" else times[k]
        print("  %-16s %5d %8.1f %8.1f %8.1f %8.1f" % (k, len(v), 1e3 * pct(v, 50), 1e3 * pct(v, 90),
                                                      1e3 * pct(v, 99), 1e3 * max(v)))
    print("  SIGTERM to exit: %.0f ms" % (1e3 * exit_s))
    for f in failures[:20]:
        print("  FAIL " + f)
    print(json.dumps({"bench": "latency", "clock": a.clock, "workers": a.workers,
                      "eval_every": a.eval_every, "model": a.model, "busy": a.busy,
                      "requests": len(allt), "p50_ms": round(1e3 * pct(allt, 50), 2),
                      "p99_ms": round(1e3 * pct(allt, 99), 2),
                      "max_ms": round(1e3 * max(allt), 2), "exit_ms": round(1e3 * exit_s, 1),
                      "failures": len(failures)}))
    err.close()
    subprocess.call(["rm", "-rf", tmp])
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
