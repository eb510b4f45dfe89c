#!/bin/sh
# The seeds' results in small (issue 16, part 5): every experiment of
# experiments/quick/ swept and its claims checked by experiments/results.py
# --quick: every verdict decided by its 95% interval over the seeds (lib.py,
# whose unit test experiments/test_lib.py runs first, without a sweep). A
# claim that differs fails, and so does one not resolved whose estimate
# lies outside the claimed region (the direction is wrong); one not
# resolved in the right direction is printed as "open" (two seeds rarely
# resolve anything). The identities must hold. The findings docs/results.md
# reports as differing from their source are printed as "note".
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: the results, quick"
if ! command -v python3 >/dev/null; then
	bad "python3 missing (make deps installs it)"
	finish results
	exit 1
fi
if python3 experiments/test_lib.py >"$TMP/lib" 2>&1; then
	ok "experiments/test_lib.py: $(grep -E '^Ran [0-9]+ tests' "$TMP/lib")"
else
	bad "experiments/test_lib.py" "$(cat "$TMP/lib")"
fi
python3 experiments/results.py --quick --stalelab "$SL" --out "$TMP/results" >"$TMP/out" 2>&1
rc=$?
sed -n 's/^\([a-z0-9-]*\) *\([0-9.]* s, [0-9]* cells\)$/  \1: \2/p' "$TMP/out"
while IFS= read -r line; do
	case $line in
	"  ok   "*) ok "${line#  ok   }" ;;
	"  note "*) echo "  note ${line#  note }" ;;
	"  open "*) echo "  open ${line#  open }" ;;
	"  DIFF "*) bad "${line#  DIFF }" ;;
	esac
done <"$TMP/out"
[ "$rc" -eq 0 ] && ok "results.py --quick exits 0" || bad "results.py --quick exit $rc" "$(tail -n 20 "$TMP/out")"
grep -q '^r8-identities' "$TMP/out" && ok "every experiment ran" || bad "every experiment ran" "$(cat "$TMP/out")"
# the page rendered from the quick cells: every verdict with its interval,
# the tally without the identities, nothing missing but the experiments
# --quick does not run (r2-lenet5, r2-workers)
page=$TMP/results/results.md
if [ -f "$page" ]; then
	grep -q '| claim | the source | measured here | estimate, 95% interval over seeds | verdict |' "$page" &&
		grep -Eq '\((paired t|Welch|t), [0-9]+ seeds\) \| (agrees|\*\*differs\*\*|not resolved at [0-9]+ seeds[^|]*) \|' "$page" &&
		grep -q 'exact (no seed noise) | identity holds |' "$page" &&
		grep -Eq 'Over the page: [0-9]+ claims decided by intervals over seeds: .*identities of our model or code, not counted as agreement' "$page" &&
		ok "the quick page: verdicts beside their intervals, identities apart" ||
		bad "the quick page's verdicts" "$(grep -n 'verdict\|Over the page' "$page" | head)"
	miss=$(grep -o '([a-z0-9._-]*: not in this run)' "$page" | grep -v '^(r2-lenet5\.\|^(r2-workers\.')
	[ -z "$miss" ] && ok "the quick page: every value filled" || bad "the quick page lacks values" "$miss"
else
	bad "results.py --quick rendered no page" "$(tail -n 5 "$TMP/out")"
fi
finish results
