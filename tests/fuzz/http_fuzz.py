"""Random JSON bodies against every endpoint of a live daemon, for a bounded
time: the daemon must answer each with a status below 500 (bad input is a
400 naming a field), never die, and exit 0 on SIGTERM with no sanitizer
report.   python3 http_fuzz.py STALELAB SECONDS TMPDIR"""
import json, random, subprocess, sys, time, urllib.request, re, os
SL = sys.argv[1]
cfg = os.path.join(sys.argv[3], "fz.json")
json.dump({"model": "mlp:784-16-10", "dataset": "synthetic:2400", "lr": 0.01, "workers": 3, "eval_every": 50,
           "delay": {"dist": "uniform", "mean_ms": 1}}, open(cfg, "w"))
p = subprocess.Popen([SL, "serve", "--listen", "127.0.0.1:0", "--quiet", "--config", cfg,
                      "--checkpoint-dir", sys.argv[3]], stderr=subprocess.PIPE, text=True)
line = p.stderr.readline()
port = re.search(r":(\d+)/", line).group(1)
base = "http://127.0.0.1:" + port
random.seed(7)
vals = [0, -1, 1, 1e308, -1e308, 0.5, "x", "", None, True, False, [], {}, [1, 2], {"a": 1}, 2**63, -2**63, 1e-300, "asgd", "dcasgd", "ssgd", 300, 257, 64, "../../etc/passwd"]
keys = ["rule", "rule_params", "lr", "momentum", "batch", "workers", "paused", "stop", "delay", "spb_depth", "speed", "eval_every", "count", "checkpoint", "weight_decay", "s", "lambda", "dist", "mean_ms", "alpha", "sigma", "where", "resume", "model", "dataset", "clock", "schedule", "path"]
def rnd(depth=0):
    if depth < 2 and random.random() < 0.3:
        return {random.choice(keys): rnd(depth + 1) for _ in range(random.randint(0, 3))}
    return random.choice(vals)
paths = [("PATCH", "/api/v1/run"), ("PATCH", "/api/v1/workers/1"), ("PATCH", "/api/v1/workers/99"), ("PUT", "/api/v1/workers"),
         ("POST", "/api/v1/checkpoint"), ("POST", "/api/v1/run"), ("GET", "/api/v1/status"), ("GET", "/api/v1/metrics?since=5"), ("GET", "/metrics"), ("GET", "/api/v1/runs")]
codes = {}
t_end = time.time() + float(sys.argv[2])
n = 0
while time.time() < t_end:
    m, path = random.choice(paths)
    body = rnd()
    if m == "POST" and path == "/api/v1/run" and random.random() < 0.7:
        body = {"model": "logreg", "dataset": "synthetic:1200", "workers": random.randint(1, 4), **({k: rnd(1) for k in random.sample(keys, 2)})}
    data = None if m == "GET" else (json.dumps(body) if random.random() < 0.9 else "{\"" + "x" * random.randint(0, 50)).encode()
    req = urllib.request.Request(base + path, data=data, method=m)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            codes[r.status] = codes.get(r.status, 0) + 1
    except urllib.error.HTTPError as e:
        codes[e.code] = codes.get(e.code, 0) + 1
        assert e.code < 500 or e.code == 500 and path == "/api/v1/run", (m, path, body, e.read())
    n += 1
    assert p.poll() is None, "daemon died"
p.terminate()
rc = p.wait(timeout=60)
err = p.stderr.read()
print("requests", n, "codes", codes, "exit", rc)
assert rc == 0, err[-2000:]
assert "ERROR: AddressSanitizer" not in err and "runtime error" not in err, err[-2000:]
print("fuzz-ok")
