#!/bin/sh
# `stalelab run` on a terminal (a pty from python3's pty module): the
# progress bar and where the log goes. With stdout and stderr on the one
# terminal and no --log, the log goes to a new file (named on the
# terminal), never into the bar; with stdout a pipe it goes there. The bar
# has an ETA, fills its last cell at 100%, follows --steps and --seconds
# stops, shows nothing measured before the first measurement, and a NaN
# loss as divergence.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
SL=$(cd "$(dirname "$SL")" && pwd)/$(basename "$SL")
echo "integration: tty"

# ptyrun MODE ARGS...: run stalelab in $TMP/cwd with stderr on a 100-column
# pty (and stdout too when MODE is "both"; a file $TMP/stdout when "pipe");
# the terminal's text is in $TMP/tty.txt, the exit status in $TMP/rc
ptyrun() {
	mode=$1; shift
	mkdir -p "$TMP/cwd"
	python3 - "$mode" "$TMP" "$SL" "$@" <<'PY'
import fcntl, os, pty, struct, subprocess, sys, termios
mode, tmp, args = sys.argv[1], sys.argv[2], sys.argv[3:]
master, slave = pty.openpty()
fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
out = slave if mode == "both" else open(os.path.join(tmp, "stdout"), "wb")
p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=slave,
                     cwd=os.path.join(tmp, "cwd"))
os.close(slave)
text = b""
while True:
    try:
        chunk = os.read(master, 65536)
    except OSError:
        break
    if not chunk:
        break
    text += chunk
rc = p.wait()
open(os.path.join(tmp, "tty.txt"), "wb").write(text)
open(os.path.join(tmp, "rc"), "w").write(str(rc))
PY
}

# the states the bar was drawn in (each "\r\033[K..." redraw) and the
# lines printed, one a line
frames() { python3 -c '
import re, sys
t = open(sys.argv[1], "rb").read().decode("utf-8", "replace")
for f in re.split(r"\r\x1b\[K|\r?\n", t):
    print(f)' "$TMP/tty.txt"; }

# 1. stdout is the bar's terminal, no --log: the log goes to a file
# (a delay of 1 ms a step: at least 1.1 s of training, so the bar is drawn
# between the epochs on any machine; without it one that trained at 400,000
# samples/s finished in 0.18 s, before the bar's first redraw)
printf '{"delay": {"dist": "const", "mean_ms": 1}}\n' >"$TMP/slow.json"
ptyrun both run --config "$TMP/slow.json" --model mlp:784-64-10 --dataset synthetic:6000 --epochs 12 --eval-every 0
tty=$(cat "$TMP/tty.txt")
[ "$(cat "$TMP/rc")" = 0 ] && ok "run on a terminal exits 0" || bad "run on a terminal (rc $(cat "$TMP/rc"))" "$tty"
printf '%s' "$tty" | grep -q '{"' && bad "no JSON on the terminal" "$tty" || ok "no JSON records on the terminal"
log=$(printf '%s' "$tty" | sed -n 's/.*the log goes to \(stalelab-run-[0-9-]*\.jsonl\).*/\1/p' | head -n 1)
if [ -n "$log" ] && [ -f "$TMP/cwd/$log" ]; then
	ok "the terminal says where the log went ($log)"
	last=$(tail -n 1 "$TMP/cwd/$log" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["event"], d["stop"])')
	[ "$last" = "end epochs" ] && ok "that log is complete" || bad "that log is complete ($last)"
else
	bad "the terminal says where the log went" "$tty"
fi
f=$(frames)
expect_grep 'epoch [0-9.]+/12 \[#+\.*\] +[0-9]+%  ETA [0-9]+:[0-9][0-9]' "the bar: epochs, cells, percent, ETA" "$f"
expect_grep '^epoch 12\.00/12 \[#+\] 100%  in [0-9]+:[0-9][0-9]' "the last frame fills every cell at 100%" "$f"
printf '%s\n' "$f" | grep -Eq 'loss 0\.0000|  0 samples/s' && bad "nothing unmeasured shown" "$f" || ok "no 'loss 0.0000' or '0 samples/s' before a measurement"
printf '%s\n' "$f" | awk '/\[[#.]+\]/ && length > 99 { bad = 1 } END { exit bad }' && ok "bar frames fit the 100-column terminal" || bad "bar frames fit the terminal" "$f"

# 2. stdout a pipe: the log goes there, the bar stays on the terminal
ptyrun pipe run --model mlp:784-64-10 --dataset synthetic:3000 --steps 1500 --eval-every 500
python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; assert r[0]["model"]=="mlp:784-64-10" and r[-1]["event"]=="end"' "$TMP/stdout" &&
	ok "stdout a pipe: the log is on stdout" || bad "stdout a pipe: the log is on stdout" "$(head -c 300 "$TMP/stdout")"
f=$(frames)
expect_grep '^v [0-9]+/1500 \[#+\.*\] +[0-9]+%' "--steps: the bar counts versions" "$f"
expect_grep '^v 1500/1500 \[#+\] 100%' "--steps: the bar ends full" "$f"
printf '%s' "$(cat "$TMP/tty.txt")" | grep -q 'the log goes to' && bad "no file when stdout is a pipe" || ok "no log file when stdout is a pipe"

# 3. --seconds on the virtual clock; --log - writes to stdout as asked
ptyrun pipe run --model mlp:784-64-10 --dataset synthetic:3000 --clock virtual --seconds 1 --log -
f=$(frames)
expect_grep '^1\.0/1 virtual s \[#+\] 100%' "--seconds: the bar follows run time" "$f"

# 4. a diverging run: the loss is shown as the NaN it is
ptyrun pipe run --model lenet5 --dataset synthetic:600 --lr 100 --steps 40 --eval-every 10
f=$(frames)
expect_grep 'nan \(diverged\)' "a NaN loss shows as divergence" "$f"

# 5. --quiet on a terminal: no bar, so the log may go to the terminal
ptyrun both run --model logreg --dataset synthetic:600 --steps 5 --quiet
expect_grep '^\{"model":"logreg"' "--quiet: the log on the terminal" "$(cat "$TMP/tty.txt")"

finish tty
