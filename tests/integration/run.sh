#!/bin/sh
# Integration tests of `stalelab run` as a user drives it: help, version,
# bad flags and configs (exit 2 naming the field), --augment (a virtual
# crop-flip run repeats its log), a short real run whose JSON-Lines log is
# checked record by record.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: stalelab run"

expect_exit 0 "--version" "$SL" --version
expect_grep '^stalelab [0-9]+\.[0-9]+' "--version prints the version" "$LAST_OUT"
expect_exit 0 "--help" "$SL" --help
expect_grep 'run' "--help lists run" "$LAST_OUT"
expect_exit 0 "run --help" "$SL" run --help
expect_grep 'epochs X' "run --help lists --epochs" "$LAST_OUT"
expect_exit 0 "bench --help" "$SL" bench --help
# help COMMAND prints that command's --help, as git does (it printed the
# top-level help); help alone the top-level one
for c in run serve bench tui; do
	want=$("$SL" "$c" --help 2>&1)
	got=$("$SL" help "$c" 2>&1); code=$?
	[ "$code" = 0 ] && [ "$got" = "$want" ] && ok "help $c is $c --help" ||
		bad "help $c is $c --help (exit $code)" "$(printf '%s\n' "$got" | head -n 3)"
done
[ "$("$SL" help 2>&1)" = "$("$SL" --help 2>&1)" ] && ok "help alone is --help" || bad "help alone is --help"
expect_exit 2 "help of an unknown command" "$SL" help frobnicate
expect_grep "help: no command 'frobnicate'" "help names the unknown command" "$LAST_OUT"
expect_exit 2 "unknown command" "$SL" frobnicate
expect_grep "unknown command 'frobnicate'" "unknown command is named" "$LAST_OUT"
expect_exit 2 "unknown flag" "$SL" run --no-such-flag
expect_exit 2 "bad number" "$SL" run --lr abc
expect_grep '[-][-]lr: expected a number' "bad number names the flag" "$LAST_OUT"
expect_exit 2 "lr out of range" "$SL" run --lr -1
expect_grep 'lr: ' "lr range names the field" "$LAST_OUT"
expect_exit 2 "bad model" "$SL" run --model mlp:784-x-10 --dataset synthetic:100
expect_grep 'model: ' "bad model names the field" "$LAST_OUT"
expect_exit 2 "model/data mismatch" "$SL" run --model mlp:100-10 --dataset synthetic:100
expect_grep '784 features' "mismatch says why" "$LAST_OUT"
expect_exit 2 "bad dataset" "$SL" run --dataset synthetic:abc
expect_grep 'dataset: ' "bad dataset names the field" "$LAST_OUT"
expect_exit 2 "missing idx dir" "$SL" run --dataset idx:/nonexistent/dir
expect_grep '/nonexistent/dir' "missing dir is named" "$LAST_OUT"
expect_exit 2 "a text data set for a model without a context" "$SL" run --dataset synthetic-text:5000
expect_grep "dataset: synthetic-text:5000 is text, read as contexts of a language model's T bytes; model mlp:784-256-128-10 has no context: give a gpt:" \
	"... names the data set, the model and what it needs" "$LAST_OUT"
expect_exit 2 "a gpt spec cut short" "$SL" run --model gpt:L1-H2-E8 --dataset synthetic-text:5000
expect_grep "model: \"gpt:L1-H2-E8\": expected '-' after E8" "... named where it stops" "$LAST_OUT"
# a language model on text, end to end: the data cut into the model's T,
# the held-out loss per position falls (first evaluation against the last)
GPTRUN="--clock virtual --model gpt:L1-H2-E16-T16 --optimizer adamw --lr 0.01 --workers 2
 --batch 16 --steps 1500 --eval-every 500 --threads 1"
# shellcheck disable=SC2086
expect_exit 0 "gpt on synthetic text" "$SL" run $GPTRUN --dataset synthetic-text:20000 --log "$TMP/gpt.jsonl"
expect_grep 'gpt:L1-H2-E16-T16 on synthetic-text:20000 \(1125 train, 256 test\)' \
	"... 18000 training bytes cut into 1125 contexts of 16, 256 held out" "$LAST_OUT"
python3 - "$TMP/gpt.jsonl" <<'PY' && ok "... its held-out loss per position falls by 0.5 nats, below 2.3 (the letters alone: 2.76)" || bad "... the held-out loss" "$(grep test_loss "$TMP/gpt.jsonl" | head -3)"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"test_loss"' in l and '"event"' not in l]
first, last = r[0]["test_loss"], r[-1]["test_loss"]
print(first, last)
sys.exit(0 if len(r) >= 3 and last < first - 0.5 and last < 2.3 else 1)
PY
# any file read as bytes: this script
expect_exit 0 "gpt on text:FILE" "$SL" run --clock virtual --model gpt:L1-H2-E8-T8 --steps 4 \
	--batch 4 --quiet --dataset "text:$0" --log "$TMP/gptf.jsonl"

# --- the batches' augmentation: --augment, "augment" in the run object ------
expect_grep 'augment NAME' "run --help lists --augment" "$("$SL" run --help)"
expect_exit 2 "a misspelt --augment" "$SL" run --augment crop-flp --dataset synthetic:600
expect_grep "augment: unknown \"crop-flp\" \(expected none, crop-flip, auto; did you mean 'crop-flip'\?\)" \
	"... named, with the choices and a suggestion" "$LAST_OUT"
printf '{"model": "mlp:784-16-10", "dataset": "synthetic:600", "augmnet": "none"}\n' >"$TMP/augtypo.json"
expect_exit 2 "a misspelt \"augment\" key" "$SL" run --config "$TMP/augtypo.json"
expect_grep "augmnet: unknown field.*augment" "... suggests augment" "$LAST_OUT"
AUGRUN="--clock virtual --dataset synthetic:600 --model mlp:784-16-10 --workers 3 --batch 16
 --steps 90 --eval-every 30 --threads 1 --quiet"
for n in 1 2; do
	# shellcheck disable=SC2086
	expect_exit 0 "a virtual crop-flip run ($n)" "$SL" run $AUGRUN --augment crop-flip --log "$TMP/aug$n.jsonl"
done
# shellcheck disable=SC2086
expect_exit 0 "the same run without views" "$SL" run $AUGRUN --log "$TMP/aug0.jsonl"
check=$(python3 - "$TMP/aug1.jsonl" "$TMP/aug2.jsonl" "$TMP/aug0.jsonl" <<'PY'
import json, sys
machine = ("samples_per_s", "updates_per_s", "train_s")
def recs(p):
    return [{k: v for k, v in r.items() if k not in machine} for r in map(json.loads, open(p))]
a, b, n = map(recs, sys.argv[1:4])
assert a[0]["augment"] == "crop-flip", a[0]
assert "augment" not in n[0], ("auto, the default, is not echoed", n[0])
assert a == b, "two crop-flip runs of a seed differ"
assert a[-1]["weights"] != n[-1]["weights"], "crop-flip trained as none"
print("ok")
PY
)
expect_grep '^ok' "crop-flip: two virtual runs, one log; not the log without views" "$check"

printf '{"model": "mlp:784-32-10", "lr": 0.1,\n "stop": {"epochs": 1}, "bacth": 32}\n' >"$TMP/typo.json"
expect_exit 2 "config typo" "$SL" run --config "$TMP/typo.json"
expect_grep 'bacth: unknown field' "config typo names the field" "$LAST_OUT"
printf '{"model": "mlp:784-32-10",\n "lr": 0.1,,}\n' >"$TMP/syntax.json"
expect_exit 2 "config syntax error" "$SL" run --config "$TMP/syntax.json"
expect_grep 'line 2' "syntax error gives the line" "$LAST_OUT"
printf '{"batch": "64"}' >"$TMP/type.json"
expect_exit 2 "config wrong type" "$SL" run --config "$TMP/type.json"
expect_grep 'batch: expected an integer' "wrong type names the field" "$LAST_OUT"
printf '{"stop": {"epochs": -1}}' >"$TMP/range.json"
expect_exit 2 "config out of range" "$SL" run --config "$TMP/range.json"
expect_grep 'stop.epochs' "range error names stop.epochs" "$LAST_OUT"
expect_exit 2 "missing config file" "$SL" run --config "$TMP/nope.json"
expect_exit 2 "workers out of range" "$SL" run --workers 0 --dataset synthetic:100
expect_grep 'workers: ' "workers error names the field" "$LAST_OUT"
expect_exit 2 "hogwild on the virtual clock" "$SL" run --rule hogwild --clock virtual --dataset synthetic:100
expect_grep 'rule: hogwild' "hogwild error names the field" "$LAST_OUT"
expect_exit 2 "cuda not built" "$SL" run --device cuda --dataset synthetic:100
expect_grep 'device: ' "cuda error names the field" "$LAST_OUT"

# A real run: config file plus overriding flags, log to a file.
printf '{"model": "mlp:784-32-10", "dataset": "synthetic:3000", "lr": 0.1,\n "batch": 32, "seed": 7, "eval_every": 40, "stop": {"epochs": 5}}\n' >"$TMP/run.json"
expect_exit 0 "short run" "$SL" run --config "$TMP/run.json" --epochs 2 --log "$TMP/run.jsonl"
expect_grep 'done \(epochs\)' "summary on stderr" "$LAST_OUT"
check=$(python3 - "$TMP/run.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
first, evals, end = recs[0], [r for r in recs[1:] if "event" not in r], recs[-1]
assert first["model"] == "mlp:784-32-10" and first["lr"] == 0.1 and first["batch"] == 32, first
assert first["stop"]["epochs"] == 2 and first["t"] == 0 and first["v"] == 0, first
assert end["event"] == "end" and end["stop"] == "epochs", end
for r in evals:
    for k in ("t", "v", "epoch", "samples", "train_loss", "test_loss", "test_acc",
              "samples_per_s", "staleness"):
        assert k in r, (k, r)
    s = r["staleness"]
    assert len(s["hist"]) == 65 and s["hist"][0] == r["v"] and s["max"] == 0, s
assert [r["v"] for r in evals][:2] == [40, 80], [r["v"] for r in evals]
assert end["samples"] == 6000 and abs(end["epoch"] - 2.0) < 1e-9, end
assert end["best_acc"] >= end["test_acc"] > 0.9, end
assert abs(end["samples_per_s"] - end["samples"] / end["train_s"]) < 1e-6 * end["samples_per_s"]
assert all(a["t"] <= b["t"] for a, b in zip(recs[1:], recs[2:]))
print("log-ok", len(evals))
PY
)
expect_grep '^log-ok' "log records are complete and consistent" "$check"

# Determinism: the same config, seed and thread count give the same log
# (apart from the fields that time the machine); another thread count sums
# in another order, so it agrees to rounding only.
curve() {
	python3 -c 'import json,sys; print([(r.get("v"), r.get("train_loss"), r.get("test_loss"), r.get("test_acc")) for r in map(json.loads, open(sys.argv[1]))][1:])' "$1"
}
expect_exit 0 "repeat run" "$SL" run --config "$TMP/run.json" --epochs 2 --log "$TMP/run2.jsonl"
[ "$(curve "$TMP/run.jsonl")" = "$(curve "$TMP/run2.jsonl")" ] && ok "same seed, same curve, bit for bit" ||
	bad "same seed, same curve" "$(curve "$TMP/run.jsonl")"
expect_exit 0 "one-thread run" "$SL" run --config "$TMP/run.json" --epochs 2 --log "$TMP/run3.jsonl" --threads 1
close=$(python3 - "$TMP/run.jsonl" "$TMP/run3.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(f)][1:-1] for f in sys.argv[1:3])
assert len(a) == len(b)
for x, y in zip(a, b):
    assert x["v"] == y["v"]
    assert abs(x["train_loss"] - y["train_loss"]) <= 1e-5 * abs(x["train_loss"]), (x, y)
print("close")
PY
)
expect_grep '^close' "1 and 2 threads agree to rounding" "$close"

# Log to stdout when --log is absent; progress stays on stderr.
out=$("$SL" run --config "$TMP/run.json" --steps 30 --quiet 2>/dev/null)
expect_grep '"event":"end"' "log on stdout by default" "$out"
expect_exit 1 "unwritable log" "$SL" run --config "$TMP/run.json" --steps 5 --log /nonexistent/x.jsonl

# SIGTERM stops a run cleanly: end record, summary, and 143, which a
# script tells from a run that met its stop (tests/integration/exits.sh
# has the rest)
"$SL" run --config "$TMP/run.json" --epochs 1000 --log "$TMP/term.jsonl" 2>"$TMP/term.err" &
pid=$!
# until it trains (its run object and a first evaluation logged; 60 s at most)
wait_until 60 has_lines 2 "$TMP/term.jsonl"
kill -TERM $pid; wait $pid; rc=$?
last=$(tail -n 1 "$TMP/term.jsonl" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("event"), d.get("stop"))')
[ $rc -eq 143 ] && [ "$last" = "end interrupted" ] && ok "SIGTERM: end record (interrupted), exit 143" || bad "SIGTERM (rc $rc, last $last)" "$(tail -3 "$TMP/term.err")"
expect_grep 'interrupted \(SIGTERM\)' "SIGTERM: summary" "$(cat "$TMP/term.err")"

# CSV logs: a header and one flat row per record
expect_exit 0 "csv log" "$SL" run --config "$TMP/run.json" --steps 100 --log "$TMP/run.csv" --log-format csv --quiet
check=$(python3 - "$TMP/run.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
assert rows[0]["kind"] == "run" and '"model"' in rows[0]["detail"], rows[0]
evals = [r for r in rows if r["kind"] == "eval"]
assert evals and float(evals[-1]["test_acc"]) > 0.5 and int(evals[0]["v"]) == 40, evals[:1]
assert rows[-1]["kind"] == "end" and rows[-1]["detail"] == "steps", rows[-1]
print("ok")
PY
)
expect_grep '^ok' "csv rows parse" "$check"
expect_exit 2 "bad log format" "$SL" run --log-format xml

# make install into a staging root
root="$TMP/root"
make -s -C "$(dirname "$0")/../.." install-files DESTDIR="$root" PREFIX=/usr BUILD="$(cd "$(dirname "$SL")" && pwd)" >/dev/null 2>&1
[ -x "$root/usr/bin/stalelab" ] && [ -f "$root/usr/share/man/man1/stalelab.1" ] && [ -f "$root/usr/share/stalelab/stalelab.service" ] &&
	ok "make install (DESTDIR, PREFIX)" || bad "make install" "$(find "$root" 2>/dev/null)"
[ -f "$root/usr/share/stalelab/examples/ssp.json" ] && [ -f "$root/usr/share/stalelab/python/stalelab.py" ] &&
	ok "make install: the examples and the Python client" || bad "make install: examples, client" "$(find "$root/usr/share/stalelab" 2>/dev/null)"
# every doc the man page points to is installed
missing=""
for f in $(sed -n '/^\.SH FILES/,/^\.SH EXIT/p' "$root/usr/share/man/man1/stalelab.1" | grep -o '[a-z]*\.md'); do
	[ -f "$root/usr/share/doc/stalelab/$f" ] || missing="$missing $f"
done
[ -z "$missing" ] && ok "make install installs the docs the man page names" || bad "docs the man page names are installed (missing:$missing)"
grep -q '^\.SH OPTIONS' "$root/usr/share/man/man1/stalelab.1" && ok "the man page has an OPTIONS section" ||
	bad "the man page has an OPTIONS section"
unit="$root/usr/share/stalelab/stalelab.service"
grep -q '^EnvironmentFile=.*token' "$unit" && grep -q 'STALELAB_TOKEN=' "$unit" && ! grep -q -- '--token' "$unit" &&
	ok "the systemd unit shows where the token goes (STALELAB_TOKEN in an EnvironmentFile)" ||
	bad "the systemd unit shows where the token goes" "$(cat "$unit")"
"$root/usr/bin/stalelab" --version | grep -q '^stalelab ' && ok "installed binary runs" || bad "installed binary runs"

# make bench without the PyTorch peer says how to get it
out=$(cd "$(dirname "$0")/../.." && PEER=/nonexistent/peer.py PEER_CHECK_ONLY=1 sh bench/run.sh "$(dirname "$SL")" 2>&1)
expect_grep 'no PyTorch peer at /nonexistent/peer.py' "bench without the peer says so" "$out"
expect_grep 'make bench PEER=' "bench without the peer says how to get it" "$out"
[ -f "$(dirname "$0")/../../bench/peers/torch_fmnist.py" ] && ok "the peer is in the source tree" || bad "the peer is in the source tree"

# README and docs link nothing outside the repository: no path of the
# machine it was written on, and every relative link resolves to a file
# of the repository (docs/ links ../examples/)
top=$(cd "$(dirname "$0")/../.." && pwd)
outside=$(grep -n '\.\./shared\|/work/' "$top/README.md" "$top"/docs/*.md "$top"/docs/stalelab.1 "$top"/bench/*.sh 2>/dev/null)
outside="$outside$(python3 - "$top" "$top/README.md" "$top"/docs/*.md <<'PY'
import os, re, sys
top = os.path.realpath(sys.argv[1])
for f in sys.argv[2:]:
    for n, line in enumerate(open(f, encoding="utf-8"), 1):
        for t in re.findall(r"\]\(([^)#\s]+)", line):
            if re.match(r"[a-z]+:", t):
                continue
            p = os.path.realpath(os.path.join(os.path.dirname(f), t))
            if not (p == top or p.startswith(top + os.sep)) or not os.path.exists(p):
                print(f"{f}:{n}: {t}")
PY
)"
[ -z "$outside" ] && ok "docs link nothing outside the repository" || bad "docs link nothing outside the repository" "$outside"

finish run
