#!/bin/sh
# Run every test of `make test`: the Check suites and the integration
# scripts (tests/integration/*.sh, each given the binary's path and printing
# its own "name: N passed, M failed" line), SL_TEST_JOBS of them at a time
# (default: the cores plus one, since some scripts spend their time
# waiting on a daemon, a browser or a socket; 1 runs them one after the
# other). Each job's output is printed whole when it ends, with its time.
# The last line is the sum, "N passed, M failed", and the exit status is
# non-zero on any failure. The scripts are written for a loaded machine
# (lib.inc: they poll with deadlines, never read after a fixed sleep), so
# running them side by side is a test of that too.
# Usage: tests/run_all.sh BUILD_DIR
build=${1:-build}
jobs=${SL_TEST_JOBS:-$(($(nproc 2>/dev/null || echo 1) + 1))}
out=$(mktemp -d "${TMPDIR:-/tmp}/sl-test.XXXXXX")
trap 'rm -rf "$out"' EXIT

# The longest first, so that the pool does not end on one of them alone
# (their times on 2 cores, tests/run_job.sh prints each): the rest follow
# in name order.
first="results libfuzz remote dashboard isa netns crash fuzz graph resnet"
# ... and those that time the daemon against a bound of their own, with
# the load they make themselves: after the others, alone
alone="responsive"
list=$out/list
: >"$list"
for t in "$build"/tests/test_*; do
	case $t in *.o|*.d) continue ;; esac
	[ -x "$t" ] && echo "unit $t" >>"$list"
done
if [ -z "$SL_VALGRIND" ]; then
	for n in $first; do
		[ -f "tests/integration/$n.sh" ] && echo "int tests/integration/$n.sh" >>"$list"
	done
	for t in tests/integration/*.sh; do
		[ -f "$t" ] || continue
		n=$(basename "$t" .sh)
		case " $first $alone " in *" $n "*) continue ;; esac
		echo "int $t" >>"$list"
	done
	for n in $alone; do
		[ -f "tests/integration/$n.sh" ] && echo "solo tests/integration/$n.sh" >>"$list"
	done
fi
# the unit suites after the first integration scripts: the heaviest
# scripts start at once
{ grep '^int' "$list" | head -n "$jobs"; grep '^unit' "$list"; grep '^int' "$list" | tail -n +"$((jobs + 1))"; } >"$out/order"
grep '^solo' "$list" | sed 's/^solo/int/' >"$out/solo"

echo "tests: $(($(wc -l <"$out/order") + $(wc -l <"$out/solo"))) jobs, $jobs at a time, then $(wc -l <"$out/solo") alone"
t0=$(date +%s)
xargs -P "$jobs" -L 1 sh tests/run_job.sh "$out" "$build" <"$out/order"
xargs -P 1 -L 1 sh tests/run_job.sh "$out" "$build" <"$out/solo"
echo "(all: $(($(date +%s) - t0)) s)"
cat "$out/solo" >>"$out/order"

pass=0; fail=0; rc=0
while read -r kind t; do
	f=$out/$(echo "$t" | tr '/' '_').log
	if [ ! -f "$f" ]; then
		echo "$t: did not run"; fail=$((fail + 1)); rc=1; continue
	fi
	line=$(grep -E '^[a-z_-]+: [0-9]+ passed, [0-9]+ failed' "$f" | tail -n 1)
	if [ -z "$line" ]; then
		echo "$t: no summary line"; fail=$((fail + 1)); rc=1; continue
	fi
	p=$(echo "$line" | sed -E 's/^[a-z_-]+: ([0-9]+) passed.*/\1/')
	n=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
	pass=$((pass + p)); fail=$((fail + n))
	[ "$(cat "$f.rc" 2>/dev/null)" = 0 ] || rc=1
done <"$out/order"
echo "$pass passed, $fail failed"
[ "$rc" -eq 0 ] && [ "$fail" -eq 0 ]
