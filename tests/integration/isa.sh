#!/bin/sh
# Each instruction-set clone of our kernels, checked on this machine
# (issue 18): the hot loops are built three times (AVX-512, AVX2+FMA,
# plain x86-64) and the loader runs the best the CPU has, so a default
# build tests one clone only. Here the backend parity tests (every cpu op
# against the ref backend, odd shapes, forward and backward) and the
# model tests (finite differences) are built with SL_FORCE_ISA for each
# clone this CPU can run but the one the default build already ran, and
# run. A clone the CPU cannot run is skipped, saying so.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
build=$(dirname "$SL")
echo "integration: our kernels' instruction-set clones"
name() { [ "$1" -eq 1 ] && echo x86-64 || echo "x86-64-v$1"; }
has() { grep -qw "$1" /proc/cpuinfo 2>/dev/null; }
best=1
has avx2 && has fma && best=3
has avx512f && has avx512bw && has avx512vl && has avx512dq && has avx512cd && best=4
for isa in 4 3 1; do
	if [ "$isa" -gt "$best" ]; then
		echo "  skipped: the $(name $isa) clone (this CPU lacks its instructions)"
		continue
	fi
	if [ "$isa" -eq "$best" ]; then
		echo "  (the $(name $isa) clone is the one the default build runs here)"
		continue
	fi
	dir=$build/isa$isa
	# SL_FORCE_ISA changes the cpu backend's four files alone
	# (backend_cpu_impl.h): the default build's other objects are taken as
	# they are (their times kept, so make leaves them), those four built
	# again with it
	mkdir -p "$dir"
	(cd "$build" && find . -name '*.o' ! -path './isa*' ! -name 'backend_cpu*.o' -print0 |
		tar --null -cf - -T -) | (cd "$dir" && tar -xf -)
	rm -f "$dir"/engine/nn/backend_cpu*.o "$dir"/tests/test_backend "$dir"/tests/test_model \
		"$dir"/tests/test_model_graph
	# under make asan (SL_ASAN) the objects taken are sanitized: so is the link
	san= opt=-O2
	[ -n "$SL_ASAN" ] && san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" opt=-O1
	if ! make --no-print-directory BUILD="$dir" OPT="$opt" EXTRA_CFLAGS="-DSL_FORCE_ISA=$isa $san" -j2 \
		"$dir/tests/test_backend" "$dir/tests/test_model" "$dir/tests/test_model_graph" \
		>"$TMP/make.log" 2>&1; then
		bad "builds with SL_FORCE_ISA=$isa" "$(tail -20 "$TMP/make.log")"
		continue
	fi
	for t in test_backend test_model test_model_graph; do
		out=$("$dir/tests/$t" 2>&1)
		echo "$out" | grep -q '^100%: Checks' &&
			ok "$t, clone $(name $isa) alone: $(echo "$out" | grep -o 'Checks: [0-9]*')" ||
			bad "$t, clone $(name $isa) alone" "$(echo "$out" | tail -5)"
	done
done
finish isa
