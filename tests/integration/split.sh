#!/bin/sh
# Non-IID data ("data_split", docs/architecture.md "Non-IID data"), as a
# user meets it: stalelab run under dirichlet:0.1 logs a split record
# whose per-worker class counts differ (each worker's part a partition of
# the set, mostly a few classes), the same bits for a seed and others for
# another seed, a new split when the worker count changes; under iid no
# split record and /status's per-worker counts are the whole set's
# (near-uniform); remote workers train on their parts; bad values refused
# naming data_split, text refused for
# the label splits and taken for contiguous; a resumed run keeps its split.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: split"

RUN="--model mlp:784-16-10 --dataset synthetic:3000 --clock virtual --workers 4 --batch 32 --quiet"
# shellcheck disable=SC2086
"$SL" run $RUN --data-split dirichlet:0.1 --epochs 1 --log "$TMP/d1.jsonl" 2>"$TMP/d1.err"
expect_exit 0 "dirichlet:0.1: the run finishes" test -s "$TMP/d1.jsonl"
# the split record: a partition, skewed (the largest class's share of a
# worker's part, averaged over the workers, above 0.25)
stat=$(python3 - "$TMP/d1.jsonl" <<'PY' 2>&1
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
sp = [r for r in recs if r.get("event") == "split"]
assert len(sp) == 1, "one split record, got %d" % len(sp)
w = sp[0]["workers"]
assert [x["id"] for x in w] == [0, 1, 2, 3]
assert all(sum(x["classes"]) == x["part"] for x in w)
assert sum(x["part"] for x in w) == 3000, "a partition of 3000"
tot = [sum(x["classes"][k] for x in w) for k in range(10)]
top = sum(max(x["classes"]) / x["part"] for x in w) / 4
assert len({tuple(x["classes"]) for x in w}) == 4, "the histograms differ"
end = recs[-1]
assert end["event"] == "end" and end["samples"] == 3000, end
# iid: every worker the whole set, about 0.1 on these 10 classes
print("skew %.2f %s" % (top, "high" if top > 0.25 else "low"))
PY
)
expect_grep '^skew [0-9.]+ high$' "dirichlet:0.1: a partition, the workers' histograms differ and are skewed ($stat)" "$stat"

# shellcheck disable=SC2086
"$SL" run $RUN --data-split dirichlet:0.1 --epochs 1 --log "$TMP/d2.jsonl" 2>/dev/null
# shellcheck disable=SC2086
"$SL" run $RUN --data-split dirichlet:0.1 --epochs 1 --seed 2 --log "$TMP/d3.jsonl" 2>/dev/null
a=$(grep '"event":"split"' "$TMP/d1.jsonl"); b=$(grep '"event":"split"' "$TMP/d2.jsonl")
c=$(grep '"event":"split"' "$TMP/d3.jsonl")
[ -n "$a" ] && [ "$a" = "$b" ] && ok "the same seed: the same split" || bad "the same seed: the same split"
[ -n "$c" ] && [ "$a" != "$c" ] && ok "another seed: another split" || bad "another seed: another split"
evals() { # the evaluations' version, samples and losses (no wall times)
	python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "test_loss" in r:
        print(r["v"], r["samples"], r["test_loss"], r.get("train_loss"))
' "$1"
}
[ -n "$(evals "$TMP/d1.jsonl")" ] && [ "$(evals "$TMP/d1.jsonl")" = "$(evals "$TMP/d2.jsonl")" ] &&
	ok "the same seed: the same evaluations (virtual clock)" || bad "the same seed: the same evaluations"

# a worker count change mid-run: a new split for 2 workers at its version
cat >"$TMP/shrink.json" <<'JSON'
{"data_split": "shards:2", "schedule": [{"at": {"v": 20}, "set": {"workers": 2}}]}
JSON
# shellcheck disable=SC2086
"$SL" run --config "$TMP/shrink.json" $RUN --epochs 1 --log "$TMP/s.jsonl" 2>"$TMP/s.err"
got=$(python3 -c '
import json, sys
sp = [json.loads(l) for l in open(sys.argv[1]) if "\"split\"" in l]
print(" ".join("%d:%d:%d:%d" % (r["splits"], r["v"], len(r["workers"]), sum(w["part"] for w in r["workers"])) for r in sp))
' "$TMP/s.jsonl" 2>&1)
expect_grep '^1:0:4:3000 2:20:2:3000$' "workers 4 -> 2 at v 20: split 2, two parts of the set ($got)" "$got"

# iid: no split record; /status's counts are the whole set's, near-uniform
# shellcheck disable=SC2086
"$SL" run $RUN --epochs 0.2 --log "$TMP/i.jsonl" 2>/dev/null
n=$(grep -c '"event":"split"' "$TMP/i.jsonl")
[ "$n" = 0 ] && ok "iid: no split record" || bad "iid: no split record ($n)"
cat >"$TMP/iid.json" <<'JSON'
{"model": "mlp:784-16-10", "dataset": "synthetic:3000", "workers": 2, "threads": 1, "batch": 16}
JSON
start --config "$TMP/iid.json"
if [ -n "$port" ]; then
	wait_api 60 /api/v1/status 'len(d["workers"]) == 2 and all(len(w["classes"]) == 10 and w["part"] == 3000 and sum(w["classes"]) == 3000 and min(w["classes"]) > 0.8 * 300 for w in d["workers"])' &&
		ok "iid: /status gives each worker the whole set's counts, near-uniform" ||
		bad "iid: /status counts" "$(cat "$TMP/body" | head -c 600)"
	kill "$PID"; wait "$PID" 2>/dev/null
else
	bad "iid: the daemon starts" "$(cat "$TMP/serve.err")"
fi
cat >"$TMP/dir.json" <<'JSON'
{"model": "mlp:784-16-10", "dataset": "synthetic:3000", "workers": 3, "threads": 1, "batch": 16,
 "data_split": "dirichlet:0.1"}
JSON
start --config "$TMP/dir.json"
if [ -n "$port" ]; then
	wait_api 60 /api/v1/status 'len(d["workers"]) == 3 and sum(w["part"] for w in d["workers"]) == 3000 and len({tuple(w["classes"]) for w in d["workers"]}) == 3' &&
		ok "dirichlet:0.1: /status gives each worker its part's counts, different" ||
		bad "dirichlet:0.1: /status counts" "$(head -c 600 "$TMP/body")"
	# growing to 4 workers: a new split, told in the daemon's log too
	expect_http "PUT workers 4" 202 PUT /api/v1/workers '{"count": 4}'
	wait_api 60 /api/v1/status 'len(d["workers"]) == 4 and sum(w["part"] for w in d["workers"]) == 3000' &&
		ok "PUT workers 4: four parts of the set in /status" || bad "four parts" "$(head -c 600 "$TMP/body")"
	kill "$PID"; wait "$PID" 2>/dev/null
else
	bad "dirichlet: the daemon starts" "$(cat "$TMP/serve.err")"
fi

# remote workers (stalelab worker): they get their batches' indices from
# their own parts, as a local worker does; each join makes a new split
cat >"$TMP/rem.json" <<'JSON'
{"model": "mlp:784-16-10", "dataset": "synthetic:3000", "workers": 0, "threads": 1, "batch": 16,
 "data_split": "dirichlet:0.1"}
JSON
WURL=tcp://127.0.0.1:$(free_pair)
start --bus none --workers-listen "$WURL" --config "$TMP/rem.json" --log "$TMP/rem.jsonl"
if [ -n "$port" ]; then
	"$SL" worker --connect "$WURL" --threads 1 --give-up 60 -q 2>"$TMP/w0.err" &
	W0=$!
	"$SL" worker --connect "$WURL" --threads 1 --give-up 60 -q 2>"$TMP/w1.err" &
	W1=$!
	wait_api 90 /api/v1/status 'sum(1 for w in d["workers"] if w["remote"] and w["iterations"] > 20) == 2 and sum(w["part"] for w in d["workers"]) == 3000 and len({tuple(w["classes"]) for w in d["workers"]}) == 2' &&
		ok "two remote workers train on their own parts (two parts of the set in /status)" ||
		bad "remote workers on their parts" "$(head -c 600 "$TMP/body"; cat "$TMP/w0.err" "$TMP/w1.err")"
	kill "$W0" "$W1" 2>/dev/null; wait "$W0" "$W1" 2>/dev/null
	kill "$PID"; wait "$PID" 2>/dev/null
	# (and one more when the last slot's worker leaves: the count goes down)
	got=$(python3 -c '
import json, sys
print(" ".join(str(len(json.loads(l)["workers"])) for l in open(sys.argv[1]) if "\"split\"" in l))
' "$TMP/rem.jsonl" 2>&1)
	expect_grep '^1 2( 1)?$' "a split record at each join: 1 worker, then 2 ($got)" "$got"
else
	bad "serve --workers-listen starts" "$(cat "$TMP/serve.err")"
fi

# refused, naming the field
for v in banana dirichlet:-1 shards:0 dirichlet:abc; do
	# shellcheck disable=SC2086
	"$SL" run $RUN --data-split "$v" --steps 5 --log "$TMP/bad.jsonl" 2>"$TMP/bad.err"
	rc=$?
	[ "$rc" = 2 ] && grep -q 'data_split' "$TMP/bad.err" && ok "$v: refused (exit 2) naming data_split" ||
		bad "$v: refused naming data_split (exit $rc)" "$(cat "$TMP/bad.err")"
done
echo '{"data_split": "shards:0"}' >"$TMP/bad.json"
"$SL" run --config "$TMP/bad.json" --steps 5 --quiet --log "$TMP/bad.jsonl" 2>"$TMP/bad.err"
expect_grep '^stalelab run: .*data_split: shards:0' "a run object's bad data_split refused" "$(cat "$TMP/bad.err")"
# shellcheck disable=SC2086
"$SL" run $RUN --workers 400 --data-split dirichlet:1 --steps 5 --log "$TMP/bad.jsonl" 2>"$TMP/bad.err"
expect_grep 'workers|data_split' "too many workers for the set refused" "$(cat "$TMP/bad.err")"

# text: the label splits refused, contiguous taken
TXT="--model gpt:L1-H1-E16-T16 --dataset synthetic-text:20000 --clock virtual --workers 2 --batch 8 --quiet"
# shellcheck disable=SC2086
"$SL" run $TXT --data-split shards:2 --steps 3 --log "$TMP/t.jsonl" 2>"$TMP/t.err"
rc=$?
[ "$rc" = 2 ] && grep -q 'data_split: shards splits by class label' "$TMP/t.err" &&
	ok "text: shards refused by name" || bad "text: shards refused (exit $rc)" "$(cat "$TMP/t.err")"
# shellcheck disable=SC2086
"$SL" run $TXT --data-split contiguous --steps 3 --log "$TMP/t.jsonl" 2>"$TMP/t.err"
rc=$?
got=$(python3 -c '
import json, sys
sp = [json.loads(l) for l in open(sys.argv[1]) if "\"split\"" in l]
print(sp[0]["data_split"], [w["part"] for w in sp[0]["workers"]], "classes" in sp[0]["workers"][0])
' "$TMP/t.jsonl" 2>&1)
[ "$rc" = 0 ] && expect_grep '^contiguous \[[0-9]+, [0-9]+\] False$' "text: contiguous runs, two ranges, no classes ($got)" "$got" ||
	bad "text: contiguous runs (exit $rc)" "$(cat "$TMP/t.err")"

# a resumed run keeps its split: another one is refused
# shellcheck disable=SC2086
"$SL" run $RUN --data-split dirichlet:0.5 --steps 30 --checkpoint-every 10 --checkpoint-dir "$TMP/ck" \
	--log "$TMP/r.jsonl" 2>"$TMP/r.err"
ck=$(ls "$TMP/ck"/* 2>/dev/null | head -n 1)
if [ -n "$ck" ]; then
	"$SL" run --resume "$ck" --data-split iid --steps 40 --quiet --log "$TMP/r2.jsonl" 2>"$TMP/r2.err"
	rc=$?
	[ "$rc" = 2 ] && grep -q 'data-split: iid differs' "$TMP/r2.err" && ok "--resume with another --data-split refused" ||
		bad "--resume with another --data-split refused (exit $rc)" "$(cat "$TMP/r2.err")"
else
	bad "a checkpoint was written" "$(cat "$TMP/r.err")"
fi
finish split
