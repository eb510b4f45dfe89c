#!/bin/sh
# Remote workers over loopback TCP (issue 17): `stalelab worker` processes
# join a daemon's run (serve --workers-listen), train it (the run's only
# local worker is paused, so every update is theirs), show in /status as
# remote with their host; one killed with SIGKILL is lost after the
# timeout and the run goes on; a new one joins with --worker-id; an ssgd
# round does not hang when its remote worker dies; SIGTERM stops a worker
# cleanly; refusals (no token, a wrong token, the virtual clock) end the
# worker with 78 and the reason; bad flags, bad URLs, --give-up; with
# "augment": "crop-flip" a remote worker's run is a local one's, bit for bit,
# and so is one with its pushes compressed (top-k with error feedback), a
# diloco run whose worker runs its phases itself (the model, not gradients,
# on the wire: its bytes pinned) and a streaming-diloco one (fragments).
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: remote workers"

run_json() { # RULE CLOCK
	cat >"$TMP/run.json" <<JSON
{"model": "mlp:784-32-10", "dataset": "synthetic:4000", "lr": 0.05, "batch": 32,
 "workers": 1, "threads": 1, "rule": "$1", "clock": "$2", "eval_every": 40,
 "worker_overrides": [{"id": 0, "paused": true}]}
JSON
}
wport=$(free_pair)
WURL=tcp://127.0.0.1:$wport
WPIDS=""
worker() { # ARGS...: a worker in the background (its pid in WPID, stderr in $TMP/w.N)
	n=$(echo "$WPIDS" | wc -w)
	"$SL" worker --connect "$WURL" --threads 1 --give-up 60 "$@" 2>"$TMP/w.$n" &
	WPID=$!
	WPIDS="$WPIDS $WPID"
}
cleanup() { for p in $WPIDS; do kill -9 "$p" 2>/dev/null; done; }

expect_exit 0 "worker --help" "$SL" worker --help
expect_grep 'mpirun, srun, ssh' "--help: the launchers" "$LAST_OUT"
[ "$("$SL" help worker)" = "$("$SL" worker --help)" ] && ok "help worker" || bad "help worker"
expect_exit 2 "no daemon named" env -u STALELAB_PS "$SL" worker
expect_grep 'which daemon' "no daemon named: said" "$LAST_OUT"
expect_exit 2 "a bad URL" "$SL" worker --connect http://x:1
expect_grep 'expected tcp://HOST:PORT' "a bad URL: said" "$LAST_OUT"
expect_exit 2 "a wrong flag" "$SL" worker --conect x
expect_exit 1 "--give-up without a daemon" "$SL" worker --connect "$WURL" --give-up 1 -q
expect_grep 'no daemon answered' "--give-up: said" "$LAST_OUT"
expect_exit 2 "serve: a bad --workers-listen" "$SL" serve --listen 127.0.0.1:0 --bus none \
	--workers-listen http://x
expect_grep 'workers-listen http://x' "serve: a bad --workers-listen: named" "$LAST_OUT"

# ---- asgd: two workers train the run ----
run_json asgd wall
start --bus none --workers-listen "$WURL" --worker-timeout 2 --config "$TMP/run.json" \
	--log "$TMP/run.jsonl" --push-log "$TMP/push.log"
[ -n "$port" ] && ok "serve --workers-listen starts" || bad "serve starts" "$(cat "$TMP/serve.err")"
worker
A=$WPID
worker
B=$WPID
wait_api 60 /api/v1/status \
	'd.get("remote",{}).get("joined")==2 and sum(1 for w in d["workers"] if w["remote"] and w["iterations"]>20)==2' &&
	ok "two remote workers join and compute" || bad "two remote workers" "$(cat "$TMP/body"; cat "$TMP"/w.*)"
host=$(hostname)
expect_grep "\"host\": ?\"$host\"" "they say their host" "$(cat "$TMP/body")"
expect_grep 'joined run 1 at tcp://127.0.0.1[^ ]* as the run.s worker [0-9]+ \(remote id [0-9]+, [^)]+\)' \
	"a worker says what it joined: its row in the run and its remote id, named" "$(cat "$TMP/w.0")"
wait_api 10 /api/v1/status 'all(w["rtt_ms"] > 0 for w in d["workers"] if w["remote"])' &&
	ok "their link round trips, by their heartbeats" || bad "rtt_ms" "$(cat "$TMP/body")"
expect_grep 'stalelab_worker_rtt_seconds\{worker="1",host="[^"]*"\} [0-9.e-]+' "/metrics: the round trip" \
	"$(curl -s "http://127.0.0.1:$port/metrics")"
v0=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$TMP/body")
wait_api 60 /api/v1/status "d['version'] > $v0 + 200 and d['test_acc'] > 0.5" &&
	ok "the run learns from them (test accuracy over 0.5)" || bad "the run learns" "$(cat "$TMP/body")"
# staleness: two asgd workers, about 1
expect_grep '"staleness_mean": ?(0\.[5-9]|1\.)' "asgd staleness from two remote workers" "$(cat "$TMP/body")"

kill -9 "$A"
wait_api 30 /api/v1/status 'd["remote"]["lost"]==1 and sum(1 for w in d["workers"] if w["remote"])==1' &&
	ok "a worker killed is lost after the timeout" || bad "killed worker lost" "$(cat "$TMP/body")"
v1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$TMP/body")
wait_api 30 /api/v1/status "d['version'] > $v1 + 100" && ok "the run goes on without it" ||
	bad "the run goes on" "$(cat "$TMP/body")"
worker --worker-id 7
wait_api 60 /api/v1/status 'd["remote"]["joined"]==3 and sum(1 for w in d["workers"] if w["remote"])==2' &&
	ok "a new worker joins (--worker-id 7)" || bad "a new worker joins" "$(cat "$TMP/body")"
# the daemon counts a join at the hello; the worker says it once its data
# is loaded, which a busy machine may take seconds for
wait_until 30 grep -q 'remote id 7, --worker-id' "$TMP/w.2"
expect_grep '\(remote id 7, --worker-id\)' "it got the id it asked for, and says from where" "$(cat "$TMP/w.2")"
S=$WPID
kill -STOP "$S"
wait_api 30 /api/v1/status 'd["remote"]["lost"]==2' &&
	ok "a stopped worker (SIGSTOP) heartbeats no more: lost" || bad "SIGSTOP: lost" "$(cat "$TMP/body")"
kill -CONT "$S"
wait_api 60 /api/v1/status 'd["remote"]["joined"]==4 and sum(1 for w in d["workers"] if w["remote"] and w["iterations"]>0)==2' &&
	ok "continued (SIGCONT), it joins again by itself" || bad "SIGCONT: rejoins" "$(cat "$TMP/body"; cat "$TMP/w.2")"
expect_grep '(let this worker go|refused: not a worker of this run|no heartbeat answered).*saying hello again' \
	"it says why it said hello again" "$(cat "$TMP/w.2")"
kill -TERM "$B"
wait "$B"
[ $? -eq 0 ] && ok "SIGTERM stops a worker, exit 0" || bad "SIGTERM stops a worker"
expect_grep 'stopped' "it says so" "$(cat "$TMP/w.1")"
wait_api 30 /api/v1/status 'sum(1 for w in d["workers"] if w["remote"])==1 and d["remote"]["left"]==1' &&
	ok "the daemon lets it go (left, not lost)" || bad "the daemon lets it go" "$(cat "$TMP/body")"
curl -s -o "$TMP/body" "http://127.0.0.1:$port/api/v1/status"
applied=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["remote"]["pushes"]["applied"])' "$TMP/body")
metrics=$(curl -s "http://127.0.0.1:$port/metrics")
expect_grep 'stalelab_remote_pushes_total\{verdict="applied"\} [1-9]' "/metrics: pushes applied" "$metrics"
expect_grep 'stalelab_remote_workers_total\{event="lost"\} 2' "/metrics: workers lost" "$metrics"
kill "$PID"; wait "$PID"
[ $? -eq 0 ] && ok "the daemon stops with a remote worker connected, exit 0" || bad "daemon exit"
cleanup; WPIDS=""
# the log has each event; the push log a line per push applied, none twice
for ev in '"what":"joined","worker":1' '"what":"joined","worker":2' '"what":"lost"' '"what":"left"'; do
	expect_grep "\"event\":\"remote\",$ev" "the log records $ev" "$(cat "$TMP/run.jsonl")"
done
pl=$(wc -l <"$TMP/push.log")
[ "$pl" -ge "$applied" ] && [ "$applied" -gt 100 ] &&
	ok "the push log has a line per push applied ($pl, $applied at the last status)" ||
	bad "push log lines" "$pl lines, $applied applied"
dups=$(cut -f2-4 "$TMP/push.log" | sort | uniq -d | wc -l)
[ "$dups" -eq 0 ] && ok "no (worker, incarnation, seq) applied twice" || bad "applied twice" "$dups"
ids=$(cut -f2 "$TMP/push.log" | sort -un | tr '\n' ' ')
[ "$ids" = "0 1 7 " ] && ok "the push log names the workers by id ($ids)" || bad "push log ids" "$ids"

# ---- "workers": 0: remote workers only ----
cat >"$TMP/run0.json" <<JSON
{"model": "mlp:784-32-10", "dataset": "synthetic:4000", "lr": 0.05, "batch": 32,
 "workers": 0, "threads": 1, "rule": "asgd", "eval_every": 40}
JSON
expect_exit 2 "stalelab run refuses workers 0" "$SL" run --config "$TMP/run0.json" --steps 10
expect_grep 'workers: 0 \(remote workers only\) is for stalelab serve' "... saying why" "$LAST_OUT"
start --bus none --workers-listen "$WURL" --config "$TMP/run0.json"
curl -s -o "$TMP/body" "http://127.0.0.1:$port/api/v1/status"
expect_grep '"workers": ?\[\]' "a run with no in-process worker starts empty" "$(cat "$TMP/body")"
worker
wait_api 60 /api/v1/status 'len(d["workers"])==1 and d["workers"][0]["remote"] and d["version"] > 50' &&
	ok "a remote worker alone trains it" || bad "workers 0: remote alone" "$(cat "$TMP/body")"
kill "$PID"; wait "$PID" 2>/dev/null
cleanup; WPIDS=""

# ---- ssgd: a round with a remote worker does not hang when it dies ----
cat >"$TMP/run.json" <<JSON
{"model": "mlp:784-32-10", "dataset": "synthetic:4000", "lr": 0.05, "batch": 32,
 "workers": 1, "threads": 1, "rule": "ssgd", "eval_every": 40}
JSON
start --bus none --workers-listen "$WURL" --worker-timeout 2 --config "$TMP/run.json"
worker
C=$WPID
wait_api 60 /api/v1/status 'sum(1 for w in d["workers"] if w["remote"] and w["iterations"]>10)==1' &&
	ok "ssgd: a remote worker in the rounds" || bad "ssgd remote" "$(cat "$TMP/body"; cat "$TMP"/w.*)"
expect_grep '"staleness_mean": ?0(\.0)?,' "ssgd: staleness 0 with a remote worker" "$(cat "$TMP/body")"
kill -9 "$C"
wait_api 30 /api/v1/status 'd["remote"]["lost"]==1' && ok "ssgd: the dead worker is lost" ||
	bad "ssgd: lost" "$(cat "$TMP/body")"
v2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$TMP/body")
wait_api 30 /api/v1/status "d['version'] > $v2 + 20" && ok "ssgd: the rounds go on without it" ||
	bad "ssgd: rounds go on" "$(cat "$TMP/body")"
kill "$PID"; wait "$PID" 2>/dev/null
cleanup; WPIDS=""

# ---- four workers started by Open MPI's mpirun ----
if command -v mpirun >/dev/null 2>&1; then
	run_json asgd wall
	start --bus none --workers-listen "$WURL" --worker-timeout 5 --config "$TMP/run.json"
	# as root, Open MPI wants its two documented variables
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm_rsh_agent=false \
		mpirun --oversubscribe --bind-to none -np 4 \
		"$SL" worker --connect "$WURL" --threads 1 --give-up 60 >"$TMP/mpi.out" 2>&1 &
	MPI=$!
	wait_api 90 /api/v1/status \
		'sum(1 for w in d["workers"] if w["remote"] and w["iterations"]>10)==4' &&
		ok "mpirun -np 4: four workers compute" || bad "mpirun -np 4" "$(cat "$TMP/body" "$TMP/mpi.out")"
	ids=$(sed -n 's/.*as the run.s worker [0-9]* (remote id \([0-9]*\), \$OMPI_COMM_WORLD_RANK).*/\1/p' \
		"$TMP/mpi.out" | sort -n | tr '\n' ' ')
	[ "$ids" = "0 1 2 3 " ] && ok "each rank's id is its OMPI_COMM_WORLD_RANK, and says so" || bad "ids from the ranks" "$ids"
	kill -TERM "$MPI"
	wait "$MPI"
	wait_api 30 /api/v1/status 'sum(1 for w in d["workers"] if w["remote"])==0' &&
		ok "mpirun's SIGTERM: every worker says bye" || bad "mpirun's SIGTERM" "$(cat "$TMP/body" "$TMP/mpi.out")"
	kill "$PID"; wait "$PID" 2>/dev/null
else
	bad "mpirun missing (make deps installs openmpi-bin)"
fi

# ---- the TUI marks a remote worker with its host ----
if command -v tmux >/dev/null 2>&1; then
	run_json asgd wall
	bport=$(free_pair)
	start --bus "tcp://127.0.0.1:$bport" --workers-listen "$WURL" --config "$TMP/run.json"
	worker
	wait_api 60 /api/v1/status 'sum(1 for w in d["workers"] if w["remote"])==1' || bad "tui: a worker joins"
	sess=slremote$$
	tmux new-session -d -s "$sess" -x 110 -y 40 "$SL tui --connect tcp://127.0.0.1:$bport"
	screen_has() { tmux capture-pane -p -t "$sess" | grep -q -- "$1"; }
	wait_until 90 screen_has "@$(hostname)" && ok "the TUI shows the remote worker's host" ||
		bad "the TUI shows the host" "$(tmux capture-pane -p -t "$sess")"
	tmux kill-session -t "$sess" 2>/dev/null
	kill "$PID"; wait "$PID" 2>/dev/null
	cleanup; WPIDS=""
else
	bad "tmux missing (make deps installs it)"
fi

# ---- refusals ----
echo "s3cret" >"$TMP/token"
echo "wrong" >"$TMP/bad"
run_json asgd wall
start --bus none --workers-listen "$WURL" --token-file "$TMP/token" --config "$TMP/run.json"
expect_exit 78 "no token: refused" env -u STALELAB_TOKEN "$SL" worker --connect "$WURL" --give-up 30 -q
expect_grep 'needs a token' "no token: the reason" "$LAST_OUT"
expect_exit 78 "a wrong token: refused" "$SL" worker --connect "$WURL" --token-file "$TMP/bad" --give-up 30
expect_grep 'refused by tcp://.*: wrong token' "a wrong token: the reason" "$LAST_OUT"
worker --token-file "$TMP/token"
wait_api 60 /api/v1/status 'sum(1 for w in d["workers"] if w["remote"] and w["iterations"]>5)==1' &&
	ok "the right token: joined" || bad "the right token" "$(cat "$TMP/body")"
kill "$PID"; wait "$PID" 2>/dev/null
cleanup; WPIDS=""
cat >"$TMP/run.json" <<JSON
{"model": "mlp:784-32-10", "dataset": "synthetic:4000", "workers": 1, "clock": "virtual", "threads": 1}
JSON
start --bus none --workers-listen "$WURL" --config "$TMP/run.json"
expect_exit 78 "the virtual clock: refused" "$SL" worker --connect "$WURL" --give-up 30 -q
expect_grep 'need the wall clock' "the virtual clock: the reason" "$LAST_OUT"
expect_http "the virtual clock: PUT workers 0 refused" 400 PUT /api/v1/workers '{"count": 0}'
expect_grep 'workers: 0 \(remote workers only\) needs the wall clock' "... saying why" "$(cat "$TMP/body")"
kill "$PID"; wait "$PID" 2>/dev/null
cat >"$TMP/big.json" <<JSON
{"model": "mlp:784-512-10", "dataset": "synthetic:4000", "workers": 1, "threads": 1}
JSON
start --bus none --workers-listen "$WURL" --workers-max-mib 1 --config "$TMP/big.json"
expect_exit 78 "a model over the receive limit: refused" "$SL" worker --connect "$WURL" --give-up 30 -q
expect_grep 'over the daemon.s receive limit of 1048576 \(serve --workers-max-mib\)' \
	"... naming the limit" "$LAST_OUT"
kill "$PID"; wait "$PID" 2>/dev/null

# ---- crop-flip: a remote worker trains on the views a local one draws ----
# (one worker, asgd, one thread each: the same updates in the same order,
# so the evaluations agree bit for bit only if the worker process drew the
# views of each batch from the key its WEIGHTS carried)
aug_json() { # WORKERS AUGMENT FILE
	cat >"$3" <<JSON
{"model": "mlp:784-16-10", "dataset": "synthetic:1000", "lr": 0.05, "batch": 16, "seed": 3,
 "workers": $1, "threads": 1, "rule": "asgd", "eval_every": 25, "augment": "$2",
 "stop": {"steps": 75}}
JSON
}
evals() { # LOG: "v test_loss train_loss" per evaluation
	python3 -c 'import json,sys
for r in map(json.loads, open(sys.argv[1])):
    if "test_loss" in r: print(r["v"], repr(r["test_loss"]), repr(r["train_loss"]))' "$1"
}
# twin LABEL TAG: the run $TMP/TAG1.json (one local worker) and
# $TMP/TAG0.json (none, a remote worker joins) evaluate alike, bit for bit;
# the remote one's evaluations in $remote_ev, the worker's stderr in $TMP/w.0
twin() {
	expect_exit 0 "$1: the local run" "$SL" run --config "$TMP/${2}1.json" --log "$TMP/$2-local.jsonl" -q
	start --bus none --workers-listen "$WURL" --config "$TMP/${2}0.json" --log "$TMP/$2-remote.jsonl"
	worker
	wait_until 60 grep -qs '"event":"end"' "$TMP/$2-remote.jsonl"
	wait "$WPID" 2>/dev/null # refused once the run has ended: its last line said
	kill "$PID"; wait "$PID" 2>/dev/null
	cleanup; WPIDS=""
	local_ev=$(evals "$TMP/$2-local.jsonl")
	remote_ev=$(evals "$TMP/$2-remote.jsonl")
	[ -n "$local_ev" ] && [ "$local_ev" = "$remote_ev" ] &&
		ok "$1: the remote worker's run evaluates as the local one's, bit for bit" ||
		bad "$1: remote and local runs differ" "local: $local_ev
remote: $remote_ev"
}
aug_json 1 crop-flip "$TMP/aug1.json"
aug_json 0 crop-flip "$TMP/aug0.json"
aug_json 1 none "$TMP/none1.json"
expect_exit 0 "none: the local run" "$SL" run --config "$TMP/none1.json" --log "$TMP/none-local.jsonl" -q
twin crop-flip aug
[ "$local_ev" != "$(evals "$TMP/none-local.jsonl")" ] &&
	ok "... and not as the run without views" || bad "crop-flip trained as none"

# ---- compression: a remote worker's pushes are compressed where a local
# one's are (where the push meets the server), with the same residual, so
# the run is the local one's bit for bit ----
cmp_json() { # WORKERS FILE
	cat >"$2" <<JSON
{"model": "mlp:784-16-10", "dataset": "synthetic:1000", "lr": 0.05, "batch": 16, "seed": 3,
 "workers": $1, "threads": 1, "rule": "asgd", "eval_every": 25, "stop": {"steps": 75},
 "rule_params": {"compress": "topk", "compress_ratio": 0.05, "ef": true}}
JSON
}
cmp_json 1 "$TMP/cmp1.json"
cmp_json 0 "$TMP/cmp0.json"
twin "topk with ef" cmp
[ "$local_ev" != "$(evals "$TMP/none-local.jsonl")" ] &&
	ok "... and not as the run without compression" || bad "topk trained as none"

# ---- a rule with phases (diloco, AdamW inside, H = 5): the worker takes
# its local steps on its own weights, so the link carries the weights down
# once a phase and the model up once, never a gradient, and the run is the
# local one's bit for bit ----
ph_json() { # WORKERS FILE
	cat >"$2" <<JSON
{"model": "mlp:784-16-10", "dataset": "synthetic:1000", "lr": 0.002, "batch": 16, "seed": 3,
 "workers": $1, "threads": 1, "rule": "diloco", "eval_every": 25, "stop": {"steps": 60},
 "optimizer": "adamw", "weight_decay": 0.1, "rule_params": {"H": 5}}
JSON
}
ph_json 1 "$TMP/ph1.json"
ph_json 0 "$TMP/ph0.json"
twin diloco ph
# 60 rounds of 5 steps; mlp:784-16-10 has 12730 parameters: 60 models of
# 4 x 12730 bytes and a loss (8 bytes) a step, where gradients would be
# 300 x (8 + 4 x 12730) = 15278400 bytes
expect_grep '300 steps: 3057600 bytes pushed' "diloco: the worker pushed 60 models and 300 losses, no gradient" \
	"$(cat "$TMP/w.0")"

# ---- streaming-diloco (two fragments, H = 6, overlap 1, mix 0.5): a
# fragment goes up at each sync point, the global one comes down a step
# later and is mixed in by the worker; the weights came down once ----
sd_json() { # WORKERS FILE
	cat >"$2" <<JSON
{"model": "mlp:784-16-10", "dataset": "synthetic:1000", "lr": 0.002, "batch": 16, "seed": 3,
 "workers": $1, "threads": 1, "rule": "streaming-diloco", "eval_every": 20, "stop": {"steps": 60},
 "optimizer": "adamw", "rule_params": {"H": 6, "fragments": 2, "overlap": 1, "mix": 0.5}}
JSON
}
sd_json 1 "$TMP/sd1.json"
sd_json 0 "$TMP/sd0.json"
twin streaming-diloco sd
# 60 fragment rounds in 180 steps, 30 of each fragment (the first layer's
# 12560 floats, the second's 170): 30 x 12730 floats and 180 losses
expect_grep '180 steps: 1529040 bytes pushed' "streaming-diloco: the worker pushed its fragments, no gradient" \
	"$(cat "$TMP/w.0")"
expect_grep 'refused by [^ ]*: the run has ended' "... and is told the run has ended" "$(cat "$TMP/w.0")"

# ---- a hostile or broken peer: refused with the reason, the daemon stands ----
run_json asgd wall
start --bus none --workers-listen "$WURL" --worker-timeout 2 --workers-max-mib 1 \
	--config "$TMP/run.json"
raw() { # WHAT [ARG]: a frame sent on a REQ socket, the answer's text in $TMP/raw
	python3 "$(dirname "$0")/wire_frame.py" "$@" >"$TMP/frame"
	python3 "$(dirname "$0")/bus_client.py" reqat "$WURL" 3 <"$TMP/frame" >"$TMP/raw" 2>&1
}
for c in "short:shorter than the 80-byte header" "magic:bad magic" \
	"proto1:protocol 1, this build speaks 4" "crc:checksum" \
	"pull 9:not a worker of this run"; do
	raw ${c%%:*}
	grep -aq "${c#*:}" "$TMP/raw" && ok "a raw ${c%%:*} frame: refused, \"${c#*:}\"" ||
		bad "a raw ${c%%:*} frame" "$(tr -c '[:print:]\n' . <"$TMP/raw")"
done
raw big 2
grep -aq 'no reply' "$TMP/raw" && ok "a frame over the receive limit: dropped, no answer" ||
	bad "an oversize frame" "$(tr -c '[:print:]\n' . <"$TMP/raw" | head -c 300)"
raw hello 'evil host"name
with\escapes'
wait_api 10 /api/v1/status 'any(w["remote"] and w["host"] == "evil_host_name_with_escapes" for w in d["workers"])' &&
	ok "a hello's host is kept to [A-Za-z0-9._-] in /status" || bad "host kept clean" "$(cat "$TMP/body")"
wait_api 10 /api/v1/status 'd["remote"]["lost"] >= 1' &&
	ok "the raw hello that never pulls is lost after the timeout" || bad "raw hello lost" "$(cat "$TMP/body")"
worker
wait_api 60 /api/v1/status 'sum(1 for w in d["workers"] if w["remote"] and w["iterations"] > 5) == 1' &&
	ok "after all that, a real worker joins and trains" || bad "a real worker after the raw frames" "$(cat "$TMP/body")"
kill "$PID"; wait "$PID"
[ $? -eq 0 ] && ok "the daemon exits 0 after the hostile peer" || bad "daemon exit after raw frames"
cleanup; WPIDS=""
expect_exit 2 "serve: a bad --workers-max-mib" "$SL" serve --listen 127.0.0.1:0 --bus none \
	--workers-max-mib 0
start --bus none --workers-listen "tcp://0.0.0.0:$wport" --config "$TMP/run.json"
expect_grep 'remote workers beyond loopback without a token' "every interface without a token: a warning" \
	"$(cat "$TMP/serve.err")"
kill "$PID"; wait "$PID" 2>/dev/null
start --bus none --workers-listen none --config "$TMP/run.json"
expect_exit 1 "--workers-listen none: nobody answers" "$SL" worker --connect "$WURL" --give-up 2 -q
kill "$PID"; wait "$PID" 2>/dev/null
finish remote
