#!/bin/sh
# The async engine on Fashion-MNIST (MLP, virtual clock, 8 workers, exp
# delays of mean 20 ms): best test accuracy within 3 epochs per rule, with
# the staleness it saw. Configs in bench/configs/fmnist-8w-*.json.
#   bench/async_accuracy.sh BUILD_DIR
build=${1:-build}
out=${BENCH_OUT:-$build/bench}
mkdir -p "$out"
for r in ssgd asgd odsgd dcasgd; do
	"$build/stalelab" run --config "bench/configs/fmnist-8w-$r.json" --quiet \
		--log "$out/async-$r.jsonl" || echo "bench: $r failed"
done
/usr/bin/python3 - "$out" <<'PY'
import json, os, sys
print("%-8s %9s %9s %8s %8s %8s" % ("rule", "best_acc", "final", "updates", "tau_mean", "tau_max"))
for r in ("ssgd", "asgd", "odsgd", "dcasgd"):
    recs = [json.loads(l) for l in open(os.path.join(sys.argv[1], "async-%s.jsonl" % r))]
    end = recs[-1]
    s = end["staleness"]
    print("%-8s %9.4f %9.4f %8d %8.2f %8d" % (r, end["best_acc"], end["test_acc"], end["v"], s["mean"], s["max"]))
PY
