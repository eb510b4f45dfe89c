#!/bin/sh
# The GPT beside its PyTorch twin (issue 33), a part of make bench that
# runs alone too: bench/gpt.sh BUILD_DIR (ROUNDS=3 SECONDS_PER=4 by
# default). Tokens/s of gpt:L4-H4-E128-T64 at batch 12 (nanoGPT's CPU
# configuration) against bench/peers/torch_gpt.py at each of its two
# thread settings, interleaved round by round (the faster setting counts),
# medians and per-round ratios; where the time goes per op; and the
# quality pair, nanoGPT's CPU schedule on both side by side.
build=${1:-build}
SL=$build/stalelab
ROUNDS=${ROUNDS:-3}
SECONDS_PER=${SECONDS_PER:-4}
out=${BENCH_OUT:-$build/bench}
mkdir -p "$out"
have_peer=1
if ! /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null; then
	echo "bench: installing python3-torch python3-numpy for the PyTorch twin"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch python3-numpy >/dev/null 2>&1 ||
		{ echo "bench: no PyTorch (apt-get install python3-torch python3-numpy, as root):"
		  echo "bench: the engine's figures alone"; have_peer=0; }
fi
# the GPT's configuration and text (text:webster is dict-gcide's file)
GPT=gpt:L4-H4-E128-T64
GPT_ARGS="--layers 4 --heads 4 --width 128 --context 64"
GPT_TEXT=text:webster
GPT_FILE=/usr/share/dictd/gcide.dict.dz
GPT_ITERS=${GPT_ITERS:-2000}

echo "== $GPT beside its PyTorch twin, $ROUNDS rounds =="
: >"$out/gpt-engine.jsonl"
: >"$out/gpt-peer.jsonl"
for r in $(seq 1 "$ROUNDS"); do
	# the GPT (nanoGPT's CPU configuration, batch 12) on Webster's 1913:
	# one worker on every core against the PyTorch twin at each of its two
	# thread settings (torch's pool or OpenBLAS's on the cores; the faster
	# counts)
	"$SL" bench -m "$GPT" -d "$GPT_TEXT" -b 12 -S "$SECONDS_PER" | grep '^{' >>"$out/gpt-engine.jsonl"
	if [ $have_peer = 1 ]; then
		for tb in "1 0" "0 1"; do
			set -- $tb
			/usr/bin/python3 bench/peers/torch_gpt.py --text "$GPT_FILE" $GPT_ARGS --batch 12 \
				--bench "$SECONDS_PER" --threads "$1" --blas-threads "$2" --quiet \
				>>"$out/gpt-peer.jsonl" 2>/dev/null || echo "bench: peer gpt failed"
		done
	fi
done
/usr/bin/python3 - "$out/gpt-engine.jsonl" "$out/gpt-peer.jsonl" "$GPT" <<'PY'
import json, statistics, sys
eng = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
eng = [r for r in eng if r["bench"] == "train"]
peer = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
def med(xs):
    return statistics.median(xs) if xs else float("nan")
print("%-22s %10s %10s %8s" % ("model", "stalelab", "torch", "ratio"))
# the GPT: tokens/s, the twin's faster thread setting in each round
gpt = sys.argv[3]
es = [r["tokens_per_s"] for r in eng if r["model"] == gpt]
pg = [r for r in peer if r.get("peer") == "torch_gpt"]
ps = [max(a["tokens_per_s_median"], b["tokens_per_s_median"]) for a, b in zip(pg[::2], pg[1::2])]
e, sp = med(es), med(ps)
rs = [x / y for x, y in zip(es, ps)]
print("%-22s %10.0f %10.0f %8.2f   tokens/s, batch 12; per-round ratios %s"
      % (gpt, e, sp, e / sp if sp == sp else float("nan"), ["%.2f" % x for x in rs]))
for a, b in zip(pg[::2], pg[1::2]):
    print("    torch: %.0f tokens/s with torch %d thread(s) + OpenBLAS %d, %.0f with %d + %d"
          % (a["tokens_per_s_median"], a["threads"], a["blas_threads"],
             b["tokens_per_s_median"], b["threads"], b["blas_threads"]))
print(json.dumps({"bench": "vs_peer", "model": gpt, "stalelab_tokens_per_s": round(e, 1),
                  "torch_tokens_per_s": sp, "ratio": round(e / sp, 3) if sp == sp else None,
                  "ratios": [round(x, 3) for x in rs]}))
PY
echo
echo "== $GPT: where the time goes (stalelab bench -L, batch 12) =="
"$SL" bench -m "$GPT" -d "$GPT_TEXT" -b 12 -S "$SECONDS_PER" -L | tee "$out/gpt-layers.txt" | grep -v '^{'

echo
echo "== $GPT quality: nanoGPT's CPU schedule ($GPT_ITERS iterations, AdamW, lr 1e-3 cosine) =="
echo "(bench/configs/gpt-nanogpt-cpu.json against the twin with the same recipe, one thread each, side by side)"
if [ $have_peer = 1 ]; then
	/usr/bin/python3 bench/peers/torch_gpt.py --text "$GPT_FILE" $GPT_ARGS --batch 12 \
		--iters "$GPT_ITERS" --eval-every 250 --threads 1 --blas-threads 1 --quiet \
		>"$out/gpt-quality-torch.json" 2>"$out/gpt-quality-torch.err" &
	tpid=$!
fi
"$SL" run -c bench/configs/gpt-nanogpt-cpu.json --steps "$GPT_ITERS" -q -l "$out/gpt-quality.jsonl" \
	>"$out/gpt-quality.txt" 2>&1 || echo "bench: stalelab's GPT run failed ($out/gpt-quality.txt)"
[ $have_peer = 1 ] && { wait $tpid || echo "bench: the twin's GPT run failed ($out/gpt-quality-torch.err)"; }
/usr/bin/python3 - "$out/gpt-quality.jsonl" "$out/gpt-quality-torch.json" <<'PY'
import json, math, os, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()] if os.path.exists(sys.argv[1]) else []
ev = [(r["v"], r["test_loss"]) for r in recs if "test_loss" in r and "event" not in r]
tw = json.load(open(sys.argv[2])) if os.path.exists(sys.argv[2]) and os.path.getsize(sys.argv[2]) else None
tc = dict(tw["held_out_curve"]) if tw else {}
print("%8s %14s %14s" % ("update", "stalelab", "torch twin"))
for v, l in ev:
    print("%8d %14.4f %14s" % (v, l, "%.4f" % tc[v] if v in tc else "-"))
if ev and tw:
    e, t = ev[-1][1], tw["held_out_loss"]
    print("held-out loss per token after %d: stalelab %.4f (%.3f bits/byte), torch %.4f: "
          "%+.2f%% of the twin's (target within 2%%)" % (ev[-1][0], e, e / math.log(2), t,
                                                        100 * (e - t) / t))
    print(json.dumps({"bench": "gpt_quality", "iters": ev[-1][0], "stalelab_loss": e,
                      "torch_loss": t, "rel_diff": round((e - t) / t, 5)}))
PY
