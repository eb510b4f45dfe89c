#!/bin/sh
# Integration tests of divergence: `stalelab run --lr 5 --momentum 0.9`
# stops at the first non-finite step with a "diverged" record, the end
# record's "stop": "diverged" and exit status 3; the daemon pauses a
# diverged run (state, SSE event, log record, PATCH refused) and
# POST /api/v1/run/recover resumes it from the last good checkpoint with a
# smaller lr, logged as a change, training on with finite losses.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: divergence"

# json FILE PYTHON-EXPRESSION: over d (FILE's JSON) or lines (its JSON lines)
json() {
	python3 -c "
import json, sys
t = open(sys.argv[1]).read()
try:
    d = json.loads(t)
except ValueError:
    d = None
lines = [json.loads(l) for l in t.splitlines() if l.strip()]
print($2)" "$1"
}

# ---- stalelab run --------------------------------------------------------
# the issue's command, four workers on the virtual clock (the same every time)
expect_exit 3 "run --lr 5 --momentum 0.9 exits 3" "$SL" run --lr 5 --momentum 0.9 -w 4 \
	--clock virtual --steps 600 --eval-every 5 --log "$TMP/run.jsonl"
expect_grep 'diverged at v [0-9]+: worker [0-3].s (loss|gradient) is not finite' \
	"stderr names the worker, version and what" "$LAST_OUT"
expect_grep 'DIVERGED' "the summary says so" "$LAST_OUT"
[ "$(json "$TMP/run.jsonl" '[l.get("event") for l in lines if l.get("event")] == ["diverged", "end"]')" = True ] &&
	ok "log: one diverged record, then the end" || bad "log records" "$(grep event "$TMP/run.jsonl")"
[ "$(json "$TMP/run.jsonl" '(lambda dv, end: (end["stop"], end["v"] == dv["v"], dv["what"] in ("loss", "gradient"), 0 <= dv["worker"] < 4, dv["v_read"] <= dv["v"]))([l for l in lines if l.get("event") == "diverged"][0], lines[-1])')" = "('diverged', True, True, True, True)" ] &&
	ok "end record: stop diverged, at the diverged record's version" || bad "end record" "$(tail -2 "$TMP/run.jsonl")"
[ "$(json "$TMP/run.jsonl" 'all(l["train_loss"] is not None for l in lines if "train_loss" in l)')" = True ] &&
	ok "no null train_loss in the series" || bad "null train_loss" "$(grep -c null "$TMP/run.jsonl")"
"$SL" run --lr 5 --momentum 0.9 -w 4 --clock virtual --steps 600 --eval-every 5 \
	--log "$TMP/run.csv" --log-format csv -q
code=$?
[ $code = 3 ] && grep -q '^diverged,' "$TMP/run.csv" && grep -q '^end,.*diverged' "$TMP/run.csv" &&
	ok "quiet CSV run: exit 3, diverged and end rows" || bad "CSV run (exit $code)" "$(cut -c1-120 "$TMP/run.csv" | tail -3)"
expect_exit 0 "run --help" "$SL" run --help
expect_grep '3 the run diverged' "--help lists exit status 3" "$LAST_OUT"

# ---- the daemon -----------------------------------------------------------
cat >"$TMP/serve.json" <<'JSON'
{"model": "mlp:784-256-128-10", "dataset": "synthetic:6000", "lr": 0.01, "batch": 16,
 "workers": 2, "clock": "virtual", "eval_every": 10,
 "schedule": [{"at": {"v": 40}, "set": {"paused": true}}]}
JSON
start --config "$TMP/serve.json" --log "$TMP/serve.jsonl"
[ -n "$port" ] && ok "daemon listens" || bad "daemon listens" "$(cat "$TMP/serve.err")"

# http METHOD PATH [BODY] -> the status code; the body in $TMP/body
http() {
	curl -s -o "$TMP/body" -w '%{http_code}' -X "$1" ${3:+-H 'Content-Type: application/json' --data "$3"} "$URL$2"
}
# wait_state STATE: poll /api/v1/status (up to 60 s)
wait_state() { wait_api 60 /api/v1/status 'd["state"] == "'"$1"'"'; }

# a few evaluations first (each a good checkpoint), then an lr that diverges,
# given at the same version every time (the schedule pauses the run at v 40;
# the steps in flight end it at 42): given at
# whatever version a loaded machine reached, lr 100 could as well kill
# every ReLU of a trained net and leave its loss large but finite
wait_api 60 /api/v1/status 'd["state"] == "paused" and d["version"] >= 40' || bad "paused at v 40 within 60 s" "$(cat "$TMP/body")"
# the event stream, live (its first snapshot came) before the change
timeout 120 curl -s -N "$URL/api/v1/events?hz=2" >"$TMP/sse.txt" 2>/dev/null &
SSE=$!
wait_until 30 grep -q '^event: snapshot' "$TMP/sse.txt"
code=$(http PATCH /api/v1/run '{"lr": 100, "momentum": 0.9}')
[ "$code" = 202 ] && ok "PATCH lr 100, momentum 0.9" || bad "PATCH lr (HTTP $code)" "$(cat "$TMP/body")"
code=$(http PATCH /api/v1/run '{"paused": false}')
[ "$code" = 202 ] && ok "PATCH paused false" || bad "PATCH paused false (HTTP $code)" "$(cat "$TMP/body")"
wait_state diverged && ok "state: diverged" || bad "state: diverged" "$(cat "$TMP/body")"
[ "$(json "$TMP/body" '(d["stop"], d["diverged"]["event"], d["diverged"]["what"] in ("loss", "gradient"), d["version"] == d["diverged"]["v"], 0 < d["recover"]["from_v"] <= d["version"], d["recover"]["lr"])')" = "('diverged', 'diverged', True, True, True, 50.0)" ] &&
	ok "status: the divergence, and what recover would do" || bad "status body" "$(cat "$TMP/body")"
div_v=$(json "$TMP/body" 'd["diverged"]["v"]')
from_v=$(json "$TMP/body" 'd["recover"]["from_v"]')
wait_until 30 grep -q '^event: diverged' "$TMP/sse.txt"
kill $SSE 2>/dev/null; wait $SSE 2>/dev/null
grep -q '^event: diverged' "$TMP/sse.txt" && ok "SSE: the diverged event" || bad "SSE: no diverged event" "$(grep '^event' "$TMP/sse.txt" | sort | uniq -c)"
[ "$(json "$TMP/serve.jsonl" 'len([l for l in lines if l.get("event") == "diverged" and l["run"] == 1 and l["v"] == '"$div_v"'])')" = 1 ] &&
	ok "log: the diverged record" || bad "log: diverged record" "$(grep diverged "$TMP/serve.jsonl")"
code=$(http PATCH /api/v1/run '{"lr": 0.01}')
[ "$code" = 409 ] && [ "$(json "$TMP/body" 'd["error"]["code"]')" = diverged ] &&
	ok "PATCH on a diverged run: 409 diverged" || bad "PATCH diverged (HTTP $code)" "$(cat "$TMP/body")"
code=$(http POST /api/v1/run/recover '{"lr": "small"}')
[ "$code" = 400 ] && grep -q '"lr: expected a number' "$TMP/body" && ok "recover: a bad lr is a 400 naming lr" || bad "recover bad lr (HTTP $code)" "$(cat "$TMP/body")"
code=$(http POST /api/v1/run/recover '{"lr": 0}')
[ "$code" = 400 ] && grep -q '"lr: ' "$TMP/body" && ok "recover: lr 0 is a 400 naming lr" || bad "recover lr 0 (HTTP $code)" "$(cat "$TMP/body")"
code=$(http POST /api/v1/run/recover '{"lr": 0.005, "rule": "ssgd"}')
[ "$code" = 400 ] && grep -q 'only \\"lr\\"' "$TMP/body" && ok "recover: another field is a 400" || bad "recover extra field (HTTP $code)" "$(cat "$TMP/body")"
code=$(http POST /api/v1/run/recover '{"lr": 0.005}')
[ "$code" = 201 ] && ok "recover: 201" || bad "recover (HTTP $code)" "$(cat "$TMP/body")"
[ "$(json "$TMP/body" '(d["run"], d["state"], d["version"] >= '"$from_v"', d["recovered"]["run"], d["recovered"]["from"], d["recovered"]["from_v"] == '"$from_v"', d["recovered"]["diverged_v"] == '"$div_v"', d["recovered"]["lr"], d["recovered"]["applied"])')" = "(2, 'running', True, 1, 'checkpoint', True, True, 0.005, True)" ] &&
	ok "recover: run 2 from the last good checkpoint with lr 0.005" || bad "recover body" "$(cat "$TMP/body")"
# training goes on, with finite losses
wait_api 60 /api/v1/status 'd["version"] >= '"$div_v"' + 50'
[ "$(json "$TMP/body" '(d["state"], d["run"], d["config"]["lr"], d["train_loss"] is not None and d["train_loss"] < 5)')" = "('running', 2, 0.005, True)" ] &&
	ok "run 2 trains past the divergence, finite loss" || bad "run 2 trains" "$(cat "$TMP/body")"
code=$(http GET "/api/v1/metrics?since=$from_v")
[ "$code" = 200 ] && [ "$(json "$TMP/body" 'len(d["series"]) >= 3 and all(e["train_loss"] is not None and e["test_loss"] is not None for e in d["series"])')" = True ] &&
	ok "run 2's series after the checkpoint: all finite" || bad "run 2 series" "$(head -c 400 "$TMP/body")"
code=$(http POST /api/v1/run/recover)
[ "$code" = 409 ] && [ "$(json "$TMP/body" 'd["error"]["code"]')" = not_diverged ] &&
	ok "recover a running run: 409 not_diverged" || bad "recover running (HTTP $code)" "$(cat "$TMP/body")"
kill "$PID"; wait "$PID"
code=$?
[ $code = 0 ] && ok "the daemon exits 0 on SIGTERM" || bad "daemon exit $code" "$(tail -20 "$TMP/serve.err")"
[ "$(json "$TMP/serve.jsonl" '[(l["set"], l["v"]) for l in lines if l.get("event") == "set" and l.get("origin") == "recover" and l["run"] == 2]')" = "[({'lr': 0.005}, $from_v)]" ] &&
	ok "log: the recover change at the checkpoint's version" || bad "log: recover change" "$(grep recover "$TMP/serve.jsonl" | cut -c1-200)"
[ "$(json "$TMP/serve.jsonl" '[(l.get("resumed"), l["recovered"]["from_v"]) for l in lines if "model" in l and l.get("run") == 2]')" = "[(True, $from_v)]" ] &&
	ok "log: run 2's run object says what it recovers" || bad "log: run 2 record" "$(grep '"run":2' "$TMP/serve.jsonl" | head -1 | cut -c1-300)"

# ---- the daemon, diverged before any finite evaluation: from the start ---
printf '{"model": "mlp:784-256-128-10", "dataset": "synthetic:6000", "lr": 100, "momentum": 0.9,\n "batch": 16, "workers": 1, "clock": "virtual", "eval_every": 100}\n' >"$TMP/early.json"
start --config "$TMP/early.json"
wait_state diverged && ok "early divergence: state diverged" || bad "early: state" "$(cat "$TMP/body")"
[ "$(json "$TMP/body" '(d["recover"]["from"], d["recover"]["from_v"], d["recover"]["lr"])')" = "('start', 0, 50.0)" ] &&
	ok "early divergence: recover would start over" || bad "early: recover hint" "$(cat "$TMP/body")"
code=$(curl -s -o "$TMP/body" -w '%{http_code}' -X POST "$URL/api/v1/run/recover")
[ "$code" = 201 ] && [ "$(json "$TMP/body" '(d["recovered"]["from"], d["recovered"]["lr"], d["recovered"]["applied"], d["config"]["momentum"])')" = "('start', 50.0, True, 0.9)" ] &&
	ok "recover with no body: from the start at half the lr" || bad "early recover (HTTP $code)" "$(cat "$TMP/body")"
kill "$PID"; wait "$PID"
code=$?
[ $code = 0 ] && ok "the second daemon exits 0 on SIGTERM" || bad "second daemon exit $code" "$(tail -20 "$TMP/serve.err")"

finish divergence
