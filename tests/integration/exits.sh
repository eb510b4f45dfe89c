#!/bin/sh
# How `stalelab run` ends, as a script sees it: a stop option of 0 is
# refused with its range (it was accepted, then the run trained its default
# 3 epochs); a run object whose stop fields are 0 runs until interrupted;
# Ctrl-C exits 130 and SIGTERM 143 (an interrupted run exited 0 like a
# finished one), the end record saying "stop": "interrupted"; a run that
# meets its own stop exits 0.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: how stalelab run ends (stop options, exit codes)"

for f in "--steps 0" "--epochs 0" "--epochs 0.0" "--seconds 0" "--target-acc 0"; do
	# shellcheck disable=SC2086
	expect_exit 2 "run $f is refused" "$SL" run -d synthetic:300 $f --log /dev/null
	flag=${f%% *}
	expect_grep "^stalelab run: $flag: must be (>= 1|> 0)" "run $f: the message names $flag and its range" "$LAST_OUT"
done
expect_exit 2 "run --steps -1 is refused" "$SL" run --steps -1 --log /dev/null
expect_exit 0 "run --help" "$SL" run --help
expect_grep '130 interrupted by SIGINT' "run --help: exit 130 for SIGINT" "$LAST_OUT"
expect_grep '143 by SIGTERM' "run --help: exit 143 for SIGTERM" "$LAST_OUT"
expect_grep 'stop fields are all 0' "run --help: a run object's stop of 0 is no limit" "$LAST_OUT"

# interrupt a run that would go on for long: the exit status and the end
# record tell it from a finished one
interrupt() { # SIGNAL WANT-CODE CONFIG-OR-FLAGS...
	sig=$1; want=$2; shift 2
	"$SL" run -d synthetic:300 --eval-every 5 --log "$TMP/$sig.jsonl" "$@" 2>"$TMP/$sig.err" &
	pid=$!
	if ! wait_until 60 has_lines 3 "$TMP/$sig.jsonl"; then
		bad "$sig: the run logged its first evaluations" "$(cat "$TMP/$sig.err")"
	fi
	kill -"$sig" $pid
	wait $pid
	code=$?
	[ "$code" -eq "$want" ] && ok "$sig: exit $want" || bad "$sig: exit $want (got $code)" "$(tail -3 "$TMP/$sig.err")"
	tail -n 1 "$TMP/$sig.jsonl" | grep -q '"event":"end".*"stop":"interrupted"' &&
		ok "$sig: the end record says \"stop\": \"interrupted\"" ||
		bad "$sig: the end record says interrupted" "$(tail -n 1 "$TMP/$sig.jsonl" | cut -c1-300)"
	grep -q "^interrupted (SIG$sig)" "$TMP/$sig.err" && ok "$sig: the summary says interrupted (SIG$sig)" ||
		bad "$sig: the summary says interrupted" "$(tail -3 "$TMP/$sig.err")"
}
interrupt INT 130 --epochs 100000
interrupt TERM 143 --epochs 100000

# the run object's stop of 0 is no limit: it runs until interrupted
printf '{"stop": {"steps": 0}}\n' >"$TMP/nostop.json"
"$SL" run -c "$TMP/nostop.json" -d synthetic:300 --eval-every 5 --log "$TMP/nostop.jsonl" 2>"$TMP/nostop.err" &
pid=$!
wait_until 60 has_lines 3 "$TMP/nostop.jsonl"
grep -q 'no stop (the run object.s stop fields are 0, no limit)' "$TMP/nostop.err" &&
	ok "a run object's stop of 0: it says the run has no stop" ||
	bad "a run object's stop of 0: says no stop" "$(cat "$TMP/nostop.err")"
# past the 3 epochs the default would stop at (300 samples, batch 64: 15 updates)
wait_until 60 sh -c "grep -q '\"v\":[2-9][0-9]' '$TMP/nostop.jsonl'" &&
	ok "a run object's stop of 0: it trains past the default 3 epochs" ||
	bad "a run object's stop of 0: trains past 3 epochs" "$(tail -n 2 "$TMP/nostop.jsonl" | cut -c1-200)"
kill -INT $pid; wait $pid; code=$?
[ "$code" -eq 130 ] && ok "a run object's stop of 0: Ctrl-C ends it (130)" || bad "stop of 0: Ctrl-C (got $code)"

# a sweep interrupted: 130 for SIGINT, 143 for SIGTERM (it said 130 for both)
cat >"$TMP/sweep.json" <<'JSON'
{"model": "mlp:784-64-10", "dataset": "synthetic:4000", "batch": 16, "eval_every": 50,
 "workers": [1, 2, 4, 8], "stop": {"epochs": 50}}
JSON
for sig in INT TERM; do
	"$SL" sweep "$TMP/sweep.json" --out "$TMP/sw-$sig" --quiet --jobs 1 2>"$TMP/sw-$sig.err" &
	pid=$!
	wait_until 60 sh -c "ls '$TMP/sw-$sig/cells' 2>/dev/null | grep -q ."
	kill -"$sig" $pid; wait $pid; code=$?
	want=130; [ $sig = TERM ] && want=143
	[ "$code" -eq "$want" ] && ok "sweep: SIG$sig exits $want" || bad "sweep: SIG$sig exits $want (got $code)" "$(cat "$TMP/sw-$sig.err")"
done

# a run that meets its own stop exits 0 with that stop
expect_exit 0 "a run that meets its stop exits 0" "$SL" run -d synthetic:300 --steps 10 --log "$TMP/done.jsonl" -q
tail -n 1 "$TMP/done.jsonl" | grep -q '"stop":"steps"' && ok "its end record says \"stop\": \"steps\"" ||
	bad "its end record says steps" "$(tail -n 1 "$TMP/done.jsonl" | cut -c1-300)"
finish exits
