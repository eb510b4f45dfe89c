#!/usr/bin/env python3
"""soak.py - the clients of bench/soak.sh (standard library only; the bus
through ctypes on libnanomsg.so.5). Against a running daemon, for SECONDS:
20 Server-Sent Events clients, bus subscribers when BUS_URL is given, a
worker-count change every CHANGE seconds, and every 10 s a sample of the
daemon's RSS, threads and training samples. Prints the samples, a summary
and a verdict; the last line is one JSON object. wrk's output (the HTTP
load, run beside this by soak.sh) is read at the end from WRK_OUT.

  soak.py URL PID SECONDS WRK_OUT LOG [BUS_URL]
"""
import ctypes
import http.client
import json
import os
import re
import signal
import sys
import threading
import time
import urllib.parse

URL, PID, SECONDS, WRK_OUT, LOG = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
BUS_URL = sys.argv[6] if len(sys.argv) > 6 else ""
SSE_CLIENTS = int(os.environ.get("SOAK_SSE", 20))
BUS_SUBS = int(os.environ.get("SOAK_BUS_SUBS", 5))
CHANGE = float(os.environ.get("SOAK_CHANGE", 5))
SAMPLE = 10.0
COUNTS = [4, 2, 6, 3]                      # the worker counts, in turn
CYCLE = CHANGE * len(COUNTS)               # whole cycles are compared
# the daemon's own RSS climbs for its first 30 s or so (data, buffers)
WARMUP = float(os.environ.get("SOAK_WARMUP", min(60.0, max(30.0, round(SECONDS / 4 / SAMPLE) * SAMPLE))))
WRK_PID = int(os.environ.get("SOAK_WRK_PID", 0))
# remote workers joining and leaving (soak.sh passes the daemon's
# --workers-listen URL and the binary): one joins at each cycle's start and
# leaves half a cycle later, by SIGTERM (saying bye) and SIGKILL (lost) in turn
REMOTE_URL = os.environ.get("SOAK_WORKERS_URL", "")
REMOTE_BIN = os.environ.get("SOAK_BIN", "")

u = urllib.parse.urlparse(URL)
HOST, PORT = u.hostname, u.port
stop = threading.Event()
lock = threading.Lock()
errors = {}                                # kind -> count
stats = {"sse_events": 0, "sse_reconnects": 0, "bus_msgs": 0, "changes": 0,
         "remote_started": 0, "remote_termed": 0, "remote_killed": 0}


def error(kind, detail=""):
    with lock:
        errors[kind] = errors.get(kind, 0) + 1
        if errors[kind] <= 3:
            print("  error: %s %s" % (kind, detail), flush=True)


def count(key, n=1):
    with lock:
        stats[key] += n


def request(method, path, body=None):
    c = http.client.HTTPConnection(HOST, PORT, timeout=10)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def sse_client(i, gaps):
    """one event stream, read as it comes; an end or a silence over 10 s
    before the soak is over is an error (and the client reconnects)"""
    while not stop.is_set():
        c = http.client.HTTPConnection(HOST, PORT, timeout=10)
        try:
            c.request("GET", "/api/v1/events?hz=4")
            r = c.getresponse()
            if r.status != 200:
                error("sse_status", str(r.status))
                time.sleep(1)
                continue
            last = time.time()
            while not stop.is_set():
                d = r.read1(65536)
                if not d:
                    if not stop.is_set():
                        error("sse_eof", "client %d" % i)
                    break
                now = time.time()
                gaps[i] = max(gaps[i], now - last)
                last = now
                count("sse_events", d.count(b"\nevent: "))
        except OSError as e:
            if not stop.is_set():
                error("sse_socket", "client %d: %s" % (i, e))
        finally:
            c.close()
        if not stop.is_set():
            count("sse_reconnects")
            time.sleep(0.5)


def bus_subscriber(i, gaps):
    """every message on the PUB socket; snapshots are the heartbeat (4 Hz):
    a silence over 2 s is an error"""
    AF_SP, NN_SUB, NN_SOL_SOCKET, NN_RCVTIMEO, NN_SUB_SUBSCRIBE = 1, 33, 0, 5, 1
    nn = ctypes.CDLL("libnanomsg.so.5", use_errno=True)
    nn.nn_recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    nn.nn_freemsg.argtypes = [ctypes.c_void_p]
    s = nn.nn_socket(AF_SP, NN_SUB)
    nn.nn_setsockopt(s, NN_SUB, NN_SUB_SUBSCRIBE, b"", 0)
    ms = ctypes.c_int(1000)
    nn.nn_setsockopt(s, NN_SOL_SOCKET, NN_RCVTIMEO, ctypes.byref(ms), 4)
    if nn.nn_connect(s, BUS_URL.encode()) < 0:
        error("bus_connect", BUS_URL)
        return
    last = None
    while not stop.is_set():
        buf = ctypes.c_void_p()
        n = nn.nn_recv(s, ctypes.byref(buf), ctypes.c_size_t(-1).value, 0)
        now = time.time()
        if n < 0:
            continue
        msg = ctypes.string_at(buf, n)
        nn.nn_freemsg(buf)
        count("bus_msgs")
        topic, _, data = msg.partition(b" ")
        try:
            json.loads(data)
        except ValueError:
            error("bus_bad_json", topic.decode(errors="replace"))
        if topic == b"snapshot":
            if last is not None:
                gaps[i] = max(gaps[i], now - last)
            last = now
    nn.nn_close(s)


def changer(t0):
    """PUT /api/v1/workers every CHANGE seconds, on a grid from t0"""
    k = 0
    while not stop.is_set():
        k += 1
        if stop.wait(max(0, t0 + k * CHANGE - time.time())):
            break
        n = COUNTS[k % len(COUNTS)]
        try:
            st, body = request("PUT", "/api/v1/workers", {"count": n})
            if st != 202:
                error("put_workers", "%d %s" % (st, body[:100]))
            else:
                count("changes")
        except OSError as e:
            error("put_workers", str(e))


def remote_churn(t0):
    """a remote worker per cycle: joins at its start, leaves half a cycle on"""
    import subprocess
    k = 0
    while not stop.is_set():
        if stop.wait(max(0, t0 + k * CYCLE + 1 - time.time())):
            break
        w = subprocess.Popen([REMOTE_BIN, "worker", "--connect", REMOTE_URL, "--threads", "1",
                              "--give-up", "30", "-q"], stderr=subprocess.PIPE, text=True)
        count("remote_started")
        stop.wait(CYCLE / 2)
        if k % 2 == 0:
            w.send_signal(signal.SIGTERM)
            out = w.communicate(timeout=15)[1]
            if w.returncode != 0:
                error("remote_worker", "exit %s: %s" % (w.returncode, out.strip()[-200:]))
            count("remote_termed")
        else:
            w.kill()
            w.wait()
            count("remote_killed")
        k += 1


def proc(field):
    with open("/proc/%d/status" % PID) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def sample(t0):
    st, body = request("GET", "/api/v1/status")
    if st != 200:
        error("status", str(st))
        return None
    s = json.loads(body)
    return {"t": time.time() - t0, "rss_mib": proc("VmRSS") / 1024.0, "threads": proc("Threads"),
            "samples": s["samples"], "version": s["version"], "workers": len(s["workers"])}


def window_rate(rows, a, b):
    """training samples/s between the samples nearest t=a and t=b"""
    ra = min(rows, key=lambda r: abs(r["t"] - a))
    rb = min(rows, key=lambda r: abs(r["t"] - b))
    return (rb["samples"] - ra["samples"]) / max(1e-9, rb["t"] - ra["t"]), ra["t"], rb["t"]


def wrk_figures():
    """wrk runs past the end: SIGINT makes it stop and print its figures"""
    if WRK_PID:
        try:
            os.kill(WRK_PID, signal.SIGINT)
        except OSError:
            pass
        end = time.time() + 10
        while time.time() < end and "Requests/sec" not in open(WRK_OUT).read():
            time.sleep(0.2)
    try:
        text = open(WRK_OUT).read()
    except OSError:
        return {"requests": 0, "non2xx": 0, "socket_errors": 0, "rps": 0, "ran": False}
    req = re.search(r"(\d+) requests in", text)
    non = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    rps = re.search(r"Requests/sec:\s*([\d.]+)", text)
    return {"requests": int(req.group(1)) if req else 0,
            "non2xx": int(non.group(1)) if non else 0,
            "socket_errors": sum(int(x) for x in sock.groups()) if sock else 0,
            "rps": float(rps.group(1)) if rps else 0, "ran": bool(req)}


def main():
    if SECONDS < WARMUP + 2 * CYCLE:
        print("soak: %.0f s is too short: the warm-up (%.0f s) and two cycles of worker counts "
              "(%.0f s each) are needed" % (SECONDS, WARMUP, CYCLE))
        return 2
    t0 = time.time()
    sse_gaps = [0.0] * SSE_CLIENTS
    bus_gaps = [0.0] * (BUS_SUBS if BUS_URL else 0)
    threads = [threading.Thread(target=sse_client, args=(i, sse_gaps)) for i in range(SSE_CLIENTS)]
    threads += [threading.Thread(target=bus_subscriber, args=(i, bus_gaps)) for i in range(len(bus_gaps))]
    threads.append(threading.Thread(target=changer, args=(t0,)))
    if REMOTE_URL:
        threads.append(threading.Thread(target=remote_churn, args=(t0,)))
    for t in threads:
        t.daemon = True
        t.start()
    rows = []
    print("  %6s %8s %8s %8s %10s %12s" % ("t s", "RSS MiB", "threads", "workers", "version", "samples/s"), flush=True)
    k = 0
    while True:
        r = sample(t0)
        if r:
            rate = (r["samples"] - rows[-1]["samples"]) / (r["t"] - rows[-1]["t"]) if rows else 0
            rows.append(r)
            print("  %6.0f %8.1f %8d %8d %10d %12.0f" % (r["t"], r["rss_mib"], r["threads"],
                                                      r["workers"], r["version"], rate), flush=True)
        k += 1
        if t0 + k * SAMPLE > t0 + SECONDS + 0.5:
            break
        time.sleep(max(0, t0 + k * SAMPLE - time.time()))
    stop.set()
    wrk = wrk_figures()
    for t in threads:
        t.join(timeout=12)

    # --- the verdict ---------------------------------------------------------
    after = [r for r in rows if r["t"] >= WARMUP - 1]
    third = max(1, len(after) // 3)
    rss_start = sorted(x["rss_mib"] for x in after[:third])[third // 2]
    rss_end = max(x["rss_mib"] for x in after[-third:])
    rss_ok = rss_end <= rss_start * 1.10 + 8
    w = max(CYCLE, (SECONDS - WARMUP) // 3 // CYCLE * CYCLE)
    rate_start, a0, a1 = window_rate(rows, WARMUP, WARMUP + w)
    rate_end, b0, b1 = window_rate(rows, SECONDS - w, SECONDS)
    rate_ok = rate_start > 0 and abs(rate_end / rate_start - 1) <= 0.10
    if not wrk["ran"]:
        error("wrk", "no wrk output in %s" % WRK_OUT)
    if wrk["non2xx"]:
        error("http_non2xx", str(wrk["non2xx"]))
    if wrk["socket_errors"]:
        error("http_socket_errors", str(wrk["socket_errors"]))
    if BUS_URL and not stats["bus_msgs"]:
        error("bus_silent", "no message on %s" % BUS_URL)
    if bus_gaps and max(bus_gaps) > 2:
        error("bus_gap", "%.1f s without a snapshot" % max(bus_gaps))
    if max(sse_gaps) > 10:
        error("sse_gap", "%.1f s without an event" % max(sse_gaps))
    bad_lines = 0
    with open(LOG) as f:
        for line in f:
            try:
                json.loads(line)
            except ValueError:
                bad_lines += 1
    if bad_lines:
        error("log", "%d lines of the log are not JSON" % bad_lines)
    expected_changes = int(SECONDS // CHANGE) - 1
    if stats["changes"] < expected_changes:
        error("changes", "%d worker-count changes, expected %d" % (stats["changes"], expected_changes))
    remote = {}
    if REMOTE_URL:
        st, body = request("GET", "/api/v1/status")
        remote = json.loads(body).get("remote", {}) if st == 200 else {}
        if remote.get("joined", 0) < stats["remote_started"]:
            error("remote_join", "%d remote workers started, %d joined"
                  % (stats["remote_started"], remote.get("joined", 0)))
        if stats["remote_started"] < 2:
            error("remote_churn", "%d remote workers started" % stats["remote_started"])
    n_err = sum(errors.values())

    print()
    print("summary (%.0f s, warm-up %.0f s):" % (SECONDS, WARMUP))
    print("  HTTP load (wrk): %d requests, %.0f/s, %d non-2xx, %d socket errors"
          % (wrk["requests"], wrk["rps"], wrk["non2xx"], wrk["socket_errors"]))
    print("  SSE: %d clients, %d events, %d reconnects, longest silence %.1f s"
          % (SSE_CLIENTS, stats["sse_events"], stats["sse_reconnects"], max(sse_gaps)))
    if BUS_URL:
        print("  bus: %d subscribers on %s, %d messages, longest silence between snapshots %.1f s"
              % (len(bus_gaps), BUS_URL, stats["bus_msgs"], max(bus_gaps) if bus_gaps else 0))
    else:
        print("  bus: not in this build (serve --help has no --bus)")
    print("  worker-count changes: %d (every %.0f s: %s)" % (stats["changes"], CHANGE, COUNTS))
    if REMOTE_URL:
        print("  remote workers: %d started (%d stopped by SIGTERM, %d by SIGKILL); the daemon "
              "saw %s joined, %s left, %s lost, %s pushes applied"
              % (stats["remote_started"], stats["remote_termed"], stats["remote_killed"],
                 remote.get("joined"), remote.get("left"), remote.get("lost"),
                 remote.get("pushes", {}).get("applied")))
    print("  RSS: %.1f MiB after warm-up, %.1f MiB at most in the last third (%+.1f%%)"
          % (rss_start, rss_end, 100 * (rss_end / rss_start - 1)))
    print("  training: %.0f samples/s in t %.0f-%.0f s, %.0f samples/s in t %.0f-%.0f s (%+.1f%%)"
          % (rate_start, a0, a1, rate_end, b0, b1, 100 * (rate_end / rate_start - 1) if rate_start else 0))
    print("  errors: %s" % (", ".join("%s %d" % kv for kv in sorted(errors.items())) or "none"))
    print("  log: %s, every line JSON" % LOG if not bad_lines else "  log: %d bad lines" % bad_lines)
    verdict = rss_ok and rate_ok and n_err == 0
    print("verdict: %s (RSS flat after warm-up: %s; no unexpected errors: %s; samples/s within 10%%: %s)"
          % ("PASS" if verdict else "FAIL", "yes" if rss_ok else "NO",
             "yes" if n_err == 0 else "NO", "yes" if rate_ok else "NO"))
    print(json.dumps({"bench": "soak", "seconds": SECONDS, "warmup_s": WARMUP,
                      "rss_mib_start": round(rss_start, 1), "rss_mib_end": round(rss_end, 1),
                      "samples_per_s_start": round(rate_start), "samples_per_s_end": round(rate_end),
                      "http_requests": wrk["requests"], "http_rps": wrk["rps"],
                      "sse_events": stats["sse_events"], "bus_msgs": stats["bus_msgs"],
                      "changes": stats["changes"], "remote": remote,
                      "remote_started": stats["remote_started"], "errors": errors,
                      "verdict": verdict}))
    return 0 if verdict else 1


sys.exit(main())
