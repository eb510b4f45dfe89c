#!/bin/sh
# `stalelab tui` against a real daemon, inside a detached tmux session of
# a fixed size: keys typed with send-keys, the screen read with
# capture-pane, the daemon's state read with curl. Checks: the header,
# histograms and worker table are drawn; j selects the next worker and +
# raises its delay (seen in /api/v1/workers); r changes the rule; a
# refused lr shows the daemon's words in the status line; a click selects
# a row; a resize to 80x24 and to 30x8 keeps the layout whole; ASCII under
# LANG=C and NO_COLOR; a stopped daemon shows "disconnected, retrying", a
# command without an answer says so after 3 s, keys still work; a restart
# shows live data again; q and Ctrl-C exit 0 and SIGTERM 1, each leaving
# the terminal as it found it; an async-diloco run with dylu: a worker
# slowed with d shows a smaller H and the outer staleness rises, and its H
# rises again with its delay restored.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
SL=$(cd "$(dirname "$SL")" && pwd)/$(basename "$SL")
echo "integration: tui"

if ! command -v tmux >/dev/null 2>&1; then
	bad "tmux is installed (make deps)"
	finish tui
	exit 1
fi

cat >"$TMP/run.json" <<'JSON'
{"model": "mlp:784-16-10", "dataset": "synthetic:6000", "lr": 0.01, "batch": 16,
 "workers": 3, "eval_every": 100, "delay": {"dist": "const", "mean_ms": 2}}
JSON

# a daemon with its bus on a free pair of ports (a few tries: a port may
# be taken between the probe and the bind)
serve() {
	for try in 1 2 3 4 5; do
		[ -n "$BP" ] || BP=$(free_pair)
		BUS=tcp://127.0.0.1:$BP
		# shellcheck disable=SC2086
		start --config "$TMP/run.json" --bus "$BUS" --checkpoint-dir "$TMP" $SERVE_ARGS
		[ -n "$port" ] && return 0
		kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null
		[ -n "$KEEP_BP" ] || BP=
	done
	return 1
}

BP=
serve && ok "daemon listens with its bus on $BUS" || bad "daemon listens" "$(cat "$TMP/serve.err")"

TM="tmux -S $TMP/tmux.sock -f /dev/null"
cleanup() { $TM kill-server 2>/dev/null; kill "$PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT

# screen: a settled capture of the pane. curses writes a frame in many
# pieces (a write per cursor move: strace shows 20 and more for one
# update), and a capture taken between two of them is a torn screen: the
# top of the new frame over the bottom of the old one (the worker rows
# drawn, the events pane and status line still those of the frame before
# the first snapshot). Two captures alike 0.05 s apart are a whole frame.
screen() {
	_sc_prev=$($TM capture-pane -p -t tui)
	for _sc_i in 1 2 3 4 5 6 7 8 9 10; do
		sleep 0.05
		_sc_cur=$($TM capture-pane -p -t tui)
		[ "$_sc_cur" = "$_sc_prev" ] && break
		_sc_prev=$_sc_cur
	done
	printf '%s\n' "$_sc_cur"
}
# wait_screen SECONDS PATTERN: the screen shows PATTERN (extended regex)
# within SECONDS; the last screen is in $SCREEN
wait_screen() {
	end=$(($(date +%s) + $1))
	while :; do
		SCREEN=$(screen)
		printf '%s\n' "$SCREEN" | grep -Eq -- "$2" && return 0
		[ "$(date +%s)" -ge "$end" ] && return 1
		sleep 0.2
	done
}
keys() { $TM send-keys -t tui "$@"; }
# wait_for SECONDS FUNC: FUNC (reading $SCREEN) succeeds within SECONDS
wait_for() {
	end=$(($(date +%s) + $1))
	while :; do
		SCREEN=$(screen)
		$2 && return 0
		[ "$(date +%s)" -ge "$end" ] && return 1
		sleep 0.2
	done
}
# the header says run 1 and nothing of a disconnection
live() { printf '%s\n' "$SCREEN" | sed -n 1p | grep -v disconnected | grep -q ' run 1 '; }

# the TUI in a shell whose prompt is known, so that q can be seen to leave
# the terminal to it
$TM new-session -d -s tui -x 100 -y 30 "env PS1='tui-test\$ ' LANG=C.UTF-8 sh -i"
keys "$SL tui --connect $BUS; echo TUI_EXIT=\$?" Enter

wait_screen 20 ' stalelab +run 1 ' && ok "header: run, state, rule" || bad "header drawn" "$SCREEN"
wait_screen 10 'last 5 s:.*cumulative:' && ok "both staleness histograms are titled" || bad "histograms titled" "$SCREEN"
# the run's first snapshot may come before its workers start (v 0, no
# rows; a loaded CI drew just that): wait for the rows and the bars
wait_screen 20 '^   2 [a-z]+ +const 2 ms' && ok "the worker rows are drawn" || bad "the worker rows drawn within 20 s" "$SCREEN"
printf '%s\n' "$SCREEN" | grep -q '[▁▂▃▄▅▆▇█]' && ok "histogram bars in eighth blocks" || bad "histogram bars" "$SCREEN"
expect_grep 'id state +delay +where +spb +H +iters +stale +samples/s +mem' "worker table header" "$SCREEN"
expect_grep '^   2 [a-z]+ +const 2 ms +worker +0 +- ' "asgd has no local phases: H is -" "$SCREEN"
expect_grep '^   2 [a-z]+ +const 2 ms .* [0-9.]+[KM]$' "worker 2's memory on its device" "$SCREEN"
expect_grep '^>  0 [a-z]+ +const 2 ms +worker' "worker 0 selected, its delay shown" "$SCREEN"
expect_grep '^   2 [a-z]+ +const 2 ms' "worker 2's row" "$SCREEN"
expect_grep 'q quit' "key hints in the status line" "$SCREEN"
[ "$($TM display -p -t tui '#{alternate_on}')" = 1 ] && ok "runs on the alternate screen" || bad "alternate screen"

# j selects worker 1, + raises its delay (2 -> 5 ms), worker 0 untouched
keys j
wait_screen 10 '^>  1 ' && ok "j selects the next worker" || bad "j selects" "$SCREEN"
keys +
wait_api 30 /api/v1/workers 'd["workers"][1]["delay"]["mean_ms"] == 5 and d["workers"][0]["delay"]["mean_ms"] == 2' &&
	ok "+ raises the selected worker's delay (2 -> 5 ms in /api/v1/workers)" || bad "+ raises the delay" "$(cat "$TMP/body")"
wait_screen 10 '^>  1 [a-z]+ +const 5 ms' && ok "the table shows the new delay" || bad "table shows 5 ms" "$SCREEN"
wait_screen 10 'api: w1 delay const 5 ms' && ok "the change is in the events pane" || bad "change in the events" "$SCREEN"
# two at once: the second goes on from the first, not from the snapshot
keys + +
wait_api 30 /api/v1/workers 'd["workers"][1]["delay"]["mean_ms"] == 20' &&
	ok "+ + at once: 5 -> 10 -> 20 ms" || bad "+ + at once" "$(cat "$TMP/body")"
keys - -
wait_api 30 /api/v1/workers 'd["workers"][1]["delay"]["mean_ms"] == 5' &&
	ok "- - at once: 20 -> 10 -> 5 ms" || bad "- - at once" "$(cat "$TMP/body")"

# r: the next rule of the schema
keys r
wait_api 30 /api/v1/status 'd["rule"] != "asgd"' && ok "r changes the rule (asgd -> $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rule"])' "$TMP/body"))" ||
	bad "r changes the rule" "$(head -c 300 "$TMP/body")"
rule=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rule"])' "$TMP/body")
wait_screen 10 "rule $rule" && ok "the header shows rule $rule" || bad "header shows the rule" "$SCREEN"

# a refused command: the daemon's words in the status line
keys l 9 9 9 Enter
wait_screen 10 'lr 999 refused: lr: must be in \(0, 100\], got 999' && ok "the daemon's error in the status line" ||
	bad "the daemon's error in the status line" "$(printf '%s\n' "$SCREEN" | tail -n 2)"
curl -s "$URL/api/v1/run" | grep -q '"lr": *0.01' && ok "a refused lr changes nothing" || bad "lr unchanged"
keys l x y Enter
wait_screen 10 "lr: not a number: 'xy'" && ok "a typed lr that is not a number is refused, named" || bad "bad typed lr" "$(printf '%s\n' "$SCREEN" | tail -n 1)"

# a typed delay, and a local parse error naming the field
keys d 1 2 Enter
wait_api 30 /api/v1/workers 'd["workers"][1]["delay"]["mean_ms"] == 12' && ok "d types a delay (12 ms)" || bad "d types a delay" "$(cat "$TMP/body")"
keys d a b c Enter
wait_screen 10 "delay: not a number: 'abc'" && ok "a typed delay that is not a number is refused, named" || bad "bad typed delay" "$(printf '%s\n' "$SCREEN" | tail -n 1)"

# the help screen comes from the key table
keys '?'
wait_screen 10 'keys \(q quits, any other key closes\)' && ok "? opens the help" || bad "? opens the help" "$SCREEN"
for k in 'Up k' '\+ ' 'd ' 'a ' 'x ' 'r ' 'R ' 'l ' 'p ' 'c ' 'q F10'; do
	printf '%s\n' "$SCREEN" | grep -Eq "│ $k" || { bad "help lists '$k'" "$SCREEN"; break; }
done
printf '%s\n' "$SCREEN" | grep -q '│ q F10' && ok "help lists every key of the table"
# docs/tui.md's keys table says what the help says, row for row
printf '%s\n' "$SCREEN" | python3 -c '
import re, sys
doc = open(sys.argv[1]).read()
rows = [m.group(1, 2) for m in (re.match(r".*│ (\S.{7}) (\S.*?)\s*│", l) for l in sys.stdin) if m]
rows = [(k.strip(), h) for k, h in rows if not h.startswith("A click")]
missing = [f"{k}: {h}" for k, h in rows if not re.search(r"\| `" + re.escape(k) + r"` \| " + re.escape(h) + r" \|", doc)]
print("\n".join(missing)); sys.exit(1 if missing or len(rows) < 10 else 0)' "$(dirname "$0")/../../docs/tui.md" >"$TMP/keys.txt" &&
	ok "docs/tui.md's keys table matches the help" || bad "docs/tui.md's keys table matches the help" "$(cat "$TMP/keys.txt")"
keys Escape
no_help() { ! printf '%s\n' "$SCREEN" | grep -q 'any other key closes'; }
wait_for 5 no_help && ok "a key closes the help" || bad "help closes" "$SCREEN"

# R: the rule's parameters from the schema
keys R
wait_screen 10 "rule $rule: parameters" && ok "R opens the parameter form of $rule" || bad "R opens the form" "$SCREEN"
[ "$rule" = softsync ] || bad "the rule after asgd is softsync (engine/ps/rules/table.c's order)" "$rule"
expect_grep '│ n +2 +softsync: a round is' "the form: n, its value, its description" "$SCREEN"
keys BSpace 2 . 5 Enter
wait_screen 10 "n: expected an integer, got '2.5'" && ok "a form value not of its type is refused, named" || bad "form type check" "$(printf '%s\n' "$SCREEN" | tail -n 1)"
expect_grep "rule $rule: parameters" "the form stays open to fix the value" "$SCREEN"
keys BSpace BSpace BSpace 4 Enter
wait_api 30 /api/v1/run 'd["config"]["rule_params"]["n"] == 4' && ok "the form sets n = 4" || bad "the form sets n" "$(head -c 400 "$TMP/body")"
wait_screen 10 'api: params n=4' && ok "the change names the parameter the rule reads" || bad "params n=4 in the events" "$SCREEN"

# a click on worker 2's row selects it (an xterm mouse report, as tmux
# passes it on)
row=$(printf '%s\n' "$SCREEN" | grep -n '^   2 ' | head -n 1 | cut -d: -f1)
if [ -n "$row" ]; then
	$TM send-keys -t tui -l "$(printf '\033[M %s%s' "$(printf "\\$(printf %o $((32 + 10)))")" "$(printf "\\$(printf %o $((32 + row)))")")"
	wait_screen 10 '^>  2 ' && ok "a click selects worker 2" || bad "a click selects a row" "$SCREEN"
	keys k
fi

# 80x24: every part still there, nothing past the edge (until the TUI
# has redrawn at the new size: 10 s at most)
whole_80x24() {
	lines=$(printf '%s\n' "$SCREEN" | wc -l)
	wide=$(printf '%s\n' "$SCREEN" | python3 -c 'import sys; print(sum(len(l.rstrip("\n")) > 80 for l in sys.stdin))')
	printf '%s\n' "$SCREEN" | head -n 1 | grep -q '^ stalelab  run 1' &&
		printf '%s\n' "$SCREEN" | grep -q 'last 5 s:' &&
		printf '%s\n' "$SCREEN" | grep -Eq '^  id state' &&
		printf '%s\n' "$SCREEN" | grep -Eq '^ +2 [a-z]+ +const' &&
		printf '%s\n' "$SCREEN" | grep -q 'events' &&
		printf '%s\n' "$SCREEN" | sed -n 24p | grep -q 'q quit' &&
		[ "$lines" -eq 24 ] && [ "$wide" -eq 0 ]
}
$TM resize-window -t tui -x 80 -y 24
wait_for 10 whole_80x24 && ok "80x24: header, histograms, table, events, status line all whole" || bad "80x24 layout" "$SCREEN"
# very small: no crash, header and status line still there
small_drawn() {
	[ "$(printf '%s\n' "$SCREEN" | wc -l)" -eq 8 ] && printf '%s\n' "$SCREEN" | grep -q '^ stalelab' &&
		printf '%s\n' "$SCREEN" | sed -n 8p | grep -q '[a-z]'
}
$TM resize-window -t tui -x 30 -y 8
wait_for 10 small_drawn && ok "30x8: still drawn (header, status)" || bad "30x8" "$SCREEN"
$TM resize-window -t tui -x 80 -y 24

# colours unless NO_COLOR (checked below): some foreground colour now
# (the redraw at 80x24 may come a moment after the resize)
coloured() { $TM capture-pane -e -p -t tui | grep -q "$(printf '\033')\[3[1-6]m"; }
wait_for 10 coloured && ok "colours drawn" || bad "colours drawn"

# c: a checkpoint, where the daemon says it wrote it
keys c
wait_screen 10 'checkpoint: written to [^ ]*\.ckpt' && ckpt=$(printf '%s\n' "$SCREEN" | sed -n 's/.*checkpoint: written to \([^ ]*\.ckpt\).*/\1/p' | tail -n 1) &&
	[ -f "$ckpt" ] && ok "c writes a checkpoint ($(basename "$ckpt"))" || bad "c writes a checkpoint" "$(printf '%s\n' "$SCREEN" | tail -n 2)"

# a stopped daemon never freezes the screen: the snapshots stop
# ("disconnected, retrying"), a command is given up after 3 s, keys work
kill -STOP "$PID"
wait_screen 10 'disconnected, retrying' && ok "a stopped daemon shows 'disconnected, retrying'" || bad "disconnected shown" "$SCREEN"
keys c
wait_screen 10 'checkpoint: no answer from the daemon in 3 s' && ok "a command without an answer says so after 3 s" ||
	bad "no answer shown" "$(printf '%s\n' "$SCREEN" | tail -n 2)"
keys '?'
wait_screen 10 'keys \(q quits, any other key closes\)' && ok "keys still work while the daemon is stopped" || bad "keys work" "$SCREEN"
keys Escape
# killed: the same bus again gives live data
kill -CONT "$PID"; kill "$PID"; wait "$PID" 2>/dev/null
KEEP_BP=1
SERVE_ARGS="--token tui-s3cret"
serve || bad "daemon restarts on the same bus" "$(cat "$TMP/serve.err")"
wait_for 20 live && ok "the restarted daemon's data live again" || bad "live again after a restart" "$SCREEN"
has_v1() { v1=$(printf '%s\n' "$SCREEN" | sed -n '2s/^ v \([0-9]*\) .*/\1/p'); [ -n "$v1" ]; }
wait_for 10 has_v1
moved_on() {
	v2=$(printf '%s\n' "$SCREEN" | sed -n '2s/^ v \([0-9]*\) .*/\1/p')
	[ -n "$v1" ] && [ -n "$v2" ] && [ "$v2" -gt "$v1" ]
}
wait_for 20 moved_on && ok "the version moves on (v $v1 -> $v2)" || bad "version moves on ($v1 -> $v2)" "$SCREEN"

# the restarted daemon wants a token this TUI was not given
keys +
wait_screen 10 "w[0-9] delay const 5 ms refused: no token \(--token-file or STALELAB_TOKEN\); this dae" &&
	printf '%s\n' "$SCREEN" | tail -n 1 | grep -q "mon needs 'Authorization: Bearer TOKEN' for changes" &&
	ok "401: the daemon's words and where a token goes" || bad "401 shown" "$(printf '%s\n' "$SCREEN" | tail -n 1)"

# q: exit 0, the shell's screen back, the cursor shown
keys q
wait_screen 10 'TUI_EXIT=[0-9]' && expect_grep 'TUI_EXIT=0' "q exits 0" "$SCREEN" || bad "q exits" "$SCREEN"
[ "$($TM display -p -t tui '#{alternate_on}')" = 0 ] && ok "the alternate screen is left" || bad "alternate screen left"
[ "$($TM display -p -t tui '#{cursor_flag}')" = 1 ] && ok "the cursor is shown again" || bad "cursor shown"
printf '%s\n' "$SCREEN" | grep -q 'last 5 s:' && bad "the TUI's screen is gone" "$SCREEN" || ok "the TUI's screen is gone, the shell's is back"
printf '%s\n' "$SCREEN" | tail -n 3 | grep -q 'tui-test\$' && ok "the shell prompt is back" || bad "shell prompt back" "$SCREEN"

# ASCII under a locale that is not UTF-8, no colour asked, the token
# from a file
echo tui-s3cret >"$TMP/token"
keys "env LANG=C LC_ALL=C NO_COLOR=1 $SL tui --connect $BUS --token-file $TMP/token; echo TUI_EXIT=\$?" Enter
wait_screen 20 'last 5 s:' && wait_screen 10 '^.  0 [a-z]+ +const' && ok "LANG=C: drawn" || bad "LANG=C drawn" "$SCREEN"
printf '%s\n' "$SCREEN" | grep -q '[▁▂▃▄▅▆▇█─]' && bad "LANG=C: ASCII only" "$SCREEN" || ok "LANG=C: ASCII only"
printf '%s\n' "$SCREEN" | grep -q '^-- events ---' && ok "LANG=C: ASCII rules" || bad "LANG=C: ASCII rules" "$SCREEN"
$TM capture-pane -e -p -t tui | grep -q "$(printf '\033')\[3[1-6]m" && bad "NO_COLOR: no colours" || ok "NO_COLOR: no colours"
keys +
wait_api 30 /api/v1/workers 'd["workers"][0]["delay"]["mean_ms"] == 5' && ok "--token-file: the command is accepted" || bad "--token-file" "$(cat "$TMP/body")"

# a run that diverges (lr 100 before its first evaluation): the events say
# which worker, and l recovers it with the lr typed
AUTH=tui-s3cret http POST /api/v1/run '{"model": "mlp:784-256-128-10", "dataset": "synthetic:6000",
 "lr": 100, "momentum": 0.9, "batch": 16, "workers": 1, "clock": "virtual", "eval_every": 100}' >/dev/null
wait_screen 20 "diverged: worker 0's [a-z]+ is not finite \(read v [0-9]+\); l recovers" &&
	ok "a divergence in the events pane, in words" || bad "divergence in the events" "$SCREEN"
# the event may come before the next snapshot says so (4 a second)
wait_screen 10 '^ stalelab +run 2 +diverged ' || bad "the header says diverged" "$SCREEN"
keys l
wait_screen 10 'diverged: recover from the last good checkpoint with lr:' && ok "l on a diverged run offers a recover" ||
	bad "l offers a recover" "$(printf '%s\n' "$SCREEN" | tail -n 1)"
keys 0 . 0 0 5 Enter
wait_api 30 /api/v1/status 'd["state"] == "running" and d["config"]["lr"] == 0.005 and d["run"] == 3' &&
	ok "the lr typed recovers it (run 3, lr 0.005)" || bad "l recovers" "$(head -c 300 "$TMP/body")"
keys C-c
wait_screen 10 'TUI_EXIT=[0-9]' && expect_grep 'TUI_EXIT=0' "Ctrl-C quits as q does: exit 0" "$SCREEN" || bad "Ctrl-C quits" "$SCREEN"

# SIGTERM: curses' handler leaves the terminal as it was (exit 1)
keys clear Enter "$SL tui --connect $BUS; echo TUI_EXIT=\$?" Enter
wait_screen 20 'last 5 s:' || bad "drawn again" "$SCREEN"
tui_pid=$(pgrep -P "$($TM display -p -t tui '#{pane_pid}')" stalelab)
[ -n "$tui_pid" ] && kill -TERM "$tui_pid"
wait_screen 10 'TUI_EXIT=[0-9]' && [ "$($TM display -p -t tui '#{alternate_on}')" = 0 ] &&
	[ "$($TM display -p -t tui '#{cursor_flag}')" = 1 ] &&
	ok "SIGTERM: the terminal is left as it was found" || bad "SIGTERM restores the terminal" "$SCREEN"

# a daemon whose command socket is not the sibling (serve --bus-rep):
# --rep tells the TUI where it is
kill "$PID"; wait "$PID" 2>/dev/null
SERVE_ARGS="--bus-rep ipc://$TMP/rep.ipc"
serve || bad "daemon restarts with --bus-rep" "$(cat "$TMP/serve.err")"
keys clear Enter "$SL tui --connect $BUS --rep ipc://$TMP/rep.ipc; echo TUI_EXIT=\$?" Enter
wait_screen 20 '^   2 [a-z]+ +const' || bad "drawn with --rep" "$SCREEN"
wait_screen 10 "\\(commands to ipc://$TMP/rep" && ok "--rep: the events say where commands go" ||
	bad "--rep named in the events" "$SCREEN"
keys p
wait_api 30 /api/v1/status 'd["state"] == "paused"' && ok "--rep: p pauses the run through the REP socket given" ||
	bad "--rep: p pauses" "$(head -c 300 "$TMP/body")"
keys q
wait_screen 10 'TUI_EXIT=[0-9]' && expect_grep 'TUI_EXIT=0' "--rep: q exits 0" "$SCREEN" || bad "--rep: q exits" "$SCREEN"

# a language model (a gpt on text): the header says next-token acc and the
# perplexity of /api/v1/status
kill "$PID"; wait "$PID" 2>/dev/null
printf '{"model": "gpt:L1-H2-E8-T8", "dataset": "synthetic-text:4000", "clock": "virtual", "threads": 1, "batch": 8, "workers": 2, "optimizer": "adamw", "lr": 0.01, "eval_every": 3, "stop": {"steps": 6}}' >"$TMP/run.json"
SERVE_ARGS=
serve || bad "daemon restarts with a gpt run" "$(cat "$TMP/serve.err")"
keys clear Enter "$SL tui --connect $BUS; echo TUI_EXIT=\$?" Enter
if wait_api 60 /api/v1/status 'd["state"] != "running" and d["version"] == 6'; then
	ppl=$(python3 -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["test_ppl"])' "$TMP/body")
	wait_screen 20 "next-token acc [0-9.]+  ppl $ppl" && ok "a gpt run: the header says next-token acc and ppl $ppl" ||
		bad "a gpt run's header (ppl $ppl)" "$SCREEN"
else
	bad "the gpt run ends" "$(head -c 300 "$TMP/body")"
fi
keys q
wait_screen 10 'TUI_EXIT=[0-9]' || bad "q exits the gpt run's TUI" "$SCREEN"

# async-diloco with Dynamic Local Updates: worker 1 slowed with d (5 ->
# 50 ms) runs shorter phases (its H falls from 8), its pseudo-gradients
# arrive more outer versions stale (the histogram's max and its mean in the
# table rise); with its delay back to 5 ms its H rises again (dylu's speed
# is since it joined, so it climbs back step by step). The virtual clock:
# the same H for the same speeds however loaded the machine.
kill "$PID"; wait "$PID" 2>/dev/null
printf '{"model": "mlp:784-32-10", "dataset": "fashion-mnist", "rule": "async-diloco", "rule_params": {"H": 8, "dn_period": 3, "dylu": true}, "optimizer": "adamw", "lr": 0.001, "workers": 3, "clock": "virtual", "threads": 1, "batch": 16, "eval_every": 500, "delay": {"dist": "const", "mean_ms": 5}, "stop": {"epochs": 1000}}' >"$TMP/run.json"
serve || bad "daemon restarts with an async-diloco run" "$(cat "$TMP/serve.err")"
$TM resize-window -t tui -x 110 -y 30
keys clear Enter "$SL tui --connect $BUS; echo TUI_EXIT=\$?" Enter
# a worker's row: "   1 running  const 5 ms  worker  0  8  ..." (">" when
# selected) -> its H (field 8), staleness (10); the cumulative max
row_of() { printf '%s\n' "$SCREEN" | grep -E "^[ >] +$1 [a-z]+ +const" | head -n 1 | cut -c2-; }
h_of() { row_of "$1" | awk '{print $8}'; }
stale_of() { row_of "$1" | awk '{print $10}'; }
cum_max() { printf '%s\n' "$SCREEN" | sed -n 's/.*cumulative: .* max \([0-9]*\).*/\1/p' | head -n 1; }
full_h() { h=$(h_of 1); [ -n "$h" ] && [ "$h" -ge 7 ] 2>/dev/null && [ -n "$(cum_max)" ]; }
wait_for 60 full_h && ok "async-diloco: worker 1 runs H $(h_of 1) of 8 at the others' speed" ||
	bad "worker 1's H shown (8, or 7 by rounding)" "$SCREEN"
expect_grep '^ +0 +outer versions +[0-9]+\+? +0 +outer versions' "both histograms' axes say outer versions" "$SCREEN"
max0=$(cum_max); stale0=$(stale_of 1)
keys j
wait_screen 10 '^>  1 ' || bad "j selects worker 1" "$SCREEN"
keys d 5 0 Enter
wait_api 30 /api/v1/workers 'd["workers"][1]["delay"]["mean_ms"] == 50' && ok "d slows worker 1 (5 -> 50 ms)" ||
	bad "d slows worker 1" "$(head -c 300 "$TMP/body")"
hmin=8
h_fell() { h=$(h_of 1); [ -n "$h" ] && { [ "$h" -lt "$hmin" ] && hmin=$h; [ "$h" -le 4 ]; }; }
wait_for 120 h_fell && ok "worker 1's H falls with its speed (8 -> $hmin)" || bad "worker 1's H falls to 4 or less" "$SCREEN"
keys d 5 Enter
wait_api 30 /api/v1/workers 'd["workers"][1]["delay"]["mean_ms"] == 5' || bad "d restores worker 1's delay" "$(head -c 300 "$TMP/body")"
grew() { m=$(cum_max); s1=$(stale_of 1); s0=$(stale_of 0); [ -n "$m" ] && [ "$m" -gt "$max0" ] &&
	python3 -c 'import sys; a, b, c = map(float, sys.argv[1:]); sys.exit(0 if a > b and a > c else 1)' "$s1" "$stale0" "$s0"; }
wait_for 30 grew && ok "the outer staleness answers: cumulative max $max0 -> $m, worker 1's mean $stale0 -> $s1 (worker 0's $s0)" ||
	bad "the histogram's max and worker 1's staleness rise" "$SCREEN"
hlow=$hmin
h_rose() { h=$(h_of 1); [ -n "$h" ] && { [ "$h" -lt "$hlow" ] && hlow=$h; [ "$h" -gt "$hlow" ]; }; }
wait_for 120 h_rose && ok "with its delay back at 5 ms worker 1's H rises ($hlow -> $h)" || bad "worker 1's H rises again (from $hlow)" "$SCREEN"
keys q
wait_screen 10 'TUI_EXIT=[0-9]' || bad "q exits the async-diloco run's TUI" "$SCREEN"

# flags
expect_exit 2 "bad --rep: exit 2" "$SL" tui --rep tcp://127.0.0.1:0
expect_grep "--rep: expected tcp://HOST:PORT with a port in \[1, 65535\], got 'tcp://127.0.0.1:0'" "bad --rep named" "$LAST_OUT"
expect_exit 2 "unknown flag: exit 2" "$SL" tui --bogus
expect_grep "unknown option '--bogus'" "unknown flag named" "$LAST_OUT"
expect_exit 2 "bad --connect: exit 2" "$SL" tui --connect http://x
expect_grep "--connect: expected tcp://HOST:PORT or ipc://PATH" "bad --connect named" "$LAST_OUT"
expect_exit 2 "a missing --token-file: exit 2" "$SL" tui --token-file "$TMP/none"
expect_grep "--token-file $TMP/none: No such file" "missing token file named" "$LAST_OUT"
expect_exit 0 "--help: exit 0" "$SL" tui --help
expect_grep "--no-mouse" "--help lists the flags" "$LAST_OUT"
expect_exit 1 "no terminal: exit 1" sh -c "$SL tui </dev/null >/dev/null"

finish tui
