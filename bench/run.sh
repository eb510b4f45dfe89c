#!/bin/sh
# make bench: the engine's throughput next to the PyTorch peer, measured in
# the same run, interleaved (engine, peer, engine, peer, ...) so that a noisy
# neighbour hurts both; medians and ratios at the end.
#   bench/run.sh BUILD_DIR        (ROUNDS=3 SECONDS_PER=4 by default;
#                                 PEER_CHECK_ONLY=1: only the peer check)
# The GPT's part is bench/gpt.sh, which runs alone too.
# The peer is bench/peers/torch_fmnist.py (PEER=path to override); it needs
# python3-torch and python3-numpy, installed here if missing (as root); without
# them the engine's figures come alone, with a line that says how to get them.
build=${1:-build}
SL=$build/stalelab
ROUNDS=${ROUNDS:-3}
SECONDS_PER=${SECONDS_PER:-4}
PEER=${PEER:-bench/peers/torch_fmnist.py}
out=${BENCH_OUT:-$build/bench}
mkdir -p "$out"

have_peer=1
if [ ! -f "$PEER" ]; then
	echo "bench: no PyTorch peer at $PEER: engine figures only."
	echo "bench: the peer is bench/peers/torch_fmnist.py in the source tree; run make bench"
	echo "bench: from there, or give its path: make bench PEER=/path/to/torch_fmnist.py"
	have_peer=0
elif ! /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null; then
	echo "bench: installing python3-torch python3-numpy for the PyTorch peer"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch python3-numpy >/dev/null 2>&1 ||
		{ echo "bench: could not install the peer's packages: engine figures only."
		  echo "bench: to compare with PyTorch, install them (as root) and run make bench again:"
		  echo "bench:   apt-get install python3-torch python3-numpy"
		  have_peer=0; }
fi

# PEER_CHECK_ONLY=1: say whether the peer is there (and how to get it), no more
[ -n "$PEER_CHECK_ONLY" ] && { [ $have_peer = 1 ] && echo "bench: peer $PEER ready"; exit 0; }

# the server's optimisers against torch.optim on test_optim's tiny case:
# this machine's torch, now, against the steps test_optim pins

if [ $have_peer = 1 ]; then
	echo "== optimisers: torch.optim now against tests/fixtures/optim/torch.json =="
	/usr/bin/python3 bench/peers/torch_optim.py >"$out/torch_optim.json" &&
	/usr/bin/python3 - "$out/torch_optim.json" tests/fixtures/optim/torch.json <<'PY'
import json, sys
now, kept = (json.load(open(p)) for p in sys.argv[1:3])
for k in ("adamw", "adam", "nesterov", "clip"):
    d = max(abs(a - b) for sa, sb in zip(now[k], kept[k]) for a, b in zip(sa, sb))
    print("%-9s torch %s against the fixture's (torch %s): largest difference %.3g"
          " (test_optim holds the server within 1e-6 of the fixture)"
          % (k, now["torch"], kept["torch"], d))
PY
fi

echo "== engine: one worker, all cores (stalelab bench) =="
"$SL" bench -S "$SECONDS_PER" -L -A | tee "$out/engine-layers.txt" | grep -v '^{'

: >"$out/engine.jsonl"
: >"$out/peer.jsonl"
for r in $(seq 1 "$ROUNDS"); do
	for m in mlp cnn; do
		spec=mlp:784-256-128-10; [ $m = cnn ] && spec=lenet5
		"$SL" bench -m "$spec" -S "$SECONDS_PER" -A | grep '^{' >>"$out/engine.jsonl"
		if [ $have_peer = 1 ]; then
			for mode in single hogwild; do
				/usr/bin/python3 "$PEER" --model $m --mode $mode --epochs 1 \
					--eval-every 0 --quiet >>"$out/peer.jsonl" 2>/dev/null ||
					echo "bench: peer $m $mode failed"
			done
		fi
	done
	# ResNet-20 (28x28x1, batch norm, option-A shortcuts): one worker on
	# every core against the PyTorch twin on 3200 samples of an epoch
	"$SL" bench -m resnet20 -S "$SECONDS_PER" -A | grep '^{' >>"$out/engine.jsonl"
	if [ $have_peer = 1 ]; then
		/usr/bin/python3 "$PEER" --model resnet20 --mode single --epochs 1 --samples 3200 \
			--eval-every 0 --quiet >>"$out/peer.jsonl" 2>/dev/null || echo "bench: peer resnet20 failed"
	fi
done

/usr/bin/python3 - "$out/engine.jsonl" "$out/peer.jsonl" <<'PY'
import json, statistics, sys
allrec = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
eng = [r for r in allrec if r["bench"] == "train"]
asy = [r for r in allrec if r["bench"] == "async"]
psr = [r for r in allrec if r["bench"] == "ps_apply"]
peer = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
def med(xs):
    return statistics.median(xs) if xs else float("nan")
print("\n== medians over %d rounds (samples/s) =="
      % max(1, sum(r["model"] == "mlp:784-256-128-10" for r in eng)))
print("one worker, all cores, vs PyTorch single process; asgd with 2 workers vs PyTorch hogwild x2")
print("%-22s %10s %10s %8s" % ("model", "stalelab", "torch", "ratio"))
for spec, m in (("mlp:784-256-128-10", "mlp"), ("lenet5", "cnn")):
    e = med([r["samples_per_s"] for r in eng if r["model"] == spec])
    s = med([r["samples_per_s_median"] for r in peer if r["model"] == m and r["mode"] == "single"])
    h = med([r["samples_per_s_median"] for r in peer if r["model"] == m and r["mode"] == "hogwild"])
    a2 = med([r["samples_per_s"] for r in asy if r["model"] == spec and r["workers"] == 2])
    print("%-22s %10.0f %10.0f %8.2f   asgd x2 %9.0f  torch hogwild x2 %9.0f  ratio %5.2f"
          % (spec, e, s, e / s if s == s else float("nan"), a2, h, a2 / h if h == h else float("nan")))
    for nw in (1, 2, 4):
        x = med([r["samples_per_s"] for r in asy if r["model"] == spec and r["workers"] == nw])
        u = med([r["updates_per_s"] for r in asy if r["model"] == spec and r["workers"] == nw])
        print("    asgd %d worker(s): %9.0f samples/s %8.0f updates/s" % (nw, x, u))
    p = med([r["updates_per_s"] for r in psr if r["model"] == spec])
    print("    parameter server apply alone: %.0f updates/s" % p)
    # ratios of the pairs measured in the same round (robust to a noisy
    # neighbour that slows one round down)
    es = [r["samples_per_s"] for r in eng if r["model"] == spec]
    ss = [r["samples_per_s_median"] for r in peer if r["model"] == m and r["mode"] == "single"]
    a2s = [r["samples_per_s"] for r in asy if r["model"] == spec and r["workers"] == 2]
    hs = [r["samples_per_s_median"] for r in peer if r["model"] == m and r["mode"] == "hogwild"]
    rs = [x / y for x, y in zip(es, ss)]
    rh = [x / y for x, y in zip(a2s, hs)]
    if rs:
        print("    per-round ratios single %s (median %.2f); hogwild %s (median %.2f)"
              % (["%.2f" % x for x in rs], med(rs), ["%.2f" % x for x in rh], med(rh)))
    print(json.dumps({"bench": "vs_peer", "model": spec, "stalelab": round(e, 1),
                      "torch_single": s, "ratio_single": round(e / s, 3) if s == s else None,
                      "asgd_2w": round(a2, 1), "torch_hogwild": h,
                      "ratio_hogwild": round(a2 / h, 3) if h == h else None}))
es = [r["samples_per_s"] for r in eng if r["model"] == "resnet20"]
ss = [r["samples_per_s_median"] for r in peer if r["model"] == "resnet20"]
e, sp = med(es), med(ss)
rs = [x / y for x, y in zip(es, ss)]
print("%-22s %10.0f %10.0f %8.2f   per-round ratios %s"
      % ("resnet20 (28x28x1)", e, sp, e / sp if sp == sp else float("nan"), ["%.2f" % x for x in rs]))
print(json.dumps({"bench": "vs_peer", "model": "resnet20", "stalelab": round(e, 1),
                  "torch_single": sp, "ratio_single": round(e / sp, 3) if sp == sp else None}))
# the engine's overhead over the bare step: asgd with one worker through
# the whole engine against model_step alone, each round's pair; over the
# whole run and over its last seconds (without the workers' start)
print("\nthe engine's overhead: asgd, 1 worker, against the bare step (1 - ratio; target 5%)")
for spec in ("mlp:784-256-128-10", "lenet5", "resnet20"):
    b = [r["samples_per_s"] for r in eng if r["model"] == spec]
    a1 = [r for r in asy if r["model"] == spec and r["workers"] == 1]
    whole = [1 - x["samples_per_s"] / y for x, y in zip(a1, b)]
    steady = [1 - x["samples_per_s_steady"] / y for x, y in zip(a1, b)
              if x.get("samples_per_s_steady")] or [float("nan")]
    if whole:
        print("    %-20s whole run %5.1f%% (rounds %s), last seconds %5.1f%% (rounds %s)"
              % (spec, 100 * med(whole), ", ".join("%.1f" % (100 * x) for x in whole),
                 100 * med(steady), ", ".join("%.1f" % (100 * x) for x in steady)))
        print(json.dumps({"bench": "overhead", "model": spec, "whole": round(med(whole), 4),
                          "steady": round(med(steady), 4)}))
PY

echo
sh bench/gpt.sh "$build"
echo
echo "== our kernels' instruction-set clones, each forced (bench/isa.sh) =="
ROUNDS=$ROUNDS sh bench/isa.sh "$build"

echo
echo "== the daemon under load =="
sh bench/http.sh "$build" | tee "$out/http.txt"

echo
echo "== the daemon's answers while it trains flat out, a busy loop per core beside it =="
echo "(tests/integration/latency.py: 300 mixed requests, HTTP and bus, then SIGTERM)"
: >"$out/latency.jsonl"; : >"$out/latency.txt"
for clock in virtual wall; do
	python3 tests/integration/latency.py "$SL" --clock "$clock" --workers 2 --eval-every 50 \
		--requests 300 --bound 2 | tee -a "$out/latency.txt" | grep -v '^{'
	grep '^{' "$out/latency.txt" | tail -n 1 >>"$out/latency.jsonl"
done
python3 - "$out/latency.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print("%-8s clock: p50 %6.1f ms  p99 %6.1f ms  max %6.1f ms  SIGTERM to exit %5.0f ms  (%d requests)"
          % (r["clock"], r["p50_ms"], r["p99_ms"], r["max_ms"], r["exit_ms"], r["requests"]))
PY

echo
echo "== remote workers on loopback against in-process ones (bench/remote.py) =="
python3 bench/remote.py "$SL" --rounds "${ROUNDS:-3}" --seconds 5
echo
echo "== the virtual clock against real links (bench/vclock.py; as root with network namespaces) =="
python3 bench/vclock.py "$SL" --rounds "${ROUNDS:-3}" --seconds 15
echo
echo "== the cluster simulator's speed (bench/cluster.sh) =="
sh bench/cluster.sh "$build"
echo
echo "== the sweep runner: 100 cells of 10 updates each (bench/configs/sweep-tiny.json) =="
for j in 1 2; do
	rm -rf "$out/sweep-tiny-$j"
	t0=$(date +%s.%N)
	"$SL" sweep bench/configs/sweep-tiny.json --out "$out/sweep-tiny-$j" --jobs "$j" --quiet
	t1=$(date +%s.%N)
	python3 -c 'import json, sys; s = float(sys.argv[2]) - float(sys.argv[1]); j = int(sys.argv[3])
print("--jobs %d: %.2f s, %.1f cells/s, %.1f ms of wall time per cell" % (j, s, 100 / s, 1000 * s / 100))
print(json.dumps({"bench": "sweep_overhead", "jobs": j, "cells": 100, "seconds": round(s, 3),
                  "cells_per_s": round(100 / s, 1)}))' "$t0" "$t1" "$j"
done
