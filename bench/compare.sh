#!/bin/sh
# make bench-compare: this tree's engine against an earlier commit's, side
# by side in one run (interleaved rounds, so a noisy neighbour hurts both):
# the bare training step (one worker, no engine), asgd through the engine
# with 1, 2 and 4 workers, and the ratio of one worker through the engine to
# the bare step; then the cpu backend's convolutions alone on ResNet-20's
# shapes (bench/convs.c). Medians and per-round ratios; the order of the
# two trees turns each round.
#   bench/compare.sh BUILD_DIR BASE_REV     (ROUNDS=5 SECONDS_PER=3 MODEL=...)
build=${1:-build}
base=${2:-HEAD~1}
ROUNDS=${ROUNDS:-5}
SECONDS_PER=${SECONDS_PER:-3}
MODEL=${MODEL:-mlp:784-256-128-10}
out=${BENCH_OUT:-$build/bench}
mkdir -p "$out"
NEW=$build/stalelab
wt=$(mktemp -d "${TMPDIR:-/tmp}/sl-base.XXXXXX")
trap 'git worktree remove --force "$wt" >/dev/null 2>&1; rm -rf "$wt"' EXIT
rev=$(git rev-parse --short "$base") || exit 2
echo "bench-compare: building $base ($rev) in $wt"
git worktree add --detach -f "$wt" "$rev" >/dev/null 2>&1 || { echo "cannot check out $base"; exit 1; }
make -C "$wt" -s all >"$out/base-build.log" 2>&1 || { echo "base build failed: $out/base-build.log"; exit 1; }
OLD=$wt/build/stalelab

# rounds FILE: ROUNDS rounds of `run_one old` and `run_one new` (the
# caller's function), their JSON lines tagged with the tree and the round
# into FILE; the order turns each round, so neither tree always runs second
rounds() {
	: >"$1"
	for r in $(seq 1 "$ROUNDS"); do
		order="old new"; [ $((r % 2)) = 0 ] && order="new old"
		for which in $order; do
			run_one $which | grep '^{' |
				sed "s/^{/{\"which\":\"$which\",\"round\":$r,/" >>"$1"
		done
	done
}

run_one() {
	bin=$OLD; [ "$1" = new ] && bin=$NEW
	"$bin" bench -m "$MODEL" -S "$SECONDS_PER" -A 2>/dev/null
}
rounds "$out/compare.jsonl"
python3 - "$out/compare.jsonl" "$rev" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rev = sys.argv[2]
def pick(which, bench, workers=None):
    out = {}
    for r in recs:
        if r["which"] == which and r["bench"] == bench and (workers is None or r.get("workers") == workers):
            out[r["round"]] = r["samples_per_s"]
    return out
med = statistics.median
print("%-26s %12s %12s %8s   per-round new/old" % ("samples/s (median)", rev, "this tree", "ratio"))
rows = [("bare training step", "train", None)] + [("asgd %d worker(s)" % n, "async", n) for n in (1, 2, 4)]
for name, bench, n in rows:
    o, w = pick("old", bench, n), pick("new", bench, n)
    rs = [w[k] / o[k] for k in sorted(o) if k in w]
    print("%-26s %12.0f %12.0f %8.3f   %s" % (name, med(o.values()), med(w.values()),
          med(rs), " ".join("%.2f" % x for x in rs)))
for which, label in (("old", rev), ("new", "this tree")):
    t, a = pick(which, "train"), pick(which, "async", 1)
    rs = [a[k] / t[k] for k in sorted(t) if k in a]
    print("one worker through the engine / bare step, %s: %.3f   (%s)"
          % (label, med(rs), " ".join("%.2f" % x for x in rs)))
PY

# the convolutions alone (bench/convs.c, this tree's source built against
# each tree's engine), interleaved round by round; a BASE whose backend.h
# it does not build against is skipped with a line that says so
cv=$out/convs-base
if ${CC:-cc} -O2 -std=c11 -D_GNU_SOURCE -pthread -I"$wt/engine/base" -I"$wt/engine/nn" \
	-o "$cv" bench/convs.c $(find "$wt/build/engine" -name '*.o') \
	$(pkg-config --libs openblas jansson zlib libmicrohttpd nanomsg) -lm -pthread \
	>"$out/convs-base.log" 2>&1 && [ -x "$build/bench/convs" ]; then
	run_one() {
		bin=$cv; [ "$1" = new ] && bin=$build/bench/convs
		"$bin" 2 64
	}
	rounds "$out/convs.jsonl"
	python3 - "$out/convs.jsonl" "$rev" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rev = sys.argv[2]
print("\nthe convolutions alone (bench/convs.c, batch 64, 2 threads; us, medians of each round's best of 15)")
print("%-22s %9s %9s %7s   %9s %9s %7s" % ("shape", "fwd " + rev, "fwd new", "ratio",
                                            "bwd " + rev, "bwd new", "ratio"))
for shape in dict.fromkeys(r["shape"] for r in recs):
    row = []
    for key in ("fwd_us", "bwd_us"):
        o = statistics.median(r[key] for r in recs if r["shape"] == shape and r["which"] == "old")
        n = statistics.median(r[key] for r in recs if r["shape"] == shape and r["which"] == "new")
        row += [o, n, n / o]
    print("%-22s %9.0f %9.0f %7.3f   %9.0f %9.0f %7.3f" % (shape, *row))
PY
else
	echo "bench-compare: bench/convs.c does not build against $rev's engine (see $out/convs-base.log): convolutions skipped"
fi
