#!/bin/sh
# Crash safety (docs/reliability.md, "Crash safety"): a small virtual-clock
# run with --checkpoint-every is killed with SIGKILL at random moments,
# KILLS times (default 12; seeded, the seed is printed: CRASH_SEED=N
# replays the same moments). After each kill: every whole line of the log
# is a JSON object (a partial last line is allowed), the newest checkpoint
# loads, and `--resume DIR` with the same log goes on to the end; the
# continued log must then hold exactly the records of an uninterrupted run
# (on the virtual clock: bit for bit, machine timings aside) and its end
# record the same hash of the final weights. Every fifth round the resumed
# run is killed too and resumed once more.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: crash safety (kill -9 and resume)"

KILLS=${CRASH_KILLS:-12}
[ -n "$SL_ASAN" ] && [ -z "$CRASH_KILLS" ] && KILLS=10 # ASan: 3x slower
SEED=${CRASH_SEED:-$(date +%s)}
echo "  seed $SEED (CRASH_SEED=$SEED replays these moments), $KILLS kills"

STEPS=600
RUN="--clock virtual --dataset synthetic:1000 --model mlp:784-16-10 --workers 3
 --threads 1 --steps $STEPS --eval-every 60 --quiet"
CK="--checkpoint-every 30 --checkpoint-dir"

# the reference: never interrupted (and without checkpoints: taking them
# must not change the run)
t0=$(date +%s.%N)
# shellcheck disable=SC2086
expect_exit 0 "uninterrupted reference run" "$SL" run $RUN --log "$TMP/ref.jsonl"
t1=$(date +%s.%N)
echo "  the reference run took $(echo "$t0 $t1" | awk '{ printf "%.2f", $2 - $1 }') s"

# check_log LOG: every whole line a JSON object, the first a run object
# (or no log yet, killed before it was made); prints "ok LINES PARTIAL
# LAST_V"
check_log() {
	python3 - "$1" <<'PY'
import json, os, sys
if not os.path.exists(sys.argv[1]) or not os.path.getsize(sys.argv[1]):
    print("ok 0 0 0")  # killed before its first line
    sys.exit(0)
data = open(sys.argv[1], "rb").read()
lines = data.split(b"\n")
partial = lines.pop()  # after the last "\n": empty, or a line cut short
assert lines, "no whole line"
recs = [json.loads(l) for l in lines]
assert all(isinstance(r, dict) for r in recs), "a line is no JSON object"
assert "model" in recs[0] and "event" not in recs[0], "the first line is no run object"
vs = [r["v"] for r in recs if isinstance(r.get("v"), int)]
print("ok", len(recs), len(partial), max(vs) if vs else 0)
PY
}

# same_run LOG: its records (run objects aside) are the reference's, field
# for field but the machine's timings, and so is the end's weights hash
same_run() {
	python3 - "$TMP/ref.jsonl" "$1" <<'PY'
import json, sys
machine = ("samples_per_s", "updates_per_s", "train_s")
def recs(p):
    out = []
    for r in map(json.loads, open(p)):
        if "model" in r and "event" not in r:
            continue
        out.append({k: v for k, v in r.items() if k not in machine})
    return out
a, b = recs(sys.argv[1]), recs(sys.argv[2])
assert a[-1]["event"] == "end" and "weights" in a[-1], a[-1]
if a != b:
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    brief = lambda r: r and {k: r.get(k) for k in ("event", "v", "train_loss", "test_loss", "weights") if k in r}
    print("record", i, "of", len(a), "(resumed log:", len(b), "records) differs:",
          brief(a[i] if i < len(a) else None), "vs", brief(b[i] if i < len(b) else None))
    sys.exit(1)
print("ok", len(b), b[-1]["weights"])
PY
}

newest() { ls "$1" 2>/dev/null | sed -n 's/^stalelab-v\([0-9]*\)\.ckpt$/\1/p' | sort -n | tail -n 1; }

# the kill moments, "V D" per line (round r's first kill on line 2r-1, its
# second on 2r): D seconds (0 to 0.1) after the log reaches version V (0 to
# 95% of the run's). In versions, not seconds, so they fall anywhere in the
# run however loaded the machine is.
python3 -c 'import random, sys; s, k, n = map(int, sys.argv[1:])
g = random.Random(s)
for i in range(2 * k):
    print(g.randrange(n * 95 // 100), "%.3f" % g.uniform(0, 0.1))' "$SEED" "$KILLS" "$STEPS" >"$TMP/moments"
moment() { sed -n "$(($1 * 2 - 1 + $2))p" "$TMP/moments"; }

# logged_v LOG: the version of the log's last whole record
logged_v() {
	tail -c 2000 "$1" 2>/dev/null | sed -n 's/.*"v":\([0-9]*\).*/\1/p' | tail -n 1
}

# kill_at "V D" LOG DIR [resume]: start the run (or its resume), SIGKILL it
# at that moment (or once it exits by itself)
kill_at() {
	if [ "$4" = resume ]; then
		# shellcheck disable=SC2086
		"$SL" run --resume "$3" $CK "$3" --log "$2" --quiet 2>>"$TMP/err" &
	else
		# shellcheck disable=SC2086
		"$SL" run $RUN $CK "$3" --log "$2" 2>>"$TMP/err" &
	fi
	pid=$!
	want=${1% *}
	while kill -0 "$pid" 2>/dev/null; do
		v=$(logged_v "$2")
		[ "${v:-0}" -ge "$want" ] && break
		sleep 0.03
	done
	sleep "${1#* }"
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
}

fails=0; nockpt=0; done_before=0
round=1
while [ "$round" -le "$KILLS" ]; do
	d=$TMP/r$round; log=$d.jsonl
	at=$(moment "$round" 0)
	kill_at "$at" "$log" "$d"
	res=$(check_log "$log" 2>&1) || { bad "round $round: log after a kill at ${at} s" "$res"; round=$((round + 1)); continue; }
	grep -qs '"event":"end"' "$log" && done_before=$((done_before + 1))
	v=$(newest "$d")
	note="kill ${at#* } s after v ${at% *}: $(echo "$res" | awk '{ printf "%d lines, %d-byte partial line, v %d", $2, $3, $4 }')"
	if [ -z "$v" ]; then
		# killed before the first checkpoint: a new start is all there is
		nockpt=$((nockpt + 1))
		note="$note, no checkpoint yet: started again"
		rm -f "$log"
		# shellcheck disable=SC2086
		"$SL" run $RUN $CK "$d" --log "$log" 2>>"$TMP/err" || fails=$((fails + 1))
	else
		note="$note, newest checkpoint v $v"
		if [ $((round % 5)) -eq 0 ]; then
			at2=$(moment "$round" 1)
			kill_at "$at2" "$log" "$d" resume
			res=$(check_log "$log" 2>&1) || bad "round $round: log after the second kill" "$res"
			note="$note, resumed and killed again ${at2#* } s after v ${at2% *} (newest v $(newest "$d"))"
		fi
		if ! "$SL" run --resume "$d" $CK "$d" --log "$log" --quiet 2>>"$TMP/err"; then
			bad "round $round: resume from $d (v $v)" "$(tail -n 3 "$TMP/err")"
			round=$((round + 1)); continue
		fi
	fi
	n=$(ls "$d" | grep -c '^stalelab-v[0-9]*\.ckpt$')
	[ "$n" -le 2 ] || bad "round $round: $n checkpoints left, want at most 2 (--checkpoint-keep)" "$(ls "$d")"
	res=$(same_run "$log" 2>&1) && ok "round $round: $note; the end is the reference's" \
		|| bad "round $round: $note; the resumed run's log differs from the reference" "$res"
	rm -rf "$d" "$log"
	round=$((round + 1))
done
t2=$(date +%s.%N)
echo "  $KILLS kills in $(echo "$t1 $t2" | awk '{ printf "%.1f", $2 - $1 }') s ($nockpt before the first checkpoint, $done_before after the end record)"

# a truncated checkpoint is refused, naming the file and what is missing
"$SL" run $RUN $CK "$TMP/t" --log "$TMP/t.jsonl" 2>/dev/null
v=$(newest "$TMP/t")
head -c 5000 "$TMP/t/stalelab-v$v.ckpt" >"$TMP/cut.ckpt"
expect_exit 2 "a truncated checkpoint is refused" "$SL" run --resume "$TMP/cut.ckpt" --quiet
expect_grep 'truncated: 5000 of [0-9]+ bytes' "the refusal says how much is there" "$LAST_OUT"
# a new run refuses a checkpoint directory that holds another run's
# shellcheck disable=SC2086
expect_exit 2 "a new run refuses a used --checkpoint-dir" "$SL" run $RUN $CK "$TMP/t" --log "$TMP/u.jsonl"
expect_grep "holds a checkpoint at v $v" "the refusal names the checkpoint" "$LAST_OUT"
expect_exit 2 "--resume of a directory without checkpoints" "$SL" run --resume "$TMP" --quiet
expect_grep 'holds no checkpoint' "the refusal says why" "$LAST_OUT"
expect_exit 2 "--checkpoint-every without a directory" "$SL" run --checkpoint-every 10
expect_exit 2 "--checkpoint-every 0" "$SL" run --checkpoint-every 0 --checkpoint-dir "$TMP/z"
expect_grep 'checkpoint-every: expected' "the refusal names the flag" "$LAST_OUT"
# a resumed run will not continue another run's log
# shellcheck disable=SC2086
"$SL" run $RUN --seed 7 --steps 50 --log "$TMP/other.jsonl" 2>/dev/null
expect_exit 2 "resume into another run's log" "$SL" run --resume "$TMP/t" --log "$TMP/other.jsonl" --quiet
expect_grep "another run's log \(its seed differs" "the refusal says whose" "$LAST_OUT"
# a truncated log (a cut in the middle of its last line) is continued,
# from the checkpoint before the last
rm "$TMP/t/stalelab-v$(newest "$TMP/t").ckpt"
python3 -c 'import sys; p=sys.argv[1]; d=open(p,"rb").read(); open(p,"wb").write(d[:len(d)-40])' "$TMP/t.jsonl"
expect_exit 0 "resume continues a log cut mid-line" "$SL" run --resume "$TMP/t" $CK "$TMP/t" --log "$TMP/t.jsonl" --quiet
res=$(same_run "$TMP/t.jsonl" 2>&1)
expect_grep '^ok' "the continued log is the reference run's" "$res"
# --replay of a continued log replays the whole run
expect_exit 0 "replay the continued log" "$SL" run --replay "$TMP/t.jsonl" --log "$TMP/rp.jsonl" --quiet
res=$(same_run "$TMP/rp.jsonl" 2>&1)
expect_grep '^ok' "the replay of a continued log is the whole run" "$res"

[ "$fails" -eq 0 ] || bad "$fails restarts failed" "$(tail -n 5 "$TMP/err")"
finish crash
