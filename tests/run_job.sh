#!/bin/sh
# One job of tests/run_all.sh: a Check suite (KIND unit, through
# tests/run_unit.sh) or an integration script (KIND int, given the
# binary's path). Its output goes to OUT/NAME.log and its exit status to
# OUT/NAME.log.rc; then the log is printed whole, under a lock, so the
# jobs running side by side do not interleave their lines.
# Usage: tests/run_job.sh OUT BUILD KIND PATH
out=$1; build=$2; kind=$3; t=$4
f=$out/$(echo "$t" | tr '/' '_').log
t0=$(date +%s)
if [ "$kind" = unit ]; then
	# Check's per-test timeouts (4 s by default) catch a hang, not a
	# slow machine: the jobs beside this one load it
	CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-10} sh tests/run_unit.sh "$t" >"$f" 2>&1
	echo $? >"$f.rc"
else
	sh "$t" "$build/stalelab" >"$f" 2>&1
	echo $? >"$f.rc"
	echo "($t: $(($(date +%s) - t0)) s)" >>"$f"
fi
if command -v flock >/dev/null 2>&1; then
	flock "$out/print.lock" cat "$f"
else
	cat "$f"
fi
exit 0
