#!/bin/sh
# The finished cluster simulations a daemon serves (stalelab serve
# --clusters DIR, issue 20): GET /api/v1/clusters, one simulation with its
# summary, its timelines reduced with their GPU-seconds kept, the JCTs'
# distribution and the schedules; its files; names not in DIR refused; a
# DIR that is one simulation; a broken cluster.json said, not a crash; bad
# --clusters refused at start. Then the browser test of the Cluster view
# (tests/browser/cluster.mjs).
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: the dashboard's cluster view"

D=$TMP/sims
mkdir -p "$D"
# T3 of docs/cluster.md: two 2-GPU jobs of a model with full and half backprop
cp tests/fixtures/cluster/t3-profiles.csv "$TMP/prof.csv"
cp tests/fixtures/cluster/t3-jobs.csv "$TMP/t3.csv"
P=bench/configs/cluster-profiles-measured.csv
"$SL" cluster synth -p "$P" --jobs 1500 --rate 8 --gpus 64 --seed 3 >"$TMP/big.csv"
cat >"$TMP/live.json" <<'JSON'
{"model": "mlp:784-16-10", "dataset": "synthetic:2000", "batch": 16, "workers": 2,
 "threads": 1, "stop": {"epochs": 0.2}}
JSON

expect_exit 0 "T3 into DIR/t3 (a new directory's parents made)" "$SL" cluster -t "$TMP/t3.csv" -p "$TMP/prof.csv" -g 2 -m 16 -o "$D/t3"
expect_exit 0 "1500 jobs on 64 GPUs into DIR/big" "$SL" cluster -t "$TMP/big.csv" -p "$P" -g 64 -o "$D/big"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["jobs"] == 2 and d["gpus"] == 2 and d["gpu_mem_gb"] == 16, d
assert d["policies"] == ["fifo", "srtf", "las", "gandiva", "jigsaw"], d["policies"]
assert d["profiles_notes"][0].startswith("T3"), d["profiles_notes"]
assert [s["name"] for s in d["models"][0]["schedules"]] == ["full", "half"]
assert d["command"].startswith("stalelab cluster -t "), d["command"]
' "$D/t3/cluster.json" && ok "cluster.json: the inputs, their notes, the policies, the command" ||
	bad "cluster.json" "$(cat "$D/t3/cluster.json")"
expect_grep '^stalelab cluster synth --jobs 1500' "cluster.json keeps the trace's origin line" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["trace_notes"][0])' "$D/big/cluster.json")"
mkdir -p "$D/not-a-sim" "$D/.hidden" "$D/broken"
echo '{"jobs": 3,' >"$D/broken/cluster.json"

expect_exit 2 "--clusters missing is refused" "$SL" serve --listen 127.0.0.1:0 --bus none --clusters "$TMP/nope"
expect_grep "clusters $TMP/nope: No such file" "--clusters missing: named" "$LAST_OUT"
expect_exit 2 "--clusters a file is refused" "$SL" serve --listen 127.0.0.1:0 --bus none --clusters "$TMP/t3.csv"
expect_grep "not a directory" "--clusters a file: said" "$LAST_OUT"
expect_exit 0 "serve --help names --clusters" "$SL" serve --help
expect_grep 'clusters DIR  ' "--help names --clusters DIR" "$LAST_OUT"

start --bus none --workers-listen none --config "$TMP/live.json" --clusters "$D"
[ -n "$port" ] && ok "serve --clusters starts" || bad "serve --clusters starts" "$(cat "$TMP/serve.err")"
get() { curl -s -o "$TMP/body" -w '%{http_code} %{content_type}' "$@"; }
expect_grep '^200 application/json' "GET /api/v1/clusters" "$(get "$URL/api/v1/clusters")"
out=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(",".join(s["name"] for s in d["simulations"]), [(s["jobs"], s["gpus"]) for s in d["simulations"]])
' "$TMP/body")
expect_grep '^big,broken,t3 \[\(1500, 64\), \(None, None\), \(2, 2\)\]$' "the list: the simulations in name order, jobs and GPUs (none from a broken cluster.json)" "$out"
expect_grep '"files":\[.*"jobs_jigsaw.csv".*"summary.csv".*"timeline_fifo.csv"' "the list: the files" "$(cat "$TMP/body")"

expect_grep '^200 application/json' "GET /api/v1/clusters/t3" "$(get "$URL/api/v1/clusters/t3")"
out=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
s = d["series"]["jigsaw"]
rows = {r[0]: r for r in d["summary"]["rows"]}
print(list(d["series"]), s["schedules"], s["jct"], s["timeline"]["t"], s["timeline"]["in_use"],
      rows["jigsaw"][d["summary"]["columns"].index("gain_vs_fifo")], d["spec"]["gpus"])
' "$TMP/body")
expect_grep "^\['fifo', 'srtf', 'las', 'gandiva', 'jigsaw'\] {'half': 2} {'s': \[16.8, 16.8\], 'share': \[0.5, 1.0\]} \[0.0, 16.8\] \[2.0, 0.0\] 1.380952 2$" \
	"T3: jigsaw's two halves packed, both done at 16.8 s, +138.1%" "$out"

# the big one: timelines over 2000 points come as 1000 spans' means, their
# GPU-seconds kept (fifo, srtf and las never pack: the area is the
# summary's allocation); the JCTs as 1000 quantiles, the largest the jobs'
expect_grep '^200 ' "GET /api/v1/clusters/big" "$(get "$URL/api/v1/clusters/big")"
out=$(python3 -c '
import csv, json, sys
d = json.load(open(sys.argv[1]))
G = d["spec"]["gpus"]
cols = d["summary"]["columns"]
for r in d["summary"]["rows"]:
    p = r[0]
    s = d["series"][p]
    tl = s["timeline"]
    t, u = tl["t"], tl["in_use"]
    area = sum((t[i + 1] - t[i]) * u[i] for i in range(len(t) - 1))
    mk, alloc = float(r[cols.index("makespan_s")]), float(r[cols.index("util_alloc")])
    jobs = list(csv.DictReader(open(sys.argv[2] + "/jobs_%s.csv" % p)))
    jmax = max(float(j["jct_s"]) for j in jobs)
    ok = (tl["points"] > 2000 and tl["spans"] == 1000 and len(t) == 1001
          and all(0 <= x <= G + 1e-9 for x in u)
          and len(s["jct"]["s"]) == 1000 and abs(s["jct"]["s"][-1] - jmax) < 1e-6
          and s["jct"]["share"][-1] == 1.0 and s["jct"]["s"] == sorted(s["jct"]["s"])
          and sum(s["schedules"].values()) == 1500 == s["jobs"])
    if p in ("fifo", "srtf", "las"):
        ok = ok and abs(area / (G * mk) - alloc) < 2e-6
    else:
        ok = ok and area / (G * mk) <= alloc + 2e-6
    print(p, "ok" if ok else "BAD points=%d spans=%d area=%.6f alloc=%.6f jmax=%g got=%g" % (
        tl["points"], tl["spans"], area / (G * mk), alloc, jmax, s["jct"]["s"][-1]))
' "$TMP/body" "$D/big")
expect_grep '^fifo ok$' "big, fifo: 1000 spans, GPU-seconds kept, 1000 JCT quantiles" "$out"
expect_grep '^las ok$' "big, las: the same" "$out"
expect_grep '^jigsaw ok$' "big, jigsaw: packed (in use <= allocated), schedules sum to the jobs" "$out"
[ "$(printf '%s\n' "$out" | grep -c ' ok$')" -eq 5 ] && ok "big: every policy's series" || bad "big: every policy's series" "$out"

expect_grep '^200 text/csv' "a CSV file" "$(get "$URL/api/v1/clusters/t3/files/jobs_jigsaw.csv")"
cmp -s "$TMP/body" "$D/t3/jobs_jigsaw.csv" && ok "a CSV file: the bytes on disk" || bad "a CSV file: the bytes on disk"
expect_grep '^200 image/svg\+xml' "a figure" "$(get "$URL/api/v1/clusters/t3/files/gpus.svg")"
expect_grep '^404 ' "a file not listed (a PNG)" "$(get "$URL/api/v1/clusters/t3/files/gpus.png")"
expect_grep '^404 ' "cluster.gp is not served" "$(get "$URL/api/v1/clusters/t3/files/cluster.gp")"
expect_grep '^404 ' "an escaping file" "$(get --path-as-is "$URL/api/v1/clusters/t3/files/../../prof.csv")"
expect_grep '^404 ' "a directory that is not a simulation" "$(get "$URL/api/v1/clusters/not-a-sim")"
expect_grep 'no cluster simulation' "not a simulation: said" "$(cat "$TMP/body")"
expect_grep '^404 ' "a hidden name" "$(get "$URL/api/v1/clusters/.hidden")"
expect_grep '^404 ' "an escaping name" "$(get --path-as-is "$URL/api/v1/clusters/..%2F..%2Fetc")"
expect_grep '^404 ' "another endpoint below one" "$(get "$URL/api/v1/clusters/t3/figures/gpus.svg")"
expect_grep '^500 ' "a broken cluster.json: 500" "$(get "$URL/api/v1/clusters/broken")"
expect_grep 'broken/cluster.json: line 2' "a broken cluster.json: the file and line said" "$(cat "$TMP/body")"
expect_grep '^405 ' "read only" "$(get -X POST "$URL/api/v1/clusters/t3")"
expect_grep '^200 ' "the daemon still answers" "$(get "$URL/api/v1/status")"
kill "$PID"; wait "$PID" 2>/dev/null

start --bus none --workers-listen none --config "$TMP/live.json" --clusters "$D/t3"
expect_grep '"name":"t3"' "DIR that is one simulation: listed by its name" "$(curl -s "$URL/api/v1/clusters")"
expect_grep '^200 ' "DIR that is one simulation: opened" "$(get "$URL/api/v1/clusters/t3")"
kill "$PID"; wait "$PID" 2>/dev/null
start --bus none --workers-listen none --config "$TMP/live.json"
expect_grep '^404 ' "no --clusters: 404" "$(get "$URL/api/v1/clusters")"
expect_grep 'serve --clusters DIR' "no --clusters: how to" "$(cat "$TMP/body")"
kill "$PID"; wait "$PID" 2>/dev/null
rm -r "$D/broken" "$D/not-a-sim" "$D/.hidden"

out=$(dirname "$SL")/dashboard
browser_test 200 tests/browser/cluster.mjs "$SL" "$D" "$TMP/live.json" "$out"
finish cluster_view
