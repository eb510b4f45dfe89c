#!/bin/sh
# Integration tests of `stalelab serve` driven with curl: every endpoint,
# statuses and error bodies, live changes seen in /status, /staleness and
# the log, three SSE events, the Prometheus exposition, a token, a new run,
# SIGTERM, and kill -9 leaving a valid JSON-Lines log.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: stalelab serve"

cat >"$TMP/run.json" <<'JSON'
{"model": "mlp:784-32-10", "dataset": "synthetic:6000", "lr": 0.01, "batch": 16,
 "workers": 3, "eval_every": 100, "delay": {"dist": "uniform", "mean_ms": 2}}
JSON

json() { # PYTHON-EXPRESSION over d (the last body)
	python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" "$TMP/body"
}

start --config "$TMP/run.json" --log "$TMP/serve.jsonl" --checkpoint-dir "$TMP"
[ -n "$port" ] && ok "daemon listens" || bad "daemon listens" "$(cat "$TMP/serve.err")"
# the workers started and a first evaluation made (a loaded machine may
# take a while; the run's first snapshot has no workers yet)
wait_api 60 /api/v1/metrics 'len(d["series"]) > 0' || bad "a first evaluation within 60 s" "$(cat "$TMP/body")"
wait_api 60 /api/v1/status 'len(d["workers"]) == 3' || bad "three workers within 60 s" "$(cat "$TMP/body")"

expect_http "GET /" 200 GET /
expect_grep '/api/v1/status' "index lists the endpoints" "$LAST_OUT"
expect_http "GET /api/v1/status" 200 GET /api/v1/status
[ "$(json 'd["state"], len(d["workers"]), d["rule"], d["config"]["model"], d["workers"][0]["host"]')" = "running 3 asgd mlp:784-32-10 local" ] &&
	ok "status body" || bad "status body" "$LAST_OUT"
expect_http "GET /api/v1/staleness" 200 GET /api/v1/staleness
[ "$(json 'len(d["overall"]["hist"]), len(d["window"]["hist"]), len(d["workers"])')" = "65 65 3" ] &&
	ok "staleness body" || bad "staleness body" "$LAST_OUT"
expect_http "GET /api/v1/metrics" 200 GET /api/v1/metrics
[ "$(json 'all(k in d["series"][0] for k in ("v","t","epoch","train_loss","test_loss","test_acc","samples_per_s"))')" = "True" ] &&
	ok "metrics series" || bad "metrics series" "$LAST_OUT"
expect_http "GET /api/v1/metrics?since=x" 400 GET '/api/v1/metrics?since=x'
expect_http "unknown path" 404 GET /api/v2/status
expect_grep '"error":\{"code":"not_found"' "error body" "$LAST_OUT"
expect_http "wrong method" 405 DELETE /api/v1/run
expect_http "bad JSON" 400 PATCH /api/v1/run '{"lr": 0.1,'
expect_grep 'line 1' "bad JSON gives the position" "$LAST_OUT"
expect_http "unknown field" 400 PATCH /api/v1/run '{"learning_rate": 0.1}'
expect_grep 'learning_rate: unknown field' "unknown field named" "$LAST_OUT"
expect_http "out of range" 400 PATCH /api/v1/run '{"lr": -1}'
expect_grep 'lr: ' "range error names lr" "$LAST_OUT"
expect_http "workers out of range" 400 PUT /api/v1/workers '{"count": 257}'
expect_http "workers extra field" 400 PUT /api/v1/workers '{"count": 2, "x": 1}'
expect_http "no such worker" 404 PATCH /api/v1/workers/17 '{"spb_depth": 1}'
expect_http "bad worker field" 400 PATCH /api/v1/workers/1 '{"depth": 1}'
big=$(python3 -c 'print("{\"x\": \"" + "a" * 1100000 + "\"}")')
printf '%s' "$big" >"$TMP/big.json"
code=$(curl -s -o /dev/null -w '%{http_code}' -X PATCH --data-binary @"$TMP/big.json" "$URL/api/v1/run")
[ "$code" = 413 ] && ok "body too large: 413" || bad "body too large: 413" "$code"

# live changes, seen in /status, /staleness and the log
expect_http "PATCH rule" 202 PATCH /api/v1/run '{"rule": "ssp", "rule_params": {"s": 1}, "lr": 0.02}'
# the answer is the change as logged: applied, with t and v
[ "$(json 'd["applied"], d["change"]["set"]["lr"], d["change"]["run"], d["change"]["v"] >= 0, d["change"]["t"] >= 0, d["change"]["origin"]')" = "True 0.02 1 True True api" ] &&
	ok "PATCH answers the change with t and v" || bad "PATCH answer" "$(cat "$TMP/body")"
pv=$(json 'd["change"]["v"]')
grep '"event":"set"' "$TMP/serve.jsonl" | grep '"lr":0.02' | grep -q "\"v\":$pv," &&
	ok "the answer's v is the logged one" || bad "answer v $pv not in the log" "$(grep '"event":"set"' "$TMP/serve.jsonl")"
expect_http "PUT workers" 202 PUT /api/v1/workers '{"count": 5}'
expect_http "PATCH worker delay" 202 PATCH /api/v1/workers/1 '{"delay": {"dist": "const", "mean_ms": 30}, "spb_depth": 1}'
wait_api 30 /api/v1/status 'len(d["workers"]) == 5 and d["workers"][1]["spb_depth"] == 1'
got=$(json 'd["rule"], d["config"]["rule_params"]["s"], d["config"]["lr"], len(d["workers"]), d["workers"][1]["delay"]["mean_ms"], d["workers"][1]["spb_depth"]')
[ "$got" = "ssp 1 0.02 5 30.0 1" ] && ok "changes visible in /status" || bad "changes visible in /status" "$got"
# compression mid-run: refused by name when bad; applied, worker 0's pushes
# are then top-k's 8 ceil(0.01 P) bytes each (docs/rules.md, "Compression")
expect_http "compress zip: refused" 400 PATCH /api/v1/run '{"rule_params": {"compress": "zip"}}'
expect_grep 'rule_params.compress: unknown .*zip.*expected none, topk, randk, int8, int4' "... named" "$LAST_OUT"
expect_http "compress_ratio 0: refused" 400 PATCH /api/v1/run '{"rule_params": {"compress_ratio": 0}}'
expect_grep 'rule_params.compress_ratio: must be in \(0, 1\], got 0' "... named" "$LAST_OUT"
expect_http "PATCH compress topk with ef" 202 PATCH /api/v1/run \
	'{"rule_params": {"compress": "topk", "compress_ratio": 0.01, "ef": true}}'
wait_api 30 /api/v1/status 'd["config"]["rule_params"]["compress"] == "topk" and d["workers"][0]["iterations"] > 0'
# a push the worker was computing when the change came goes out whole (the
# change takes effect at its next step): count from one push later
ic=$(json 'd["workers"][0]["iterations"]')
wait_api 30 /api/v1/status "d['workers'][0]['iterations'] > $ic + 1"
b0=$(json 'd["workers"][0]["bytes_sent"], d["workers"][0]["iterations"], d["model_summary"]["params"]')
wait_api 30 /api/v1/status "d['workers'][0]['iterations'] > $(echo "$b0" | cut -d' ' -f2) + 5"
b1=$(json 'd["workers"][0]["bytes_sent"], d["workers"][0]["iterations"]')
python3 -c "
import math, sys
b0, i0, P = map(float, '$b0'.split()); b1, i1 = map(float, '$b1'.split())
sys.exit(0 if (b1 - b0) == (i1 - i0) * 8 * math.ceil(0.01 * P) else 1)" &&
	ok "compressed pushes: 8 ceil(0.01 P) bytes each in bytes_sent" ||
	bad "compressed pushes' bytes" "$b0 / $b1"
expect_http "compress back to none" 202 PATCH /api/v1/run '{"rule_params": {"compress": "none"}}'
wait_api 30 /api/v1/staleness 'len(d["workers"]) == 5'
[ "$(json 'len(d["workers"])')" = 5 ] && ok "staleness per worker follows the count" || bad "staleness per worker" "$(cat "$TMP/body")"
three_sets() { [ "$(grep -c '"event":"set"' "$TMP/serve.jsonl")" -ge 3 ]; }
wait_until 30 three_sets
sets=$(grep -c '"event":"set"' "$TMP/serve.jsonl")
[ "$sets" -ge 3 ] && ok "changes logged" || bad "changes logged ($sets)" "$(tail -3 "$TMP/serve.jsonl")"
grep '"event":"set"' "$TMP/serve.jsonl" | grep -q '"origin":"api"' && ok "origin api" || bad "origin api"

# three SSE events (the stream read until it has them, 60 s at most)
timeout 60 curl -s -N "$URL/api/v1/events?hz=10" >"$TMP/sse.txt" 2>/dev/null &
SSE=$!
# (a fourth begun: the third is whole)
four_snapshots() { [ "$(grep -c '^event: snapshot' "$TMP/sse.txt")" -ge 4 ]; }
wait_until 60 four_snapshots
kill $SSE 2>/dev/null; wait $SSE 2>/dev/null
n=$(grep -c '^event: ' "$TMP/sse.txt")
[ "$n" -ge 3 ] && ok "SSE: $n events" || bad "SSE events" "$(head -c 300 "$TMP/sse.txt")"
python3 - "$TMP/sse.txt" <<'PY' && ok "SSE snapshots parse" || bad "SSE snapshots parse"
import json, sys
blocks = open(sys.argv[1]).read().split("\n\n")
snaps = [b for b in blocks if "event: snapshot" in b]
assert len(snaps) >= 3
for b in snaps[:3]:
    data = [l[6:] for l in b.split("\n") if l.startswith("data: ")][0]
    d = json.loads(data)
    assert d["state"] == "running" and len(d["staleness"]["window"]["hist"]) == 65
PY
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/api/v1/events?hz=1000")
[ "$code" = 400 ] && ok "SSE hz out of range: 400" || bad "SSE hz: $code"

# Prometheus
curl -s -D "$TMP/prom.h" "$URL/metrics" >"$TMP/prom.txt"
grep -qi '^content-type: text/plain; version=0.0.4' "$TMP/prom.h" && ok "prometheus content type" || bad "prometheus content type" "$(cat "$TMP/prom.h")"
python3 - "$TMP/prom.txt" <<'PY' && ok "prometheus exposition is well formed" || bad "prometheus exposition" "$(head -20 "$TMP/prom.txt")"
import re, sys
text = open(sys.argv[1]).read()
assert text.endswith("\n")
types, seen_done, last = {}, set(), None
series = {}
for line in text.splitlines():
    if line.startswith("# HELP ") or line.startswith("# TYPE "):
        name = line.split()[2]
        if line.startswith("# TYPE "):
            assert name not in types, "TYPE twice: " + name
            types[name] = line.split()[3]
        assert name not in seen_done, "metric split: " + name
        if last and last != name:
            seen_done.add(last)
        last = name
        continue
    m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$', line)
    assert m, line
    base = re.sub(r'_(bucket|sum|count)$', '', m.group(1)) if types.get(re.sub(r'_(bucket|sum|count)$', '', m.group(1))) == "histogram" else m.group(1)
    assert base in types, "no TYPE for " + m.group(1)
    if types[base] == "counter":
        assert base.endswith("_total"), base
    float(m.group(3).replace("+Inf", "inf"))
    series.setdefault(base, []).append((m.group(1), m.group(2) or "", float(m.group(3).replace("+Inf", "inf"))))
for name in ("stalelab_staleness", "stalelab_updates_total", "stalelab_samples_total",
             "stalelab_test_accuracy", "stalelab_workers"):
    assert name in types, name
# histogram buckets: cumulative, ordered, +Inf == count, per label set
groups = {}
for n, labels, v in series["stalelab_staleness"]:
    key = re.sub(r',?le="[^"]*"', "", labels).replace("{}", "")
    groups.setdefault(key, {"b": [], "count": None})
    if n.endswith("_bucket"):
        groups[key]["b"].append(v)
    elif n.endswith("_count"):
        groups[key]["count"] = v
assert len(groups) >= 2
for key, g in groups.items():
    b = g["b"]
    assert len(b) == 65 and all(x <= y for x, y in zip(b, b[1:])), key
    assert b[-1] == g["count"], key
PY

# GET on what can be changed; the schema; HTTP conventions
expect_http "GET /api/v1/run" 200 GET /api/v1/run
[ "$(json 'd["run"], d["state"], d["config"]["rule"], d["config"]["lr"]')" = "1 running ssp 0.02" ] &&
	ok "GET /api/v1/run: the run object with the changes" || bad "GET /api/v1/run" "$(cat "$TMP/body")"
expect_http "GET /api/v1/workers" 200 GET /api/v1/workers
[ "$(json 'd["count"], len(d["workers"]), d["workers"][1]["spb_depth"]')" = "5 5 1" ] &&
	ok "GET /api/v1/workers" || bad "GET /api/v1/workers" "$(cat "$TMP/body")"
expect_http "GET /api/v1/workers/1" 200 GET /api/v1/workers/1
[ "$(json 'd["id"], d["delay"]["dist"], d["delay"]["mean_ms"]')" = "1 const 30.0" ] &&
	ok "GET /api/v1/workers/1" || bad "GET /api/v1/workers/1" "$(cat "$TMP/body")"
expect_http "GET a worker beyond the count: 404" 404 GET /api/v1/workers/9
expect_http "PATCH spb_depth deeper than the model" 400 PATCH /api/v1/workers/1 '{"spb_depth": 3}'
expect_grep 'spb_depth: must be in \[0, 2\]' "the model's depth is named" "$LAST_OUT"
expect_http "PATCH a fixed field" 400 PATCH /api/v1/run '{"clock": "virtual"}'
expect_grep 'clock: cannot change mid-run' "a fixed field says so" "$LAST_OUT"
expect_http "GET /api/v1/schema" 200 GET /api/v1/schema
[ "$(json '[f["key"] for f in d["fields"]][:6], [f for f in d["fields"] if f["key"] == "lr"][0]["max"], [r["params"][0]["key"] for r in d["rules"] if r["name"] == "ssp"][0], len(d["worker_fields"])')" = "['model', 'dataset', 'data_split', 'augment', 'device', 'rule'] 100 s 6" ] &&
	ok "schema: fields, ranges, rules' parameters" || bad "schema" "$(head -c 300 "$TMP/body")"
expect_http "POST /api/v1/schema: 405" 405 POST /api/v1/schema '{}'
hdr=$(curl -s -D - -o /dev/null -X DELETE "$URL/api/v1/run")
printf '%s' "$hdr" | grep -qi '^Allow: GET, HEAD, POST, PATCH' && ok "405 lists Allow" || bad "405 Allow" "$hdr"
hdr=$(curl -s -I "$URL/api/v1/status")
printf '%s' "$hdr" | grep -q '^HTTP/1.1 200' && printf '%s' "$hdr" | grep -qi '^Content-Type: application/json' &&
	ok "HEAD where GET is" || bad "HEAD" "$hdr"
hdr=$(curl -s -D - -o /dev/null "$URL/api/v1/nothing")
printf '%s' "$hdr" | grep -qi '^Content-Type: application/json' && ok "Content-Type on a 404" || bad "Content-Type on a 404" "$hdr"
hdr=$(curl -s -D - -o /dev/null -X OPTIONS "$URL/api/v1/workers")
printf '%s' "$hdr" | grep -q '^HTTP/1.1 204' && printf '%s' "$hdr" | grep -qi '^Allow: GET, HEAD, PUT, OPTIONS' &&
	ok "OPTIONS lists the methods" || bad "OPTIONS" "$hdr"
code=$(curl -s -o "$TMP/body" -w '%{http_code}' -X PATCH -H 'Content-Type: application/xml' --data '<lr/>' "$URL/api/v1/run")
[ "$code" = 415 ] && grep -q 'unsupported_media_type' "$TMP/body" && ok "a body that is not JSON: 415" || bad "415 ($code)" "$(cat "$TMP/body")"
code=$(curl -s -o /dev/null -w '%{http_code}' -X PATCH --data '{"lr": 0.02}' "$URL/api/v1/run")
[ "$code" = 202 ] && ok "curl -d (form type) is read as JSON" || bad "curl -d: $code"

# checkpoint and resume
expect_http "POST /api/v1/checkpoint" 201 POST /api/v1/checkpoint '{"path": "c1.ckpt"}'
ckv=$(json 'd["version"]')
[ -s "$TMP/c1.ckpt" ] && ok "checkpoint file written" || bad "checkpoint file written"
ls "$TMP"/c1.ckpt.tmp.* >/dev/null 2>&1 && bad "temporary file left behind" || ok "no temporary file left"
expect_http "checkpoint: bad field" 400 POST /api/v1/checkpoint '{"file": "x"}'
expect_http "checkpoint: no .. components" 400 POST /api/v1/checkpoint '{"path": "../x.ckpt"}'
expect_http "checkpoint: unwritable" 400 POST /api/v1/checkpoint '{"path": "nonexistent/dir/c.ckpt"}'
hdr=$(curl -s -D - -o "$TMP/body" -X POST --data '{"resume": "c1.ckpt"}' "$URL/api/v1/run")
printf '%s' "$hdr" | grep -q '^HTTP/1.1 201' && ok "resume" || bad "resume" "$hdr"
printf '%s' "$hdr" | grep -qi '^Location: /api/v1/runs/2' && ok "201 with Location" || bad "Location" "$hdr"
got=$(json 'd["version"] >= '"$ckv"', d["config"]["rule"], len(d["workers"]), d["run"]')
[ "$got" = "True ssp 5 2" ] && ok "resumed where the checkpoint was" || bad "resumed where the checkpoint was" "$got / $ckv"
printf 'garbage' >"$TMP/bad.ckpt"
expect_http "resume a bad file" 400 POST /api/v1/run '{"resume": "bad.ckpt"}'
expect_grep 'not a stalelab checkpoint' "bad checkpoint says why" "$LAST_OUT"
expect_http "resume a missing file" 400 POST /api/v1/run '{"resume": "none.ckpt"}'
http GET /api/v1/status >/dev/null
[ "$(json 'd["state"], d["run"]')" = "running 2" ] && ok "a failed resume leaves the run alone" || bad "failed resume" "$(cat "$TMP/body")"

# token: changes need it, reads do not
kill -TERM $PID; wait $PID 2>/dev/null
start --config "$TMP/run.json" --token s3cret
expect_http "no token: 401" 401 PATCH /api/v1/run '{"lr": 0.02}'
AUTH=wrong expect_http "wrong token: 401" 401 PATCH /api/v1/run '{"lr": 0.02}'
AUTH=s3cret expect_http "right token: 202" 202 PATCH /api/v1/run '{"lr": 0.02}'
expect_http "reads need no token" 200 GET /api/v1/status
kill -TERM $PID; wait $PID 2>/dev/null
# the token from a file or the environment, not on the command line
printf 'fromfile\n' >"$TMP/token"
start --config "$TMP/run.json" --token-file "$TMP/token"
AUTH=fromfile expect_http "--token-file: its token works" 202 PATCH /api/v1/run '{"lr": 0.02}'
expect_http "--token-file: none is refused" 401 PATCH /api/v1/run '{"lr": 0.02}'
ps -o args= -p $PID | grep -q fromfile && bad "token visible in ps" || ok "token not visible in ps"
kill -TERM $PID; wait $PID 2>/dev/null
STALELAB_TOKEN=fromenv start --config "$TMP/run.json"
AUTH=fromenv expect_http "STALELAB_TOKEN: its token works" 202 PATCH /api/v1/run '{"lr": 0.02}'
AUTH=fromfile expect_http "STALELAB_TOKEN: another is refused" 401 PATCH /api/v1/run '{"lr": 0.02}'
kill -TERM $PID; wait $PID 2>/dev/null
expect_exit 2 "--token-file missing" "$SL" serve --token-file "$TMP/none" --config "$TMP/run.json"
expect_grep "--token-file $TMP/none: No such file" "a missing token file is named" "$LAST_OUT"
start --config "$TMP/run.json" --token s3cret

# a new run replaces the old; a stopped run refuses changes with 409
AUTH=s3cret expect_http "POST /api/v1/run" 201 POST /api/v1/run '{"model": "logreg", "dataset": "synthetic:3000", "workers": 2, "clock": "virtual", "stop": {"steps": 200}}'
[ "$(json 'd["config"]["model"], d["config"]["clock"], d["run"]')" = "logreg virtual 2" ] && ok "new run in the answer" || bad "new run" "$LAST_OUT"
expect_http "GET /api/v1/runs" 200 GET /api/v1/runs
[ "$(json '[r["run"] for r in d["runs"]], d["runs"][0]["config"]["model"], "series" in d["runs"][0], d["runs"][1]["config"]["model"]')" = "[1, 2] mlp:784-32-10 False logreg" ] &&
	ok "runs: summaries by default" || bad "runs" "$(head -c 400 "$TMP/body")"
expect_http "GET /api/v1/runs?series=1" 200 GET '/api/v1/runs?series=1'
[ "$(json 'len(d["runs"][0]["series"]) > 0, "series" in d["runs"][1]')" = "True True" ] &&
	ok "runs?series=1: the earlier one kept with its series" || bad "runs?series=1" "$(head -c 400 "$TMP/body")"
expect_http "GET /api/v1/runs/1" 200 GET /api/v1/runs/1
[ "$(json 'd["run"], d["config"]["model"], len(d["series"]) > 0')" = "1 mlp:784-32-10 True" ] &&
	ok "runs/1: one run with its series" || bad "runs/1" "$(head -c 400 "$TMP/body")"
expect_http "GET /api/v1/runs/99" 404 GET /api/v1/runs/99
expect_http "runs?series=2" 400 GET '/api/v1/runs?series=2'
AUTH=s3cret expect_http "POST bad run object" 400 POST /api/v1/run '{"model": "resnet"}'
expect_grep 'model' "bad run object names the field" "$LAST_OUT"
wait_api 60 /api/v1/status 'd["state"] != "running"'
[ "$(json 'd["state"], d["version"]')" = "finished 200" ] && ok "virtual run finished at its stop" || bad "virtual run finished" "$(cat "$TMP/body")"
AUTH=s3cret expect_http "change after the end: 409" 409 PATCH /api/v1/run '{"lr": 0.02}'
kill -TERM $PID; wait $PID; rc=$?
[ $rc -eq 0 ] && ok "SIGTERM: exit 0" || bad "SIGTERM exit $rc"
grep -q 'SIGTERM, stopping' "$TMP/serve.err" && ok "says it stops" || bad "says it stops" "$(cat "$TMP/serve.err")"

# two SIGTERMs at once (make run passes its own on top of the first): still
# a clean stop with the end record
start --config "$TMP/run.json" --log "$TMP/twice.jsonl"
wait_api 60 /api/v1/status 'd["version"] > 0'
kill -TERM $PID; kill -TERM $PID; wait $PID; rc=$?
[ $rc -eq 0 ] && ok "two SIGTERMs: exit 0" || bad "two SIGTERMs: exit $rc" "$(tail -3 "$TMP/serve.err")"
expect_grep '"event":"end"' "two SIGTERMs: the log ends with the end record" "$(tail -n 1 "$TMP/twice.jsonl")"

# checkpoint on exit, then start from it
start --config "$TMP/run.json" --checkpoint-on-exit "$TMP/exit.ckpt" --log "$TMP/exit.jsonl"
wait_api 60 /api/v1/status 'd["version"] > 0'
kill -TERM $PID; wait $PID; rc=$?
[ $rc -eq 0 ] && [ -s "$TMP/exit.ckpt" ] && ok "checkpoint on SIGTERM" || bad "checkpoint on SIGTERM (rc $rc)" "$(cat "$TMP/serve.err")"
last=$(tail -n 1 "$TMP/exit.jsonl" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("event"), d.get("stop"))')
[ "$last" = "end stopped" ] && ok "final log record on SIGTERM" || bad "final log record on SIGTERM" "$last"
start --resume "$TMP/exit.ckpt"
wait_api 30 /api/v1/status 'd["version"] > 0'
[ "$(json 'd["config"]["model"], d["version"] > 0')" = "mlp:784-32-10 True" ] && ok "serve --resume" || bad "serve --resume" "$(cat "$TMP/body") $(cat "$TMP/serve.err")"
kill -TERM $PID; wait $PID 2>/dev/null

# kill -9 mid-run: the log stays valid JSON Lines up to the last full line
start --config "$TMP/run.json" --log "$TMP/k9.jsonl"
# until the log holds the run object and an evaluation (60 s at most)
wait_until 60 has_lines 2 "$TMP/k9.jsonl"
kill -9 $PID; wait $PID 2>/dev/null
python3 - "$TMP/k9.jsonl" <<'PY' && ok "log valid after kill -9" || bad "log valid after kill -9" "$(tail -c 300 "$TMP/k9.jsonl")"
import json, sys
data = open(sys.argv[1]).read()
lines = data.split("\n")
full = lines[:-1] if not data.endswith("\n") else lines[:-1]
assert len(full) >= 2
for l in full:
    json.loads(l)
assert json.loads(full[0])["model"] == "mlp:784-32-10"
PY

# --demo FILE: scenes with captions, then a fresh run
cat >"$TMP/demo.json" <<'JSON'
{"run": {"model": "mlp:784-16-10", "dataset": "synthetic:2400", "lr": 0.01, "workers": 2},
 "scenes": [{"seconds": 1, "caption": "scene A", "set": {"workers": 3}},
            {"seconds": 1, "caption": "scene B", "workers": [{"id": 2, "set": {"spb_depth": 1}}]}]}
JSON
start --demo "$TMP/demo.json" --log "$TMP/demo.jsonl"
# the stream until it has shown scene B's caption (60 s at most)
timeout 60 curl -s -N "$URL/api/v1/events?hz=1" >"$TMP/demo-sse.txt" 2>/dev/null &
SSE=$!
wait_until 60 grep -q '"caption":"scene B"' "$TMP/demo-sse.txt"
kill $SSE 2>/dev/null; wait $SSE 2>/dev/null
http GET /api/v1/status >/dev/null
[ "$(json 'd["demo"]["scenes"], d["demo"]["caption"] in ("scene A", "scene B"), d["demo"]["scene"] in (0, 1)')" = "2 True True" ] &&
	ok "status carries the demo's scene and caption" || bad "demo in status" "$(head -c 300 "$TMP/body")"
kill -TERM $PID; wait $PID 2>/dev/null
grep 'event: snapshot' -A1 "$TMP/demo-sse.txt" | grep -q '"demo":{"scene":' && ok "snapshots carry the demo's scene" || bad "demo in snapshots" "$(head -c 400 "$TMP/demo-sse.txt")"
grep -q '"caption":"scene B"' "$TMP/demo-sse.txt" && ok "demo captions reach SSE" || bad "demo captions reach SSE" "$(head -c 400 "$TMP/demo-sse.txt")"
[ "$(grep -c '"event":"caption"' "$TMP/demo.jsonl")" -ge 2 ] && ok "demo captions logged" || bad "demo captions logged"
grep '"event":"set"' "$TMP/demo.jsonl" | grep -q '"origin":"demo"' && ok "demo changes logged" || bad "demo changes logged"
printf '{"scenes": [{"seconds": 1, "caption": "x", "set": {"rule": "adam"}}]}' >"$TMP/baddemo.json"
expect_exit 2 "bad demo file" "$SL" serve --demo "$TMP/baddemo.json"
expect_grep 'scenes\[0\]\.set\.rule' "bad demo names the field" "$LAST_OUT"

# a port in use: exit 1, saying so, before any training
start --config "$TMP/run.json"
expect_exit 1 "port in use" "$SL" serve --listen "127.0.0.1:$port" --config "$TMP/run.json"
expect_grep '--listen 127.0.0.1:[0-9]+: cannot listen: Address already in use' "port in use is named" "$LAST_OUT"
kill -TERM $PID; wait $PID 2>/dev/null

# a virtual run's checkpoint is quick, and the version it names (reply and
# default file name) is the one the file holds (the loop used to run on
# between the save and the reply: 2102 named, 2058 resumed; calls took 3 s)
cat >"$TMP/virt.json" <<'JSON'
{"model": "mlp:784-16-10", "dataset": "synthetic:600", "clock": "virtual",
 "workers": 3, "batch": 8, "eval_every": 100}
JSON
mkdir -p "$TMP/ck"
start --config "$TMP/virt.json" --checkpoint-dir "$TMP/ck"
wait_api 30 /api/v1/status 'd["version"] > 0'
t0=$(date +%s%N)
expect_http "checkpoint of a virtual run" 201 POST /api/v1/checkpoint '{}'
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$ms" -lt 2000 ] && ok "a virtual run's checkpoint is quick (${ms} ms)" || bad "checkpoint took ${ms} ms"
v=$(json 'd["version"]')
case "$(json 'd["path"]')" in
"$TMP/ck/stalelab-run"*"-v$v.ckpt") [ -s "$(json 'd["path"]')" ] && ok "default file name has the version replied" ||
	bad "default checkpoint file missing" "$LAST_OUT" ;;
*) bad "default file name has the version replied" "$LAST_OUT" ;;
esac
kill "$PID"; wait "$PID" 2>/dev/null

wait_listen() { # FILE [PATTERN]: until the daemon says where it listens, or
	# PATTERN (60 s of wall time at most: loaded machines)
	end=$(($(date +%s) + 60))
	while [ "$(date +%s)" -lt $end ] && ! grep -qs "${2:-listening on http.*/ (rule}" "$1"; do sleep 0.1; done
}

# the terminal: a line per run start, change and end; evaluations with -v;
# a summary at SIGINT
: >"$TMP/term.err"
"$SL" serve --listen 127.0.0.1:0 --config "$TMP/run.json" 2>"$TMP/term.err" &
PID=$!
wait_listen "$TMP/term.err"
port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$TMP/term.err")
URL=http://127.0.0.1:$port
wait_api 30 /api/v1/status 'd["version"] > 0'
http PATCH /api/v1/run '{"lr": 0.03}' >/dev/null
wait_until 30 grep -q 'set {"lr":0.03}' "$TMP/term.err"
kill -INT $PID; wait $PID 2>/dev/null
grep -q 'run 1 started: rule asgd, 3 workers' "$TMP/term.err" && ok "terminal: run start" || bad "terminal: run start" "$(cat "$TMP/term.err")"
grep -q 'run 1 at v [0-9]*: set {"lr":0.03} (api)' "$TMP/term.err" && ok "terminal: a change" || bad "terminal: a change" "$(cat "$TMP/term.err")"
grep -q 'run 1 ended (stopped) at v' "$TMP/term.err" && ok "terminal: run end" || bad "terminal: run end" "$(cat "$TMP/term.err")"
grep -q 'up [0-9.]* s, 1 run started' "$TMP/term.err" && grep -q 'run 1 running at v [0-9]*, epoch' "$TMP/term.err" &&
	ok "terminal: a summary at SIGINT" || bad "terminal: summary" "$(cat "$TMP/term.err")"
grep -q 'test_acc [0-9.]* staleness' "$TMP/term.err" && bad "terminal: no evaluation lines by default" "$(cat "$TMP/term.err")" || ok "terminal: no evaluation lines by default"
"$SL" serve --listen 127.0.0.1:0 -v --config "$TMP/run.json" 2>"$TMP/term.err" &
PID=$!
wait_listen "$TMP/term.err" 'test_acc [0-9.]* staleness'
kill -INT $PID; wait $PID 2>/dev/null
grep -q 'stalelab serve: v [0-9]* epoch [0-9.]* test_acc' "$TMP/term.err" && ok "terminal: -v adds evaluations" || bad "terminal: -v" "$(cat "$TMP/term.err")"

# --listen forms: PORT, :PORT, [::1]:PORT
for spec in 0 :0; do
	"$SL" serve --listen "$spec" --quiet --config "$TMP/run.json" 2>"$TMP/l.err" &
	PID=$!; wait_listen "$TMP/l.err"; kill -TERM $PID; wait $PID 2>/dev/null
	grep -q 'listening on http://127.0.0.1:[1-9][0-9]*/' "$TMP/l.err" && ok "--listen $spec: loopback" || bad "--listen $spec" "$(cat "$TMP/l.err")"
done
if python3 -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
	"$SL" serve --listen '[::1]:0' --quiet --config "$TMP/run.json" 2>"$TMP/l.err" &
	PID=$!; wait_listen "$TMP/l.err"
	p6=$(sed -n 's|.*listening on http://\[::1\]:\([0-9]*\)/.*|\1|p' "$TMP/l.err")
	code=$(curl -sS --retry 3 --retry-connrefused -o /dev/null -w '%{http_code}' "http://[::1]:$p6/api/v1/status" 2>"$TMP/curl6.err")
	kill -TERM $PID; wait $PID 2>/dev/null
	[ "$code" = 200 ] && ok "--listen [::1]:PORT answers over IPv6" || bad "--listen [::1] ($code)" "$(cat "$TMP/l.err" "$TMP/curl6.err")"
else
	ok "--listen [::1]:PORT (no IPv6 loopback here: skipped)"
fi
expect_exit 2 "serve: IPv6 without brackets" "$SL" serve --listen ::1:8470
expect_exit 2 "serve: bad --listen" "$SL" serve --listen nowhere
expect_grep '--listen' "bad --listen is named" "$LAST_OUT"
expect_exit 0 "serve --help" "$SL" serve --help
finish serve
