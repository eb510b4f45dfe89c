#!/bin/sh
# Integration tests of what a new user meets first (issue 8): replaying a
# daemon's log (several runs, live changes, a demo), resuming with new stop
# flags (and a crop-flip run resumed as it went on), bench with any model spec, the OpenBLAS kernel in every log, and
# error messages of one form.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: cli"

# --- replay a daemon's log --------------------------------------------------
printf '{"model": "mlp:784-16-10", "dataset": "synthetic:2400", "batch": 16, "workers": 2,\n "eval_every": 50}\n' >"$TMP/s.json"
start --config "$TMP/s.json" --log "$TMP/serve.jsonl"
sleep 0.5
curl -s -X PATCH "$URL/api/v1/run" -d '{"lr": 0.02}' >/dev/null
curl -s -X PATCH "$URL/api/v1/workers/1" -d '{"delay": {"dist": "const", "mean_ms": 2}}' >/dev/null
sleep 0.5
curl -s -X POST "$URL/api/v1/run" -d '{"model": "logreg", "dataset": "synthetic:2400", "workers": 3, "batch": 8}' >/dev/null
sleep 0.5
curl -s -X PATCH "$URL/api/v1/run" -d '{"rule": "dcasgd"}' >/dev/null
sleep 0.3
kill -TERM $PID; wait $PID
runs=$(grep -c '"model"' "$TMP/serve.jsonl")
[ "$runs" -eq 2 ] && ok "daemon log holds two runs" || bad "daemon log holds two runs ($runs)" "$(head -c 600 "$TMP/serve.jsonl")"

expect_exit 0 "replay a daemon's log (the last run)" "$SL" run --replay "$TMP/serve.jsonl" --log "$TMP/r2.jsonl"
expect_grep 'replaying run 2 of 2' "replay says which run" "$LAST_OUT"
expect_exit 0 "replay its first run (--run 1)" "$SL" run --replay "$TMP/serve.jsonl" --run 1 --log "$TMP/r1.jsonl" --quiet
[ -z "$LAST_OUT" ] && ok "--quiet replay prints nothing" || bad "--quiet replay prints nothing" "$LAST_OUT"
check=$(python3 - "$TMP/serve.jsonl" "$TMP/r1.jsonl" "$TMP/r2.jsonl" <<'PY'
import json, sys
src = [json.loads(l) for l in open(sys.argv[1])]
r1 = [json.loads(l) for l in open(sys.argv[2])]
r2 = [json.loads(l) for l in open(sys.argv[3])]
def own(n):
    return [r for r in src if r.get("run") == n]
for n, rep in ((1, r1), (2, r2)):
    orig = own(n)
    assert rep[0]["model"] == orig[0]["model"] and rep[0]["clock"] == "virtual", rep[0]
    want = [(r.get("worker"), r["set"], r["v"]) for r in orig if r.get("event") == "set"]
    got = [(r.get("worker"), r["set"], r["v"]) for r in rep if r.get("event") == "set"]
    assert want and got == want, (n, want, got)
    end = [r for r in orig if r.get("event") == "end"][0]
    assert rep[-1]["event"] == "end" and rep[-1]["v"] == end["v"], (rep[-1], end)
print("ok")
PY
)
expect_grep '^ok' "replays: same changes at the same versions, same end" "$check"

expect_exit 2 "--run beyond the log" "$SL" run --replay "$TMP/serve.jsonl" --run 3
expect_grep 'serve.jsonl: --run 3: the log holds 2 runs' "--run beyond says how many" "$LAST_OUT"
expect_exit 2 "--run without --replay" "$SL" run --run 1
expect_exit 0 "csv log" "$SL" run --dataset synthetic:600 --model logreg --steps 5 --log "$TMP/x.csv" --log-format csv --quiet
expect_exit 2 "replay a CSV log" "$SL" run --replay "$TMP/x.csv"
expect_grep 'x.csv: .*replay needs the JSON-Lines log' "CSV replay says JSONL is needed" "$LAST_OUT"

# a demo's log: captions and demo changes
cat >"$TMP/demo.json" <<'JSON'
{"run": {"model": "logreg", "dataset": "synthetic:1200", "workers": 2, "eval_every": 50},
 "scenes": [{"seconds": 1, "caption": "calm"},
            {"seconds": 1, "caption": "lr up", "set": {"lr": 0.1}, "workers": [{"id": 1, "set": {"spb_depth": 1}}]}]}
JSON
start --demo "$TMP/demo.json" --log "$TMP/demo.jsonl"
# until the second scene's changes are logged (60 s at most)
second_scene() {
	grep '"event":"set"' "$TMP/demo.jsonl" | grep -q '"lr":0.1' &&
		grep '"event":"set"' "$TMP/demo.jsonl" | grep -q '"worker":1'
}
wait_until 60 second_scene
kill -TERM $PID; wait $PID
expect_grep '"caption"' "demo log has captions" "$(cat "$TMP/demo.jsonl")"
expect_exit 0 "replay a demo's log, its first loop" "$SL" run --replay "$TMP/demo.jsonl" --run 1 --log "$TMP/rd.jsonl" --quiet
check=$(python3 -c '
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
sets = [x for x in r if x.get("event") == "set"]
assert any(x["set"].get("lr") == 0.1 for x in sets) and any(x.get("worker") == 1 for x in sets), sets
assert not any(x.get("event") == "caption" for x in r)
print("ok")' "$TMP/rd.jsonl")
expect_grep '^ok' "demo replay carries the demo changes, no captions" "$check"

# --- the OpenBLAS kernel in every log; replays warn when it differs ---------
kernel=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["blas"]["kernel"])' "$TMP/r1.jsonl")
[ -n "$kernel" ] && ok "run log records the BLAS kernel ($kernel)" || bad "run log records the BLAS kernel"
kernel=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["blas"]["kernel"])' "$TMP/serve.jsonl")
[ -n "$kernel" ] && ok "daemon log records the BLAS kernel" || bad "daemon log records the BLAS kernel"
python3 - "$TMP/r1.jsonl" "$TMP/other.jsonl" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
first = json.loads(lines[0]); first["blas"]["kernel"] = "NoSuchCore"
open(sys.argv[2], "w").write("\n".join([json.dumps(first)] + lines[1:]) + "\n")
PY
expect_exit 0 "replay of another kernel's log" "$SL" run --replay "$TMP/other.jsonl" --steps 5 --quiet --log /dev/null
expect_grep 'warning: .*NoSuchCore' "replay warns of another BLAS kernel" "$LAST_OUT"
python3 - "$TMP/r1.jsonl" "$TMP/isa.jsonl" "$TMP/ref.jsonl" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
first = json.loads(lines[0])
assert first["blas"]["isa"].startswith("x86-64"), first["blas"]
first["blas"]["isa"] = "x86-64-v9"
open(sys.argv[2], "w").write("\n".join([json.dumps(first)] + lines[1:]) + "\n")
first["blas"]["kernel"] = "NoSuchCore"; first["device"] = "ref"
open(sys.argv[3], "w").write("\n".join([json.dumps(first)] + lines[1:]) + "\n")
PY
expect_exit 0 "replay of another instruction-set level's log" "$SL" run --replay "$TMP/isa.jsonl" --steps 5 --quiet --log /dev/null
expect_grep 'warning: .*x86-64-v9' "replay warns of kernels built for another level" "$LAST_OUT"
expect_exit 0 "replay of a ref-backend log" "$SL" run --replay "$TMP/ref.jsonl" --steps 5 --quiet --log /dev/null
[ -z "$(printf '%s' "$LAST_OUT" | grep warning)" ] && ok "no kernel warning for the ref backend" || bad "no kernel warning for the ref backend" "$LAST_OUT"
expect_exit 0 "replay of this kernel's log" "$SL" run --replay "$TMP/r1.jsonl" --steps 5 --quiet --log /dev/null
[ -z "$(printf '%s' "$LAST_OUT" | grep warning)" ] && ok "no warning for the same kernel" || bad "no warning for the same kernel" "$LAST_OUT"
head -n 1 "$TMP/r1.jsonl" >"$TMP/first.json"
expect_exit 0 "a log's first record reads back as --config" "$SL" run --config "$TMP/first.json" --steps 5 --quiet --log /dev/null

# --- resume: flags on the command line win ------------------------------------
printf '{"model": "mlp:784-16-10", "dataset": "synthetic:2400", "batch": 16, "workers": 2, "clock": "virtual",\n "eval_every": 50, "stop": {"steps": 300}, "schedule": [{"at": {"v": 100}, "set": {"checkpoint": "%s"}}]}\n' "$TMP/h.ckpt" >"$TMP/h.json"
expect_exit 0 "headless run with a checkpoint" "$SL" run --config "$TMP/h.json" --log /dev/null --quiet
endv() { python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; e=r[-1]; print(e["event"], e["v"], e["stop"], round(e["epoch"], 4))' "$1"; }
expect_exit 0 "resume --steps 900" "$SL" run --resume "$TMP/h.ckpt" --steps 900 --log "$TMP/res.jsonl" --quiet
expect_grep '^end 900 steps' "resume --steps 900 goes past the old stop" "$(endv "$TMP/res.jsonl")"
expect_exit 0 "resume --steps 150" "$SL" run --resume "$TMP/h.ckpt" --steps 150 --log "$TMP/res.jsonl" --quiet
expect_grep '^end 150 steps' "resume --steps 150 stops before the old stop" "$(endv "$TMP/res.jsonl")"
expect_exit 0 "resume --epochs 2.5" "$SL" run --resume "$TMP/h.ckpt" --epochs 2.5 --log "$TMP/res.jsonl" --quiet
expect_grep '^end [0-9]+ epochs 2.5$' "resume --epochs 2.5 stops at epoch 2.5" "$(endv "$TMP/res.jsonl")"
expect_exit 0 "resume --seconds 0.02 (virtual)" "$SL" run --resume "$TMP/h.ckpt" --seconds 0.02 --log "$TMP/res.jsonl" --quiet
expect_grep '^end [0-9]+ seconds' "resume --seconds stops on seconds" "$(endv "$TMP/res.jsonl")"
expect_exit 0 "resume without a stop keeps the checkpoint's" "$SL" run --resume "$TMP/h.ckpt" --log "$TMP/res.jsonl" --quiet
expect_grep '^end 300 steps' "the checkpoint's own stop" "$(endv "$TMP/res.jsonl")"
# (a new log: given the same one, a resumed run would continue it)
expect_exit 0 "resume with --lr and --workers" "$SL" run --resume "$TMP/h.ckpt" --steps 120 --lr 0.01 --workers 3 --log "$TMP/res2.jsonl" --quiet
check=$(python3 -c '
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
assert r[0]["resumed"] is True and r[0]["stop"] == {"steps": 120}, r[0]
assert r[0]["v"] == 100 and r[0]["t"] > 0, ("the run object says where it resumes", r[0]["t"], r[0]["v"])
s = [x for x in r if x.get("event") == "set"]
assert s[0]["origin"] == "resume" and s[0]["v"] == 100 and s[0]["set"] == {"lr": 0.01, "workers": 3}, s
print("ok")' "$TMP/res2.jsonl")
expect_grep '^ok' "resume changes are logged at the checkpoint's version" "$check"
# --param: a rule parameter on the command line, as "rule_params" in --config
P="--clock virtual --dataset synthetic:2400 --model mlp:784-16-10 --workers 2 --batch 16 --threads 1
 --eval-every 20 --steps 40 --quiet --rule diloco"
printf '{"rule_params": {"H": 3, "outer_lr": 0.5, "inner_reset": true, "compress": "topk", "compress_ratio": 0.1}}\n' >"$TMP/p.json"
# shellcheck disable=SC2086
expect_exit 0 "--param KEY=VALUE, repeated" "$SL" run $P -p H=3 --param outer_lr=0.5 -p inner_reset=true \
	-p compress=topk -p compress_ratio=0.1 --log "$TMP/pa.jsonl"
# shellcheck disable=SC2086
expect_exit 0 "the same parameters in --config" "$SL" run $P --config "$TMP/p.json" --log "$TMP/pb.jsonl"
check=$(python3 -c '
import json, sys
a, b = ([json.loads(l) for l in open(f)] for f in sys.argv[1:3])
rp = a[0]["rule_params"]
assert (rp["H"], rp["outer_lr"], rp["inner_reset"], rp["compress"], rp["compress_ratio"]) == (3, 0.5, True, "topk", 0.1), rp
assert a[0]["rule_params"] == b[0]["rule_params"], "flags and config differ"
ea, eb = ([x for x in r if "test_loss" in x][-1] for r in (a, b))
assert ea["test_loss"] == eb["test_loss"] and ea["v"] == eb["v"] == 40, (ea, eb)
print("ok")' "$TMP/pa.jsonl" "$TMP/pb.jsonl")
expect_grep '^ok' "--param sets the run object's rule_params: the same run as --config" "$check"
# shellcheck disable=SC2086
expect_exit 2 "--param without =" "$SL" run $P -p H
expect_grep 'stalelab run: --param: expected KEY=VALUE' "--param without = names the form" "$LAST_OUT"
# shellcheck disable=SC2086
expect_exit 2 "--param with a misspelt key" "$SL" run $P -p Hh=3
expect_grep "rule_params.Hh: unknown field \(did you mean 'rule_params.H'" "--param's typo gets a suggestion" "$LAST_OUT"
# shellcheck disable=SC2086
expect_exit 2 "--param with a bad value" "$SL" run $P -p H=abc
expect_grep 'stalelab run: --param: rule_params.H: expected an integer' "--param's bad value named" "$LAST_OUT"
expect_exit 0 "resume with --param" "$SL" run --resume "$TMP/h.ckpt" --steps 120 -p s=2 -p H=7 \
	--log "$TMP/res3.jsonl" --quiet
check=$(python3 -c '
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
s = [x for x in r if x.get("event") == "set"]
assert len(s) == 1 and s[0]["origin"] == "resume" and s[0]["v"] == 100, s
assert s[0]["set"]["rule_params"]["H"] == 7, s[0]["set"]
print("ok")' "$TMP/res3.jsonl")
expect_grep '^ok' "--param on resume: one change at the checkpoint's version" "$check"
expect_exit 0 "resume without --param" "$SL" run --resume "$TMP/h.ckpt" --steps 120 --log "$TMP/res4.jsonl" --quiet
[ "$(grep -c '"event":"set"' "$TMP/res4.jsonl")" = 0 ] && ok "no --param, no rule change on resume" ||
	bad "no --param, no rule change on resume" "$(grep '"event":"set"' "$TMP/res4.jsonl")"
expect_exit 2 "resume cannot change the model" "$SL" run --resume "$TMP/h.ckpt" --model logreg
expect_grep 'stalelab run: --model: .*differs' "model change refused, naming the flag" "$LAST_OUT"
expect_exit 2 "resume cannot change the seed" "$SL" run --resume "$TMP/h.ckpt" --seed 9
expect_exit 2 "resume with --config" "$SL" run --resume "$TMP/h.ckpt" --config "$TMP/h.json"

# --- crop-flip: a run stopped and resumed draws the views the whole one did --
# (three workers, 600 samples in batches of 16: the checkpoint at v 80 is in
# the third epoch, with batches of the second still in flight)
AUG="--clock virtual --dataset synthetic:600 --model mlp:784-16-10 --workers 3 --batch 16
 --threads 1 --eval-every 20 --augment crop-flip --quiet"
# shellcheck disable=SC2086
expect_exit 0 "crop-flip: the whole run" "$SL" run $AUG --steps 160 --log "$TMP/aug-whole.jsonl"
# shellcheck disable=SC2086
expect_exit 0 "crop-flip: the run stopped at v 80" "$SL" run $AUG --steps 80 --checkpoint-every 40 \
	--checkpoint-dir "$TMP/augck" --log "$TMP/aug-cut.jsonl"
expect_exit 2 "a resume cannot drop the views" "$SL" run --resume "$TMP/augck" --augment none --steps 160
expect_grep 'augment: none differs from the checkpoint.s crop-flip' "... naming the flag" "$LAST_OUT"
expect_exit 0 "crop-flip: resumed to v 160, the log continued" "$SL" run --resume "$TMP/augck" --steps 160 \
	--log "$TMP/aug-cut.jsonl" --quiet
check=$(python3 - "$TMP/aug-whole.jsonl" "$TMP/aug-cut.jsonl" <<'PY'
import json, sys
machine = ("samples_per_s", "updates_per_s", "train_s")
def recs(p):
    return [{k: v for k, v in r.items() if k not in machine}
            for r in map(json.loads, open(p)) if not ("model" in r and "event" not in r)]
a, b = recs(sys.argv[1]), recs(sys.argv[2])
assert a[-1]["event"] == "end" and a[-1]["v"] == 160, a[-1]
assert a == b, [(x.get("v"), x.get("train_loss"), y.get("v"), y.get("train_loss"))
                for x, y in zip(a, b) if x != y][:2]
print("ok", a[-1]["weights"])
PY
)
expect_grep '^ok' "crop-flip: the resumed log is the whole run's, record for record" "$check"

# a daemon's checkpoint has no stop: --steps 1 stops it at once
start --config "$TMP/s.json" --checkpoint-dir "$TMP"
sleep 0.5
curl -s -X POST "$URL/api/v1/checkpoint" -d '{"path": "d.ckpt"}' >/dev/null
kill -TERM $PID; wait $PID
expect_exit 0 "resume a daemon's checkpoint with --steps 1" timeout 30 "$SL" run --resume "$TMP/d.ckpt" --steps 1 --log "$TMP/dres.jsonl" --quiet
expect_grep '^end [0-9]+ steps' "it stops at once" "$(endv "$TMP/dres.jsonl")"
expect_exit 2 "resume a daemon's checkpoint without a stop" timeout 30 "$SL" run --resume "$TMP/d.ckpt"
expect_grep 'no stop' "says a stop is needed" "$LAST_OUT"

# --- bench: any model spec, unknown ones refused ------------------------------
for m in logreg mlp:784-64-10; do
	expect_exit 0 "bench --model $m" "$SL" bench --model $m -S 0.2 -d synthetic:600 -t 1
	expect_grep "\"model\":\"$m\"" "bench --model $m prints its figures" "$LAST_OUT"
done
expect_exit 2 "bench --model foo" "$SL" bench --model foo -d synthetic:600
expect_grep 'stalelab bench: model: unknown "foo"' "unknown model named" "$LAST_OUT"
expect_exit 2 "bench model/data mismatch" "$SL" bench --model mlp:100-10 -d synthetic:600

# --- messages of one form -------------------------------------------------------
expect_exit 2 "run: option without its value" "$SL" run --lr
expect_grep "^stalelab run: option '--lr' needs a value" "run: missing value in one form" "$LAST_OUT"
expect_exit 2 "bench: unknown option" "$SL" bench --nope
expect_grep "^stalelab bench: unknown option '--nope'" "bench: unknown option in one form" "$LAST_OUT"

# the same mistake, the same exit status and form in run and serve
for cmd in run serve; do
	expect_exit 2 "$cmd: unknown option" "$SL" $cmd --no-such-flag
	expect_grep "^stalelab $cmd: unknown option '--no-such-flag'" "$cmd: unknown option in one form" "$LAST_OUT"
	expect_exit 2 "$cmd: missing config" "$SL" $cmd --config "$TMP/nope.json"
	expect_grep "^stalelab $cmd: unable to open .*nope.json: No such file" "$cmd: missing config in one form" "$LAST_OUT"
	n=$(printf '%s\n' "$LAST_OUT" | grep -o 'nope.json' | wc -l)
	[ "$n" -eq 1 ] && ok "$cmd: missing config named once" || bad "$cmd: missing config named once ($n)" "$LAST_OUT"
	expect_exit 2 "$cmd: missing checkpoint" "$SL" $cmd --resume "$TMP/nope.ckpt"
	expect_grep "^stalelab $cmd: .*nope.ckpt" "$cmd: missing checkpoint named" "$LAST_OUT"
	stop=; [ $cmd = run ] && stop="--steps 5"
	expect_exit 1 "$cmd: unwritable log" timeout 20 "$SL" $cmd --config "$TMP/s.json" $stop --log /nonexistent/x.jsonl --quiet
	expect_grep "^stalelab $cmd: --log: cannot open /nonexistent/x.jsonl" "$cmd: unwritable log named" "$LAST_OUT"
done

# a label byte out of range is reported as such
mkdir -p "$TMP/idx"
python3 - "$TMP/idx" 200 <<'PY'
import struct, sys
d, bad = sys.argv[1], int(sys.argv[2])
def imgs(n): return struct.pack(">IIII", 0x803, n, 28, 28) + bytes(n * 784)
def labs(l): return struct.pack(">II", 0x801, len(l)) + bytes(l)
open(d + "/train-images-idx3-ubyte", "wb").write(imgs(20))
open(d + "/train-labels-idx1-ubyte", "wb").write(labs([i % 10 for i in range(19)] + [bad]))
open(d + "/t10k-images-idx3-ubyte", "wb").write(imgs(5))
open(d + "/t10k-labels-idx1-ubyte", "wb").write(labs([1, 2, 3, 47, 5]))
PY
expect_exit 2 "idx: a label byte out of range" "$SL" run --dataset "idx:$TMP/idx" --steps 2
expect_grep 'train-labels-idx1-ubyte: label 200 of sample 19 is out of range' "the label, sample and file are named" "$LAST_OUT"
printf '%s' "$LAST_OUT" | grep -Eq '[0-9]+ classes' && bad "not reported as a class count" "$LAST_OUT" || ok "not reported as a class count"
python3 - "$TMP/idx" 3 <<'PY'
import struct, sys
open(sys.argv[1] + "/train-labels-idx1-ubyte", "wb").write(struct.pack(">II", 0x801, 20) + bytes([i % 10 for i in range(20)]))
PY
expect_exit 2 "idx: a test label beyond the training set's" "$SL" run --dataset "idx:$TMP/idx" --steps 2
expect_grep "t10k-labels-idx1-ubyte: label 47 of sample 3 is out of range: the training set's labels are 0..9" "test label out of range named" "$LAST_OUT"

finish cli
