#!/bin/sh
# Run every test of `make test`: the Check suites, then the integration
# scripts (tests/integration/*.sh, each given the binary's path and printing
# its own "name: N passed, M failed" line). The last line is the sum,
# "N passed, M failed", and the exit status is non-zero on any failure.
# Usage: tests/run_all.sh BUILD_DIR
build=${1:-build}
log=${TMPDIR:-/tmp}/sl-test.$$
rc=0
bins=""
for t in "$build"/tests/test_*; do
	case $t in *.o|*.d) continue ;; esac
	[ -x "$t" ] && bins="$bins $t"
done
# shellcheck disable=SC2086
sh tests/run_unit.sh $bins >"$log" 2>&1 || rc=1
cat "$log"
summary=$(grep -E '^unit: [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
pass=$(echo "$summary" | sed -E 's/^unit: ([0-9]+) passed.*/\1/')
fail=$(echo "$summary" | sed -E 's/.* ([0-9]+) failed.*/\1/')
[ -n "$pass" ] || { pass=0; fail=$((fail + 1)); }
if [ -z "$SL_VALGRIND" ]; then
	for t in tests/integration/*.sh; do
		[ -f "$t" ] || continue
		t0=$(date +%s)
		sh "$t" "$build/stalelab" >"$log" 2>&1 || rc=1
		cat "$log"
		echo "($t: $(($(date +%s) - t0)) s)"
		line=$(grep -E '^[a-z_-]+: [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
		if [ -z "$line" ]; then
			echo "$t: no summary line"; fail=$((fail + 1)); rc=1; continue
		fi
		p=$(echo "$line" | sed -E 's/^[a-z_-]+: ([0-9]+) passed.*/\1/')
		f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
		pass=$((pass + p)); fail=$((fail + f))
	done
fi
rm -f "$log"
echo "$pass passed, $fail failed"
[ "$rc" -eq 0 ] && [ "$fail" -eq 0 ]
