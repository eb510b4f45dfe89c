#!/bin/sh
# A GPT in runs (issue 33, "every rule trains it"): every rule trains a
# small gpt on the synthetic text for a few virtual-clock updates with
# AdamW (hogwild, threads only, on the wall clock with sgd) to finite
# losses; a run is the same bits twice and resumed from a checkpoint.
# On the cpu backend (--device cpu): auto's look for a GPU costs half a
# second a start.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: gpt"

base="--device cpu --dataset synthetic-text:4000 --model gpt:L1-H2-E8-T8 --threads 1 --batch 8 --workers 2 -q"
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
	printf '{"device": "cpu", "model": "gpt:L1-H2-E8-T8", "dataset": "synthetic-text:4000", "clock": "virtual", "threads": 1, "batch": 8, "workers": 2, "rule": "%s", "rule_params": {"H": 2}, "optimizer": "adamw", "lr": 0.01, "weight_decay": 0.05, "eval_every": 4, "schedule": [{"at": {"v": 6}, "set": {"checkpoint": "%s"}}]}' \
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
ka = {r["v"]: (r.get("test_loss"), r.get("sample")) for r in a if "test_loss" in r}
kc = {r["v"]: (r.get("test_loss"), r.get("sample")) for r in c if "test_loss" in r}
common = sorted(set(ka) & set(kc) - {0})
assert common and all(ka[v] == kc[v] for v in common), (ka, kc)
print("ok")
PY
)
	[ "$out" = ok ] && ok "... and the same held-out losses and samples after it" || bad "$r evaluations after resume" "$out"
done
# what a language-model run reports: the held-out loss per token, its
# perplexity exp(loss) and bits per byte loss / ln 2, named as such; an
# image run's log has neither
expect_exit 0 "a gpt run's progress" "$SL" run ${base% -q} --clock virtual --rule asgd --optimizer adamw \
	--lr 0.01 --steps 6 --eval-every 3 --log "$TMP/lm.jsonl"
expect_grep 'v 3  train_loss [0-9.]+  test_loss [0-9.]+  test_ppl [0-9.]+  test_bpb [0-9.]+  next_token_acc [0-9.]+  ' \
	"... says test_ppl, test_bpb and next_token_acc, not test_acc" "$LAST_OUT"
expect_grep 'done \(steps\): .* test_ppl [0-9.]+, test_bpb [0-9.]+, next_token_acc [0-9.]+ \(best ' \
	"... and so does its last line" "$LAST_OUT"
out=$(python3 - "$TMP/lm.jsonl" "$LAST_OUT" <<'PY' 2>&1
import json, math, re, sys
ev = [r for r in map(json.loads, open(sys.argv[1])) if "test_loss" in r]
assert len(ev) == 2, ev
for r in ev:
    # the sample: a start byte and 64 drawn, all of the chain's 16 symbols
    assert len(r["sample"]) == 65 and set(r["sample"]) <= set(" abcdefghijklmno"), r
    assert r["test_ppl"] == math.exp(r["test_loss"]), r
    assert r["test_bpb"] == r["test_loss"] / math.log(2), r
# the progress line's figures are the log's, rounded
for v, ppl, bpb in re.findall(r"v (\d+) .*test_ppl ([0-9.]+)  test_bpb ([0-9.]+)", sys.argv[2]):
    r = [r for r in ev if r["v"] == int(v)][0]
    assert abs(float(ppl) - r["test_ppl"]) <= 1e-3 * r["test_ppl"], (ppl, r)
    assert abs(float(bpb) - r["test_bpb"]) <= 1e-4, (bpb, r)
print("ok", len(ev), ev[-1]["test_ppl"], ev[-1]["test_bpb"])
PY
)
case $out in ok*) ok "... its log: test_ppl = exp(test_loss), test_bpb = test_loss / ln 2, a 65-byte sample (${out#ok })" ;;
*) bad "the log's test_ppl and test_bpb" "$out" ;; esac
expect_exit 0 "an image run" "$SL" run --device cpu --dataset synthetic:200 --model logreg --clock virtual \
	--steps 2 --eval-every 1 --log "$TMP/img.jsonl"
! grep -q 'test_ppl\|test_bpb\|"sample"' "$TMP/img.jsonl" && grep -q '"test_loss"' "$TMP/img.jsonl" &&
	ok "... its log has test_loss and no test_ppl, test_bpb or sample" || bad "image log" "$(cat "$TMP/img.jsonl")"
expect_grep 'test_acc [0-9.]+  staleness' "... its progress says test_acc" "$LAST_OUT"

# the same in /api/v1/status and /metrics while a daemon runs one
printf '{"device": "cpu", "model": "gpt:L1-H2-E8-T8", "dataset": "synthetic-text:4000", "clock": "virtual", "threads": 1, "batch": 8, "workers": 2, "rule": "asgd", "optimizer": "adamw", "lr": 0.01, "eval_every": 3, "stop": {"steps": 6}}' >"$TMP/serve.json"
start --config "$TMP/serve.json"
if wait_api 60 /api/v1/status 'd["state"] != "running" and d["version"] == 6'; then
	out=$(python3 - "$TMP/body" <<'PY' 2>&1
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d["language_model"] is True, d.get("language_model")
assert d["test_ppl"] == math.exp(d["test_loss"]) and d["test_bpb"] == d["test_loss"] / math.log(2), d
print("ok", d["test_loss"])
PY
)
	case $out in ok*) ok "/api/v1/status: language_model, test_loss ${out#ok }, test_ppl, test_bpb" ;;
	*) bad "/api/v1/status" "$out" ;; esac
	curl -s "$URL/metrics" >"$TMP/prom.txt"
	out=$(python3 - "$TMP/prom.txt" <<'PY' 2>&1
import math, sys
m = {l.split()[0]: float(l.split()[1]) for l in open(sys.argv[1]) if l.startswith("stalelab_test_")}
loss = m["stalelab_test_loss_per_token"]
assert abs(m["stalelab_test_perplexity"] - math.exp(loss)) <= 1e-12 * math.exp(loss), m
assert abs(m["stalelab_test_bits_per_byte"] - loss / math.log(2)) <= 1e-12, m
print("ok")
PY
)
	[ "$out" = ok ] && ok "/metrics: stalelab_test_loss_per_token, _perplexity, _bits_per_byte" || bad "/metrics" "$out"
else
	bad "the served gpt run ends at v 6 within 60 s" "$(cat "$TMP/body" | head -c 400)"
fi
kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null
# resumed: the checkpoint's evaluations in /api/v1/metrics carry them too
start --resume "$TMP/asgd.ckpt"
if wait_api 60 /api/v1/status 'd["state"] != "running"'; then
	http GET /api/v1/metrics >/dev/null
	out=$(python3 - "$TMP/body" <<'PY' 2>&1
import json, math, sys
s = json.load(open(sys.argv[1]))["series"]
old = [e for e in s if e["v"] <= 6]
assert old and all(e["test_ppl"] == math.exp(e["test_loss"]) for e in s), s
print("ok", len(old), len(s))
PY
)
	case $out in ok*) ok "a resumed daemon's series: test_ppl on the checkpoint's evaluations too (${out#ok })" ;;
	*) bad "resumed series" "$out" ;; esac
else
	bad "the resumed gpt run ends within 60 s" "$(head -c 400 "$TMP/body")"
fi
kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null
# results.csv of a sweep: test_ppl and test_bpb for a language model, empty for an image model
printf '{"device": "cpu", "model": ["gpt:L1-H2-E8-T8"], "dataset": "synthetic-text:4000", "batch": 8, "eval_every": 3, "threads": 1, "optimizer": "adamw", "lr": 0.01, "rule": ["asgd"], "workers": [2], "stop": {"steps": 6}}' >"$TMP/sw.json"
printf '{"device": "cpu", "model": "logreg", "dataset": "synthetic:200", "batch": 8, "eval_every": 3, "rule": ["asgd"], "workers": [2], "stop": {"steps": 6}}' >"$TMP/swi.json"
"$SL" sweep "$TMP/sw.json" --out "$TMP/sw" >"$TMP/sw.out" 2>&1 && "$SL" sweep "$TMP/swi.json" --out "$TMP/swi" >>"$TMP/sw.out" 2>&1
out=$(python3 - "$TMP/sw/results.csv" "$TMP/swi/results.csv" <<'PY' 2>&1
import csv, math, sys
r = list(csv.DictReader(open(sys.argv[1], newline="")))
assert len(r) == 1, r
x = r[0]
loss = float(x["test_loss"])
assert float(x["test_ppl"]) == math.exp(loss) and float(x["test_bpb"]) == loss / math.log(2), x
i = list(csv.DictReader(open(sys.argv[2], newline="")))
assert i and all(y["test_ppl"] == "" and y["test_bpb"] == "" for y in i), i
print("ok")
PY
)
[ "$out" = ok ] && ok "results.csv: test_ppl, test_bpb for gpt, empty for logreg" || bad "results.csv" "$out
$(cat "$TMP/sw.out")"
finish gpt
