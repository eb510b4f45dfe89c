#!/bin/sh
# Remote workers across network namespaces (issue 17), as root: the daemon
# in one namespace, two workers in two others, each joined to the daemon's
# by a veth link. Faults: a worker killed (SIGKILL), a link cut and
# restored, a link blackholed (tc netem loss 100%) for longer than the
# timeout, the daemon killed (SIGKILL) and restarted from a checkpoint.
# Checked: the run goes on throughout, each lost worker is counted and
# logged, the workers come back by themselves, test accuracy keeps rising,
# and the push log (serve --push-log) has no (worker, incarnation, seq)
# twice. Without root or `ip netns` it says so and checks nothing.
. "$(dirname "$0")/lib.inc"
SL=$(cd "$(dirname "${1:-build/stalelab}")" && pwd)/$(basename "${1:-build/stalelab}")
echo "integration: remote workers across network namespaces"
tag=sl$$
# the probe: a namespace made and entered (in a chroot, where / is not a
# mount point, `ip netns add` works and `ip netns exec` does not)
probe() {
	# a chroot's / is no mount point: `ip netns add` would leave a mount
	# of /run/netns in it, and `ip netns exec` cannot work there
	command -v mountpoint >/dev/null 2>&1 && ! mountpoint -q / && return 1
	ip netns add "$tag-probe" 2>/dev/null || return 1
	ip netns exec "$tag-probe" true 2>/dev/null
	_rc=$?
	ip netns del "$tag-probe" 2>/dev/null
	return $_rc
}
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null 2>&1 || ! command -v tc >/dev/null 2>&1 ||
	! probe; then
	echo "  skipped: needs root, ip and tc (iproute2), and network namespaces it can enter"
	finish netns
	exit 0
fi
PS=$tag-ps W1=$tag-w1 W2=$tag-w2
teardown() {
	for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
	for n in $PS $W1 $W2; do ip netns del "$n" 2>/dev/null; done
	ip link del "vp1$tag" 2>/dev/null; ip link del "vp2$tag" 2>/dev/null
	rm -rf "$TMP"
}
trap teardown EXIT
PIDS=""
for n in $PS $W1 $W2; do ip netns add "$n" && ip -n "$n" link set lo up; done
# ps:vp1 10.77.1.1 <-> w1:vw1 10.77.1.2, ps:vp2 10.77.2.1 <-> w2:vw2 10.77.2.2
for i in 1 2; do
	eval w=\$W$i
	ip link add "vp$i$tag" netns "$PS" type veth peer name "vw$i$tag" netns "$w"
	ip -n "$PS" addr add "10.77.$i.1/24" dev "vp$i$tag"
	ip -n "$w" addr add "10.77.$i.2/24" dev "vw$i$tag"
	ip -n "$PS" link set "vp$i$tag" up
	ip -n "$w" link set "vw$i$tag" up
done
ip -n "$W1" route get 10.77.1.1 >/dev/null && ok "the namespaces are joined" ||
	bad "the namespaces are joined"

cat >"$TMP/run.json" <<'JSON'
{"model": "mlp:784-32-10", "dataset": "fashion-mnist", "lr": 0.02, "batch": 32,
 "workers": 1, "threads": 1, "rule": "asgd", "eval_every": 40,
 "worker_overrides": [{"id": 0, "paused": true}]}
JSON
NLOG=0
serve_ps() { # ARGS...: the daemon in the ps namespace; URL set
	: >"$TMP/serve.err"
	NLOG=$((NLOG + 1))
	ip netns exec "$PS" "$SL" serve --listen 127.0.0.1:0 --bus none --quiet \
		--workers-listen tcp://0.0.0.0:8473 --token-file "$TMP/token" --worker-timeout 3 \
		--checkpoint-dir "$TMP" --log "$TMP/run$NLOG.jsonl" --push-log "$TMP/push.log" \
		"$@" 2>"$TMP/serve.err" &
	SPID=$!
	PIDS="$PIDS $SPID"
	port=""
	wait_until 30 grep -q 'listening on' "$TMP/serve.err"
	port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$TMP/serve.err")
}
# GET the status inside the ps namespace (its loopback) into $TMP/body
st() {
	rm -f "$TMP/body" # no answer: no body, never the last one's
	ip netns exec "$PS" curl -s -o "$TMP/body" "http://127.0.0.1:$port/api/v1/status"
}
until_st() { # SECONDS PYTHON-EXPR over the status as d
	_e=$(($(date +%s) + $1))
	while :; do
		st
		python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' \
			"$TMP/body" "$2" 2>/dev/null && return 0
		[ "$(date +%s)" -ge "$_e" ] && return 1
		sleep 0.3
	done
}
val() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$TMP/body" "$1"; }
worker_in() { # N: a worker in namespace N's, to 10.77.N.1
	eval ns=\$W$1
	ip netns exec "$ns" "$SL" worker --connect "tcp://10.77.$1.1:8473" --token-file "$TMP/token" \
		--threads 1 --worker-id "$1" >>"$TMP/w$1.err" 2>&1 &
	eval P$1=$!
	PIDS="$PIDS $!"
}
remote_n() { echo 'sum(1 for w in d["workers"] if w["remote"] and w["state"] != "paused")'; }
only_remote() { echo 'all(w["remote"] for w in d["workers"] if w["id"] != 0)'; }

echo "t0ken-$$" >"$TMP/token"
serve_ps --config "$TMP/run.json"
[ -n "$port" ] && ok "the daemon starts in its namespace" || bad "the daemon starts" "$(cat "$TMP/serve.err")"
worker_in 1
worker_in 2
until_st 60 "$(remote_n) == 2 and d['version'] > 100 and d['test_acc'] > 0" && ok "two workers train across the links" ||
	bad "two workers train" "$(cat "$TMP/body" "$TMP"/w*.err)"
acc0=$(val 'd["test_acc"]')

# 1. a worker killed
kill -9 "$P1"
until_st 30 'd["remote"]["lost"] >= 1' && ok "a worker killed is lost" || bad "killed: lost" "$(cat "$TMP/body")"
v=$(val 'd["version"]')
until_st 30 "d['version'] > $v + 50" && ok "the run goes on with the other" || bad "goes on" "$(cat "$TMP/body")"
worker_in 1
until_st 60 "$(remote_n) == 2" && ok "a new worker process joins" || bad "rejoin" "$(cat "$TMP/body")"

# 2. a link cut, then restored
lost=$(val 'd["remote"]["lost"]')
joined=$(val 'd["remote"]["joined"]')
ip -n "$PS" link set "vp2$tag" down
until_st 30 "d['remote']['lost'] > $lost" && ok "a cut link: its worker is lost" || bad "cut: lost" "$(cat "$TMP/body")"
v=$(val 'd["version"]')
until_st 30 "d['version'] > $v + 50" && ok "a cut link: the run goes on" || bad "cut: goes on" "$(cat "$TMP/body")"
ip -n "$PS" link set "vp2$tag" up
until_st 60 "d['remote']['joined'] > $joined and $(remote_n) == 2" &&
	ok "the link restored: the worker comes back by itself" || bad "restored: back" "$(cat "$TMP/body" "$TMP/w2.err")"

# 3. a link blackholed for longer than the timeout: every packet dropped,
# no reset, no error (tc netem loss 100% where the kernel has sch_netem,
# else a blackhole route, which drops them the same way)
lost=$(val 'd["remote"]["lost"]')
joined=$(val 'd["remote"]["joined"]')
if ip netns exec "$PS" tc qdisc add dev "vp1$tag" root netem loss 100% 2>/dev/null; then
	unhole() { ip netns exec "$PS" tc qdisc del dev "vp1$tag" root; }
	echo "  (netem loss 100%)"
else
	ip -n "$PS" route add blackhole 10.77.1.2/32
	unhole() { ip -n "$PS" route del blackhole 10.77.1.2/32; }
	echo "  (no sch_netem in this kernel: a blackhole route)"
fi
until_st 30 "d['remote']['lost'] > $lost" && ok "a blackholed link: its worker is lost" ||
	bad "blackhole: lost" "$(cat "$TMP/body")"
sleep 2
unhole
until_st 90 "d['remote']['joined'] > $joined and $(remote_n) == 2" &&
	ok "the blackhole lifted: the worker comes back by itself" || bad "blackhole: back" "$(cat "$TMP/body" "$TMP/w1.err")"

# 4. the daemon killed (SIGKILL) after a checkpoint, and restarted from it:
# the pushes it applied after the checkpoint are gone with it
ip netns exec "$PS" curl -s -o "$TMP/ck" -X POST -H 'Content-Type: application/json' \
	-H "Authorization: Bearer $(cat "$TMP/token")" \
	--data '{"path": "mid.ckpt"}' "http://127.0.0.1:$port/api/v1/checkpoint"
[ -s "$TMP/mid.ckpt" ] && ok "a checkpoint of the live run" || bad "checkpoint" "$(cat "$TMP/ck")"
st
v=$(val 'd["version"]')
until_st 30 "d['version'] > $v + 50" || bad "trains after the checkpoint" "$(cat "$TMP/body")"
kill -9 "$SPID"
wait "$SPID" 2>/dev/null
serve_ps --resume "$TMP/mid.ckpt"
[ -n "$port" ] && ok "the daemon restarts from the checkpoint" || bad "restart" "$(cat "$TMP/serve.err")"
until_st 90 "$(remote_n) == 2 and d['version'] > $v + 50" &&
	ok "the restarted daemon: both workers come back and train on" ||
	bad "restart: back" "$(cat "$TMP/body" "$TMP/serve.err" "$TMP"/w*.err)"
expect_grep '"generation": ?1' "its ledger is the checkpoint's, in a new generation" "$(cat "$TMP/body")"
acc1=$(val 'd["test_acc"]')
until_st 5 "$(only_remote)" && ok "no slot a remote worker left came back as a local worker" ||
	bad "slots" "$(cat "$TMP/body")"
python3 -c "import sys; sys.exit(0 if float('$acc1') > float('$acc0') else 1)" &&
	ok "test accuracy kept rising ($acc0 then $acc1)" || bad "accuracy: $acc0 then $acc1"

# the logs: each event; the push log: nothing applied twice, two daemons
logs=$(cat "$TMP/run1.jsonl" "$TMP/run2.jsonl")
n_lost=$(printf '%s\n' "$logs" | grep -c '"event":"remote","what":"lost"')
n_join=$(printf '%s\n' "$logs" | grep -c '"event":"remote","what":"joined"')
[ "$n_lost" -ge 3 ] && [ "$n_join" -ge 6 ] &&
	ok "the logs record each loss and join ($n_lost lost, $n_join joined)" ||
	bad "events in the logs" "$n_lost lost, $n_join joined"
dups=$(cut -f2-4 "$TMP/push.log" | sort | uniq -d | wc -l)
epochs=$(cut -f1 "$TMP/push.log" | uniq | wc -l)
[ "$dups" -eq 0 ] && [ "$epochs" -eq 2 ] &&
	ok "no (worker, incarnation, seq) applied twice, over $(wc -l <"$TMP/push.log") pushes by 2 daemons" ||
	bad "applied twice" "$dups repeated, $epochs daemons"
finish netns
