#!/bin/sh
# The folders read as the architecture (docs/architecture.md), and the
# dependency direction holds, checked on the #include lines of every file
# of every folder of engine/ and daemon/ (a folder uses only itself and the
# folders below it), tui/ (none of engine/ or daemon/), with no exception.
#
# engine/: base/ (errors, random numbers, threads, serialisation) needs
# nothing else; nn/ (backends, layers, models) and data/ (data sets) know
# nothing of training; wire/ (the remote-worker messages) needs only base/,
# so a worker process links it alone; worker/ (a worker's step, in-process
# or remote) needs only base/, nn/ and data/: not the run loop, the clocks
# or the server; nothing in engine/ knows HTTP, the bus or curses.
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
DIRS="$(ls -d engine/*/ engine/ps/rules/ daemon/*/ | sed 's|/$||') daemon tui tests"
dir_of() {
	for d in $DIRS; do [ -f "$d/$1" ] && { echo "$d"; return; }; done
}
ENGINE=$(ls -d engine/*/ engine/ps/rules/ | sed 's|/$||' | tr '\n' ' ')

# may_use FOLDER ALLOWED...: every header of ours FOLDER's files include is
# in FOLDER itself or one of ALLOWED
may_use() {
	f=$1; shift
	out=""
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

may_use engine/base
may_use engine/nn engine/base engine/data
may_use engine/data engine/base
may_use engine/wire engine/base
may_use engine/worker engine/base engine/nn engine/data
may_use engine/ps engine/base engine/nn
may_use engine/ps/rules engine/base engine/nn engine/ps
may_use engine/run engine/base engine/nn engine/data engine/ps engine/ps/rules \
	engine/worker engine/wire
# the cluster simulator: pure arithmetic over its own types
may_use engine/cluster engine/base
# the cuda plugin: the backend table and nothing else of the engine
may_use engine/cuda engine/nn

# shellcheck disable=SC2086
{
may_use daemon/formats $ENGINE
may_use daemon/wire engine/base engine/wire
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
for d in $(ls -d engine/*/ engine/ps/rules/ daemon/*/ | sed 's|/$||'); do
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
foreign=$(grep -lE '#include [<"](microhttpd|jansson|nanomsg/[a-z]+|n?curses[w]?)\.h' engine/*/*.[ch] engine/ps/rules/*.[ch] 2>/dev/null)
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
