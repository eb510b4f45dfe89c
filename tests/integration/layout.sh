#!/bin/sh
# The folders read as the architecture (docs/architecture.md), and the
# dependency direction holds, checked on the #include lines of every file
# of every folder of engine/ and daemon/ (a folder uses only itself and the
# folders below it), tui/ (none of engine/ or daemon/), with no exception.
#
# engine/: the order is the one docs/architecture.md draws (its picture's
# folder rows under "engine/", top to bottom), read from there: every
# folder of engine/ is drawn once, and each may use only folders drawn
# below it. base/ (errors, random numbers, threads, serialisation) needs
# nothing else; cluster/ (the simulator) only base/; data/ (data sets) and
# nn/ (backends, models as graphs of nodes) know nothing of training;
# nn/ops/ (one file per op, a row in its table) only nn/ below it (op.h,
# the backend table), which finds the ops through op.h; cuda/ only nn/'s
# backend table; wire/ (the remote-worker messages) needs only base/, so a
# worker process links it alone; worker/ (a worker's step, in-process or
# remote) needs only base/, nn/ and data/: not the run loop, the clocks or
# the server; ps/ (the server, the rule class and its hooks' views) only
# base/ and nn/; ps/rules/ (one file per rule) only ps/ below it, never
# the run; run/ (the run, its clocks, its checkpoint) over them all;
# nothing in engine/ knows HTTP, the bus or curses.
#
# daemon/: formats/ (run objects as JSON, logs, checkpoint files, the
# API's JSON, the command line's helpers) over the engine; wire/ (wire
# frames in nanomsg buffers), progress/ (a run in this process, logged)
# and control/ (the API, no transport) over formats/; serve/ over control/
# and wire/; one folder per command above them (run/, sweep/, cluster/,
# bench/, worker/), none reaching into another's; main.c dispatches.
. "$(dirname "$0")/lib.inc"
echo "integration: the layout of engine/ and daemon/"
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1

# the folder of a header of ours, or nothing for a system or foreign one
DIRS="$(ls -d engine/*/ engine/ps/rules/ engine/nn/ops/ daemon/*/ | sed 's|/$||') daemon tui tests"
dir_of() {
	for d in $DIRS; do [ -f "$d/$1" ] && { echo "$d"; return; }; done
}
ENGINE=$(ls -d engine/*/ engine/ps/rules/ engine/nn/ops/ | sed 's|/$||' | tr '\n' ' ')
# the engine's folders as docs/architecture.md draws them, top to bottom
ORDER=$(sed -n '/^  engine\/ /,/^```/s|^   \([a-z][a-z/]*\)/ .*|engine/\1|p' docs/architecture.md)
# drawn_below FOLDER OTHER: OTHER is drawn under FOLDER in that picture
drawn_below() {
	echo "$ORDER" | sed -n "\\|^$1\$|,\$p" | tail -n +2 | grep -qx "$2"
}

# may_use FOLDER ALLOWED...: every header of ours FOLDER's files include is
# in FOLDER itself or one of ALLOWED; in engine/, ALLOWED are all drawn
# below FOLDER (so no rule here lets a folder reach up)
may_use() {
	f=$1; shift
	out=""
	case $f in engine/*)
		for a in "$@"; do
			drawn_below "$f" "$a" ||
				out="${out}layout.sh lets $f use $a, not drawn below it in docs/architecture.md\n"
		done ;;
	esac
	for src in "$f"/*.c "$f"/*.h "$f"/*.cu "$f"/*.cuh; do
		[ -f "$src" ] || continue
		for h in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$src"); do
			d=$(dir_of "$h")
			[ -z "$d" ] && continue
			okd=0
			for a in "$f" "$@"; do [ "$d" = "$a" ] && okd=1; done
			[ "$okd" -eq 1 ] || out="$out$src includes $h ($d)\n"
		done
	done
	if [ -z "$out" ]; then ok "$f uses only ${*:-itself}"; else bad "$f's dependencies" "$(printf "$out")"; fi
	CHECKED="$CHECKED $f"
}
CHECKED=""

# the engine's order: every folder of engine/ is drawn once in
# docs/architecture.md's picture, and every row drawn there is a folder
bad_order=""
for d in $ENGINE; do
	[ "$(echo "$ORDER" | grep -cx "$d")" -eq 1 ] ||
		bad_order="${bad_order}$d is not drawn once in docs/architecture.md's engine picture\n"
done
for d in $ORDER; do
	[ -d "$d" ] || bad_order="${bad_order}docs/architecture.md draws $d, no folder\n"
done
if [ -z "$bad_order" ]; then ok "engine/ top to bottom as drawn: $(echo "$ORDER" | sed 's|engine/||' | tr '\n' ' ' | sed 's/ $//')"
else bad "engine/'s order in docs/architecture.md" "$(printf "$bad_order")"; fi

may_use engine/run engine/ps/rules engine/ps engine/worker engine/wire engine/nn \
	engine/data engine/base
may_use engine/ps/rules engine/ps engine/nn engine/base
may_use engine/ps engine/nn engine/base
may_use engine/worker engine/nn engine/data engine/base
may_use engine/wire engine/base
# the cuda plugin: the backend table and nothing else of the engine
may_use engine/cuda engine/nn
# the ops (one file each, a row in table.c): nn/'s op.h and backend table
may_use engine/nn/ops engine/nn engine/base
may_use engine/nn engine/data engine/base
may_use engine/data engine/base
# the cluster simulator: pure arithmetic over its own types
may_use engine/cluster engine/base
may_use engine/base

# shellcheck disable=SC2086
{
may_use daemon/formats $ENGINE
may_use daemon/wire engine/base engine/data engine/wire
may_use daemon/progress daemon/formats $ENGINE
may_use daemon/control daemon/formats $ENGINE
may_use daemon/serve daemon/control daemon/wire daemon/formats $ENGINE
may_use daemon/run daemon/progress daemon/formats $ENGINE
may_use daemon/sweep daemon/progress daemon/formats $ENGINE
may_use daemon/cluster daemon/formats $ENGINE
may_use daemon/bench daemon/formats $ENGINE
may_use daemon/worker daemon/wire daemon/formats $ENGINE
# main.c: the commands' entry points, and what --help and --version print
may_use daemon daemon/run daemon/serve daemon/sweep daemon/cluster daemon/bench \
	daemon/worker tui daemon/formats engine/base engine/nn
}
# the terminal UI: a client of the bus, nothing of the engine or the daemon
may_use tui

# every folder above is checked, and nothing lies outside them
for d in $(ls -d engine/*/ engine/ps/rules/ engine/nn/ops/ daemon/*/ | sed 's|/$||'); do
	case " $CHECKED " in
	*" $d "*) ;;
	*) bad "$d is checked by layout.sh (add its rule)" ;;
	esac
	[ -n "$(ls "$d"/*.c "$d"/*.h "$d"/*.cu "$d"/*.cuh 2>/dev/null)" ] || bad "$d is empty"
done
# no engine internals outside the engine
impl=$(grep -lE '#include "[a-z_]*_impl\.h"' daemon/*.c daemon/*/*.[ch] tui/*.[ch] 2>/dev/null |
	while read -r f; do
		for h in $(sed -n 's/^#include "\([a-z_]*_impl\.h\)".*/\1/p' "$f"); do
			case $(dir_of "$h") in engine/*) echo "$f includes $h" ;; esac
		done
	done)
[ -z "$impl" ] && ok "no engine internals (*_impl.h) outside engine/" || bad "engine internals included" "$impl"
foreign=$(grep -lE '#include [<"](microhttpd|jansson|nanomsg/[a-z]+|n?curses[w]?)\.h' engine/*/*.[ch] engine/ps/rules/*.[ch] engine/nn/ops/*.[ch] 2>/dev/null)
[ -z "$foreign" ] && ok "nothing in engine/ includes HTTP, JSON, the bus or curses" || bad "foreign headers in engine/" "$foreign"
loose=$(ls engine/*.c engine/*.h 2>/dev/null)
[ -z "$loose" ] && ok "every engine file is in a folder of its concern" || bad "files at engine/'s top" "$loose"
top=$(ls daemon/*.c daemon/*.h 2>/dev/null | grep -v '^daemon/main\.c$')
[ -z "$top" ] && ok "daemon/ holds main.c and its folders only" || bad "files at daemon/'s top" "$top"
# the bus and the remote workers' link alone include nanomsg
nn=$(grep -lE '#include <nanomsg/' daemon/*.c daemon/*/*.[ch] 2>/dev/null |
	grep -vE '^daemon/(serve/(bus|remote)\.c|wire/wiremsg\.c|worker/cmd_worker\.c)$')
[ -z "$nn" ] && ok "nanomsg only in the bus, the remote link and the worker" || bad "nanomsg included by" "$nn"
finish layout
