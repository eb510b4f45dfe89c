#!/bin/sh
# Our kernels' instruction-set clones, each timed alone on this machine
# (issue 18: "an AVX2-only machine keeps its speed"): the default build
# (the loader's pick), then builds with SL_FORCE_ISA for every clone this
# CPU can run, each `stalelab bench` on the MLP and LeNet-5, medians of
# ROUNDS. Used by make bench.
#   bench/isa.sh BUILD_DIR      (ROUNDS=3, SECONDS_PER=2)
build=${1:-build}
ROUNDS=${ROUNDS:-3}
SECONDS_PER=${SECONDS_PER:-2}
has() { grep -qw "$1" /proc/cpuinfo 2>/dev/null; }
best=1
has avx2 && has fma && best=3
has avx512f && has avx512bw && has avx512vl && has avx512dq && has avx512cd && best=4
bins="$build/stalelab"
for isa in 3 1; do
	[ "$isa" -ge "$best" ] && continue
	dir=$build/isa$isa
	make --no-print-directory BUILD="$dir" EXTRA_CFLAGS="-DSL_FORCE_ISA=$isa" -j2 \
		"$dir/stalelab" >/dev/null 2>&1 || { echo "isa: cannot build SL_FORCE_ISA=$isa"; continue; }
	bins="$bins $dir/stalelab"
done
out=$(mktemp)
for r in $(seq 1 "$ROUNDS"); do
	for b in $bins; do
		for m in mlp:784-256-128-10 lenet5; do
			isa=$("$b" bench -m "$m" -S 0.1 | sed -n 's/.*"isa":"\([^"]*\)".*/\1/p' | head -1)
			"$b" bench -m "$m" -S "$SECONDS_PER" | grep '"bench":"train"' | sed "s|^|$isa\t|" >>"$out"
		done
	done
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    isa, j = line.rstrip("\n").split("\t", 1)
    r = json.loads(j)
    rows.setdefault((r["model"], isa), []).append(r["samples_per_s"])
print("%-22s %-22s %12s  %s" % ("model", "our kernels' clone", "samples/s", "(each round)"))
for (m, isa), v in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1])):
    print("%-22s %-22s %12.0f  %s" % (m, isa, statistics.median(v), ", ".join("%.0f" % x for x in v)))
    print(json.dumps({"bench": "isa_clone", "model": m, "isa": isa,
                      "samples_per_s_median": round(statistics.median(v), 1), "samples_per_s": v}))
PY
rm -f "$out"
