#!/bin/sh
# The soak: one daemon for SOAK_SECONDS (default 600) under HTTP load (wrk on
# the read endpoints and the dashboard), 20 Server-Sent Events clients, bus
# subscribers (when `stalelab serve --help` lists --bus), a worker-count
# change every SOAK_CHANGE seconds (default 5), remote workers (`stalelab
# worker`) joining and leaving, one a cycle (SIGTERM and SIGKILL in turn,
# when serve --help lists --workers-listen); RSS, threads and training
# samples/s sampled every 10 s. Prints the samples, a summary and a verdict:
# RSS flat after warm-up (the last third at most 10% + 8 MiB over the
# level after warm-up), no unexpected error (HTTP non-2xx or socket errors,
# an event stream ended or silent, a bus silent, a refused change, a log
# line that is not JSON), training samples/s at the end within 10% of the
# start (over whole cycles of worker counts). Not part of `make test`.
#   bench/soak.sh [BUILD_DIR]
# Environment: SOAK_SECONDS, SOAK_CHANGE, SOAK_WARMUP (default a quarter of
# the run, 30 to 60 s), SOAK_CONFIG (a run object; default:
# serve's own run), SOAK_WRK (wrk's load flags, default "-t2 -c20"),
# SOAK_SSE (20), SOAK_BUS_SUBS (5). Exit status 0 on PASS, 1 on FAIL.
build=${1:-build}
SL=$build/stalelab
SECONDS_=${SOAK_SECONDS:-600}
WRK_FLAGS=${SOAK_WRK:--t2 -c20}
here=$(dirname "$0")

[ -x "$SL" ] || { echo "soak: no $SL (make first)"; exit 2; }
if ! command -v wrk >/dev/null 2>&1; then
	echo "soak: installing wrk"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null 2>&1; }
fi
command -v wrk >/dev/null 2>&1 || { echo "soak: wrk is missing (apt-get install wrk)"; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/soak.XXXXXX")
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; rm -rf "$tmp"' EXIT

# the bus, when this build has one: a PUB port with its REP sibling free
bus=
if "$SL" serve --help | grep -q -- '--bus'; then
	bport=$(python3 -c '
import socket
for p in range(20000, 60000, 2):
    s1, s2 = socket.socket(), socket.socket()
    try:
        s1.bind(("127.0.0.1", p)); s2.bind(("127.0.0.1", p + 1))
    except OSError:
        continue
    finally:
        s1.close(); s2.close()
    print(p); break')
	bus=tcp://127.0.0.1:$bport
fi

wurl=
if "$SL" serve --help | grep -q -- '--workers-listen'; then
	wport=$(python3 -c '
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
	wurl=tcp://127.0.0.1:$wport
fi

set --
[ -n "$SOAK_CONFIG" ] && set -- --config "$SOAK_CONFIG"
[ -n "$bus" ] && set -- "$@" --bus "$bus"
[ -n "$wurl" ] && set -- "$@" --workers-listen "$wurl"
"$SL" serve --listen 127.0.0.1:0 --quiet --log "$tmp/soak.jsonl" "$@" 2>"$tmp/err" &
PID=$!
i=0
while [ $i -lt 300 ] && ! grep -q 'listening on http' "$tmp/err" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$tmp/err")
[ -n "$port" ] || { echo "soak: the daemon did not start:"; cat "$tmp/err"; exit 2; }
URL=http://127.0.0.1:$port
echo "soak: $SECONDS_ s against $URL (pid $PID)${bus:+, bus $bus}${wurl:+, remote workers on $wurl}; wrk $WRK_FLAGS"

cat >"$tmp/paths.lua" <<'LUA'
-- the read endpoints and the dashboard, in turn
local paths = {"/api/v1/status", "/metrics", "/api/v1/staleness", "/api/v1/workers", "/"}
local i = 0
request = function()
	i = i % #paths + 1
	return wrk.format("GET", paths[i])
end
LUA
# shellcheck disable=SC2086
wrk $WRK_FLAGS -d"$((SECONDS_ + 60))s" --timeout 5s -s "$tmp/paths.lua" "$URL" >"$tmp/wrk.txt" 2>&1 &
WRK=$!
# soak.py stops wrk (SIGINT: it prints its figures) when the time is up
SOAK_WRK_PID=$WRK SOAK_WORKERS_URL=$wurl SOAK_BIN=$SL python3 "$here/soak.py" "$URL" "$PID" "$SECONDS_" "$tmp/wrk.txt" "$tmp/soak.jsonl" $bus
rc=$?
wait $WRK
kill -TERM $PID; wait $PID; src=$?
PID=
if [ $src -ne 0 ]; then
	echo "soak: the daemon exited $src on SIGTERM"; rc=1
fi
if grep -qiE 'error|fail|warning' "$tmp/err"; then
	echo "soak: the daemon's stderr:"; cat "$tmp/err"
fi
exit $rc
