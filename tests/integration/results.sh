#!/bin/sh
# The seeds' results in small (issue 16, part 5): every experiment of
# experiments/quick/ swept and its claims checked by experiments/results.py
# --quick: each effect's direction, the identities bit for bit, the
# Mitliagkas geometric staleness (mean M-1 within 2%) and the n-softsync
# bounds within their stated tolerances. A check that differs fails, except
# the findings docs/results.md reports as differing from their source
# (printed as "note").
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: the results, quick"
if ! command -v python3 >/dev/null; then
	bad "python3 missing (make deps installs it)"
	finish results
	exit 1
fi
python3 experiments/results.py --quick --stalelab "$SL" --out "$TMP/results" >"$TMP/out" 2>&1
rc=$?
sed -n 's/^\([a-z0-9-]*\) *\([0-9.]* s, [0-9]* cells\)$/  \1: \2/p' "$TMP/out"
while IFS= read -r line; do
	case $line in
	"  ok   "*) ok "${line#  ok   }" ;;
	"  note "*) echo "  note ${line#  note }" ;;
	"  DIFF "*) bad "${line#  DIFF }" ;;
	esac
done <"$TMP/out"
[ "$rc" -eq 0 ] && ok "results.py --quick exits 0" || bad "results.py --quick exit $rc" "$(tail -n 20 "$TMP/out")"
grep -q '^r8-identities' "$TMP/out" && ok "every experiment ran" || bad "every experiment ran" "$(cat "$TMP/out")"
finish results
