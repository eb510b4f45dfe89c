#!/bin/sh
# A live run as a teacher drives it, then checked from outside:
# - a straggler, then a switch to ssp: the fast workers go on at most s
#   clocks ahead of it (its clocks counted from the switch; counted from the
#   start of the run they sat in "waiting" until it caught up);
# - the rates /status, /metrics and the headers show are current (the last
#   rate_window_s seconds), the run's averages beside them: a stall shows;
# - /metrics has the live lr, the last training loss, the rule (an info
#   metric);
# - a run's changes listed (GET /api/v1/runs/{id}/changes, and on the bus):
#   a dashboard (tests/browser/late.mjs) and a TUI opened after them show
#   every one; ?snapshot draws the page once, so a headless chromium
#   screenshot ends;
# - a run with no worker says it is waiting for workers;
# - each worker's H (async-diloco's dylu) and what the staleness counts.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
SL=$(cd "$(dirname "$SL")" && pwd)/$(basename "$SL")
echo "integration: a live run checked from outside (ssp switch, rates, changes, late clients)"

cat >"$TMP/run.json" <<'JSON'
{"model": "mlp:784-16-10", "dataset": "synthetic:6000", "lr": 0.01, "batch": 16,
 "workers": 4, "threads": 1, "eval_every": 100,
 "worker_overrides": [{"id": 3, "delay": {"dist": "const", "mean_ms": 100}}]}
JSON
BP=$(free_pair)
BUS=tcp://127.0.0.1:$BP
start --config "$TMP/run.json" --bus "$BUS"
[ -n "$port" ] && ok "daemon listens" || { bad "daemon listens" "$(cat "$TMP/serve.err")"; finish live; exit 1; }
TM="tmux -S $TMP/tmux.sock -f /dev/null"
trap '$TM kill-server 2>/dev/null; kill $PID 2>/dev/null; rm -rf "$TMP"' EXIT
py() { python3 -c "import json,sys; d=json.load(open('$TMP/body')); $1"; }

# ---- ssp after an imbalance -------------------------------------------------
wait_api 60 /api/v1/status 'd["workers"][0]["iterations"] > 20 * max(1, d["workers"][3]["iterations"])' &&
	ok "worker 3 straggles (20 times fewer iterations)" || bad "an imbalance" "$(cut -c1-300 "$TMP/body")"
expect_http "PATCH rule ssp, s = 2" 202 PATCH /api/v1/run '{"rule": "ssp", "rule_params": {"s": 2}}'
http GET /api/v1/status >/dev/null
it0=$(py 'print(" ".join(str(w["iterations"]) for w in d["workers"]))')
# the straggler steps every 100 ms: in 3 s about 30 iterations, the fast
# workers as many (at most 2 more)
sleep 3
http GET /api/v1/status >/dev/null
it1=$(py 'print(" ".join(str(w["iterations"]) for w in d["workers"]))')
gaps=$(python3 -c "
a = [int(x) for x in '$it0'.split()]; b = [int(x) for x in '$it1'.split()]
d = [y - x for x, y in zip(a, b)]
print(' '.join(map(str, d)))")
set -- $gaps
[ "$1" -ge 5 ] && [ "$2" -ge 5 ] && [ "$3" -ge 5 ] &&
	ok "after the switch the fast workers go on ($1 $2 $3 iterations in 3 s, the straggler $4)" ||
	bad "after the switch the fast workers go on" "iterations in 3 s: $gaps"
[ "$1" -le $(($4 + 4)) ] && [ "$2" -le $(($4 + 4)) ] && [ "$3" -le $(($4 + 4)) ] &&
	ok "... and stay within s of the straggler" || bad "... within s of the straggler" "iterations in 3 s: $gaps"
py 'sys.exit(0 if d["rule"] == "ssp" and d["config"]["rule_params"]["s"] == 2 else 1)' &&
	ok "status says ssp, s = 2" || bad "status says ssp" "$(cut -c1-200 "$TMP/body")"

# ---- current rates ------------------------------------------------------------
py 'sys.exit(0 if all(k in d for k in ("samples_per_s", "samples_per_s_avg", "updates_per_s", "updates_per_s_avg", "rate_window_s")) else 1)' &&
	ok "status: current rates and the run's averages" || bad "status rates" "$(cut -c1-400 "$TMP/body")"
# the ssp bound now holds everyone to the straggler's pace: the current
# rate falls well under the run's average, which moves little
wait_api 30 /api/v1/status 'd["updates_per_s"] < 0.5 * d["updates_per_s_avg"]' &&
	ok "status: updates_per_s shows the slowdown ($(py 'print("%.0f now, %.0f avg" % (d["updates_per_s"], d["updates_per_s_avg"]))'))" ||
	bad "updates_per_s shows the slowdown" "$(py 'print(d["updates_per_s"], d["updates_per_s_avg"])')"
expect_http "pause the run" 202 PATCH /api/v1/run '{"paused": true}'
wait_api 30 /api/v1/status 'd["updates_per_s"] == 0 and d["samples_per_s"] == 0 and d["updates_per_s_avg"] > 0' &&
	ok "paused: the current rates read 0, the averages do not" ||
	bad "paused: current rates 0" "$(py 'print(d["state"], d["updates_per_s"], d["samples_per_s"], d["updates_per_s_avg"])')"
py 'sys.exit(0 if all(w["samples_per_s"] == 0 and w["samples_per_s_avg"] > 0 for w in d["workers"]) else 1)' &&
	ok "paused: each worker's current rate reads 0" || bad "paused: workers' rates" "$(cut -c1-600 "$TMP/body")"
expect_http "resume the run" 202 PATCH /api/v1/run '{"paused": false}'
wait_api 30 /api/v1/status 'd["updates_per_s"] > 0' && ok "resumed: the rate comes back" || bad "resumed: rate"

# ---- /metrics gauges ------------------------------------------------------------
expect_http "PATCH lr 0.02" 202 PATCH /api/v1/run '{"lr": 0.02}'
curl -s "$URL/metrics" >"$TMP/prom"
grep -Eq '^stalelab_learning_rate 0\.02(0*1?)?$' "$TMP/prom" && ok "/metrics: stalelab_learning_rate is the live lr" ||
	bad "/metrics: learning rate" "$(grep learning_rate "$TMP/prom")"
grep -q '^stalelab_run_info{rule="ssp",model="mlp:784-16-10",clock="wall",device="[a-z]*"} 1$' "$TMP/prom" &&
	ok "/metrics: stalelab_run_info names the rule" || bad "/metrics: run info" "$(grep run_info "$TMP/prom")"
for g in stalelab_train_loss stalelab_updates_per_second stalelab_samples_per_second_avg \
	stalelab_best_test_accuracy 'stalelab_worker_samples_per_second{worker="3"}'; do
	grep -q "^$g [0-9]" "$TMP/prom" && ok "/metrics: $g" || bad "/metrics: $g" "$(grep -F "$g" "$TMP/prom")"
done
grep -q '^# TYPE stalelab_run_info gauge$' "$TMP/prom" && ok "/metrics: typed" || bad "/metrics: typed"

# ---- the run's changes --------------------------------------------------------------
for lr in 0.011 0.012 0.013; do
	http PATCH /api/v1/run "{\"lr\": $lr}" >/dev/null
done
# so far: the ssp switch, pause, resume, lr 0.02 and these three
N=7
expect_http "GET /api/v1/runs/1/changes" 200 GET /api/v1/runs/1/changes
py "sys.exit(0 if d['run'] == 1 and len(d['changes']) == $N else 1)" &&
	ok "it lists the run's $N changes" || bad "the run's $N changes" "$(cut -c1-600 "$TMP/body")"
py 'c = d["changes"]; sys.exit(0 if c[0]["set"]["rule"] == "ssp" and c[-1]["set"]["lr"] == 0.013 and all(x["v"] <= y["v"] for x, y in zip(c, c[1:])) and all(k in c[0] for k in ("t", "v", "origin")) else 1)' &&
	ok "as logged: in order, with t, v, origin and what was set" || bad "changes as logged" "$(cut -c1-600 "$TMP/body")"
expect_http "a run that never was: 404" 404 GET /api/v1/runs/9/changes
expect_grep 'run 9: not among' "... saying so" "$LAST_OUT"
expect_http "GET /api/v1/runs/1 carries the changes too" 200 GET /api/v1/runs/1
py "sys.exit(0 if len(d['changes']) == $N else 1)" && ok "... all $N" || bad "runs/1 changes" "$(cut -c1-300 "$TMP/body")"
printf '{"id":"c1","method":"GET","path":"/api/v1/runs/1/changes"}' |
	python3 "$(dirname "$0")/bus_client.py" req "$BUS" 10 >"$TMP/busreply" 2>&1
python3 -c "
import json,sys; r = json.load(open('$TMP/busreply'))
sys.exit(0 if r['status'] == 200 and len(r['body']['changes']) == $N else 1)" 2>/dev/null &&
	ok "the same over the bus" || bad "changes over the bus" "$(cut -c1-300 "$TMP/busreply")"

# ---- clients that come late ---------------------------------------------------------------
browser_test 180 tests/browser/late.mjs "$URL" "$N" "$(dirname "$SL")/late"
if command -v tmux >/dev/null 2>&1; then
	$TM new-session -d -s tui -x 120 -y 40 "env LANG=C.UTF-8 $SL tui --connect $BUS"
	end=$(($(date +%s) + 30))
	while :; do
		SCREEN=$($TM capture-pane -p -t tui)
		[ "$(printf '%s\n' "$SCREEN" | grep -c 'api: lr 0\.01[123]')" -ge 3 ] && break
		[ "$(date +%s)" -ge "$end" ] && break
		sleep 0.3
	done
	[ "$(printf '%s\n' "$SCREEN" | grep -c 'api: lr 0\.01[123]')" -eq 3 ] &&
		ok "a TUI opened late logs the changes made before it" || bad "late TUI logs the changes" "$SCREEN"
	printf '%s\n' "$SCREEN" | grep -q 'api: rule ssp' && ok "... the rule switch among them" ||
		bad "late TUI: the rule switch" "$SCREEN"
	printf '%s\n' "$SCREEN" | grep -Eq '^chg .*[▲^]' && ok "... and marks them under the sparklines" ||
		bad "late TUI: the chg row" "$SCREEN"
	$TM kill-server 2>/dev/null
else
	bad "tmux is installed (make deps)"
fi
# the one-line screenshot of docs/dashboard.md: it ends, and draws
CHROME=${CHROMIUM:-/usr/bin/chromium}
if [ -x "$CHROME" ]; then
	( cd "$TMP" && timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
		--no-first-run --disable-background-networking --user-data-dir="$TMP/chrome" \
		--window-size=1400,1000 --virtual-time-budget=15000 --screenshot="$TMP/shot.png" \
		"$URL/?snapshot" >"$TMP/chrome.log" 2>&1 )
	rc=$?
	[ "$rc" -eq 0 ] && [ -s "$TMP/shot.png" ] && ok "chromium --screenshot of ?snapshot ends, with a PNG" ||
		bad "chromium --screenshot of ?snapshot (exit $rc)" "$(tail -5 "$TMP/chrome.log")"
	cp "$TMP/shot.png" "$(dirname "$SL")/late/snapshot.png" 2>/dev/null
else
	bad "chromium is installed (make deps)"
fi
kill "$PID"; wait "$PID" 2>/dev/null

# ---- no worker: waiting for workers -------------------------------------------------------
printf '{"model": "mlp:784-16-10", "dataset": "synthetic:600", "workers": 0}\n' >"$TMP/zero.json"
start --config "$TMP/zero.json"
wait_api 30 /api/v1/status 'd["state"] == "waiting" and "workers" in d["waiting_for"]' &&
	ok "workers 0: state waiting, for workers" || bad "workers 0: waiting" "$(cut -c1-300 "$TMP/body")"
expect_http "add a worker" 202 PUT /api/v1/workers '{"count": 1}'
wait_api 30 /api/v1/status 'd["state"] == "running" and "waiting_for" not in d' &&
	ok "with a worker: running" || bad "with a worker: running" "$(cut -c1-300 "$TMP/body")"
expect_http "pause worker 0" 202 PATCH /api/v1/workers/0 '{"paused": true}'
wait_api 30 /api/v1/status 'd["state"] == "waiting" and "paused" in d["waiting_for"]' &&
	ok "every worker paused: waiting, saying why" || bad "all paused: waiting" "$(cut -c1-300 "$TMP/body")"
kill "$PID"; wait "$PID" 2>/dev/null

# ---- each worker's H and the staleness unit (async-diloco with dylu) --------------------
printf '{"model": "logreg", "dataset": "synthetic:6000", "rule": "async-diloco", "rule_params": {"H": 8, "dylu": true}, "optimizer": "adamw", "lr": 0.001, "workers": 3, "clock": "virtual", "threads": 1, "batch": 16, "eval_every": 0, "stop": {"epochs": 1000}, "worker_overrides": [{"id": 2, "speed": 0.25}]}\n' >"$TMP/dylu.json"
start --config "$TMP/dylu.json"
wait_api 60 /api/v1/status 'd["staleness_unit"] == "outer versions" and d["workers"][0]["h"] >= 7 and 1 <= d["workers"][2]["h"] <= 3' &&
	ok "status: each worker's H (a quarter-speed worker's dylu H $(py 'print(d["workers"][2]["h"])') of 8), staleness in outer versions" ||
	bad "status: workers[].h and staleness_unit" "$(cut -c1-600 "$TMP/body")"
py 'sys.exit(0 if all(w["bytes_sent"] > 0 and w["bytes_recv"] > 0 for w in d["workers"]) else 1)' &&
	ok "status: each worker's bytes sent and received" || bad "status: bytes" "$(cut -c1-600 "$TMP/body")"
http GET /api/v1/staleness >/dev/null
py 'sys.exit(0 if d["unit"] == "outer versions" else 1)' && ok "staleness: unit outer versions" || bad "staleness: unit" "$(cut -c1-300 "$TMP/body")"
curl -s "$URL/metrics" >"$TMP/metrics"
expect_grep '^stalelab_worker_phase_steps\{worker="2"\} [123]$' "/metrics: the slow worker's phase steps" "$(cat "$TMP/metrics")"
expect_http "PATCH rule asgd" 202 PATCH /api/v1/run '{"rule": "asgd"}'
wait_api 30 /api/v1/status 'd["staleness_unit"] == "versions" and not any("h" in w for w in d["workers"])' &&
	ok "asgd: staleness in versions, no H" || bad "asgd: unit and no h" "$(cut -c1-600 "$TMP/body")"
kill "$PID"; wait "$PID" 2>/dev/null
finish live
