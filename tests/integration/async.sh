#!/bin/sh
# Integration tests of the asynchronous engine through `stalelab run`:
# multi-worker runs on both clocks, a schedule of changes in the run object,
# change records in the log, bit-identical virtual runs, and --replay.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: async engine"

cat >"$TMP/sched.json" <<'JSON'
{"model": "mlp:784-16-10", "dataset": "synthetic:2400", "lr": 0.01, "batch": 16,
 "workers": 3, "clock": "virtual", "seed": 5, "eval_every": 40,
 "delay": {"dist": "exp", "mean_ms": 5},
 "stop": {"epochs": 3},
 "schedule": [
   {"at": {"v": 100}, "set": {"rule": "dcasgd", "rule_params": {"lambda": 0.1}}},
   {"at": {"v": 150}, "worker": 1, "set": {"delay": {"dist": "const", "mean_ms": 50}, "spb_depth": 1}},
   {"at": {"v": 200}, "set": {"workers": 5}},
   {"at": {"t": 0.5}, "set": {"lr": 0.02}}
 ]}
JSON
expect_exit 0 "virtual run with a schedule" "$SL" run --config "$TMP/sched.json" --log "$TMP/a.jsonl"
expect_exit 0 "same run again" "$SL" run --config "$TMP/sched.json" --log "$TMP/b.jsonl" --quiet
check=$(python3 - "$TMP/a.jsonl" "$TMP/b.jsonl" <<'PY'
import json, sys
def load(p):
    return [json.loads(l) for l in open(p)]
a, b = load(sys.argv[1]), load(sys.argv[2])
machine = ("samples_per_s", "updates_per_s", "train_s")
strip = lambda r: {k: v for k, v in r.items() if k not in machine}
assert [strip(r) for r in a] == [strip(r) for r in b], "virtual runs differ"
sets = [r for r in a if r.get("event") == "set"]
assert [r["v"] for r in sets[:3]] == [100, 150, 200], sets
assert sets[0]["set"]["rule"] == "dcasgd" and sets[0]["set"]["rule_params"]["lambda"] == 0.1
assert sets[1]["worker"] == 1 and sets[1]["set"]["spb_depth"] == 1
assert sets[2]["set"]["workers"] == 5
assert any(r["set"].get("lr") == 0.02 for r in sets), sets
assert all(r["origin"] == "schedule" for r in sets)
evals = [r for r in a[1:] if "test_acc" in r and "event" not in r]
assert evals[-1]["staleness"]["max"] >= 4, evals[-1]["staleness"]
assert a[-1]["event"] == "end" and a[-1]["samples"] == 3 * 2400, a[-1]
print("ok", len(evals), "evals")
PY
)
expect_grep '^ok' "identical logs, change records at their versions" "$check"

# Replay: the log's run object and change records re-run the same run.
expect_exit 0 "replay" "$SL" run --replay "$TMP/a.jsonl" --log "$TMP/r.jsonl" --quiet
check=$(python3 - "$TMP/a.jsonl" "$TMP/r.jsonl" <<'PY'
import json, sys
machine = ("samples_per_s", "updates_per_s", "train_s")
def evals(p):
    return [{k: v for k, v in r.items() if k not in machine}
            for r in map(json.loads, open(p)) if "test_acc" in r]
a, b = evals(sys.argv[1]), evals(sys.argv[2])
assert len(a) == len(b) and a == b, (len(a), len(b))
print("ok")
PY
)
expect_grep '^ok' "replayed run equals the original" "$check"
{ head -n 3 "$TMP/a.jsonl"; sed -n 4p "$TMP/a.jsonl" | head -c 40; } >"$TMP/cut.jsonl"
expect_exit 0 "replay of a log cut mid-line" "$SL" run --replay "$TMP/cut.jsonl" --steps 20 --quiet --log /dev/null
printf 'not json\n' >"$TMP/bad.jsonl"
expect_exit 2 "replay of a bad file" "$SL" run --replay "$TMP/bad.jsonl"
expect_grep 'bad.jsonl' "replay error names the file" "$LAST_OUT"

# Wall clock: threads that really sleep.
printf '{"delay": {"dist": "uniform", "mean_ms": 2}}' >"$TMP/wd.json"
expect_exit 0 "wall-clock asgd, 3 workers" "$SL" run --dataset synthetic:2400 --model mlp:784-16-10 \
	--lr 0.01 --batch 16 --workers 3 --steps 150 --eval-every 50 --config "$TMP/wd.json" \
	--log "$TMP/w.jsonl" --quiet
check=$(python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; e=r[-1]; assert e["event"]=="end" and e["v"]>=150 and e["staleness"]["mean"]>0.5, e; print("ok")' "$TMP/w.jsonl")
expect_grep '^ok' "wall-clock workers are stale" "$check"

# Headless checkpoints: a schedule entry writes one at v 150; --resume goes
# on from it to the same end, record for record.
python3 - "$TMP/sched.json" "$TMP/ck.json" "$TMP/mid.ckpt" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["schedule"].append({"at": {"v": 150}, "set": {"checkpoint": sys.argv[3]}})
json.dump(c, open(sys.argv[2], "w"))
PY
expect_exit 0 "run with a checkpoint at v 150" "$SL" run --config "$TMP/ck.json" --log "$TMP/ck.jsonl" --quiet
[ -s "$TMP/mid.ckpt" ] && ok "checkpoint written" || bad "checkpoint written"
expect_exit 0 "resume from it" "$SL" run --resume "$TMP/mid.ckpt" --log "$TMP/res.jsonl" --quiet
check=$(python3 - "$TMP/ck.jsonl" "$TMP/res.jsonl" <<'PY'
import json, sys
machine = ("samples_per_s", "updates_per_s", "train_s")
def evals(p):
    return [{k: v for k, v in r.items() if k not in machine}
            for r in map(json.loads, open(p)) if "test_acc" in r]
a, b = evals(sys.argv[1]), evals(sys.argv[2])
assert b and a[-len(b):] == b, (len(a), len(b))
assert all(r["v"] > 150 for r in b)
print("ok", len(b))
PY
)
expect_grep '^ok' "resumed run ends exactly as the uninterrupted one" "$check"
expect_exit 2 "resume a missing checkpoint" "$SL" run --resume "$TMP/none.ckpt"
expect_exit 2 "resume with another model" "$SL" run --resume "$TMP/mid.ckpt" --model logreg
expect_grep 'differ' "model mismatch says why" "$LAST_OUT"

printf '{"schedule": [{"at": {"v": 10}, "worker": 3, "set": {"spb": 1}}]}' >"$TMP/bads.json"
expect_exit 2 "bad schedule entry" "$SL" run --config "$TMP/bads.json"
expect_grep 'schedule\[0\]\.set\.spb' "bad schedule names the field" "$LAST_OUT"

finish async
