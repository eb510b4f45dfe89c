#!/bin/sh
# Error paths of a run, as a user meets them: an allocation that fails in
# the middle of a run (an LD_PRELOAD shim makes malloc of one size fail
# after N calls) fails the run with the reason, on both clocks: exit 1, the
# message on stderr, and a log that ends with an end record whose stop is
# "failed", so nothing already logged is lost.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: error paths"

SHIM="$TMP/failmalloc.so"
if ! cc -shared -fPIC -O1 -o "$SHIM" "$(dirname "$0")/../shim/failmalloc.c" -ldl 2>"$TMP/cc.err"; then
	bad "build the malloc shim" "$(cat "$TMP/cc.err")"
	finish errors
	exit 1
fi
# mlp:784-16-10 has 12,730 parameters: a held gradient is 50,920 bytes
echo '{"delay": {"dist": "const", "mean_ms": 2, "where": "server"}}' >"$TMP/held.json"
# ASan's runtime must be the first library loaded, so its builds skip the shim
clocks="virtual wall"
[ -n "$SL_ASAN" ] && { echo "  (ASan build: the malloc shim cannot preload; shim cases left out)"; clocks=""; }
for clock in $clocks; do
	FAILMALLOC_SIZE=50920 FAILMALLOC_AFTER=20 LD_PRELOAD="$SHIM" \
		"$SL" run --config "$TMP/held.json" --model mlp:784-16-10 \
		--dataset synthetic:2000 --clock $clock --workers 2 --steps 300 \
		--quiet --log "$TMP/fail-$clock.jsonl" 2>"$TMP/fail-$clock.err"
	rc=$?
	[ "$rc" -eq 1 ] && ok "$clock: a failed allocation exits 1" ||
		bad "$clock: a failed allocation exits 1 (exit $rc)" "$(cat "$TMP/fail-$clock.err")"
	expect_grep "the run failed at version [0-9]+: out of memory holding a gradient" \
		"$clock: stderr says why" "$(cat "$TMP/fail-$clock.err")"
	last=$(tail -n 1 "$TMP/fail-$clock.jsonl")
	expect_grep '"event":"end".*"stop":"failed"' "$clock: the log ends with a failed end record" "$last"
	n=$(python3 -c 'import json,sys; print(sum(1 for l in open(sys.argv[1]) if json.loads(l)))' \
		"$TMP/fail-$clock.jsonl" 2>&1)
	expect_grep '^[0-9]+$' "$clock: every log line is JSON" "$n"
done
# the same run without the shim finishes
"$SL" run --config "$TMP/held.json" --model mlp:784-16-10 --dataset synthetic:2000 \
	--clock virtual --workers 2 --steps 300 --quiet --log "$TMP/ok.jsonl" 2>"$TMP/ok.err"
rc=$?
[ "$rc" -eq 0 ] && ok "without the shim the run ends at its stop" || bad "run without the shim (exit $rc)" "$(cat "$TMP/ok.err")"
expect_grep '"stop":"steps"' "stop reason steps" "$(tail -n 1 "$TMP/ok.jsonl")"
finish errors
