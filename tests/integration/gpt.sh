#!/bin/sh
# A GPT in runs (issue 33, "every rule trains it"): every rule trains a
# small gpt on the synthetic text for a few virtual-clock updates with
# AdamW (hogwild, threads only, on the wall clock with sgd) to finite
# losses; a run is the same bits twice and resumed from a checkpoint.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: gpt"

base="--dataset synthetic-text:4000 --model gpt:L1-H2-E8-T8 --threads 1 --batch 8 --workers 2 -q"
rules=$("$SL" run --rule none-such --steps 1 -q 2>&1 | sed -n 's/.*(expected \(.*\))$/\1/p' | tr -d ,)
[ "$(echo $rules | wc -w)" -ge 10 ] && ok "the rules: $(echo $rules)" || bad "the rules" "$rules"
for r in $rules; do
	clock=virtual opt=adamw
	case $r in hogwild) clock=wall opt=sgd ;; esac
	log=$TMP/$r.jsonl
	out=$(timeout 60 "$SL" run $base --clock $clock --rule "$r" --optimizer $opt --lr 0.01 \
		--steps 6 --eval-every 3 --log "$log" 2>&1)
	rc=$?
	end=$(tail -n 1 "$log" 2>/dev/null)
	fin=$(python3 - "$log" <<'PY' 2>&1
import json, math, sys
recs = [json.loads(l) for l in open(sys.argv[1])][1:]
ev = [r for r in recs if "test_loss" in r]
assert ev, "no evaluation"
assert all(math.isfinite(r["test_loss"]) and r["test_loss"] > 0 for r in ev), ev
assert all(math.isfinite(r["train_loss"]) for r in ev if r["v"] > 0), ev
print("ok")
PY
)
	case "$rc $fin $end" in
	'0 ok'*'"event":"end"'*'"v":6,'*'"stop":"steps"'*) ok "$r trains gpt with $opt: 6 updates, finite losses" ;;
	*) bad "$r on gpt (exit $rc)" "$out
$fin
$end" ;;
	esac
done

# the same bits twice, and from a checkpoint (virtual clock, cpu, one thread)
for r in asgd localsgd; do
	printf '{"model": "gpt:L1-H2-E8-T8", "dataset": "synthetic-text:4000", "clock": "virtual", "threads": 1, "batch": 8, "workers": 2, "rule": "%s", "rule_params": {"H": 2}, "optimizer": "adamw", "lr": 0.01, "weight_decay": 0.05, "eval_every": 4, "schedule": [{"at": {"v": 6}, "set": {"checkpoint": "%s"}}]}' \
		"$r" "$TMP/$r.ckpt" >"$TMP/$r.json"
	"$SL" run -c "$TMP/$r.json" --steps 12 -q --log "$TMP/$r-a.jsonl"
	"$SL" run -c "$TMP/$r.json" --steps 12 -q --log "$TMP/$r-b.jsonl"
	"$SL" run --resume "$TMP/$r.ckpt" --steps 12 -q --log "$TMP/$r-c.jsonl"
	hash() { tail -n 1 "$1" | grep -o '"weights":"[0-9a-f]*"'; }
	a=$(hash "$TMP/$r-a.jsonl") b=$(hash "$TMP/$r-b.jsonl") c=$(hash "$TMP/$r-c.jsonl")
	[ -n "$a" ] && [ "$a" = "$b" ] && ok "$r, gpt twice: the same weights ($a)" || bad "$r twice" "$a against $b"
	[ -n "$a" ] && [ "$a" = "$c" ] && ok "$r, gpt resumed from v 6: the uninterrupted run's weights" ||
		bad "$r resumed" "$a against $c"
	out=$(python3 - "$TMP/$r-a.jsonl" "$TMP/$r-c.jsonl" <<'PY' 2>&1
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])][1:]
c = [json.loads(l) for l in open(sys.argv[2])][1:]
ka = {r["v"]: r.get("test_loss") for r in a if "test_loss" in r}
kc = {r["v"]: r.get("test_loss") for r in c if "test_loss" in r}
common = sorted(set(ka) & set(kc) - {0})
assert common and all(ka[v] == kc[v] for v in common), (ka, kc)
print("ok")
PY
)
	[ "$out" = ok ] && ok "... and the same held-out losses after it" || bad "$r evaluations after resume" "$out"
done
finish gpt
