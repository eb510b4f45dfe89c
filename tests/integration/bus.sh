#!/bin/sh
# Integration tests of the nanomsg bus (docs/bus.md) with a real client
# (tests/integration/bus_client.py: ctypes on libnanomsg): snapshots and a
# change event on PUB; commands on REP answered as the HTTP API answers
# them; a 2 MiB and a malformed message answered with errors while the
# daemon goes on; a repeated request answered again, not applied twice
# (the same id on another request applied); the
# token; the flags' errors; a clean exit on SIGTERM.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
CLIENT="python3 $(dirname "$0")/bus_client.py"
echo "integration: the bus"

cat >"$TMP/run.json" <<'JSON'
{"model": "mlp:784-16-10", "dataset": "synthetic:6000", "lr": 0.01, "batch": 16,
 "workers": 3, "eval_every": 100, "delay": {"dist": "uniform", "mean_ms": 2}}
JSON

# two free TCP ports in a row (other worktrees run tests at the same time)
free_pair() {
	python3 -c '
import random, socket
for _ in range(200):
    p = random.randrange(20000, 60000)
    try:
        for q in (p, p + 1):
            s = socket.socket(); s.bind(("127.0.0.1", q)); s.close()
        print(p); break
    except OSError:
        pass'
}

BP=$(free_pair)
BUS=tcp://127.0.0.1:$BP
TOKEN=bus-s3cret
start --config "$TMP/run.json" --bus "$BUS" --token "$TOKEN"
[ -n "$port" ] && ok "daemon listens" || bad "daemon listens" "$(cat "$TMP/serve.err")"
grep -q "bus on $BUS (commands on tcp://127.0.0.1:$((BP + 1)))" "$TMP/serve.err" &&
	ok "says where the bus is" || bad "says where the bus is" "$(cat "$TMP/serve.err")"

# bus METHOD PATH [BODY [TOKEN [ID]]] -> the reply in $TMP/reply
bus() {
	python3 -c '
import json, sys
m, p, body, tok, rid = (sys.argv[1:] + ["", "", ""])[:5]
r = {"method": m, "path": p}
if body: r["body"] = json.loads(body)
if tok: r["token"] = tok
if rid: r["id"] = rid
sys.stdout.write(json.dumps(r))' "$@" | $CLIENT req "$BUS" 10 >"$TMP/reply" 2>"$TMP/client.err"
}
# curl_ METHOD PATH [BODY [TOKEN]] -> "STATUS" and the body in $TMP/body
curl_() {
	curl -s -o "$TMP/body" -w '%{http_code}' -X "$1" ${4:+-H "Authorization: Bearer $4"} \
		${3:+-H 'Content-Type: application/json' --data "$3"} "$URL$2"
}
# same NAME PYTHON-FILTER: the bus reply and the HTTP answer agree (status
# and body, both through the filter f(body) -> what must be equal)
same() {
	python3 - "$TMP/reply" "$TMP/body" "$code" "$2" <<'PY' && ok "$1" || bad "$1" "$(cat "$TMP/reply" "$TMP/body")"
import json, sys
r = json.load(open(sys.argv[1]))
h = json.load(open(sys.argv[2])) if open(sys.argv[2]).read().strip() else None
f = eval("lambda d: " + sys.argv[4])
ok = r["status"] == int(sys.argv[3]) and f(r["body"]) == f(h)
sys.exit(0 if ok else 1)
PY
}

# ---- PUB ----
# (the run's first snapshots may come before its workers start: wait for
# training, 60 s at most on a loaded machine)
wait_api 60 /api/v1/status 'd["version"] > 0' || bad "training starts within 60 s" "$(cat "$TMP/body")"
$CLIENT sub "$BUS" "snapshot " 3 30 >"$TMP/snaps" 2>"$TMP/sub.err" &&
	ok "PUB: three snapshots" || bad "PUB: three snapshots" "$(cat "$TMP/sub.err")"
python3 -c '
import json, sys
v = []
for line in open(sys.argv[1]):
    topic, _, data = line.partition(" ")
    d = json.loads(data)
    assert topic == "snapshot" and d["state"] == "running" and d["run"] == 1, line[:200]
    assert "staleness" in d and "workers" in d, line[:200]
    v.append(d["version"])
assert v == sorted(v) and v[-1] > v[0], v' "$TMP/snaps" 2>"$TMP/py.err" &&
	ok "PUB: snapshots are the SSE snapshot, and training advances" || bad "PUB: snapshot content" "$(cat "$TMP/py.err")"

$CLIENT sub "$BUS" "change " 1 60 "$TMP/subscribed" >"$TMP/change" 2>"$TMP/sub.err" &
SUB=$!
# the subscription is live (a first message came) before the change
wait_until 30 test -e "$TMP/subscribed"
bus PATCH /api/v1/workers/1 '{"delay": {"dist": "const", "mean_ms": 3}}' "$TOKEN"
wait $SUB && grep -q '^change {.*"worker":1,"set":{"delay":{"dist":"const","mean_ms":3' "$TMP/change" &&
	ok "PUB: the change event, as SSE's" || bad "PUB: the change event" "$(cat "$TMP/change" "$TMP/sub.err" "$TMP/reply")"

# ---- REP: the same answers as HTTP ----
code=$(curl_ PATCH /api/v1/workers/1 '{"delay": {"dist": "const", "mean_ms": 3}}' "$TOKEN")
same "REP: PATCH a worker's delay as HTTP" '(d["accepted"], d["applied"], d["change"]["set"], d["change"]["worker"])'
bus GET /api/v1/workers/1
code=$(curl_ GET /api/v1/workers/1)
same "REP: GET a worker as HTTP (its delay changed)" '(d["id"], d["delay"])'
grep -q '"delay":{"dist":"const","mean_ms":3' "$TMP/reply" && ok "REP: the delay is set" || bad "REP: the delay is set" "$(cat "$TMP/reply")"
bus GET /api/v1/status
code=$(curl_ GET /api/v1/status)
same "REP: GET status as HTTP" '(sorted(d), d["config"], d["run"])'
bus GET /api/v1/schema
code=$(curl_ GET /api/v1/schema)
same "REP: GET schema, the same JSON" 'd'
bus GET /api/v1/nowhere
code=$(curl_ GET /api/v1/nowhere)
same "REP: 404 as HTTP" 'd'
bus DELETE /api/v1/run "" "$TOKEN"
code=$(curl_ DELETE /api/v1/run "" "$TOKEN")
same "REP: 405 as HTTP" 'd'
grep -q '"allow":"GET, HEAD, POST, PATCH"' "$TMP/reply" && ok "REP: 405 says allow" || bad "REP: 405 allow" "$(cat "$TMP/reply")"
bus HEAD /api/v1/status
grep -q '^{"status":200,"body":null}$' "$TMP/reply" && ok "REP: HEAD: the status, no body" || bad "REP: HEAD" "$(cut -c1-300 "$TMP/reply")"
bus GET /metrics
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["status"] == 200 and r["type"].startswith("text/plain") and "stalelab_" in r["text"] and "body" not in r, r' \
	"$TMP/reply" 2>"$TMP/py.err" && ok "REP: /metrics as type and text" || bad "REP: /metrics" "$(cat "$TMP/py.err")"

# ---- the token ----
bus PATCH /api/v1/run '{"lr": 0.02}'
code=$(curl_ PATCH /api/v1/run '{"lr": 0.02}')
same "REP: a change without the token: 401 as HTTP" 'd'
grep -q '"status":401' "$TMP/reply" && ok "REP: 401" || bad "REP: 401" "$(cat "$TMP/reply")"
bus PATCH /api/v1/run '{"lr": 0.02}' wrong-token
grep -q '"status":401' "$TMP/reply" && ok "REP: a wrong token: 401" || bad "REP: wrong token" "$(cat "$TMP/reply")"
bus PATCH /api/v1/run '{"lr": 0.02}' "$TOKEN"
grep -q '"status":202' "$TMP/reply" && ok "REP: with the token: 202" || bad "REP: with the token" "$(cat "$TMP/reply")"

# ---- bad messages: an error reply each, and the daemon goes on ----
v0=$(curl -s "$URL/api/v1/status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
python3 -c 'import sys; sys.stdout.write("{\"id\": 1, \"pad\": \"" + "x" * (2 << 20) + "\"}")' |
	$CLIENT req "$BUS" 20 >"$TMP/reply" 2>"$TMP/client.err"
grep -q '^{"status":413,"body":{"error":{"code":"too_large","message":"request: 2097' "$TMP/reply" &&
	ok "REP: 2 MiB: 413" || bad "REP: 2 MiB" "$(cat "$TMP/reply" "$TMP/client.err")"
printf '{"method": "GET", "path": ' | $CLIENT req "$BUS" 10 >"$TMP/reply" 2>"$TMP/client.err"
grep -q '"status":400,"body":{"error":{"code":"bad_request","message":"request: not JSON' "$TMP/reply" &&
	ok "REP: malformed JSON: 400" || bad "REP: malformed" "$(cat "$TMP/reply" "$TMP/client.err")"
printf '{"id": "m1", "method": "GET", "path": 7}' | $CLIENT req "$BUS" 10 >"$TMP/reply" 2>"$TMP/client.err"
grep -q '{"status":400,"body":{"error":{"code":"bad_request","message":"path: expected a string"}},"id":"m1"}' "$TMP/reply" &&
	ok "REP: a wrong field: 400 naming it, the id echoed" || bad "REP: wrong field" "$(cat "$TMP/reply")"
# (asked again for up to 30 s: a loaded machine may take a while to step)
advanced() {
	bus GET /api/v1/status
	python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["status"] == 200 and r["body"]["version"] > int(sys.argv[2]), (r["status"], sys.argv[2])' \
		"$TMP/reply" "$v0" 2>"$TMP/py.err"
}
wait_until 30 advanced && ok "REP: serving on after them, training advances" || bad "REP: after bad messages" "$(cat "$TMP/py.err")"

# ---- a repeated id: the same reply, not applied twice ----
bus PATCH /api/v1/workers/2 '{"delay": {"dist": "const", "mean_ms": 4}}' "$TOKEN" dup-1
cp "$TMP/reply" "$TMP/first"
sleep 0.3
bus PATCH /api/v1/workers/2 '{"delay": {"dist": "const", "mean_ms": 4}}' "$TOKEN" dup-1
grep -q '"status":202' "$TMP/first" && cmp -s "$TMP/first" "$TMP/reply" &&
	ok "REP: a repeated id gets the same reply (the same t and v: applied once)" ||
	bad "REP: repeated id" "$(cat "$TMP/first" "$TMP/reply")"
# the same id on another request (a client counting from 1 again) is a
# new request: answered and applied (it once got the old reply)
bus PATCH /api/v1/workers/2 '{"delay": {"dist": "const", "mean_ms": 6}}' "$TOKEN" dup-1
i=0 # reads come from the run's snapshot, every 0.1 s
while [ $i -lt 20 ] && curl_ GET /api/v1/workers/2 >/dev/null && ! grep -q '"mean_ms":6' "$TMP/body"; do
	sleep 0.1; i=$((i + 1))
done
grep -q '"mean_ms":6' "$TMP/reply" && grep -q '"mean_ms":6' "$TMP/body" &&
	ok "REP: the same id on another request is answered and applied" ||
	bad "REP: same id, another request" "$(cat "$TMP/reply" "$TMP/body")"

# ---- flags ----
expect_exit 1 "--bus in use: exit 1" "$SL" serve --listen 127.0.0.1:0 --config "$TMP/run.json" --bus "$BUS"
expect_grep "--bus $BUS: cannot bind the event socket: address in use" "--bus in use is named" "$LAST_OUT"
expect_exit 2 "--bus port 0: exit 2" "$SL" serve --listen 127.0.0.1:0 --bus tcp://127.0.0.1:0
expect_grep '^stalelab serve: --bus tcp://127.0.0.1:0: port 0' "--bus port 0 is named" "$LAST_OUT"
expect_exit 2 "--bus bad URL: exit 2" "$SL" serve --listen 127.0.0.1:0 --bus http://x:1
expect_grep '^stalelab serve: --bus http://x:1: expected tcp://' "--bus bad URL is named" "$LAST_OUT"
expect_exit 2 "--bus localhost: exit 2" "$SL" serve --listen 127.0.0.1:0 --bus tcp://localhost:$BP
expect_grep "^stalelab serve: --bus tcp://localhost:$BP: no such address or interface here .*127.0.0.1, not localhost" "--bus localhost: what to give instead" "$LAST_OUT"
expect_exit 2 "--bus-hz 0: exit 2" "$SL" serve --bus-hz 0
expect_grep '--bus-hz: expected a number in \[0.1, 50\]' "--bus-hz is named" "$LAST_OUT"
expect_exit 2 "--bus none --bus-rep: exit 2" "$SL" serve --bus none --bus-rep tcp://127.0.0.1:9
expect_grep '--bus-rep: there is no bus with --bus none' "--bus-rep without a bus is named" "$LAST_OUT"
expect_exit 0 "serve --help" "$SL" serve --help
expect_grep '--bus URL' "--help lists --bus" "$LAST_OUT"

# ---- SIGTERM: exit 0, and the ports are free again ----
kill -TERM "$PID"; wait "$PID"; rc=$?
[ $rc -eq 0 ] && ok "SIGTERM: exit 0" || bad "SIGTERM: exit $rc" "$(tail -3 "$TMP/serve.err")"
python3 -c '
import socket, sys
for q in (int(sys.argv[1]), int(sys.argv[1]) + 1):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", q)); s.close()' "$BP" 2>"$TMP/py.err" &&
	ok "SIGTERM: the bus ports are free" || bad "bus ports after exit" "$(cat "$TMP/py.err")"

# ---- --bus none, ipc, --bus-hz, a snapshot with no run ----
start --config "$TMP/run.json" --bus none
grep -q 'bus on' "$TMP/serve.err" && bad "--bus none: no bus" "$(cat "$TMP/serve.err")" || ok "--bus none: no bus"
kill -TERM "$PID"; wait "$PID"
IPC=ipc://$TMP/bus
start --config "$TMP/run.json" --bus "$IPC" --bus-hz 20
grep -q "bus on $IPC (commands on $IPC.rep)" "$TMP/serve.err" && ok "ipc: the sibling is PATH.rep" || bad "ipc" "$(cat "$TMP/serve.err")"
# the rate from the times they came, the first to the twentieth (so the
# client's start and connection do not count): 0.95 s at 20 Hz, 4.75 s at
# the default 4 Hz
BUS_CLIENT_STAMP=1 $CLIENT sub "$IPC" "snapshot " 20 60 >"$TMP/stamped" 2>"$TMP/sub.err" &&
	ok "ipc: twenty snapshots" || bad "ipc: snapshots" "$(cat "$TMP/sub.err")"
span=$(awk 'NR == 1 { a = $1 } { b = $1 } END { printf "%.2f", b - a }' "$TMP/stamped")
[ "$(wc -l <"$TMP/stamped")" -eq 20 ] && awk -v s="$span" 'BEGIN { exit !(s < 3) }' &&
	ok "--bus-hz 20: twenty snapshots in $span s, well under the 4.75 s of 4 Hz" || bad "--bus-hz 20: twenty snapshots in $span s"
printf '{"method":"PATCH","path":"/api/v1/run","body":{"stop":true}}' | $CLIENT req "$IPC" 10 >"$TMP/reply" 2>&1
grep -q '"status":202' "$TMP/reply" && ok "ipc: a command answered" || bad "ipc: command" "$(cat "$TMP/reply")"
wait_api 30 /api/v1/status 'd["state"] == "finished"' || bad "ipc: the run finishes on stop" "$(cat "$TMP/body")"
# the heartbeat goes on when the run has finished
$CLIENT sub "$IPC" "snapshot " 10 30 | tail -n 1 >"$TMP/snaps" 2>"$TMP/sub.err"
grep -q '^snapshot {"state":"finished"' "$TMP/snaps" && ok "PUB: snapshots go on after the run finished" ||
	bad "PUB: snapshots after the end" "$(cut -c1-300 "$TMP/snaps")"
kill -TERM "$PID"; wait "$PID"; rc=$?
[ $rc -eq 0 ] && ok "ipc: SIGTERM: exit 0" || bad "ipc: exit $rc" "$(tail -3 "$TMP/serve.err")"

finish bus
