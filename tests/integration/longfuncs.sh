#!/bin/sh
# No function of daemon/ is longer than 150 lines unless the comment just
# above it says why, with "long:" and the reason (issue 30): a long
# function is a place to split, or to say why it cannot be.
#
# A function is counted from the line of its name (the return type is on
# the line above, by the style) to its closing brace, both included; the
# braces of a function stand alone in column 0, and a definition with its
# opening brace elsewhere is refused, since the count reads them. The
# comment above it is the block comment between it and the blank line,
# declaration or closing brace before it. There is no list of exceptions.
. "$(dirname "$0")/lib.inc"
echo "integration: no function in daemon/ over 150 lines without a reason"
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
MAX=150

# measure FILE...: a line per function, "FILE:LINE NAME LINES MARKED"
# (MARKED 1 when the comment above it holds "long:"), and "FILE:LINE -
# BRACE 0" for a definition whose opening brace is not alone in column 0
measure() {
	awk '
	FNR == 1 { cmt = ""; fname = ""; infn = 0; incmt = 0 }
	infn {
		if ($0 ~ /^}/) {
			print FILENAME ":" start " " name " " (FNR - start + 1) " " marked
			infn = 0; cmt = ""; fname = ""
		}
		next
	}
	incmt || /^[ \t]*\/\*/ {
		cmt = cmt " " $0
		incmt = !($0 ~ /\*\//)
		next
	}
	/^\{/ {
		if (fname != "") {
			infn = 1; start = nameline; name = fname; marked = (cmt ~ /long:/)
		}
		next
	}
	/^[ \t]*$/ || /^#/ || /^}/ || /;[ \t]*$/ { cmt = ""; fname = ""; next }
	/^[A-Za-z_].*\(/ && fname == "" {
		match($0, /[A-Za-z_][A-Za-z0-9_]*\(/)
		fname = substr($0, RSTART, RLENGTH - 1); nameline = FNR
		if ($0 ~ /\)[ \t]*\{[ \t]*$/ && $0 !~ /=/)
			print FILENAME ":" FNR " - BRACE 0"
	}
	' "$@"
}

# the counter itself, on functions of 150 and 151 lines, marked and not
body() { i=0; while [ "$i" -lt "$1" ]; do echo "	x++;"; i=$((i + 1)); done; }
{
	printf '/* a comment */\nstatic int\nat_limit(void)\n{\n'; body 147; printf '}\n\n'
	printf 'static int\nover(void)\n{\n'; body 148; printf '}\n\n'
	printf '/* long: a reason\n * on two lines */\nstatic void\nmarked(int a,\n       int b)\n{\n'; body 200; printf '}\n\n'
	printf '/* long: not this one */\nstatic int x;\n\nstatic int\nunmarked(void)\n{\n'; body 160; printf '}\n'
	printf 'static int one_line(void) {\n'; body 3; printf '}\n'
} >"$TMP/t.c"
measure "$TMP/t.c" >"$TMP/t.out"
got=$(sed "s|^$TMP/||" "$TMP/t.out" | tr '\n' ';')
want="t.c:3 at_limit 150 0;t.c:155 over 151 0;t.c:310 marked 204 1;t.c:519 unmarked 163 0;t.c:682 - BRACE 0;"
[ "$got" = "$want" ] && ok "the counter: 150 and 151 lines, a marked one, a comment that is not above, a brace out of place" ||
	bad "the counter" "got  $got
want $want"

files=$(find daemon -name '*.c' | sort)
measure $files >"$TMP/all.out"
n=$(grep -vc ' BRACE ' "$TMP/all.out")
[ "$n" -gt 300 ] && ok "$n functions measured in daemon/" || bad "functions measured in daemon/: $n" "$(head "$TMP/all.out")"
while read -r at name lines marked; do
	if [ "$name" = - ]; then
		bad "$at: a function's opening brace not alone in column 0 (the count reads it)"
	elif [ "$lines" -le "$MAX" ]; then
		:
	elif [ "$marked" = 1 ]; then
		ok "$at $name: $lines lines, says why (long:)"
	else
		bad "$at $name: $lines lines, over $MAX with no \"long:\" comment above it saying why"
	fi
done <"$TMP/all.out"
finish longfuncs
