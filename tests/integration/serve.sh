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

# http METHOD PATH [BODY] -> prints "STATUS BODY"
http() {
	if [ -n "$3" ]; then
		curl -s -o "$TMP/body" -w '%{http_code}' -X "$1" -H 'Content-Type: application/json' \
			${AUTH:+-H "Authorization: Bearer $AUTH"} --data "$3" "$URL$2"
	else
		curl -s -o "$TMP/body" -w '%{http_code}' -X "$1" \
			${AUTH:+-H "Authorization: Bearer $AUTH"} "$URL$2"
	fi
	printf ' '; cat "$TMP/body"
}

expect_http() { # NAME WANT-STATUS METHOD PATH [BODY]
	name=$1; want=$2; shift 2
	out=$(http "$@")
	case "$out" in
	"$want "*) ok "$name" ;;
	*) bad "$name (want $want)" "$out" ;;
	esac
	LAST_OUT=$out
}

json() { # PYTHON-EXPRESSION over d (the last body)
	python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" "$TMP/body"
}

start --config "$TMP/run.json" --log "$TMP/serve.jsonl"
[ -n "$port" ] && ok "daemon listens" || bad "daemon listens" "$(cat "$TMP/serve.err")"
sleep 1

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
expect_http "workers out of range" 400 PUT /api/v1/workers '{"count": 0}'
expect_http "workers extra field" 400 PUT /api/v1/workers '{"count": 2, "x": 1}'
expect_http "no such worker" 404 PATCH /api/v1/workers/17 '{"spb_depth": 1}'
expect_http "bad worker field" 400 PATCH /api/v1/workers/1 '{"depth": 1}'
big=$(python3 -c 'print("{\"x\": \"" + "a" * 1100000 + "\"}")')
printf '%s' "$big" >"$TMP/big.json"
code=$(curl -s -o /dev/null -w '%{http_code}' -X PATCH --data-binary @"$TMP/big.json" "$URL/api/v1/run")
[ "$code" = 413 ] && ok "body too large: 413" || bad "body too large: 413" "$code"

# live changes, seen in /status, /staleness and the log
expect_http "PATCH rule" 202 PATCH /api/v1/run '{"rule": "ssp", "rule_params": {"s": 1}, "lr": 0.02}'
expect_http "PUT workers" 202 PUT /api/v1/workers '{"count": 5}'
expect_http "PATCH worker delay" 202 PATCH /api/v1/workers/1 '{"delay": {"dist": "const", "mean_ms": 30}, "spb_depth": 1}'
sleep 1.5
http GET /api/v1/status >/dev/null
got=$(json 'd["rule"], d["config"]["rule_params"]["s"], d["config"]["lr"], len(d["workers"]), d["workers"][1]["delay"]["mean_ms"], d["workers"][1]["spb_depth"]')
[ "$got" = "ssp 1 0.02 5 30.0 1" ] && ok "changes visible in /status" || bad "changes visible in /status" "$got"
http GET /api/v1/staleness >/dev/null
[ "$(json 'len(d["workers"])')" = 5 ] && ok "staleness per worker follows the count" || bad "staleness per worker" "$(cat "$TMP/body")"
sets=$(grep -c '"event":"set"' "$TMP/serve.jsonl")
[ "$sets" -ge 3 ] && ok "changes logged" || bad "changes logged ($sets)" "$(tail -3 "$TMP/serve.jsonl")"
grep '"event":"set"' "$TMP/serve.jsonl" | grep -q '"origin":"api"' && ok "origin api" || bad "origin api"

# three SSE events
timeout 5 curl -s -N "$URL/api/v1/events?hz=10" >"$TMP/sse.txt" 2>/dev/null
n=$(grep -c '^event: ' "$TMP/sse.txt")
[ "$n" -ge 3 ] && ok "SSE: $n events in 5 s" || bad "SSE events" "$(head -c 300 "$TMP/sse.txt")"
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

# checkpoint and resume
expect_http "POST /api/v1/checkpoint" 201 POST /api/v1/checkpoint "{\"path\": \"$TMP/c1.ckpt\"}"
ckv=$(json 'd["version"]')
[ -s "$TMP/c1.ckpt" ] && ok "checkpoint file written" || bad "checkpoint file written"
ls "$TMP"/c1.ckpt.tmp.* >/dev/null 2>&1 && bad "temporary file left behind" || ok "no temporary file left"
expect_http "checkpoint: bad field" 400 POST /api/v1/checkpoint '{"file": "x"}'
expect_http "checkpoint: no .. components" 400 POST /api/v1/checkpoint '{"path": "../x.ckpt"}'
expect_http "checkpoint: unwritable" 400 POST /api/v1/checkpoint '{"path": "/nonexistent/dir/c.ckpt"}'
expect_http "resume" 201 POST /api/v1/run "{\"resume\": \"$TMP/c1.ckpt\"}"
got=$(json 'd["version"] >= '"$ckv"', d["config"]["rule"], len(d["workers"]), d["run"]')
[ "$got" = "True ssp 5 2" ] && ok "resumed where the checkpoint was" || bad "resumed where the checkpoint was" "$got / $ckv"
printf 'garbage' >"$TMP/bad.ckpt"
expect_http "resume a bad file" 400 POST /api/v1/run "{\"resume\": \"$TMP/bad.ckpt\"}"
expect_grep 'not a stalelab checkpoint' "bad checkpoint says why" "$LAST_OUT"
expect_http "resume a missing file" 400 POST /api/v1/run "{\"resume\": \"$TMP/none.ckpt\"}"
http GET /api/v1/status >/dev/null
[ "$(json 'd["state"], d["run"]')" = "running 2" ] && ok "a failed resume leaves the run alone" || bad "failed resume" "$(cat "$TMP/body")"

# token: changes need it, reads do not
kill -TERM $PID; wait $PID 2>/dev/null
start --config "$TMP/run.json" --token s3cret
expect_http "no token: 401" 401 PATCH /api/v1/run '{"lr": 0.02}'
AUTH=wrong expect_http "wrong token: 401" 401 PATCH /api/v1/run '{"lr": 0.02}'
AUTH=s3cret expect_http "right token: 202" 202 PATCH /api/v1/run '{"lr": 0.02}'
expect_http "reads need no token" 200 GET /api/v1/status

# a new run replaces the old; a stopped run refuses changes with 409
AUTH=s3cret expect_http "POST /api/v1/run" 201 POST /api/v1/run '{"model": "logreg", "dataset": "synthetic:3000", "workers": 2, "clock": "virtual", "stop": {"steps": 200}}'
[ "$(json 'd["config"]["model"], d["config"]["clock"], d["run"]')" = "logreg virtual 2" ] && ok "new run in the answer" || bad "new run" "$LAST_OUT"
expect_http "GET /api/v1/runs" 200 GET /api/v1/runs
[ "$(json '[r["run"] for r in d["runs"]], d["runs"][0]["config"]["model"], len(d["runs"][0]["series"]) > 0, d["runs"][1]["config"]["model"]')" = "[1, 2] mlp:784-32-10 True logreg" ] &&
	ok "runs: the earlier one kept with its series" || bad "runs" "$(head -c 400 "$TMP/body")"
AUTH=s3cret expect_http "POST bad run object" 400 POST /api/v1/run '{"model": "resnet"}'
expect_grep 'model' "bad run object names the field" "$LAST_OUT"
sleep 1
http GET /api/v1/status >/dev/null
[ "$(json 'd["state"], d["version"]')" = "finished 200" ] && ok "virtual run finished at its stop" || bad "virtual run finished" "$(cat "$TMP/body")"
AUTH=s3cret expect_http "change after the end: 409" 409 PATCH /api/v1/run '{"lr": 0.02}'
kill -TERM $PID; wait $PID; rc=$?
[ $rc -eq 0 ] && ok "SIGTERM: exit 0" || bad "SIGTERM exit $rc"
grep -q 'SIGTERM, stopping' "$TMP/serve.err" && ok "says it stops" || bad "says it stops" "$(cat "$TMP/serve.err")"

# checkpoint on exit, then start from it
start --config "$TMP/run.json" --checkpoint-on-exit "$TMP/exit.ckpt" --log "$TMP/exit.jsonl"
sleep 1.5
kill -TERM $PID; wait $PID; rc=$?
[ $rc -eq 0 ] && [ -s "$TMP/exit.ckpt" ] && ok "checkpoint on SIGTERM" || bad "checkpoint on SIGTERM (rc $rc)" "$(cat "$TMP/serve.err")"
last=$(tail -n 1 "$TMP/exit.jsonl" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("event"), d.get("stop"))')
[ "$last" = "end stopped" ] && ok "final log record on SIGTERM" || bad "final log record on SIGTERM" "$last"
start --resume "$TMP/exit.ckpt"
sleep 0.5
http GET /api/v1/status >/dev/null
[ "$(json 'd["config"]["model"], d["version"] > 0')" = "mlp:784-32-10 True" ] && ok "serve --resume" || bad "serve --resume" "$(cat "$TMP/body") $(cat "$TMP/serve.err")"
kill -TERM $PID; wait $PID 2>/dev/null

# kill -9 mid-run: the log stays valid JSON Lines up to the last full line
start --config "$TMP/run.json" --log "$TMP/k9.jsonl"
sleep 2
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
timeout 3 curl -s -N "$URL/api/v1/events?hz=1" >"$TMP/demo-sse.txt" 2>/dev/null
kill -TERM $PID; wait $PID 2>/dev/null
grep -q '"caption":"scene B"' "$TMP/demo-sse.txt" && ok "demo captions reach SSE" || bad "demo captions reach SSE" "$(head -c 400 "$TMP/demo-sse.txt")"
[ "$(grep -c '"event":"caption"' "$TMP/demo.jsonl")" -ge 2 ] && ok "demo captions logged" || bad "demo captions logged"
grep '"event":"set"' "$TMP/demo.jsonl" | grep -q '"origin":"demo"' && ok "demo changes logged" || bad "demo changes logged"
printf '{"scenes": [{"seconds": 1, "caption": "x", "set": {"rule": "adam"}}]}' >"$TMP/baddemo.json"
expect_exit 2 "bad demo file" "$SL" serve --demo "$TMP/baddemo.json"
expect_grep 'scenes\[0\]\.set\.rule' "bad demo names the field" "$LAST_OUT"

# a port in use: exit 1, saying so, before any training
start --config "$TMP/run.json"
expect_exit 1 "port in use" "$SL" serve --listen "127.0.0.1:$port" --config "$TMP/run.json"
expect_grep 'cannot listen on 127.0.0.1:[0-9]+: Address already in use' "port in use is named" "$LAST_OUT"
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
sleep 0.5
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

expect_exit 2 "serve: bad --listen" "$SL" serve --listen nowhere
expect_grep -- 'listen' "bad --listen is named" "$LAST_OUT"
expect_exit 0 "serve --help" "$SL" serve --help
finish serve
