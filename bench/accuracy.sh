#!/bin/sh
# Accuracy next to the PyTorch peer on the same settings (plain SGD, lr 0.05,
# batch 64, seed 1): test accuracy at each epoch end for the MLP and
# LeNet-5, 5 epochs each.   bench/accuracy.sh BUILD_DIR
build=${1:-build}
SL=$build/stalelab
PEER=${PEER:-bench/peers/torch_fmnist.py}
EPOCHS=${EPOCHS:-5}
out=${BENCH_OUT:-$build/bench}
mkdir -p "$out"
for m in mlp cnn; do
	spec=mlp:784-256-128-10; [ $m = cnn ] && spec=lenet5
	"$SL" run --model "$spec" --epochs "$EPOCHS" --eval-every 0 --lr 0.05 \
		--batch 64 --seed 1 --quiet --log "$out/acc-$m.jsonl"
	[ -f "$PEER" ] && /usr/bin/python3 "$PEER" --model $m --mode single \
		--epochs "$EPOCHS" --eval-every 0 --quiet >"$out/acc-peer-$m.json" 2>/dev/null
done
/usr/bin/python3 - "$out" <<'PY'
import json, os, sys
d = sys.argv[1]
print("%-6s %-8s %s" % ("model", "who", "test accuracy at epochs 1..N"))
for m in ("mlp", "cnn"):
    ours = [r["test_acc"] for r in map(json.loads, open(os.path.join(d, "acc-%s.jsonl" % m)))
            if "test_acc" in r and "event" not in r]
    print("%-6s %-8s %s  best %.4f" % (m, "stalelab", " ".join("%.4f" % a for a in ours), max(ours)))
    p = os.path.join(d, "acc-peer-%s.json" % m)
    if os.path.exists(p) and os.path.getsize(p):
        theirs = json.load(open(p))["test_acc_epochs"]
        print("%-6s %-8s %s  best %.4f" % (m, "torch", " ".join("%.4f" % a for a in theirs), max(theirs)))
PY
