#!/bin/sh
# docs/new-rule.md cannot rot (issue 34, part 5): the C it shows is
# engine/ps/rules/async_gated.c byte for byte, the rows it shows are in
# rules.h and table.c, the tests it names exist, and its sweep runs: the
# gate lets fewer outer updates through than async-diloco at equal samples.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: docs/new-rule.md's worked rule"
doc=docs/new-rule.md
# the n-th fenced block of a language, as the page shows it
block() {
	awk -v lang="$1" -v want="$2" '
		/^```/ { if (inb) { inb = 0; next } if ($0 == "```" lang) { n++; if (n == want) { inb = 1; next } } }
		inb { print }' "$doc"
}
block c 1 >"$TMP/rule.c"
if cmp -s "$TMP/rule.c" engine/ps/rules/async_gated.c; then
	ok "the page's code is engine/ps/rules/async_gated.c"
else
	bad "the page's code differs from engine/ps/rules/async_gated.c" "$(diff "$TMP/rule.c" engine/ps/rules/async_gated.c | head -20)"
fi
block c 2 >"$TMP/row.c"
miss=$(while IFS= read -r l; do grep -qxF "$l" engine/ps/rules/table.c || echo "$l"; done <"$TMP/row.c")
[ -s "$TMP/row.c" ] && [ -z "$miss" ] && ok "the page's rows are in table.c" || bad "rows not in table.c" "$miss"
grep -Eq 'rule_async_gated[,;]' engine/ps/rules/rules.h && ok "rules.h declares it" || bad "rules.h lacks rule_async_gated"
for t in async_gated_drops_the_old:tests/test_ps.c rules_reduce_to_their_special_cases:tests/test_run_rules.c \
	every_rule_in_the_table:tests/test_run_rules.c; do
	grep -q "START_TEST(${t%%:*})" "${t#*:}" && ok "the test it names: ${t%%:*}" || bad "no test ${t%%:*} in ${t#*:}"
done
grep -q "async-gated" docs/rules.md && ok "docs/rules.md has the rule" || bad "docs/rules.md lacks async-gated"
block json 1 >"$TMP/gated.json"
expect_exit 0 "the page's sweep runs" timeout 300 "$SL" sweep "$TMP/gated.json" --out "$TMP/gated" --jobs 2
out=$(python3 - "$TMP/gated/results.csv" <<'PY' 2>&1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 8, "%d cells" % len(rows)
by = {}
for r in rows:
    key = r["variant"] + (":" + r["rule_params.s"] if r.get("rule_params.s") else "")
    by.setdefault(key, []).append(r)
share = {k: sum(int(r["updates"]) for r in v) / sum(int(r["samples"]) for r in v) for k, v in by.items()}
full = share["async-diloco"]
assert share["async-gated:1"] < share["async-gated:6"] < full, share
assert all(r["diverged"] == "0" for r in rows), "a cell diverged"
print("ok %s" % ", ".join("%s %.2f" % (k, v / full) for k, v in sorted(share.items())))
PY
)
case $out in
ok*) ok "the gate lets fewer updates through (updates per sample against async-diloco's: ${out#ok })" ;;
*) bad "the sweep's results" "$out $(head -2 "$TMP/gated/results.csv")" ;;
esac
finish newrule
