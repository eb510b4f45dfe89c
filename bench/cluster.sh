#!/bin/sh
# bench/cluster.sh BUILD_DIR: the cluster simulator's own speed (issue 20's
# sizes): a seeded 500-job trace on 64 GPUs under every policy, and
# 100,000 jobs on 10,000 GPUs under each policy alone (fifo runs too, as
# the gain's baseline, so a policy's time there includes fifo's), with the
# hand-made profile bench/configs/cluster-profile-t3.csv.
# CLUSTER_BIG=0 leaves the big trace out (it takes minutes).
build=${1:-build}
SL=$build/stalelab
P=bench/configs/cluster-profile-t3.csv
tmp=$(mktemp -d "${TMPDIR:-/tmp}/slcl.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
secs() { python3 -c 'import sys; print("%.3f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$1" "$2"; }
"$SL" cluster synth -p "$P" --jobs 500 --rate 30 --gpus 64 --seed 1 >"$tmp/j500.csv"
t0=$(date +%s.%N)
"$SL" cluster -t "$tmp/j500.csv" -p "$P" -g 64 -m 16 >"$tmp/out500.txt"
t1=$(date +%s.%N)
s=$(secs "$t0" "$t1")
echo "500 jobs, 64 GPUs, all five policies: $s s"
echo "{\"bench\": \"cluster\", \"jobs\": 500, \"gpus\": 64, \"policies\": \"all\", \"seconds\": $s}"
[ "${CLUSTER_BIG:-1}" = 0 ] && exit 0
"$SL" cluster synth -p "$P" --jobs 100000 --rate 6000 --gpus 10000 --seed 1 >"$tmp/j100k.csv"
for p in fifo srtf las gandiva jigsaw; do
	t0=$(date +%s.%N)
	"$SL" cluster -t "$tmp/j100k.csv" -p "$P" -g 10000 -m 16 -P "$p" >/dev/null
	t1=$(date +%s.%N)
	s=$(secs "$t0" "$t1")
	echo "100,000 jobs, 10,000 GPUs, $p: $s s"
	echo "{\"bench\": \"cluster\", \"jobs\": 100000, \"gpus\": 10000, \"policies\": \"$p\", \"seconds\": $s}"
done
