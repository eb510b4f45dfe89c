#!/bin/sh
# Integration tests of the backend registry as a user meets it: --device
# names and refusals, the device the log and /status report (auto
# resolved), and the reference backend: two virtual-clock runs write the
# same log, and it trains like the cpu backend.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: backends"

expect_exit 0 "run --help" "$SL" run --help
expect_grep 'auto \| cpu \| ref \| cuda' "run --help lists the devices" "$LAST_OUT"
expect_exit 2 "unknown device" "$SL" run --device tpu --dataset synthetic:100
expect_grep 'device: unknown "tpu" \(expected auto, cuda, cpu, ref[;)]' "unknown device lists the names" "$LAST_OUT"
# cuda where it cannot run (no plugin, no driver, no device): exit 2 and
# the reason in words; where a GPU answers, it trains
why='device: cuda: (no NVIDIA driver|stalelab-cuda\.so is not installed|the NVIDIA driver .* is older|no CUDA device visible)'
if "$SL" run --device cuda -m logreg --dataset synthetic:100 --steps 2 -l /dev/null >/dev/null 2>&1; then
	ok "cuda runs on this machine's GPU"
else
	expect_exit 2 "cuda cannot run here: exit 2" "$SL" run --device cuda --dataset synthetic:100
	expect_grep "$why" "cuda refusal says why" "$LAST_OUT"
	printf '{"device": "cuda", "dataset": "synthetic:100"}' >"$TMP/cuda.json"
	expect_exit 2 "cuda in a config" "$SL" run --config "$TMP/cuda.json"
	expect_grep "$why" "config cuda refusal says why" "$LAST_OUT"
	expect_exit 0 "auto falls back and trains" "$SL" run -m logreg --dataset synthetic:100 --steps 2 -l /dev/null
	expect_grep 'device auto: cuda: .*; using cpu' "auto says why it passed cuda over" "$LAST_OUT"
fi

# One short virtual run per device; ref twice.
run() { # DEVICE LOG
	"$SL" run --device "$1" --model mlp:784-32-10 --dataset synthetic:2000 \
		--clock virtual --workers 2 --steps 200 --eval-every 50 --quiet --log "$2"
}
expect_exit 0 "ref run" run ref "$TMP/ref1.jsonl"
expect_exit 0 "ref run again" run ref "$TMP/ref2.jsonl"
expect_exit 0 "cpu run" run cpu "$TMP/cpu.jsonl"
expect_exit 0 "auto run" run auto "$TMP/auto.jsonl"
check=$(python3 - "$TMP" <<'PY'
import json, sys
d = sys.argv[1]
def load(name):
    return [json.loads(l) for l in open(f"{d}/{name}.jsonl")]
def strip(rec):
    # the fields that measure the machine itself
    return {k: v for k, v in rec.items()
            if not (k.endswith("_per_s") or k == "train_s" or k.startswith("wall_"))}
ref1, ref2, cpu, auto = load("ref1"), load("ref2"), load("cpu"), load("auto")
assert [strip(r) for r in ref1] == [strip(r) for r in ref2], "ref logs differ"
assert ref1[0]["device"] == "ref" and cpu[0]["device"] == "cpu", (ref1[0], cpu[0])
assert auto[0]["device"] == "cpu", auto[0]
evr = [r for r in ref1[1:] if "event" not in r]
evc = [r for r in cpu[1:] if "event" not in r]
vs = [r["v"] for r in evr]
assert vs == [r["v"] for r in evc] and {50, 100, 150, 200} <= set(vs), vs
for a, b in zip(evr, evc):
    assert abs(a["train_loss"] - b["train_loss"]) <= 1e-3 * b["train_loss"], (a, b)
    assert abs(a["test_acc"] - b["test_acc"]) <= 0.01, (a, b)
end = ref1[-1]
assert end["event"] == "end" and end["test_acc"] > 0.9, end
assert evr[-1]["train_loss"] < 0.5 * evr[0]["train_loss"], evr
print("backend-ok", evr[0]["train_loss"], evr[-1]["train_loss"], end["test_acc"])
PY
)
expect_grep '^backend-ok' "ref: identical logs twice, trains like cpu" "$check"

# /status reports the opened backend, the config what was asked for.
printf '{"model": "mlp:784-32-10", "dataset": "synthetic:500", "workers": 1}' >"$TMP/small.json"
serve_device() { # SERVE-FLAGS... -> prints "DEVICE CONFIG.DEVICE" from /status
	"$SL" serve --listen 127.0.0.1:0 --quiet --config "$TMP/small.json" "$@" 2>"$TMP/serve.err" &
	pid=$!
	wait_until 60 grep -q 'listening on http://127.0.0.1:' "$TMP/serve.err"
	port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$TMP/serve.err")
	curl -s "http://127.0.0.1:$port/api/v1/status" | python3 -c \
		'import json,sys; d=json.load(sys.stdin); print(d["device"], d["config"]["device"])'
	kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
}
expect_grep '^ref ref$' "/status: device from the opened backend" "$(serve_device --device ref)"
expect_grep '^cpu auto$' "/status: auto resolved to cpu" "$(serve_device)"

# Layering: only the backends' own files (engine/nn/backend*.c) include a
# backend's headers (BLAS, CUDA, the registry's backend_impl.h), and no
# code outside them tells backends apart by name.
root=$(cd "$(dirname "$0")/../.." && pwd)
leaks=$(cd "$root" && grep -lE '#include [<"](cblas|cublas|cuda[a-z_]*|backend_impl)\.h' \
	engine/*/*.c engine/*/*.h engine/ps/rules/*.c engine/nn/ops/*.c daemon/*.c daemon/*/*.c daemon/*/*.h tests/*.c 2>/dev/null |
	grep -vE '^engine/nn/backend[a-z_]*\.(c|h)$')
[ -z "$leaks" ] && ok "backend headers stay in engine/nn/backend*.c" || bad "backend headers included by" "$leaks"
# CUDA lives in engine/cuda/ alone: no CUDA header, conditional or call elsewhere
cuda=$(cd "$root" && grep -nE '__CUDACC__|#if.*CUDA|cuda_runtime|cudaMalloc|cublas' \
	engine/*/*.c engine/*/*.h engine/ps/rules/*.c engine/nn/ops/*.c daemon/*.c daemon/*/*.c daemon/*/*.h tui/*.c Makefile.inc 2>/dev/null)
[ -z "$cuda" ] && ok "no CUDA outside engine/cuda/" || bad "CUDA outside engine/cuda/" "$cuda"
names=$(cd "$root" && grep -nE 'strcmp\([^)]*(ops->name|backend_name)' engine/*/*.c engine/ps/rules/*.c engine/nn/ops/*.c daemon/*.c daemon/*/*.c |
	grep -vE '^engine/nn/backend[a-z_]*\.c:')
[ -z "$names" ] && ok "no code outside the backends tests a backend's name" || bad "backend name tested in" "$names"

finish backends
