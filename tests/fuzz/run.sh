#!/bin/sh
# Run the libFuzzer harnesses built into BUILD (BUILD/NAME_fuzz, one per
# tests/fuzz/NAME_fuzz.c), JOBS at a time, each for SECONDS: first the
# inputs that once broke it (tests/fuzz/regress/NAME/*, replayed once each),
# then a fuzzing run on a copy of its seed corpus tests/fuzz/corpus/NAME/
# (the committed seeds are never written to). One check per harness: no
# crash, leak, sanitizer report or timeout, and a count of executions. A
# crashing input is kept in BUILD/artifacts/ (its path is printed), each
# harness's whole output in BUILD/logs/NAME.log.
# Prints "  ok   NAME: N execs in S s, cov C ft F" per harness and
# "LABEL: N passed, M failed" last; exits non-zero on any failure.
# Usage: tests/fuzz/run.sh BUILD SECONDS [JOBS] [LABEL] [NAME...]
build=${1:-build-fuzz}
secs=${2:-60}
jobs=${3:-1}
label=${4:-fuzz}
[ $# -gt 4 ] && shift 4 || set --
names="$*"
if [ -z "$names" ]; then
	for f in tests/fuzz/*_fuzz.c; do
		[ -f "$f" ] || continue
		n=${f##*/}
		names="$names ${n%_fuzz.c}"
	done
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/slfuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$build/artifacts" "$build/logs"

# one harness; its verdict goes to $work/NAME.res ("ok ..." or "FAIL ...")
fuzz_one() {
	name=$1
	bin=$build/${name}_fuzz
	res=$work/$name.res
	log=$build/logs/$name.log
	if [ ! -x "$bin" ]; then
		echo "FAIL $name: $bin not built (make fuzz-build)" >"$res"
		return
	fi
	if [ ! -d "tests/fuzz/corpus/$name" ] || [ -z "$(ls "tests/fuzz/corpus/$name")" ]; then
		echo "FAIL $name: no seed corpus in tests/fuzz/corpus/$name/" >"$res"
		return
	fi
	nreg=0
	if [ -d "tests/fuzz/regress/$name" ] && [ -n "$(ls "tests/fuzz/regress/$name")" ]; then
		nreg=$(ls "tests/fuzz/regress/$name" | wc -l)
		if ! "$bin" -timeout=30 "tests/fuzz/regress/$name"/* >"$log" 2>&1; then
			echo "FAIL $name: a regression input breaks it again" >"$res"
			grep -E 'ERROR|expected|Running:' "$log" | head -n 8 >>"$res"
			return
		fi
	fi
	mkdir -p "$work/corpus-$name"
	cp "tests/fuzz/corpus/$name"/* "$work/corpus-$name/"
	start=$(date +%s)
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
		-artifact_prefix="$build/artifacts/$name-" "$work/corpus-$name" >"$log" 2>&1
	rc=$?
	took=$(( $(date +%s) - start ))
	execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
	last=$(grep -E '^#[0-9]+.*cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1)
	cov=$(echo "$last" | sed -n 's/.*cov: \([0-9]*\) ft: \([0-9]*\).*/cov \1 ft \2/p')
	if [ "$rc" -ne 0 ]; then
		echo "FAIL $name: exit $rc after ${took} s (log tail below)" >"$res"
		grep -E 'ERROR|SUMMARY|expected|artifact|#0 |#1 |#2 |#3 ' "$log" | head -n 12 >>"$res"
	elif [ -z "$execs" ] || [ "$execs" -eq 0 ]; then
		echo "FAIL $name: no executions counted" >"$res"
		tail -n 5 "$log" >>"$res"
	else
		echo "ok $name: $execs execs in $took s, $cov, $nreg regression input(s) replayed" >"$res"
	fi
}

pass=0
fail=0
set -- $names
while [ $# -gt 0 ]; do
	batch=""
	i=0
	while [ $# -gt 0 ] && [ $i -lt "$jobs" ]; do
		fuzz_one "$1" &
		batch="$batch $1"
		shift
		i=$((i + 1))
	done
	wait
	for n in $batch; do
		if [ -f "$work/$n.res" ] && head -n 1 "$work/$n.res" | grep -q '^ok '; then
			pass=$((pass + 1))
			echo "  ok   $(sed 's/^ok //' "$work/$n.res")"
		else
			fail=$((fail + 1))
			echo "  FAIL $(sed -n '1s/^FAIL //p' "$work/$n.res" 2>/dev/null)"
			sed '1d; s/^/       /' "$work/$n.res" 2>/dev/null
		fi
	done
done
echo "$label: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
