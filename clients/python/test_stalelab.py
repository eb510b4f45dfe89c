"""The client against a live daemon: tests/integration/pyclient.sh starts
`stalelab serve` (3 workers, wall clock, a token, --checkpoint-dir,
--sweeps with a sweep "tiny", --clusters with a simulation "t3") and runs

    python3 clients/python/test_stalelab.py URL TOKEN CHECKPOINT_DIR TOKEN_FILE

Prints "  ok NAME" or "  FAIL NAME" per check (the script counts them).
"""

import itertools
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import stalelab  # noqa: E402

URL, TOKEN, CKDIR, TOKEN_FILE = sys.argv[1:5]
EXAMPLES = os.path.join(HERE, "..", "..", "examples")


def ok(name):
    print("  ok   " + name, flush=True)


def bad(name, detail=""):
    print("  FAIL " + name, flush=True)
    for line in str(detail).splitlines()[:12]:
        print("       " + line, flush=True)


def check(name, cond, detail=""):
    (ok if cond else bad)(name, *(() if cond else (detail,)))


def raises(name, exc, fn, *texts, code=None, status=None):
    """fn() raises exc, whose text holds every one of texts (and, for an
    APIError, whose code and status are these); returns the exception."""
    try:
        got = fn()
    except exc as e:
        missing = [t for t in texts if t not in str(e)]
        if code is not None and e.code != code:
            missing.append("code %s (got %s)" % (code, e.code))
        if status is not None and e.status != status:
            missing.append("status %s (got %s)" % (status, e.status))
        check(name, not missing, "%s: missing %s" % (e, missing))
        return e
    except Exception as e:  # noqa: BLE001 - a wrong exception is a failure
        bad(name, "raised %r, want %s" % (e, exc.__name__))
        return None
    bad(name, "no exception (want %s); answered %r" % (exc.__name__, got))
    return None


def step(name, fn):
    """fn() without an exception; its value (None after a failure)."""
    try:
        v = fn()
    except Exception as e:  # noqa: BLE001
        bad(name, repr(e))
        return None
    ok(name)
    return v


c = stalelab.Client(URL, token=TOKEN)
anon = stalelab.Client(URL, token="")

# ---- reads ----------------------------------------------------------------
check("index lists the endpoints", "/api/v1/status" in c.index() and "/metrics" in c.index())
s = step("wait: three workers and a first evaluation",
         lambda: c.wait(lambda s: len(s["workers"]) == 3 and s["version"] > 0
                        and s.get("test_acc") is not None))
if s is None:
    sys.exit(1)
check("status: running asgd on the config's model",
      (s["state"], s["rule"], s["config"]["model"], s["run"]) ==
      ("running", "asgd", "mlp:784-32-10", 1), s)
raises("wait: TimeoutError past its timeout", TimeoutError,
       lambda: c.wait(lambda s: False, timeout=0.3), "within 0.3 s")
m = c.metrics()
check("metrics: the series with its keys",
      m["series"] and all(k in m["series"][0] for k in ("v", "t", "test_acc", "train_loss")), m)
since = m["series"][0]["v"]
m2 = c.metrics(since=since)
check("metrics(since): only v > since", m2["since"] == since and all(e["v"] > since for e in m2["series"]), m2)
raises("metrics(since='x'): BadRequest naming since", stalelab.BadRequest,
       lambda: c.metrics(since="x"), "since", status=400)
st = c.staleness()
check("staleness: 65 buckets, a histogram per worker",
      (len(st["overall"]["hist"]), len(st["window"]["hist"]), len(st["workers"])) == (65, 65, 3), st)
r = c.run()
check("run(): run 1, the config's lr", (r["run"], r["state"], r["config"]["lr"]) == (1, "running", 0.01), r)
sc = c.schema()
lr = [f for f in sc["fields"] if f["key"] == "lr"]
check("schema: lr's range", lr and lr[0]["max"] == 100 and lr[0]["min_open"], lr)
check("rules(): the rules of the schema, every one of docs/rules.md among them",
      c.rules() == [x["name"] for x in sc["rules"]] and set(c.rules()) >= {
          "ssgd", "asgd", "softsync", "ssp", "sasgd", "dcasgd", "odsgd", "localsgd", "easgd",
          "hogwild", "diloco", "async-diloco", "async-gated", "streaming-diloco",
          "sparta", "demo"}, c.rules())
check("every rule has its example", all(os.path.exists(os.path.join(EXAMPLES, n + ".json"))
                                        for n in c.rules()), c.rules())

# ---- the token ---------------------------------------------------------------
raises("no token: Unauthorized (401) with the server's message", stalelab.Unauthorized,
       lambda: anon.update(lr=0.02), "Authorization: Bearer", "PATCH /api/v1/run",
       code="unauthorized", status=401)
raises("a wrong token: Unauthorized", stalelab.Unauthorized,
       lambda: stalelab.Client(URL, token="wrong").set_workers(2), status=401)
check("reads need no token", anon.status()["run"] == 1)
check("the refused change changed nothing", c.run()["config"]["lr"] == 0.01)
os.environ["STALELAB_TOKEN"] = TOKEN
step("the token from STALELAB_TOKEN", lambda: stalelab.Client(URL).update(lr=0.01))
del os.environ["STALELAB_TOKEN"]
step("the token from token_file", lambda: stalelab.Client(URL, token_file=TOKEN_FILE).update(lr=0.01))

# ---- changes ------------------------------------------------------------------
a = c.set_rule("ssp", {"s": 1}, lr=0.02)
check("set_rule: applied, the change as logged",
      (a["accepted"], a["applied"], a["change"]["set"]["rule"], a["change"]["set"]["lr"],
       a["change"]["origin"], a["change"]["v"] >= 0) == (True, True, "ssp", 0.02, "api", True), a)
s = c.status()
check("status says the new rule, its parameter and lr",
      (s["rule"], s["config"]["rule_params"]["s"], s["config"]["lr"]) == ("ssp", 1, 0.02), s)
raises("an unknown field: BadRequest naming it", stalelab.BadRequest,
       lambda: c.update(learning_rate=0.1), "learning_rate: unknown field", code="bad_field", status=400)
e = raises("lr out of range: BadRequest naming lr", stalelab.BadRequest,
           lambda: c.update(lr=-1), "lr: must be in (0, 100]")
check("APIError.message is the server's message alone", e is not None and e.message.startswith("lr: "),
      e and e.message)
raises("a fixed field: BadRequest saying so", stalelab.BadRequest,
       lambda: c.update(clock="virtual"), "clock: cannot change mid-run")
w = c.set_workers(4)
check("set_workers: applied", w["applied"] and w["change"]["set"]["workers"] == 4, w)
raises("set_workers(300): BadRequest with the range", stalelab.BadRequest, lambda: c.set_workers(300),
       "must be an integer in [0, 256], got 300")
c.update_worker(1, delay={"dist": "const", "mean_ms": 30}, spb_depth=1)
step("workers: four, worker 1 changed", lambda: c.wait(
    lambda s: len(s["workers"]) == 4 and s["workers"][1]["spb_depth"] == 1))
ws = c.workers()
check("workers(): the count and the rows", (ws["count"], len(ws["workers"])) == (4, 4), ws)
w1 = c.worker(1)
check("worker(1): its delay and depth",
      (w1["id"], w1["delay"]["dist"], w1["delay"]["mean_ms"], w1["spb_depth"]) == (1, "const", 30.0, 1), w1)
raises("worker(9): NotFound", stalelab.NotFound, lambda: c.worker(9), status=404)
raises("update_worker(17): NotFound naming the worker", stalelab.NotFound,
       lambda: c.update_worker(17, spb_depth=1), "worker 17")
raises("update_worker with a bad field: BadRequest naming it", stalelab.BadRequest,
       lambda: c.update_worker(1, depth=1), "depth")
c.pause()
step("pause: state paused", lambda: c.wait(lambda s: s["state"] == "paused", timeout=30))
c.unpause()
step("unpause: state running", lambda: c.wait(lambda s: s["state"] == "running", timeout=30))

# ---- the event stream -------------------------------------------------------------
with c.events(hz=10) as stream:
    first = next(stream)
    check("events: a snapshot first, with the staleness",
          first.name == "snapshot" and first.data["state"] == "running"
          and len(first.data["staleness"]["window"]["hist"]) == 65 and first.id, first)
    c.update(lr=0.03)
    seen, ids, t0 = [], [], time.monotonic()
    for ev in itertools.islice(stream, 400):
        seen.append(ev.name)
        ids.append(int(ev.id))
        if ev.name == "change" and ev.data.get("set", {}).get("lr") == 0.03 or time.monotonic() - t0 > 20:
            break
    check("events: the change as it happens", seen and seen[-1] == "change", seen[-20:])
    check("events: ids increase", ids == sorted(ids) and ids[0] > int(first.id), ids[:10])
check("events: closed by the with", stream._r is None)
raises("events(hz=1000): BadRequest naming hz", stalelab.BadRequest, lambda: c.events(hz=1000), "hz")

# ---- Prometheus, checkpoints -----------------------------------------------------------
samples = stalelab.parse_prometheus(c.prometheus())
val = {x.name: x.value for x in samples if not x.labels}
check("prometheus: stalelab_workers is 4, updates counted",
      val.get("stalelab_workers") == 4 and val.get("stalelab_updates_total", 0) > 0, val)
per_worker = {x.labels["worker"] for x in samples if x.name == "stalelab_staleness_count" and "worker" in x.labels}
check("prometheus: a staleness histogram per worker, labelled", per_worker >= {"0", "1", "2", "3"}, per_worker)
ck = c.checkpoint("c1.ckpt")
check("checkpoint: the file, its version",
      ck["path"].endswith("/c1.ckpt") and os.path.getsize(os.path.join(CKDIR, "c1.ckpt")) == ck["bytes"]
      and ck["version"] > 0, ck)
raises("checkpoint('../x.ckpt'): BadRequest naming path", stalelab.BadRequest,
       lambda: c.checkpoint("../x.ckpt"), "path:", "'..'")
d = c.checkpoint()
check("checkpoint(): the default name", os.path.basename(d["path"]).startswith("stalelab-run1-v"), d)
raises("recover a running run: Conflict not_diverged", stalelab.Conflict, lambda: c.recover(),
       code="not_diverged", status=409)

# ---- new runs --------------------------------------------------------------------
r2 = c.resume("c1.ckpt")
check("resume: run 2 where the checkpoint was, with its rule",
      (r2["run"], r2["version"] >= ck["version"], r2["config"]["rule"]) == (2, True, "ssp"), r2)
c.stop()
s = step("stop(): the run finishes", lambda: c.wait(lambda s: s["state"] == "finished", timeout=30))
raises("a change after the end: Conflict", stalelab.Conflict, lambda: c.update(lr=0.02), status=409)
r3 = c.start(os.path.join(EXAMPLES, "dcasgd.json"), dataset="synthetic:2000", model="mlp:784-32-10",
             threads=1, stop={"steps": 100})
check("start(examples/dcasgd.json, overrides): run 3 with the file's rule and lambda",
      (r3["run"], r3["config"]["rule"], r3["config"]["rule_params"]["lambda"], r3["config"]["workers"],
       r3["config"]["dataset"]) == (3, "dcasgd", 0.04, 8, "synthetic:2000"), r3["config"])
s = step("the example's run finishes at its stop",
         lambda: c.wait(lambda s: s["run"] == 3 and s["state"] == "finished", timeout=30))
check("... at v 100", s and s["version"] == 100, s and s["version"])
raises("start a bad run object: BadRequest naming model", stalelab.BadRequest,
       lambda: c.start({"model": "resnet"}), "model")
check("a bad run object leaves the run", c.run()["run"] == 3)
c.start({"model": "mlp:784-256-128-10", "dataset": "synthetic:6000", "lr": 100, "momentum": 0.9,
         "batch": 16, "workers": 1, "threads": 1, "clock": "virtual", "eval_every": 100})
s = step("lr 100: the run diverges", lambda: c.wait(lambda s: s["state"] == "diverged", timeout=30))
rv = c.recover(lr=0.005)
check("recover(lr): the next run, with that lr",
      (rv["run"], rv["recovered"]["run"], rv["recovered"]["lr"], rv["config"]["lr"]) == (5, 4, 0.005, 0.005), rv)

# ---- earlier runs ------------------------------------------------------------------
rs = c.runs()
check("runs(): every run, summaries", [x["run"] for x in rs["runs"]] == [1, 2, 3, 4, 5]
      and "series" not in rs["runs"][0], [x["run"] for x in rs["runs"]])
check("runs(series=True): with their series", len(c.runs(series=True)["runs"][0]["series"]) > 0)
one = c.run_info(1)
check("run_info(1): run 1 with its series", (one["run"], len(one["series"]) > 0) == (1, True), one.get("run"))
raises("run_info(99): NotFound", stalelab.NotFound, lambda: c.run_info(99))
try:
    ch = c.changes(1)
except stalelab.NotFound as e:
    if e.code != "not_found" or "no such endpoint" not in e.message:
        bad("changes(1): 404 for a run the daemon keeps", e)
    else:
        print("  note: this daemon has no GET /api/v1/runs/{id}/changes (404: %s): changes() not checked"
              % e.message)
else:
    sets = [x for x in ch["changes"] if x.get("event") == "set"]
    check("changes(1): run 1's changes as logged, the rule switch among them",
          ch["run"] == 1 and any(x["set"].get("rule") == "ssp" and x["v"] == a["change"]["v"] for x in sets)
          and all("t" in x and "v" in x for x in ch["changes"]), ch)

# ---- sweeps and simulations -----------------------------------------------------------
check("sweeps(): the tiny sweep", [x["name"] for x in c.sweeps()["sweeps"]] == ["tiny"], c.sweeps())
sw = c.sweep("tiny")
check("sweep('tiny'): its spec and two result rows",
      sw["spec"]["rule"] == ["ssgd", "asgd"] and len(sw["results"]["rows"]) == 2, sw)
check("sweep_figure: the SVG as text", "<svg" in c.sweep_figure("tiny", "loss.svg"))
raises("sweep('nope'): NotFound no_sweep", stalelab.NotFound, lambda: c.sweep("nope"), code="no_sweep")
cl = c.clusters()["simulations"]
check("clusters(): t3, 2 jobs on 2 GPUs", [(x["name"], x["jobs"], x["gpus"]) for x in cl] == [("t3", 2, 2)], cl)
check("cluster('t3'): its policies' series", set(c.cluster("t3")["series"]) >= {"fifo", "las"})
check("cluster_file: a CSV as text", c.cluster_file("t3", "summary.csv").startswith("policy"))
raises("cluster_file of a name not there: NotFound", stalelab.NotFound,
       lambda: c.cluster_file("t3", "../cluster.json"), code="no_file")

# ---- no daemon -----------------------------------------------------------------------
raises("no daemon: ConnectError", stalelab.ConnectError,
       lambda: stalelab.Client("http://127.0.0.1:1").status(), "cannot reach")
