#!/bin/sh
# The finished sweeps a daemon serves (stalelab serve --sweeps DIR, issue
# 16): GET /api/v1/sweeps, one sweep with its results and sweep file, its
# figures as SVG; names not in DIR refused; a DIR that is one sweep; bad
# --sweeps refused at start. Then the browser test of the Sweeps view and
# the live gradient-coherence chart (tests/browser/sweeps.mjs).
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: the dashboard's sweeps"

D=$TMP/sweeps
mkdir -p "$D"
cat >"$TMP/grid.json" <<'JSON'
{"model": "mlp:784-16-10", "dataset": "synthetic:2000", "batch": 16, "eval_every": 25,
 "rule": ["ssgd", "asgd"], "workers": 2, "stop": {"epochs": 0.5}, "seeds": 2}
JSON
cat >"$TMP/plain.json" <<'JSON'
{"model": "mlp:784-16-10", "dataset": "synthetic:2000", "batch": 16, "eval_every": 25,
 "workers": [1, 2], "stop": {"epochs": 0.3}}
JSON
cat >"$TMP/live.json" <<'JSON'
{"model": "mlp:784-16-10", "dataset": "synthetic:2000", "batch": 16, "workers": 3,
 "clock": "virtual", "eval_every": 40, "coherence_every": 10, "threads": 1,
 "delay": {"dist": "exp", "mean_ms": 5}}
JSON
expect_exit 0 "a sweep to show" "$SL" sweep "$TMP/grid.json" --out "$D/grid" --jobs 2
expect_exit 0 "its figures" "$SL" plot "$D/grid"
expect_exit 0 "a sweep without figures" "$SL" sweep "$TMP/plain.json" --out "$D/plain" --jobs 2
mkdir -p "$D/not-a-sweep" "$D/.hidden"

expect_exit 2 "--sweeps missing is refused" "$SL" serve --listen 127.0.0.1:0 --bus none --sweeps "$TMP/nope"
expect_grep "sweeps $TMP/nope: No such file" "--sweeps missing: named" "$LAST_OUT"
expect_exit 0 "serve --help names --sweeps" "$SL" serve --help
expect_grep 'sweeps DIR  ' "--help names --sweeps DIR" "$LAST_OUT"

start --bus none --sweeps "$D"
[ -n "$port" ] && ok "serve --sweeps starts" || bad "serve --sweeps starts" "$(cat "$TMP/serve.err")"
get() { curl -s -o "$TMP/body" -w '%{http_code} %{content_type}' "$@"; }
expect_grep '^200 application/json' "GET /api/v1/sweeps" "$(get "$URL/api/v1/sweeps")"
names=$(python3 -c 'import json,sys; print(",".join(s["name"] for s in json.load(open(sys.argv[1]))["sweeps"]))' "$TMP/body")
[ "$names" = "grid,plain" ] && ok "the list: the two sweeps, in name order" || bad "the list" "$names"
expect_grep '"cells":4' "the list: cells done" "$(cat "$TMP/body")"
expect_grep '"figures":\["accuracy.svg","loss.svg","staleness.svg"\]' "the list: figures" "$(cat "$TMP/body")"
expect_grep '^200 application/json' "GET /api/v1/sweeps/grid" "$(get "$URL/api/v1/sweeps/grid")"
out=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
r = d["results"]
print(d["spec"]["rule"], r["columns"][:3], len(r["rows"]), all(len(x) == len(r["columns"]) for x in r["rows"]))
' "$TMP/body")
expect_grep "^\['ssgd', 'asgd'\] \['cell', 'rule', 'seed'\] 4 True$" "one sweep: its file, results.csv as rows" "$out"
expect_grep '^200 image/svg\+xml' "a figure" "$(get "$URL/api/v1/sweeps/grid/figures/loss.svg")"
expect_grep '<svg' "a figure: SVG" "$(head -c 2000 "$TMP/body")"
expect_grep '^404 ' "a figure not drawn" "$(get "$URL/api/v1/sweeps/plain/figures/loss.svg")"
expect_grep '^404 ' "a sweep not in DIR" "$(get "$URL/api/v1/sweeps/not-a-sweep")"
expect_grep 'no sweep' "a sweep not in DIR: said" "$(cat "$TMP/body")"
expect_grep '^404 ' "a hidden name" "$(get "$URL/api/v1/sweeps/.hidden")"
expect_grep '^404 ' "an escaping name" "$(get --path-as-is "$URL/api/v1/sweeps/..%2F..%2Fetc")"
expect_grep '^404 ' "an escaping figure" "$(get --path-as-is "$URL/api/v1/sweeps/grid/figures/../sweep.json")"
expect_grep '^404 ' "not a figure" "$(get "$URL/api/v1/sweeps/grid/figures/loss.dat")"
expect_grep '^405 ' "read only" "$(get -X DELETE "$URL/api/v1/sweeps/grid")"
kill "$PID"; wait "$PID" 2>/dev/null

start --bus none --sweeps "$D/grid"
expect_grep '"name":"grid"' "DIR that is one sweep: listed by its name" "$(curl -s "$URL/api/v1/sweeps")"
expect_grep '^200 ' "DIR that is one sweep: opened" "$(get "$URL/api/v1/sweeps/grid")"
kill "$PID"; wait "$PID" 2>/dev/null
start --bus none
expect_grep '^404 ' "no --sweeps: 404" "$(get "$URL/api/v1/sweeps")"
expect_grep 'serve --sweeps DIR' "no --sweeps: how to" "$(cat "$TMP/body")"
kill "$PID"; wait "$PID" 2>/dev/null

out=$(dirname "$SL")/dashboard
browser_test 200 tests/browser/sweeps.mjs "$SL" "$D" "$out"
finish sweeps_view
