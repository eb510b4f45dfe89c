#!/bin/sh
# Residual nets with batch norm in runs (issue 31): every rule trains a
# ResNet for a few virtual-clock updates on small data (hogwild, threads
# only, on the wall clock); a run is the same bits twice and resumed from
# a checkpoint; the evaluation's batch-norm statistics are recomputed at
# the server's weights, so an asynchronous run's accuracy is a real one;
# resnet20's size is He et al.'s.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: residual nets"

base="--dataset synthetic:300 --model resnet:8 --threads 1 --batch 16 --workers 2 -q"
rules=$("$SL" run --rule none-such --steps 1 -q 2>&1 | sed -n 's/.*(expected \(.*\))$/\1/p' | tr -d ,)
for r in $rules; do
	clock=virtual opt=adamw
	case $r in hogwild) clock=wall opt=sgd ;; esac
	log=$TMP/$r.jsonl
	out=$(timeout 120 "$SL" run $base --clock $clock --rule "$r" --optimizer $opt --lr 0.003 \
		--steps 4 --log "$log" 2>&1)
	rc=$?
	end=$(tail -n 1 "$log" 2>/dev/null)
	case "$rc $end" in
	0*'"event":"end"'*'"v":4,'*'"stop":"steps"'*) ok "$r trains resnet:8 with $opt: 4 updates" ;;
	*) bad "$r on resnet:8 (exit $rc)" "$out
$end" ;;
	esac
done

# the same bits twice, and from a checkpoint (virtual clock, cpu, one thread)
printf '{"model": "resnet:8", "dataset": "synthetic:600", "clock": "virtual", "threads": 1, "batch": 16, "workers": 2, "rule": "asgd", "optimizer": "adamw", "lr": 0.003, "weight_decay": 0.05, "eval_every": 4, "schedule": [{"at": {"v": 6}, "set": {"checkpoint": "%s"}}]}' \
	"$TMP/r.ckpt" >"$TMP/r.json"
"$SL" run -c "$TMP/r.json" --steps 12 -q --log "$TMP/a.jsonl"
"$SL" run -c "$TMP/r.json" --steps 12 -q --log "$TMP/b.jsonl"
"$SL" run --resume "$TMP/r.ckpt" --steps 12 -q --log "$TMP/c.jsonl"
hash() { tail -n 1 "$1" | grep -o '"weights":"[0-9a-f]*"'; }
a=$(hash "$TMP/a.jsonl") b=$(hash "$TMP/b.jsonl") c=$(hash "$TMP/c.jsonl")
[ -n "$a" ] && [ "$a" = "$b" ] && ok "resnet:8 twice: the same weights ($a)" || bad "twice" "$a against $b"
[ -n "$a" ] && [ "$a" = "$c" ] && ok "resnet:8 resumed from v 6: the uninterrupted run's weights" ||
	bad "resumed" "$a against $c"
out=$(python3 - "$TMP/a.jsonl" "$TMP/c.jsonl" <<'PY' 2>&1
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])][1:]
c = [json.loads(l) for l in open(sys.argv[2])][1:]
ka = {r["v"]: (r.get("test_acc"), r.get("test_loss")) for r in a}
kc = {r["v"]: (r.get("test_acc"), r.get("test_loss")) for r in c}
common = sorted(set(ka) & set(kc) - {0})
assert common and all(ka[v] == kc[v] for v in common), (ka, kc)
print("ok")
PY
)
[ "$out" = ok ] && ok "... and the same evaluations after it (batch-norm statistics from the weights)" ||
	bad "evaluations after resume" "$out"

# the evaluation's statistics are the server weights' own: two workers'
# asynchronous run on separable data reaches a real accuracy
expect_exit 0 "asgd, 2 workers, resnet:8, 60 updates" "$SL" run $base --clock virtual --rule asgd \
	--lr 0.05 --steps 60 --log "$TMP/acc.jsonl"
out=$(python3 - "$TMP/acc.jsonl" <<'PY' 2>&1
import json, sys
end = [json.loads(l) for l in open(sys.argv[1])][-1]
assert end["best_acc"] >= 0.8, end["best_acc"]
print("ok")
PY
)
[ "$out" = ok ] && ok "... its evaluated accuracy is >= 0.8" || bad "resnet:8 accuracy" "$out"

# resnet20's size and depth, as stalelab run reports them
expect_exit 0 "resnet20 starts" "$SL" run --dataset synthetic:200 --model resnet20 --clock virtual \
	--threads 1 --batch 8 --steps 1
expect_grep "model: [0-9]+ nodes, 269434 parameters in 39 layers" \
	"resnet20 on 28x28x1: 269434 parameters, 39 parameterised nodes" "$LAST_OUT"
expect_grep "model: spb_depth ends at a block boundary: 0 \(full backprop\), 1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 38$" \
	"... and the depths spb_depth takes: the head, each block's start, the stem's bn" "$LAST_OUT"
printf '{"model": "resnet:8", "dataset": "synthetic:200", "clock": "virtual", "threads": 1, "workers": 2, "worker_overrides": [{"id": 1, "spb_depth": 7}], "stop": {"steps": 1}}' >"$TMP/mid.json"
expect_exit 2 "a depth inside a block: refused" "$SL" run -c "$TMP/mid.json" -q
expect_grep 'worker_overrides\[0\]\.spb_depth: 7 ends inside a block of resnet:8: expected 0 \(full backprop\) or a block boundary: 1, 5, 9, 13, 14 \(the nearest: 5 and 9\)' \
	"... naming the field, the model and the depths" "$LAST_OUT"
expect_exit 2 "resnet:21: refused" "$SL" run --dataset synthetic:200 --model resnet:21 --steps 1
expect_grep "resnet:N with N = 6n \+ 2" "... naming the form" "$LAST_OUT"
finish resnet
