#!/bin/sh
# readme-walk.sh - follow README.md from top to bottom on a fresh clone, as a
# new user would: every command of its ```sh blocks, in order, each checked
# to succeed. Not part of `make test` (it builds a clone and runs `make test`
# inside it: minutes).
#
#   sh tests/readme-walk.sh [--quick]
#
# The clone is of this repository's HEAD (commit first). The commands run as
# written, with these changes only: `make run` gets a free port and
# ARGS="--log build/serve.jsonl" and runs in the background until the first
# command that is not a curl; curl gets -f (an HTTP error fails) and the
# free port, and a stream (-N) a time limit; `stalelab run` gets a short stop
# (--steps, the first stop reached ends a run) unless it replays; `stalelab
# bench` gets -S 0.3. `make test` runs last (--quick leaves it out). Then:
# the daemon's log replays, and the walk left nothing git does not ignore.
top=$(cd "$(dirname "$0")/.." && pwd)
quick=0
[ "$1" = "--quick" ] && quick=1
PASS=0
FAIL=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/slwalk.XXXXXX")
DAEMON=""
cleanup() {
	[ -n "$DAEMON" ] && kill -TERM "-$DAEMON" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
ok() { PASS=$((PASS + 1)); echo "  ok   $1"; }
bad() { FAIL=$((FAIL + 1)); echo "  FAIL $1"; [ -n "$2" ] && printf '%s\n' "$2" | tail -n 15 | sed 's/^/       /'; }

echo "readme-walk: cloning $top"
git clone -q "$top" "$TMP/clone" || { echo "readme-walk: cannot clone $top"; exit 1; }
cd "$TMP/clone" || exit 1
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# the commands of the ```sh blocks, one a line (continuations joined,
# trailing comments dropped)
python3 - README.md >"$TMP/cmds" <<'PY'
import re, sys
inside, cur = False, ""
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if line.startswith("```"):
        inside = line.strip() == "```sh"
        continue
    if not inside:
        continue
    line = re.sub(r"\s{2,}#.*$", "", line)
    if line.endswith("\\"):
        cur += line[:-1].strip() + " "
        continue
    cur += line.strip()
    if cur:
        print(cur)
    cur = ""
PY
echo "readme-walk: $(wc -l <"$TMP/cmds") commands in README.md; daemon port $PORT"

# Ctrl-C, as the README says: SIGINT to make and the daemon together
stop_daemon() {
	[ -n "$DAEMON" ] || return
	kill -INT "-$DAEMON" 2>/dev/null
	i=0
	while kill -0 "-$DAEMON" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	last=$(tail -n 1 build/serve.jsonl 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin).get("event"))' 2>/dev/null)
	grep -q 'stopping' "$TMP/daemon.out" && [ "$last" = end ] && ok "Ctrl-C stops the daemon cleanly (end record)" ||
		bad "Ctrl-C stops the daemon cleanly (last record: $last)" "$(cat "$TMP/daemon.out")"
	DAEMON=""
}

# run NAME CMD [OK_CODES]: run CMD in the clone, pass when its status is 0
# (or one of OK_CODES)
run() {
	name=$1; cmd=$2; okc=${3:-0}
	out=$(timeout 600 sh -c "$cmd" 2>&1 </dev/null); rc=$?
	case " $okc " in
	*" $rc "*) ok "$name" ;;
	*) bad "$name (exit $rc)" "$out" ;;
	esac
}

have_test=0
while IFS= read -r cmd; do
	case $cmd in
	"make run"*)
		# a session of its own, so one signal reaches make and the daemon
		setsid sh -c "echo \$\$ >'$TMP/pgid'; exec make run PORT=$PORT ARGS='--log build/serve.jsonl'" \
			>"$TMP/daemon.out" 2>&1 </dev/null &
		i=0
		while [ ! -s "$TMP/pgid" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		DAEMON=$(cat "$TMP/pgid")
		i=0
		while ! grep -q 'listening on' "$TMP/daemon.out" && kill -0 "-$DAEMON" 2>/dev/null && [ $i -lt 6000 ]; do
			sleep 0.1; i=$((i + 1))
		done
		grep -q 'listening on' "$TMP/daemon.out" && ok "$cmd (builds, the daemon listens)" ||
			bad "$cmd" "$(cat "$TMP/daemon.out")"
		sleep 2 # a few evaluations to look at
		;;
	"make test"*)
		have_test=1
		;;
	curl*)
		c=$(printf '%s' "$cmd" | sed "s/^curl /curl -f /; s/localhost:8470/127.0.0.1:$PORT/g")
		case $c in
		*" -sN "*) run "$cmd" "$(printf '%s' "$c" | sed 's/^curl /curl --max-time 3 /')" "0 28" ;;
		*) run "$cmd" "$c" ;;
		esac
		;;
	*)
		stop_daemon
		c=$cmd
		case $c in
		*"stalelab run "*--replay*) ;;
		*"stalelab run "*) c="$c --steps 120" ;;
		*"stalelab bench"*) c="$c -S 0.3" ;;
		esac
		run "$cmd" "$c"
		;;
	esac
done <"$TMP/cmds"
stop_daemon

# what the prose promises around the blocks
if [ -f build/serve.jsonl ]; then
	run "the daemon's log replays (stalelab run --replay build/serve.jsonl)" \
		"build/stalelab run --replay build/serve.jsonl --steps 50 --log build/serve-replay.jsonl --quiet"
else
	bad "the daemon wrote build/serve.jsonl"
fi
left=$(git status --porcelain)
[ -z "$left" ] && ok "the walk left nothing git does not ignore" || bad "the walk left files git does not ignore" "$left"
if [ $have_test = 1 ] && [ $quick = 0 ]; then
	run "make test" "make test"
elif [ $have_test = 1 ]; then
	echo "  skip make test (--quick)"
fi
echo "readme-walk: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
