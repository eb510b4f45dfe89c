#!/bin/sh
# Integration tests of `stalelab sweep` (issue 16): a grid with lists,
# nested keys and seeds; results.csv and a log per cell; the same rows and
# logs whatever --jobs, and from two shards merged (by flag, by a Slurm
# array's variables, by mpirun's rank); resume after kill -9 mid-cell; a
# changed sweep file refused, --force; bad files named and DIR untouched;
# the summary over seeds with a baseline.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: stalelab sweep"

expect_exit 0 "sweep --help" "$SL" sweep --help
expect_grep '--shard I/N' "--help names --shard" "$LAST_OUT"
help_of() { "$SL" help "$1"; }
[ "$(help_of sweep)" = "$("$SL" sweep --help)" ] && ok "help sweep" || bad "help sweep"
expect_exit 2 "no file" "$SL" sweep --out "$TMP/x"
expect_grep 'which sweep file' "no file: said" "$LAST_OUT"
expect_exit 2 "a wrong flag" "$SL" sweep --jbos 2
expect_grep "unknown option '--jbos'" "a wrong flag: named" "$LAST_OUT"

cat >"$TMP/s.json" <<'JSON'
{"model": "mlp:784-16-10", "dataset": "synthetic:2000", "batch": 16, "eval_every": 25,
 "rule": ["ssgd", "asgd"], "workers": [1, 3], "delay": {"dist": "version", "s": [0, 4]},
 "stop": {"epochs": 1}, "seeds": 2, "target": 0.9}
JSON
# the rows, without the columns that measure this machine
rows() { python3 -c '
import csv, sys
r = list(csv.DictReader(open(sys.argv[1], newline="")))
for x in r:
    x.pop("train_s"); x.pop("samples_per_s")
    print(",".join(x.values()))' "$1"; }
# every cell log of two dirs alike, but for the machine-measured fields
logs_alike() { python3 -c '
import json, os, sys
a, b = sys.argv[1] + "/cells", sys.argv[2] + "/cells"
def strip(p):
    out = []
    for l in open(p):
        d = json.loads(l)
        for k in list(d):
            if k == "train_s" or k.endswith("_per_s") or k.startswith("wall_"):
                del d[k]
        out.append(d)
    return out
fa = sorted(f for f in os.listdir(a) if f.endswith(".jsonl"))
fb = sorted(f for f in os.listdir(b) if f.endswith(".jsonl"))
bad = [f for f in fa if strip(a + "/" + f) != strip(b + "/" + f)]
sys.exit(1 if fa != fb or bad or len(fa) != int(sys.argv[3]) else 0)' "$1" "$2" "$3"; }

expect_exit 0 "a 16-cell sweep, --jobs 1" "$SL" sweep "$TMP/s.json" --out "$TMP/j1" --jobs 1
expect_grep '16 cells, 0 finished before, 16 to run, 1 at a time' "it says what it runs" "$LAST_OUT"
expect_grep 'cells 16 done \| 0 running \| 0 to go \| ETA' "the heartbeat line off a terminal" "$LAST_OUT"
[ "$(wc -l <"$TMP/j1/results.csv")" = 17 ] && ok "results.csv: a header and 16 rows" || bad "results.csv rows" "$(cat "$TMP/j1/results.csv")"
head -n 1 "$TMP/j1/results.csv" | grep -q '^cell,rule,workers,delay.s,seed,final_acc,best_acc,test_loss,updates,samples,epochs,virtual_s,updates_to_target,virtual_s_to_target,epochs_to_target,stale_mean,stale_p50,stale_p99,stale_max,bytes_sent,bytes_recv,comm_s,coherence,step_flops,bwd_flops,bwd_flops_saved,stop,diverged,train_s,samples_per_s' &&
	ok "results.csv: the varied keys, then the metrics" || bad "results.csv header" "$(head -n 1 "$TMP/j1/results.csv")"
[ "$(ls "$TMP/j1/cells" | grep -c '\.jsonl$')" = 16 ] && ok "a log per cell" || bad "a log per cell" "$(ls "$TMP/j1/cells")"
[ -f "$TMP/j1/cells/rule=asgd_workers=3_delay.s=4_seed=2.jsonl" ] && ok "a cell's name is its key=value set" || bad "cell names" "$(ls "$TMP/j1/cells" | head -n 3)"
python3 -c '
import csv, sys
r = {x["cell"]: x for x in csv.DictReader(open(sys.argv[1], newline=""))}
a = r["rule=ssgd_workers=1_delay.s=0_seed=1"]
b = r["rule=asgd_workers=3_delay.s=4_seed=1"]
ok = (a["stale_mean"] == "0.0" and float(b["stale_mean"]) > 1 and a["updates_to_target"] != ""
      and int(a["updates_to_target"]) <= int(a["updates"]) and a["stop"] == "epochs"
      and float(a["bytes_sent"]) > 0 and 0 < float(a["bwd_flops"]) < float(a["step_flops"]))
sys.exit(0 if ok else 1)' "$TMP/j1/results.csv" && ok "the metrics: staleness, to-target, bytes, FLOPs" || bad "metrics" "$(head -n 3 "$TMP/j1/results.csv")"
head -n 1 "$TMP/j1/cells/rule=asgd_workers=3_delay.s=4_seed=2.jsonl" | python3 -c '
import json, sys
d = json.load(sys.stdin)
sys.exit(0 if d["rule"] == "asgd" and d["workers"] == 3 and d["delay"]["s"] == 4 and d["seed"] == 2
         and d["clock"] == "virtual" and d["cell"] == "rule=asgd,workers=3,delay.s=4,seed=2" else 1)' &&
	ok "a cell's log starts with its run object" || bad "cell log's run object"

expect_exit 0 "the same sweep, --jobs 2" "$SL" sweep "$TMP/s.json" --out "$TMP/j2" --jobs 2 --quiet
[ "$(rows "$TMP/j1/results.csv")" = "$(rows "$TMP/j2/results.csv")" ] && ok "--jobs 1 and --jobs 2: the same rows" || bad "jobs 1 vs 2 rows"
logs_alike "$TMP/j1" "$TMP/j2" 16 && ok "--jobs 1 and --jobs 2: the same logs" || bad "jobs 1 vs 2 logs"

expect_exit 0 "shard 0/2" "$SL" sweep "$TMP/s.json" --out "$TMP/s0" --shard 0/2 --quiet
SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_TASK_MIN=4 SLURM_ARRAY_TASK_COUNT=2 "$SL" sweep "$TMP/s.json" --out "$TMP/s1" >"$TMP/out" 2>&1
expect_grep 'shard 1/2: 8 of them' "a Slurm array's task 5 of 4-5 is shard 1/2" "$(cat "$TMP/out")"
expect_exit 0 "merge the shards" "$SL" sweep --merge "$TMP/s0" "$TMP/s1" --out "$TMP/m"
expect_grep 'merged 16 of 16 cells from 2 directories' "merge says what it gathered" "$LAST_OUT"
[ "$(rows "$TMP/j1/results.csv")" = "$(rows "$TMP/m/results.csv")" ] && ok "two shards merged: the same rows" || bad "merged rows"
logs_alike "$TMP/j1" "$TMP/m" 16 && ok "two shards merged: the same logs" || bad "merged logs"
OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 "$SL" sweep "$TMP/s.json" --out "$TMP/mp" -q &&
	OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 "$SL" sweep "$TMP/s.json" --out "$TMP/mp" -q &&
	[ "$(rows "$TMP/j1/results.csv")" = "$(rows "$TMP/mp/results.csv")" ] &&
	ok "mpirun's ranks share one directory: the same rows" || bad "ranks in one directory"
expect_exit 2 "a bad --shard" "$SL" sweep "$TMP/s.json" --out "$TMP/x" --shard 2/2
expect_grep '--shard: expected I/N with 0 <= I < N' "a bad --shard: named" "$LAST_OUT"

# resume: nothing to do, then after kill -9 mid-cell
expect_exit 0 "run again: resumes" "$SL" sweep "$TMP/s.json" --out "$TMP/j1"
expect_grep '16 finished before, 0 to run' "finished cells are skipped" "$LAST_OUT"
cat >"$TMP/big.json" <<'JSON'
{"model": "mlp:784-64-10", "dataset": "synthetic:4000", "batch": 16, "eval_every": 50,
 "workers": [1, 2, 4, 8], "delay": {"dist": "version", "s": [0, 2, 4, 8]}, "stop": {"epochs": 20}}
JSON
setsid "$SL" sweep "$TMP/big.json" --out "$TMP/k" --quiet &
KP=$!
wait_until 60 sh -c "ls '$TMP/k/cells' 2>/dev/null | grep -q '^workers=.*\.json$'"
kill -KILL "-$KP" 2>/dev/null; wait "$KP" 2>/dev/null
n=$(ls "$TMP/k/cells" | grep -c '^workers=.*\.json$')
[ "$n" -lt 16 ] && ok "kill -9 of the sweep and its cells mid-way ($n of 16 done)" || bad "kill -9 mid-way came too late ($n done)"
expect_exit 0 "run again after kill -9" "$SL" sweep "$TMP/big.json" --out "$TMP/k"
expect_grep "16 cells, $n finished before, $((16 - n)) to run" "only the unfinished cells run again" "$LAST_OUT"
expect_exit 0 "the same sweep, never killed" "$SL" sweep "$TMP/big.json" --out "$TMP/k2" --quiet
[ "$(rows "$TMP/k/results.csv")" = "$(rows "$TMP/k2/results.csv")" ] && ok "killed and resumed: the rows of a clean run" || bad "resumed rows"
logs_alike "$TMP/k" "$TMP/k2" 16 && ok "killed and resumed: the logs of a clean run" || bad "resumed logs"
ls "$TMP/k/cells" | grep -q '\.tmp$' && bad "temporary files left" "$(ls "$TMP/k/cells" | grep tmp)" || ok "no temporary file left"

# a changed sweep file
cp "$TMP/j1/results.csv" "$TMP/before.csv"
sed 's/"s": \[0, 4\]/"s": [0, 8]/; s/"eval_every": 25/"eval_every": 50/' "$TMP/s.json" >"$TMP/s2.json"
expect_exit 2 "a changed sweep file is refused" "$SL" sweep "$TMP/s2.json" --out "$TMP/j1"
expect_grep 'was started with another sweep file: eval_every, delay.s differ' "the keys that differ are named" "$LAST_OUT"
cmp -s "$TMP/before.csv" "$TMP/j1/results.csv" && ok "refused: results.csv untouched" || bad "results.csv changed"
sed 's/"s": \[0, 4\]/"s": [0, 8]/' "$TMP/s.json" >"$TMP/s3.json"
expect_exit 0 "--force runs it there" "$SL" sweep "$TMP/s3.json" --out "$TMP/j1" --force
expect_grep '16 cells, 8 finished before, 8 to run' "--force: the unchanged cells (s = 0) are kept" "$LAST_OUT"

# bad files: the key named, exit 2, DIR untouched
cp "$TMP/j1/results.csv" "$TMP/before.csv"
badfile() { # NAME JSON PATTERN
	printf '%s\n' "$2" >"$TMP/bad.json"
	expect_exit 2 "$1: exit 2" "$SL" sweep "$TMP/bad.json" --out "$TMP/j1" --force
	expect_grep "$3" "$1: named" "$LAST_OUT"
}
badfile "an unknown key" '{"wrokers": [1, 2]}' "cell 0 \(wrokers=1\): wrokers: unknown field"
badfile "a bad value in one cell" '{"rule": ["asgd", "bogus"]}' 'cell 1 \(rule=bogus\): rule: unknown "bogus"'
badfile "an empty list" '{"workers": []}' 'workers: an empty list'
badfile "a list in a list" '{"workers": [[1, 2]]}' 'workers\[0\]: a list inside a list'
badfile "a list for seeds" '{"seeds": [1, 2]}' 'seeds: expected a count'
badfile "too many cells" '{"a": [1,2,3,4,5,6,7,8,9,10,11], "b": [1,2,3,4,5,6,7,8,9,10], "c": [1,2,3,4,5,6,7,8,9,10], "d": [1,2,3,4,5,6,7,8,9,10], "e": [1,2,3,4,5,6,7,8,9,10]}' 'the grid has 110000 cells'
badfile "the wall clock" '{"clock": "wall"}' 'clock: a sweep runs on the virtual clock'
badfile "not JSON" '{"workers": 2,' 'bad.json: line 2'
cmp -s "$TMP/before.csv" "$TMP/j1/results.csv" && ok "bad files: nothing in DIR lost" || bad "DIR changed by a bad file"

# the summary over seeds, normalised by a baseline
expect_exit 0 "--summary with a baseline" "$SL" sweep --summary "$TMP/j2" --baseline delay.s=0 --metric updates_to_target
expect_grep 'rule=ssgd,workers=1,delay.s=0 +2 ' "a group per cell without its seed, n = 2" "$LAST_OUT"
printf '%s\n' "$LAST_OUT" | grep '^rule=ssgd,workers=1,delay.s=0 ' | grep -Eq ' 1$' &&
	ok "the baseline over itself is 1" || bad "baseline ratio" "$LAST_OUT"
python3 -c '
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1] + "/results.csv", newline="")))
summ = {r["group"]: r for r in csv.DictReader(open(sys.argv[1] + "/summary.csv", newline=""))}
g = summ["rule=asgd,workers=3,delay.s=4"]
xs = [float(r["stale_mean"]) for r in rows if r["rule"] == "asgd" and r["workers"] == "3" and r["delay.s"] == "4"]
m = sum(xs) / len(xs)
sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
sys.exit(0 if len(xs) == 2 and abs(float(g["stale_mean_mean"]) - m) < 1e-12 and
         abs(float(g["stale_mean_ci95"]) - 12.706 * sd / math.sqrt(2)) < 1e-9 else 1)' "$TMP/j2" &&
	ok "summary.csv: the mean and the 95% interval (t, 1 degree of freedom)" || bad "summary.csv numbers" "$(head -n 3 "$TMP/j2/summary.csv")"
expect_exit 2 "--baseline of no axis" "$SL" sweep --summary "$TMP/j2" --baseline lr=0.1
expect_grep '--baseline: lr is not an axis' "--baseline of no axis: named" "$LAST_OUT"
expect_exit 2 "--summary of no sweep" "$SL" sweep --summary "$TMP"
expect_grep 'no sweep here' "--summary of no sweep: said" "$LAST_OUT"

# the figures (gnuplot): a line per group, SVG and PNG, the data beside
expect_exit 0 "plot a sweep" "$SL" plot "$TMP/j2" --baseline delay.s=0
expect_grep 'figures/\{loss,accuracy,staleness,slowdown\}\.\{svg,png\}: 8 groups from 16 cells' "plot says what it drew" "$LAST_OUT"
ok_figs=1
for f in loss accuracy staleness slowdown; do
	head -c 400 "$TMP/j2/figures/$f.svg" 2>/dev/null | grep -q '<svg' || ok_figs=0
	[ "$(head -c 4 "$TMP/j2/figures/$f.png" 2>/dev/null | od -An -c | tr -d ' ')" = '211PNG' ] || ok_figs=0
done
[ $ok_figs = 1 ] && ok "four figures, each an SVG and a PNG" || bad "figures" "$(ls -l "$TMP/j2/figures")"
[ "$(grep -c '^# ' "$TMP/j2/figures/loss.dat")" = 8 ] && ok "loss.dat: a block per group" || bad "loss.dat blocks" "$(head "$TMP/j2/figures/loss.dat")"
grep -q "title \"rule=asgd,workers=3,delay.s=4\"" "$TMP/j2/figures/plots.gp" && ok "the lines are titled by their group" || bad "titles" "$(grep -m2 title "$TMP/j2/figures/plots.gp")"
python3 -c '
import sys
blocks = [b for b in open(sys.argv[1]).read().split("\n\n\n") if b.strip()]
# a line for each rule and worker count whose s = 0 reached the target
# with both seeds (not all do), each starting at 1 at s = 0
ok = len(blocks) >= 2 and all(b.splitlines()[1].split()[:2] == ["0", "1"] for b in blocks)
sys.exit(0 if ok else 1)' "$TMP/j2/figures/slowdown.dat" && ok "slowdown.dat: lines of rule and worker count, 1 at s = 0" || bad "slowdown.dat" "$(cat "$TMP/j2/figures/slowdown.dat")"
expect_exit 2 "plot with a baseline of no axis" "$SL" plot "$TMP/j2" --baseline lr=1
expect_grep '--baseline: lr is not an axis of this sweep' "a bad baseline: named" "$LAST_OUT"
expect_exit 2 "plot of no sweep" "$SL" plot "$TMP"
expect_exit 0 "sweep --plot" "$SL" sweep "$TMP/s.json" --out "$TMP/j2" --plot --quiet
[ "$(help_of plot)" = "$("$SL" plot --help)" ] && ok "help plot" || bad "help plot"

finish sweep
