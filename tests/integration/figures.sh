#!/bin/sh
# The figures of `stalelab plot` and `stalelab cluster --out` as a paper
# needs them (issue 29, item 5), checked on the gnuplot scripts they write
# and on gnuplot's answer: every figure titled, the sweep's target stated,
# the seeds' spread (a band or error bars) where there are seeds, a
# single-point series drawn as a mark and no series on the frame, one
# colour-blind-safe palette; the slowdown figure saying which groups it
# leaves out, as bars against a categorical key, and naming the real cause
# when it cannot be drawn; the cluster's GPUs in use one panel per policy,
# its JCT lines each in its own dash.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: figures"

# 24 cells in seconds: at target 0.8 the groups with 3 workers and s > 0
# miss it on some seed, the rest reach it; with 1 worker and s = 0 every
# gradient has staleness 0 (one point in the staleness figure)
cat >"$TMP/f.json" <<'JSON'
{"model": "mlp:784-16-10", "dataset": "synthetic:2000", "batch": 16, "eval_every": 25, "lr": 0.02,
 "rule": ["ssgd", "asgd"], "workers": [1, 3], "delay": {"dist": "version", "s": [0, 2, 6]},
 "stop": {"epochs": 1}, "seeds": 2, "target": 0.8}
JSON
expect_exit 0 "a 24-cell sweep with a target" "$SL" sweep "$TMP/f.json" --out "$TMP/f" --quiet
expect_exit 0 "plot it against delay.s=0" "$SL" plot "$TMP/f" --baseline delay.s=0
expect_grep 'staleness,slowdown\}\.\{svg,png\}: 12 groups from 24 cells' "plot says what it drew" "$LAST_OUT"
printf '%s\n' "$LAST_OUT" | grep -qi 'warning' && bad "gnuplot warned" "$LAST_OUT" || ok "gnuplot said nothing"

# python3 FIG.py checks: a section of plots.gp per figure (its SVG part)
cat >"$TMP/gp.py" <<'PY'
import csv, re, sys
figs = sys.argv[1]
gp = open(figs + "/plots.gp").read()
def section(name):
    m = re.search(r"set output '%s\.svg'\n(.*?)(?=set terminal|\Z)" % name, gp, re.S)
    return m.group(1) if m else ""
def blocks(name):
    text = open("%s/%s.dat" % (figs, name)).read()
    return [[l.split() for l in b.splitlines() if l and not l.startswith("#")]
            for b in text.split("\n\n\n") if b.strip()]
def clauses(name):
    # the plot command's clauses that draw a data block: (index, text)
    s = section(name)
    plot = s[s.find("\nplot ") + 1:] if "\nplot " in s else ""
    return [(int(m.group(1)), m.group(0)) for m in
            re.finditer(r"'%s\.dat' index (\d+)[^\\\n]*" % name, plot)]
PY
check() { # NAME PYTHON (with the helpers of gp.py; FIGS is the figures dir)
	if python3 -c "exec(open('$TMP/gp.py').read())
$2" "$FIGS" >"$TMP/py.out" 2>&1; then ok "$1"; else bad "$1" "$(cat "$TMP/py.out")"; fi
}
FIGS=$TMP/f/figures
F4='["loss", "accuracy", "staleness", "slowdown"]'

check "every figure has a title" "
bad = [f for f in $F4 if 'set title \"' not in section(f)]
assert not bad, bad"
check "every figure states the target, 0.8" "
bad = [f for f in $F4 if 'target 0.8' not in section(f)]
assert not bad, bad"
check "accuracy: the target drawn as a line" "
assert re.search(r'\n     0\.8 with lines[^\n]*title \"target 0\.8\"', section('accuracy')), section('accuracy')"
check "a single-point series is a mark, a longer one a line" "
seen1 = 0
for f in $F4:
    b = blocks(f)
    for i, c in clauses(f):
        one = len(b[i]) == 1
        seen1 += one
        mark = ' with points ' in c or ' with yerrorbars ' in c
        assert mark == one, (f, i, len(b[i]), c)
assert seen1, 'no single-point series in this sweep'"
check "no series on the frame: every figure is padded" "
bad = [f for f in $F4 if not re.search(r'set offsets graph 0\.0[1-9], graph 0\.0[1-9], graph 0\.0[1-9], graph 0\.0[1-9]', section(f))]
assert not bad, bad"
check "one colour-blind-safe palette (Okabe and Ito's), 14 line types" "
oi = {'#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#000000'}
lt = re.findall(r\"set linetype (\d+) lc rgb '(#[0-9A-F]{6})'\", gp)
assert len(lt) == 14 and {c for _, c in lt} == oi, lt
assert 'set linetype cycle 14' in gp"
check "loss and accuracy: the mean with the seeds' min and max, drawn as a band" "
for f in ('loss', 'accuracy'):
    rows = [r for b in blocks(f) for r in b]
    assert rows and all(len(r) == 4 and float(r[2]) <= float(r[1]) <= float(r[3]) for r in rows), f
    assert any(float(r[2]) < float(r[3]) for r in rows), f
    assert 'filledcurves' in section(f), f
assert 'filledcurves' not in section('staleness')"
check "staleness and slowdown: the seeds' range as error bars" "
for f in ('staleness', 'slowdown'):
    rows = [r for b in blocks(f) for r in b]
    assert rows and all(len(r) == 4 and float(r[2]) <= float(r[1]) <= float(r[3]) for r in rows), f
    assert all('with yerror' in c for _, c in clauses(f)), clauses(f)"
check "slowdown: every group a seed left short of the target is named in the figure" "
rows = list(csv.DictReader(open(sys.argv[1] + '/../results.csv', newline='')))
short = sorted({'rule=%s,workers=%s,delay.s=%s' % (r['rule'], r['workers'], r['delay.s'])
                for r in rows if r['updates_to_target'] == ''})
assert short, 'every group reached the target'
labels = ' '.join(re.findall(r'set label[^\n]*', section('slowdown')))
missing = [g for g in short if g not in labels]
assert not missing and 'not reached by every seed' in labels, (missing, labels)"

expect_exit 0 "plot against a categorical key: --baseline rule=asgd" "$SL" plot "$TMP/f" --baseline rule=asgd
expect_grep 'staleness,slowdown\}\.\{svg,png\}' "... draws the slowdown figure" "$LAST_OUT"
printf '%s\n' "$LAST_OUT" | grep -q 'no group reached' && bad "... and says no group reached" "$LAST_OUT" || ok "... and does not say no group reached"
check "a categorical key: a bar per group, a block per value of the key" "
b = blocks('slowdown')
assert len(b) == 2 and 'with boxes' in section('slowdown'), (len(b), section('slowdown'))
assert re.search(r'set xtics \(\"workers=1,delay.s=0\" ', section('slowdown')), section('slowdown')
base = [r for r in b[1] if r[1] == '1']
assert len(base) == len(b[1]) and len(b[1]) >= 3, b"

# refusals name their real cause
expect_exit 2 "--baseline of a value the axis does not take" "$SL" plot "$TMP/f" --baseline delay.s=3
expect_grep '--baseline: delay\.s has no value 3 in this sweep \(it has 0, 2, 6\)' "... named, with the values" "$LAST_OUT"
cat >"$TMP/nt.json" <<'JSON'
{"model": "mlp:784-16-10", "dataset": "synthetic:2000", "batch": 16, "eval_every": 25,
 "workers": [1, 3], "stop": {"epochs": 0.5}}
JSON
expect_exit 0 "a sweep without a target, one seed" "$SL" sweep "$TMP/nt.json" --out "$TMP/nt" --quiet
expect_exit 0 "... plotted against workers=1" "$SL" plot "$TMP/nt" --baseline workers=1
expect_grep 'no slowdown figure: the sweep has no "target"' "... no slowdown figure: no target, said" "$LAST_OUT"
FIGS=$TMP/nt/figures
check "one seed: no band, no error bars, no target in the titles" "
assert 'filledcurves' not in gp and 'yerror' not in gp and 'target' not in gp
assert all(len(r) == 2 for f in ('loss', 'accuracy', 'staleness') for b in blocks(f) for r in b)"
sed 's/"stop": {"epochs": 0.5}/"target": 0.999, "stop": {"epochs": 0.05}/' "$TMP/nt.json" >"$TMP/hi.json"
expect_exit 0 "a target no cell reaches (6 updates)" "$SL" sweep "$TMP/hi.json" --out "$TMP/hi" --quiet
expect_exit 0 "... plotted against workers=1" "$SL" plot "$TMP/hi" --baseline workers=1
expect_grep 'no slowdown figure: no group with workers=1 reached the target 0\.999 with every seed' \
	"... no slowdown figure: the baseline never reached it, said" "$LAST_OUT"

# the cluster's figures: T3 (docs/cluster.md) under every policy
cp tests/fixtures/cluster/t3-profiles.csv "$TMP/prof.csv"
cp tests/fixtures/cluster/t3-jobs.csv "$TMP/t3.csv"
expect_exit 0 "cluster --out, every policy" "$SL" cluster -t "$TMP/t3.csv" -p "$TMP/prof.csv" -g 2 -m 16 -o "$TMP/c"
printf '%s\n' "$LAST_OUT" | grep -qi 'warning' && bad "gnuplot warned" "$LAST_OUT" || ok "gnuplot said nothing"
cat >"$TMP/cl.py" <<'PY'
import re, sys
gp = open(sys.argv[1] + "/cluster.gp").read()
svg = gp[gp.find("set output 'gpus.svg'"):gp.find("set terminal pngcairo")]
gpus, jct = svg.split("set output 'jct.svg'")
PY
ccheck() { # NAME PYTHON
	if python3 -c "exec(open('$TMP/cl.py').read())
$2" "$TMP/c" >"$TMP/py.out" 2>&1; then ok "$1"; else bad "$1" "$(cat "$TMP/py.out")"; fi
}
ccheck "GPUs in use: one panel per policy, the five in a column" "
assert 'set multiplot layout 5,1' in gpus, gpus
pol = re.findall(r\"'timeline_(\w+)\.csv'\", gpus)
assert pol == ['fifo', 'srtf', 'las', 'gandiva', 'jigsaw'], pol
assert gpus.count('\nplot ') == 5 and 'unset multiplot' in gpus"
ccheck "JCTs: a dash type of its own for each policy's line" "
dts = re.findall(r\"'jobs_\w+\.csv'[^\n]* dt (\d+)\", jct)
assert len(dts) == 5 and len(set(dts)) == 5, dts"
ccheck "both titled with the trace's size" "
assert re.search(r'title \"GPUs in use[^\"]*2 jobs on 2 GPUs', gpus), gpus[:400]
assert re.search(r'set title \"Job completion times[^\"]*2 jobs on 2 GPUs', jct), jct[:400]"
ccheck "the sweeps' palette" "
assert \"set linetype 1 lc rgb '#0072B2'\" in gp and 'set linetype cycle 14' in gp"
for f in gpus.svg jct.svg gpus.png jct.png; do
	[ -s "$TMP/c/$f" ] && ok "--out drew $f" || bad "--out drew $f" "$(ls "$TMP/c")"
done

# a baseline key one variant lacks: said so (it was "out of memory", exit 1)
cat >"$TMP/vs.json" <<'JSON'
{"model": "mlp:784-16-10", "dataset": "synthetic:600", "batch": 16, "eval_every": 10, "seeds": 2,
 "target": 0.5, "stop": {"steps": 40}, "workers": 2,
 "variants": {"stale": {"delay": {"dist": "version", "s": [0, 4]}}, "plain": {"lr": 0.02}}}
JSON
"$SL" sweep "$TMP/vs.json" --out "$TMP/vs" --quiet >/dev/null 2>&1
expect_exit 2 "plot --baseline on a key one variant lacks: exit 2" "$SL" plot "$TMP/vs" --baseline delay.s=0
expect_grep "^stalelab plot: --baseline delay.s: the group variant=plain has no delay.s" \
	"... naming the group without it" "$LAST_OUT"

finish figures
