#!/bin/sh
# stalelab sample (issue 33, section 3): text from a language model's
# checkpoint. A gpt trained on a text of a known order-1 Markov chain (16
# symbols, each followed by one of 3 successors) samples text whose byte
# pairs are the chain's far more often than uniform bytes' 3/16; the same
# seed gives the same text, another seed other text; the prompt starts it;
# every byte is in the vocabulary; bad input is refused by name.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: stalelab sample"

expect_exit 0 "sample --help" "$SL" sample --help
expect_grep '--resume CKPT.*--tokens N.*--seed S' "--help names --resume, --tokens, --seed" "$(echo $LAST_OUT)"
expect_grep '--prompt TEXT.*--temperature T' "... --prompt and --temperature" "$(echo $LAST_OUT)"
[ "$("$SL" help sample)" = "$("$SL" sample --help)" ] && ok "help sample" || bad "help sample"
expect_grep '^  sample ' "stalelab --help lists sample" "$("$SL" --help)"

# the chain: symbol k ('a' + k) is followed by k + 1, k + 3 or k + 7 (mod 16)
python3 - "$TMP/chain.txt" <<'PY'
import random, sys
r = random.Random(7)
k, out = 0, []
for _ in range(30000):
    out.append(chr(ord("a") + k))
    k = (k + r.choice((1, 1, 3, 7))) % 16
open(sys.argv[1], "w").write("".join(out))
PY
mkdir "$TMP/ck"
expect_exit 0 "a gpt trains on the chain's text (1000 virtual updates)" "$SL" run --device cpu --clock virtual \
	--model gpt:L1-H2-E16-T16 --optimizer adamw --lr 0.01 --workers 2 --batch 16 --steps 1000 \
	--threads 1 --dataset "text:$TMP/chain.txt" --checkpoint-dir "$TMP/ck" --checkpoint-every 1000 \
	-q --log "$TMP/train.jsonl"
CK=$TMP/ck/stalelab-v1000.ckpt

"$SL" sample --resume "$CK" --tokens 400 --seed 1 >"$TMP/s1" 2>"$TMP/err"
rc=$?
"$SL" sample --resume "$TMP/ck" --tokens 400 --seed 1 >"$TMP/s1b" 2>>"$TMP/err"
"$SL" sample --resume "$CK" --tokens 400 --seed 2 >"$TMP/s2" 2>>"$TMP/err"
"$SL" sample --resume "$CK" --tokens 400 --seed 3 --prompt "abc" --temperature 0.7 >"$TMP/sp" 2>>"$TMP/err"
[ $rc -eq 0 ] && [ -s "$TMP/s1" ] && cmp -s "$TMP/s1" "$TMP/s1b" &&
	ok "seed 1 twice (the file, then its --checkpoint-dir): the same text" ||
	bad "seed 1 twice" "$(cat "$TMP/err")"
! cmp -s "$TMP/s1" "$TMP/s2" && ok "seed 2: other text" || bad "seed 2 gives seed 1's text"
out=$(python3 - "$TMP/s1" "$TMP/s2" "$TMP/sp" <<'PY' 2>&1
import sys
def valid(a, b):
    return (ord(b) - ord(a)) % 16 in (1, 3, 7)
rep = []
for i, f in enumerate(sys.argv[1:]):
    s = open(f, "rb").read().decode("latin-1")
    if i == 2:
        assert s.startswith("abc"), s[:10]
        assert len(s) == 403, len(s)
    else:
        assert len(s) == 401, len(s)   # the start byte, then 400
    assert set(s) <= set("abcdefghijklmnop"), sorted(set(s) - set("abcdefghijklmnop"))
    pairs = list(zip(s, s[1:]))
    rep.append(sum(valid(a, b) for a, b in pairs) / len(pairs))
assert min(rep) >= 0.8, rep
print("ok", " ".join("%.3f" % x for x in rep))
PY
)
case $out in ok*) ok "prompt abc printed first; every byte in the vocabulary; chain pairs: ${out#ok } of the samples (uniform bytes: 0.1875)" ;;
*) bad "the samples" "$out" ;; esac

# refusals, by name
expect_exit 2 "--prompt with a byte outside the vocabulary" "$SL" sample --resume "$CK" --prompt "abZ"
expect_grep "--prompt: byte 2, 0x5a \('Z'\), is not in the checkpoint's vocabulary of 16 bytes" "... named with its place" "$LAST_OUT"
expect_exit 2 "--prompt empty" "$SL" sample --resume "$CK" --prompt ""
expect_grep "--prompt: empty" "... said" "$LAST_OUT"
expect_exit 2 "--temperature 0" "$SL" sample --resume "$CK" --temperature 0
expect_grep "--temperature: expected a temperature > 0 and <= 100, got \"0\"" "... named" "$LAST_OUT"
expect_exit 2 "--tokens 0" "$SL" sample --resume "$CK" --tokens 0
expect_grep "--tokens: expected 1 to 1000000, got \"0\"" "... named" "$LAST_OUT"
expect_exit 2 "no --resume" "$SL" sample
expect_grep "which checkpoint\? \(--resume CKPT\)" "... said" "$LAST_OUT"
expect_exit 2 "an unknown option" "$SL" sample --resume "$CK" --temprature 2
expect_grep "unknown option '--temprature' \(did you mean '--temperature'\?\)" "... with the nearest" "$LAST_OUT"
expect_exit 2 "a missing checkpoint" "$SL" sample --resume "$TMP/none.ckpt"
expect_grep "--resume: .*none.ckpt" "... named" "$LAST_OUT"
printf 'not a checkpoint' >"$TMP/junk.ckpt"
expect_exit 2 "a file that is not a checkpoint" "$SL" sample --resume "$TMP/junk.ckpt"
expect_grep "^stalelab sample: --resume: $TMP/junk.ckpt: not a stalelab checkpoint" "... said, naming the file once" "$LAST_OUT"
mkdir "$TMP/img"
"$SL" run --device cpu --clock virtual --model logreg --dataset synthetic:200 --steps 4 --threads 1 -q \
	--checkpoint-dir "$TMP/img" --checkpoint-every 4 --log "$TMP/img.jsonl"
expect_exit 2 "an image model's checkpoint" "$SL" sample --resume "$TMP/img/stalelab-v4.ckpt"
expect_grep "stalelab-v4.ckpt is a checkpoint of model logreg on synthetic:200, not of a language model" \
	"... refused naming the model and the data set" "$LAST_OUT"
finish sample
