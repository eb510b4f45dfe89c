#!/bin/sh
# The daemon under load: GET /api/v1/status requests/s with wrk (2 threads,
# 50 connections) while it trains, and training throughput with 0 versus 20
# Server-Sent Events clients watching (alternated, medians).
#   bench/http.sh BUILD_DIR        (ROUNDS=3 WINDOW=8 by default)
build=${1:-build}
SL=$build/stalelab
ROUNDS=${ROUNDS:-3}
WINDOW=${WINDOW:-8}
command -v wrk >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null 2>&1
tmp=$(mktemp -d)
trap 'kill $PID 2>/dev/null; rm -rf "$tmp"' EXIT
printf '{"workers": 2, "rule": "asgd", "eval_every": 0}\n' >"$tmp/run.json"
"$SL" serve --listen 127.0.0.1:0 --quiet --config "$tmp/run.json" 2>"$tmp/err" &
PID=$!
i=0
while [ $i -lt 100 ] && ! grep -q listening "$tmp/err" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
URL=http://127.0.0.1:$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$tmp/err")
sleep 2

samples() { curl -s "$URL/api/v1/status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["samples"])'; }
rate() { a=$(samples); sleep "$WINDOW"; b=$(samples); echo $(( (b - a) / WINDOW )); }

echo "== training samples/s, 0 vs 20 SSE clients (window ${WINDOW}s) =="
: >"$tmp/r0"; : >"$tmp/r20"
for r in $(seq 1 "$ROUNDS"); do
	rate >>"$tmp/r0"
	pids=""
	for c in $(seq 1 20); do
		curl -s -N "$URL/api/v1/events" >/dev/null 2>&1 &
		pids="$pids $!"
	done
	sleep 1
	rate >>"$tmp/r20"
	kill $pids 2>/dev/null; wait $pids 2>/dev/null
done
python3 - "$tmp/r0" "$tmp/r20" <<'PY'
import json, statistics, sys
a = [int(x) for x in open(sys.argv[1]).read().split()]
b = [int(x) for x in open(sys.argv[2]).read().split()]
ma, mb = statistics.median(a), statistics.median(b)
print("0 clients: %s  median %.0f" % (a, ma))
print("20 clients: %s  median %.0f  drop %.1f%%" % (b, mb, 100 * (1 - mb / ma)))
print(json.dumps({"bench": "sse_impact", "samples_per_s_0": ma, "samples_per_s_20": mb,
                  "drop_pct": round(100 * (1 - mb / ma), 2)}))
PY

echo "== GET /api/v1/status with wrk -t2 -c50 -d10s while training =="
wrk -t2 -c50 -d10s "$URL/api/v1/status" | tee "$tmp/wrk.txt"
rps=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$tmp/wrk.txt")
echo "{\"bench\": \"http_status\", \"requests_per_s\": ${rps:-0}}"
kill -TERM $PID; wait $PID 2>/dev/null
