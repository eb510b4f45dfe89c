#!/bin/sh
# One runnable config per rule (examples/RULE.json, issue 29): every rule
# the binary knows has its file and every file names a rule; each runs for
# 20 updates on a small synthetic data set and ends normally, its log's run
# object has the rule it is named after and every key of the file as the
# file says, and docs/rules.md links it.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: the examples, one per rule"

# the rules, from the binary's own list (an unknown rule's message)
rules=$("$SL" run --rule none-such --steps 1 -q 2>&1 | sed -n 's/.*(expected \(.*\))$/\1/p' | tr -d ,)
[ -n "$rules" ] && ok "the binary lists its rules" || bad "the binary lists its rules" "$("$SL" run --rule none-such 2>&1)"
for r in $rules; do
	[ -f "examples/$r.json" ] || bad "examples/$r.json: missing"
done
for f in examples/*.json; do
	r=$(basename "$f" .json)
	case " $rules " in *" $r "*) ;; *) bad "$f: names no rule the binary knows" ;; esac
done

for f in examples/*.json; do
	r=$(basename "$f" .json)
	log=$TMP/$r.jsonl
	expect_exit 0 "$r: runs" timeout 60 "$SL" run --config "$f" --dataset synthetic:2000 \
		--epochs 1000 --steps 20 --threads 1 -q --log "$log"
	out=$(python3 - "$f" "$log" "$r" <<'PY' 2>&1
import json, sys
want = json.load(open(sys.argv[1]))
lines = [json.loads(l) for l in open(sys.argv[2])]
first, end, rule = lines[0], lines[-1], sys.argv[3]

def within(a, b, where):
    """every key of a is in b with a's value (b may hold more)"""
    if isinstance(a, dict):
        for k, v in a.items():
            assert isinstance(b, dict) and k in b, "%s%s: not in the log's run object" % (where, k)
            within(v, b[k], "%s%s." % (where, k))
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            within(x, y, "%s[%d]." % (where.rstrip("."), i))
    else:
        assert a == b, "%s: %r in the file, %r in the log" % (where.rstrip("."), a, b)

assert want["rule"] == rule, "the file's rule is %r" % want["rule"]
assert first["rule"] == rule, "the log's rule is %r" % first["rule"]
within({k: v for k, v in want.items() if k not in ("dataset", "stop", "threads")}, first, "")
assert first["dataset"] == "synthetic:2000", first["dataset"]
assert (end["event"], end["stop"], end["v"]) == ("end", "steps", 20), end
print("ok")
PY
)
	[ "$out" = ok ] && ok "$r: the log says rule $r, the file's keys, stopped at 20 updates" ||
		bad "$r: the log" "$out"
	grep -q "(\.\./examples/$r\.json)" docs/rules.md && ok "$r: docs/rules.md links it" ||
		bad "$r: docs/rules.md does not link ../examples/$r.json"
done
finish examples
