#!/bin/sh
# The Python client (clients/python/stalelab.py, issue 29) against a live
# daemon: every method, its answers checked on values that could be wrong
# (a rule switched and status saying so, the SSE iterator yielding the
# snapshot and the change, Prometheus parsed, a checkpoint resumed, an
# example file started, a run diverged and recovered, earlier runs, sweeps
# and simulations), errors raised as exceptions carrying the server's
# message (the field named), the token sent (from the argument, the
# environment or a file) and its absence a 401. The checks are in
# clients/python/test_stalelab.py; pydoc reads the module.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: the Python client"

py=clients/python
export PYTHONDONTWRITEBYTECODE=1 # no __pycache__ left in the tree
out=$(python3 -m pydoc "$py/stalelab.py" 2>&1)
expect_grep 'class Client' "pydoc reads the module" "$out"
expect_grep 'events\(self, hz=None' "pydoc: the methods, with their signatures" "$out"
expect_grep 'GET +/api/v1/events\?hz=H +events\(hz\)' "pydoc: the endpoints' table" "$out"
out=$(python3 - "$py" <<'PY' 2>&1
import inspect, sys
sys.path.insert(0, sys.argv[1])
import stalelab
doc = open("docs/api.md").read()
names = [n for n, f in inspect.getmembers(stalelab.Client, inspect.isfunction) if not n.startswith("_")]
print("missing:", [n for n in names + ["parse_prometheus"] if n + "(" not in doc] or "none")
PY
)
expect_grep '^missing: none$' "docs/api.md shows every method of the client" "$out"
out=$(cd "$py" && python3 -c 'import stalelab; print(stalelab.Client("http://h:1/"))' 2>&1)
expect_grep "^stalelab.Client\('http://h:1'\)$" "import stalelab from its directory" "$out"

# a sweep and a cluster simulation to serve
cat >"$TMP/tiny.json" <<'JSON'
{"model": "mlp:784-16-10", "dataset": "synthetic:1000", "batch": 16, "eval_every": 0,
 "rule": ["ssgd", "asgd"], "workers": 2, "stop": {"steps": 10}}
JSON
mkdir -p "$TMP/sweeps" "$TMP/sims" "$TMP/ck"
expect_exit 0 "a sweep to serve" "$SL" sweep "$TMP/tiny.json" --out "$TMP/sweeps/tiny" --jobs 1
mkdir -p "$TMP/sweeps/tiny/figures"
printf '<svg xmlns="http://www.w3.org/2000/svg"/>\n' >"$TMP/sweeps/tiny/figures/loss.svg"
expect_exit 0 "a simulation to serve" "$SL" cluster -t tests/fixtures/cluster/t3-jobs.csv \
	-p tests/fixtures/cluster/t3-profiles.csv -g 2 -m 16 -o "$TMP/sims/t3"

cat >"$TMP/run.json" <<'JSON'
{"model": "mlp:784-32-10", "dataset": "synthetic:6000", "lr": 0.01, "batch": 16,
 "workers": 3, "threads": 1, "eval_every": 100, "delay": {"dist": "uniform", "mean_ms": 2}}
JSON
printf 'py-s3cret\n' >"$TMP/token"
start --bus none --workers-listen none --config "$TMP/run.json" --token-file "$TMP/token" \
	--checkpoint-dir "$TMP/ck" --sweeps "$TMP/sweeps" --clusters "$TMP/sims"
[ -n "$port" ] && ok "daemon listens" || bad "daemon listens" "$(cat "$TMP/serve.err")"

env -u STALELAB_TOKEN -u STALELAB_URL timeout 120 \
	python3 "$py/test_stalelab.py" "$URL" py-s3cret "$TMP/ck" "$TMP/token" >"$TMP/py.log" 2>&1
rc=$?
cat "$TMP/py.log"
PASS=$((PASS + $(grep -c '^  ok ' "$TMP/py.log")))
FAIL=$((FAIL + $(grep -c '^  FAIL ' "$TMP/py.log")))
[ "$rc" -ne 0 ] && bad "test_stalelab.py exited $rc"

kill -TERM "$PID"; wait "$PID"
finish pyclient
