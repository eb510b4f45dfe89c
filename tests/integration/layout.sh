#!/bin/sh
# The engine's folders read as its architecture (docs/architecture.md), and
# the dependency direction holds: base/ (errors, random numbers, threads,
# serialisation) needs nothing else; nn/ (backends, layers, models) and
# data/ (data sets) know nothing of training; wire/ (the remote-worker
# messages) needs only base/, so a worker process links it alone; worker/
# (a worker's step, in-process or remote) needs only base/, nn/ and data/:
# not the run loop, the clocks or the server; nothing in engine/ knows HTTP,
# the bus or curses. Checked on the #include lines.
. "$(dirname "$0")/lib.inc"
echo "integration: the engine's layout"
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1

# the folder of an engine header, or nothing for a system or foreign one
dir_of() { for d in engine/*/ engine/ps/rules/; do [ -f "$d$1" ] && { echo "${d%/}"; return; }; done; }

# may_use FOLDER ALLOWED...: every engine header FOLDER's files include is
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
}
may_use engine/base
may_use engine/nn engine/base engine/data
may_use engine/data engine/base
may_use engine/wire engine/base
may_use engine/worker engine/base engine/nn engine/data
may_use engine/ps engine/base engine/nn engine/ps/rules engine/run
# the cluster simulator: pure arithmetic over its own types
may_use engine/cluster engine/base
# the cuda plugin: the backend table and nothing else of the engine
may_use engine/cuda engine/nn
may_use engine/ckpt engine/base engine/nn engine/data engine/ps engine/ps/rules engine/run

for d in engine/*/ engine/ps/rules/; do
	[ -n "$(ls "$d"*.c "$d"*.h "$d"*.cu "$d"*.cuh 2>/dev/null)" ] || bad "$d is empty"
done
foreign=$(grep -lE '#include [<"](microhttpd|jansson|nanomsg/[a-z]+|n?curses[w]?)\.h' engine/*/*.[ch] engine/ps/rules/*.[ch] 2>/dev/null)
[ -z "$foreign" ] && ok "nothing in engine/ includes HTTP, JSON, the bus or curses" || bad "foreign headers in engine/" "$foreign"
loose=$(ls engine/*.c engine/*.h 2>/dev/null)
[ -z "$loose" ] && ok "every engine file is in a folder of its concern" || bad "files at engine/'s top" "$loose"
finish layout
