#!/bin/sh
# Integration test of a daemon that answers while it trains at full speed
# (issue 15): tests/integration/latency.py starts `stalelab serve` on a run
# that trains flat out, a busy loop per core beside it, sends a few hundred
# mixed requests (GET status, metrics, staleness, /metrics; PATCH run and
# worker; PUT workers; GET and PATCH over the bus), then SIGTERM. Each run
# prints its percentiles; a request over 2 s, an error status, a PATCH not
# applied, or an exit over 2 s fails it. (A virtual-clock daemon left a
# PATCH unanswered 10 s and more here: its loop took the run's lock back
# before a waiting handler could.)
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
LAT="python3 $(dirname "$0")/latency.py"
echo "integration: a daemon answers while it trains flat out, beside a busy loop per core"

lat() { # NAME ARGS...: one latency.py run, its table shown
	name=$1; shift
	$LAT "$SL" --bound 2 "$@" >"$TMP/lat.txt" 2>&1; code=$?
	grep -v '^{' "$TMP/lat.txt" | sed 's/^/    /'
	[ $code = 0 ] && ok "$name" || bad "$name" "$(grep -E 'FAIL|Error|error' "$TMP/lat.txt" | head -n 10)"
}
lat "virtual clock, 2 workers, eval_every 50: 300 requests under 2 s, exit under 2 s" \
	--clock virtual --workers 2 --eval-every 50 --requests 300
lat "virtual clock, 16 workers, eval_every 200: 120 requests under 2 s, exit under 2 s" \
	--clock virtual --workers 16 --eval-every 200 --requests 120
lat "virtual clock, LeNet-5, 1 worker, eval_every 20: 90 requests under 2 s, exit under 2 s" \
	--clock virtual --workers 1 --eval-every 20 --model lenet5 --requests 90
lat "wall clock, 4 workers, eval_every 50: 120 requests under 2 s, exit under 2 s" \
	--clock wall --workers 4 --eval-every 50 --requests 120
finish responsive
