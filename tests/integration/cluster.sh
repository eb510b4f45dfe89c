#!/bin/sh
# Integration tests of `stalelab cluster` as a user runs it: the
# hand-computed trace T3 (docs/cluster.md) through the command line, its
# files, a synthetic trace (the same seed, the same bytes), and bad input
# named by file, line and field with exit status 2.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: cluster"

# T3 of docs/cluster.md: two 2-GPU jobs of a model with full and half backprop
cp tests/fixtures/cluster/t3-profiles.csv "$TMP/prof.csv"
cp tests/fixtures/cluster/t3-jobs.csv "$TMP/t3.csv"

expect_exit 0 "T3, every policy" "$SL" cluster -t "$TMP/t3.csv" -p "$TMP/prof.csv" -g 2 -m 16 -o "$TMP/out"
expect_grep '^fifo +30\.0 +20\.0 +40\.0 +40\.0 +1\.000 +0\.500 ' "fifo: 30 s on average, 40 s makespan" "$LAST_OUT"
expect_grep '^gandiva +30\.0 .* \+0\.0%$' "gandiva cannot pack (10 + 10 GB > 16)" "$LAST_OUT"
expect_grep '^jigsaw +16\.8 +16\.8 +16\.8 +16\.8 +2\.000 +1\.000 .* \+138\.1%$' "jigsaw packs two halves: 16.8 s, +138%" "$LAST_OUT"
for f in summary.csv jobs_fifo.csv jobs_jigsaw.csv timeline_jigsaw.csv gpus.svg jct.svg gpus.png jct.png; do
	[ -s "$TMP/out/$f" ] && ok "--out wrote $f" || bad "--out wrote $f" "$(ls "$TMP/out")"
done
expect_grep "timeline_jigsaw.csv' skip 1 using" "cluster.gp draws from the timelines" "$(cat "$TMP/out/cluster.gp")"
grep -q '<svg' "$TMP/out/jct.svg" && ok "jct.svg is an SVG" || bad "jct.svg is an SVG" "$(head -c 200 "$TMP/out/jct.svg")"
expect_grep '^jigsaw,2,16\.8' "summary.csv has jigsaw's row" "$(cat "$TMP/out/summary.csv")"
expect_grep '^2,0\.000000,2,spb,0\.000000,16\.800000,16\.800000,0\.000000,.*,0,half$' \
	"jobs_jigsaw.csv: J2 ran half backprop, done at 16.8" "$(cat "$TMP/out/jobs_jigsaw.csv")"

expect_exit 0 "--policy gandiva --spb best" "$SL" cluster -t "$TMP/t3.csv" -p "$TMP/prof.csv" -g 2 -m 16 -P gandiva --spb best
expect_grep '^gandiva +16\.8 ' "gandiva with each job's best schedule packs the halves" "$LAST_OUT"
[ "$(printf '%s\n' "$LAST_OUT" | grep -c '^jigsaw')" -eq 0 ] && ok "--policy prints that policy alone (fifo runs unseen: the gain's baseline)" || bad "--policy gandiva printed jigsaw" "$LAST_OUT"

# a synthetic trace: the same seed, the same file; another seed, another
"$SL" cluster synth -p "$TMP/prof.csv" --jobs 300 --rate 40 --gpus 16 --seed 5 >"$TMP/a.csv"
"$SL" cluster synth -p "$TMP/prof.csv" --jobs 300 --rate 40 --gpus 16 --seed 5 >"$TMP/b.csv"
"$SL" cluster synth -p "$TMP/prof.csv" --jobs 300 --rate 40 --gpus 16 --seed 6 >"$TMP/c.csv"
cmp -s "$TMP/a.csv" "$TMP/b.csv" && ok "synth: the same seed, the same trace" || bad "synth: the same seed, the same trace"
cmp -s "$TMP/a.csv" "$TMP/c.csv" && bad "synth: another seed, the same trace" || ok "synth: another seed, another trace"
[ "$(grep -c '^[0-9]' "$TMP/a.csv")" -eq 300 ] && ok "synth: 300 jobs" || bad "synth: 300 jobs" "$(head -3 "$TMP/a.csv")"
expect_exit 0 "the synthetic trace on 16 GPUs" "$SL" cluster -t "$TMP/a.csv" -p "$TMP/prof.csv" -g 16 -m 16
run1=$LAST_OUT
expect_exit 0 "... again" "$SL" cluster -t "$TMP/a.csv" -p "$TMP/prof.csv" -g 16 -m 16
[ "$run1" = "$LAST_OUT" ] && ok "a simulation is deterministic" || bad "two runs differ" "$run1"
# las decides incrementally; --verify checks each decision against a full
# ranking and changes nothing
expect_exit 0 "las, thresholds 20 and 200" "$SL" cluster -t "$TMP/a.csv" -p "$TMP/prof.csv" -g 16 -m 16 -P las --las-thresholds 20,200
run1=$LAST_OUT
expect_exit 0 "... with --verify" "$SL" cluster -t "$TMP/a.csv" -p "$TMP/prof.csv" -g 16 -m 16 -P las --las-thresholds 20,200 --verify
[ "$run1" = "$LAST_OUT" ] && ok "--verify agrees and changes nothing" || bad "--verify changed the result" "$LAST_OUT"
expect_exit 0 "srtf with --verify" "$SL" cluster -t "$TMP/a.csv" -p "$TMP/prof.csv" -g 16 -m 16 -P srtf --verify
[ "$(printf '%s\n' "$LAST_OUT" | grep -c 'note:')" -eq 0 ] && ok "... checked, no note" || bad "... a note" "$LAST_OUT"
expect_exit 0 "gandiva with --verify" "$SL" cluster -t "$TMP/t3.csv" -p "$TMP/prof.csv" -g 2 -m 16 -P gandiva --verify
expect_grep "note: --verify checks las's decisions, and srtf's without --spb best or --restart-s; gandiva's here are not checked" "... says what it checks" "$LAST_OUT"

# bad input: the file, the line and the field; exit status 2
printf 'job_id,arrival_s,num_gpus,model,iters_full\n1,0,2,spb,10\n2,-5,1,spb,3\n' >"$TMP/neg.csv"
expect_exit 2 "a negative arrival" "$SL" cluster -t "$TMP/neg.csv" -p "$TMP/prof.csv" -g 2 -m 16
expect_grep 'neg\.csv:3: arrival_s: must be >= 0' "... names line 3 and arrival_s" "$LAST_OUT"
printf 'job_id,arrival_s,model,iters_full\n1,0,spb,10\n' >"$TMP/col.csv"
expect_exit 2 "a missing column" "$SL" cluster -t "$TMP/col.csv" -p "$TMP/prof.csv" -g 2 -m 16
expect_grep 'col\.csv:1: missing column "num_gpus"' "... names the column" "$LAST_OUT"
printf 'job_id,arrival_s,num_gpus,model,iters_full\n1,0,4,spb,10\n' >"$TMP/big.csv"
expect_exit 2 "more GPUs than the cluster has" "$SL" cluster -t "$TMP/big.csv" -p "$TMP/prof.csv" -g 2 -m 16
expect_grep "big\.csv:2: num_gpus: 4, more than the cluster's 2" "... names the line" "$LAST_OUT"
printf 'job_id,arrival_s,num_gpus,model,iters_full\n1,0,1,spb,10\n1,5,1,spb,3\n' >"$TMP/dup.csv"
expect_exit 2 "a job_id given twice" "$SL" cluster -t "$TMP/dup.csv" -p "$TMP/prof.csv" -g 2 -m 16
expect_grep 'dup\.csv:3: job_id: 1 again \(first on line 2\)' "... names both lines" "$LAST_OUT"
expect_exit 2 "a model that does not fit a GPU" "$SL" cluster -t "$TMP/t3.csv" -p "$TMP/prof.csv" -g 2 -m 8
expect_grep "model spb, schedule full: mem_gb 10 does not fit a GPU's 8" "... names model and schedule" "$LAST_OUT"
expect_exit 2 "an unknown policy" "$SL" cluster -t "$TMP/t3.csv" -p "$TMP/prof.csv" -g 2 -P lifo
expect_grep 'unknown "lifo" \(expected fifo, srtf, las, gandiva, jigsaw or all\)' "... lists the policies" "$LAST_OUT"
expect_exit 2 "no trace" "$SL" cluster -p "$TMP/prof.csv" -g 2
expect_exit 2 "a missing file" "$SL" cluster -t "$TMP/none.csv" -p "$TMP/prof.csv" -g 2
expect_grep 'none\.csv' "... names it" "$LAST_OUT"
# the Philly trace's job log converted (tools/philly_jobs.py) on a sample
# of its shape: attempts summed, GPUs over machines, unusable jobs counted
PH=tests/fixtures/cluster/philly-sample.json
expect_exit 0 "philly_jobs.py converts a Philly job log" python3 tools/philly_jobs.py "$PH" \
	--profiles "$TMP/prof.csv" --max-gpus 8 --min-minutes 1
printf '%s\n' "$LAST_OUT" >"$TMP/philly.csv"
expect_grep '^1,0,4,spb,5400,application_1506638472019_10239$' \
	"philly: the first submitted, its two attempts summed, its largest attempt's GPUs over two machines" "$LAST_OUT"
expect_grep '^2,199,4,spb,7200,application_1506638472019_10238$' "philly: arrival from the earliest submission" "$LAST_OUT"
expect_grep '^# left out: 2 \(no attempt with a start and a later end\)$' "philly: jobs without a usable attempt counted" "$LAST_OUT"
expect_grep '^# left out: 1 \(more than 8 GPUs\)$' "philly: --max-gpus" "$LAST_OUT"
expect_grep '^# left out: 1 \(duration outside the minutes kept\)$' "philly: --min-minutes" "$LAST_OUT"
expect_exit 0 "the converted trace drives a simulation" "$SL" cluster -t "$TMP/philly.csv" -p "$TMP/prof.csv" -g 8 -m 16 -P fifo
expect_grep '^fifo +6300\.0 +5400\.0 +7200\.0 ' "philly: fifo runs both at once, JCTs their durations" "$LAST_OUT"
echo '{"jobs": []}' >"$TMP/notphilly.json"
expect_exit 1 "philly: not a job log" python3 tools/philly_jobs.py "$TMP/notphilly.json" --profiles "$TMP/prof.csv"
expect_grep 'expected a JSON array of jobs' "philly: ... said" "$LAST_OUT"
# profiles measured by the engine: a small model on the synthetic set
expect_exit 0 "cluster profile of a small MLP" "$SL" cluster profile -m mlp:784-32-10 -d synthetic:2400 \
	--target-acc 0.5 --seeds 2 -S 0.2 --max-epochs 20
printf '%s\n' "$LAST_OUT" | grep -v '^stalelab' >"$TMP/measured.csv"
expect_grep '^# compute_s: one worker.s step at batch 64 on cpu' "the profile says where it was timed" "$LAST_OUT"
expect_grep '^# iter_mult: updates to test accuracy 0.5 over full backprop.s' "... and how the multipliers were measured" "$LAST_OUT"
expect_grep '^# layers at batch 64, per batch' "the profile has the per-layer lines" "$LAST_OUT"
expect_grep '^#   0 dense +forward +[0-9.]+ us +backward +[0-9.]+ us +params +100480 B +activations +8192 B ' \
	"layer 0: its times, 784 x 32 + 32 floats of parameters, 32 x 64 of activations" "$LAST_OUT"
expect_grep '^#   1 dense .* params +1320 B ' "layer 1: 32 x 10 + 10 floats" "$LAST_OUT"
expect_grep '^mlp:784-32-10,full,[0-9.e-]+,[0-9.e-]+,[0-9.e-]+,1\.0000$' "full backprop's row, multiplier 1" "$LAST_OUT"
expect_grep '^mlp:784-32-10,top1,|^# top1: missed' "the partial depth: a row, or why it is left out" "$LAST_OUT"
printf 'job_id,arrival_s,num_gpus,model,iters_full\n1,0,1,mlp:784-32-10,1000\n2,0,1,mlp:784-32-10,1000\n' >"$TMP/small.csv"
expect_exit 0 "the measured profile drives a simulation" "$SL" cluster -t "$TMP/small.csv" -p "$TMP/measured.csv" -g 1
# a residual net: full backprop and each block boundary (resnet:8: the
# head, the 3 blocks from their first conv, the stem's bn), not its 14
# partial depths; an easy target on tiny data keeps it short
expect_exit 0 "cluster profile of resnet:8 on tiny data" "$SL" cluster profile -m resnet:8 \
	-d synthetic:600 --target-acc 0.15 --seeds 1 --max-epochs 1 --eval-every 2 -S 0.05
expect_grep '^# schedules: full and topD for D = 1, 5, 9, 13, 14 \(the depths a run.s spb_depth takes' \
	"... says which depths and why" "$LAST_OUT"
depths=$(printf '%s\n' "$LAST_OUT" | sed -n 's/^resnet:8,\([a-z0-9]*\),.*/\1/p; s/^# \(top[0-9]*\): missed.*/\1/p' | tr '\n' ' ')
[ "$depths" = "full top1 top5 top9 top13 top14 " ] && ok "... its depth column: full and the cut depths (a row, or why it is left out)" ||
	bad "resnet:8's depths" "$depths"
expect_grep '^stalelab cluster profile: 6 depths of resnet:8 in [0-9]+ s$' "... and how long it took" "$LAST_OUT"
# --depths: sorted, full backprop added, each once (the header is out
# before full backprop misses the impossible target)
expect_exit 1 "--depths 9,1,9" "$SL" cluster profile -m resnet:8 -d synthetic:200 --depths 9,1,9 \
	--target-acc 1 --max-epochs 0.05 --seeds 1 -S 0.05
expect_grep '^# schedules: full and topD for D = 1, 9 \(--depths\)$' "... full, top1 and top9" "$LAST_OUT"
expect_exit 2 "--depths inside a block" "$SL" cluster profile -m resnet:8 -d synthetic:200 --depths 0,3
expect_grep '^stalelab cluster profile: --depths: 3 ends inside a block of resnet:8: expected 0 \(full backprop\) or a block boundary: 1, 5, 9, 13, 14 \(the nearest: 1 and 5\)$' \
	"... refused naming the option and the depths" "$LAST_OUT"
expect_exit 2 "--depths not a number" "$SL" cluster profile -m resnet:8 -d synthetic:200 --depths 1,x
expect_grep '^stalelab cluster profile: --depths: expected depths from 0 \(full backprop\) to 14, comma-separated \(0,5,9\), got "x"$' \
	"... named" "$LAST_OUT"
expect_exit 2 "--depths past the model" "$SL" cluster profile -m mlp:784-32-10 -d synthetic:200 --depths 2
expect_grep '\-\-depths: expected depths from 0 \(full backprop\) to 1, ' "... named, with the range" "$LAST_OUT"
expect_exit 2 "profile: no model" "$SL" cluster profile
expect_exit 2 "profile: a bad target" "$SL" cluster profile -m logreg --target-acc 2
expect_grep 'target-acc: expected a number > 0 and <= 1' "... named" "$LAST_OUT"
expect_exit 0 "--help" "$SL" cluster --help
expect_grep 'synth' "--help shows synth" "$LAST_OUT"

finish cluster
