#!/bin/sh
# Run every Check suite binary given as arguments, without stopping at the
# first failure; print each suite's output, then sum the Checks/Failures/
# Errors lines. Prints "unit: N passed, M failed" and exits non-zero on any
# failure. With SL_VALGRIND=1 each suite runs under valgrind (CK_FORK=no),
# leaving out the cases tagged "slow" (long deterministic runs that take tens
# of minutes under memcheck; make asan runs them).
rc=0; total=0; bad=0
out=${TMPDIR:-/tmp}/sl-unit.$$
for t in "$@"; do
	t0=$(date +%s)
	if [ -n "$SL_VALGRIND" ]; then
		CK_FORK=no CK_EXCLUDE_TAGS=slow valgrind -q --error-exitcode=99 \
			--suppressions="$(dirname "$0")/valgrind.supp" \
			--leak-check=full --errors-for-leak-kinds=definite \
			"$t" >"$out" 2>&1 || rc=1
	else
		"$t" >"$out" 2>&1 || rc=1
	fi
	cat "$out"
	echo "($t: $(($(date +%s) - t0)) s)"
	line=$(grep -E '^[0-9]+%: Checks: ' "$out" | tail -n 1)
	if [ -z "$line" ]; then
		echo "$t: no Check summary (crashed?)"; rc=1; bad=$((bad + 1)); continue
	fi
	n=$(echo "$line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
	f=$(echo "$line" | sed -E 's/.*Failures: ([0-9]+).*/\1/')
	e=$(echo "$line" | sed -E 's/.*Errors: ([0-9]+).*/\1/')
	total=$((total + n)); bad=$((bad + f + e))
done
rm -f "$out"
echo "unit: $((total - bad)) passed, $bad failed"
[ $rc -eq 0 ] && [ $bad -eq 0 ]
