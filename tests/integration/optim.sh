#!/bin/sh
# The server's optimisers, the lr schedule and clipping as a person meets
# them (issue 31, part 4): each optimiser trains every global-step rule for
# a few virtual-clock updates and its log says so; the scheduled lr is in
# the log, /status and /metrics; a PATCH of the optimiser is a change
# record; bad combinations are refused naming the field, on the command
# line, in a run object and in a PATCH.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: optimisers, schedules, clipping"

small="--dataset synthetic:2000 --model mlp:784-32-10 --clock virtual --threads 1 -q"

# adamw under every rule but hogwild (localsgd and easgd: at the workers,
# each its own state), every optimiser under asgd and ssgd (each arrival;
# a round's average)
rules=$("$SL" run --rule none-such --steps 1 -q 2>&1 | sed -n 's/.*(expected \(.*\))$/\1/p' | tr -d ,)
for r in $rules; do
	case $r in hogwild) continue ;; asgd|ssgd) opts="sgd momentum nesterov adam adamw" ;;
	*) opts=adamw ;; esac
	for o in $opts; do
		log=$TMP/$r-$o.jsonl
		out=$(timeout 60 "$SL" run $small --rule "$r" --workers 2 --optimizer "$o" --momentum 0.9 \
			--lr 0.01 --clip 5 --steps 12 --log "$log" 2>&1)
		rc=$?
		end=$(tail -n 1 "$log" 2>/dev/null)
		first=$(head -n 1 "$log" 2>/dev/null)
		case "$rc $first $end" in
		0*'"optimizer":"'"$o"'"'*'"event":"end"'*'"stop":"steps"'*) ok "$r with $o: 12 updates" ;;
		0*) case "$o" in sgd) # the default is not echoed
			case "$end" in *'"stop":"steps"'*) ok "$r with $o: 12 updates" ;;
			*) bad "$r with $o" "$end" ;; esac ;;
		    *) bad "$r with $o: the log" "$first" ;; esac ;;
		*) bad "$r with $o (exit $rc)" "$out" ;;
		esac
	done
done

# localsgd with H = 1 and one worker steps the worker's weights with its own
# adamw state and averages one model: the same bits as asgd's adamw at the
# server (the end record's weights hash)
printf '{"rule_params": {"H": 1}}' >"$TMP/h1.json"
for r in asgd localsgd; do
	"$SL" run $small --device ref --rule "$r" -c "$TMP/h1.json" --optimizer adamw --weight-decay 0.1 \
		--lr 0.003 --clip 0.5 --steps 30 --log "$TMP/id-$r.jsonl"
done
a=$(tail -n 1 "$TMP/id-asgd.jsonl" | grep -o '"weights":"[0-9a-f]*"')
b=$(tail -n 1 "$TMP/id-localsgd.jsonl" | grep -o '"weights":"[0-9a-f]*"')
[ -n "$a" ] && [ "$a" = "$b" ] && ok "localsgd (H 1, one worker) with adamw and clipping = asgd with them, bit for bit" ||
	bad "localsgd = asgd under adamw" "asgd $a, localsgd $b"

# a checkpoint keeps the optimiser's state (the server's, and each localsgd
# worker's own) and the schedule's place: resumed = uninterrupted, bit for bit
for r in asgd localsgd; do
	printf '{"model": "mlp:784-32-10", "dataset": "synthetic:2000", "device": "ref", "clock": "virtual", "threads": 1, "workers": 2, "rule": "%s", "rule_params": {"H": 3}, "optimizer": "adamw", "weight_decay": 0.1, "lr": 0.003, "clip": 0.5, "lr_schedule": {"kind": "cosine", "warmup": 3, "decay_updates": 30}, "schedule": [{"at": {"v": 10}, "set": {"checkpoint": "%s"}}]}' \
		"$r" "$TMP/$r.ckpt" >"$TMP/ck-$r.json"
	"$SL" run -c "$TMP/ck-$r.json" --steps 25 -q --log "$TMP/full-$r.jsonl"
	"$SL" run --resume "$TMP/$r.ckpt" --steps 25 -q --log "$TMP/res-$r.jsonl"
	a=$(tail -n 1 "$TMP/full-$r.jsonl" | grep -o '"weights":"[0-9a-f]*"')
	b=$(tail -n 1 "$TMP/res-$r.jsonl" | grep -o '"weights":"[0-9a-f]*"')
	[ -n "$a" ] && [ "$a" = "$b" ] && ok "$r with adamw: resumed from v 10 = uninterrupted, bit for bit" ||
		bad "$r with adamw: resume" "uninterrupted $a, resumed $b"
done

# hogwild's threads step the shared weights without a lock: sgd only
expect_exit 2 "hogwild with adam: refused" "$SL" run --dataset synthetic:2000 --model mlp:784-32-10 \
	--threads 1 -q --rule hogwild --optimizer adam --steps 3
expect_grep "^stalelab run: optimizer: hogwild steps the shared weights" \
	"hogwild with adam: the message names optimizer and the rule" "$LAST_OUT"
expect_exit 2 "hogwild with clip: refused" "$SL" run --dataset synthetic:2000 --model mlp:784-32-10 \
	--threads 1 -q --rule hogwild --clip 1 --steps 3
expect_grep "^stalelab run: clip: hogwild" "hogwild with clip: the message names clip" "$LAST_OUT"
expect_exit 2 "nesterov without momentum: refused" "$SL" run $small --optimizer nesterov --steps 3
expect_grep "momentum: optimizer nesterov needs momentum > 0" "... naming momentum" "$LAST_OUT"
expect_exit 0 "nesterov with the momentum after it: fine (any order)" \
	"$SL" run $small --optimizer nesterov --momentum 0.9 --steps 3
expect_exit 2 "an unknown optimizer" "$SL" run $small --optimizer adamm --steps 3
expect_grep "did you mean 'adam'" "... suggests adam" "$LAST_OUT"
printf '{"lr_schedule": {"kind": "cosine", "warmup": 50, "decay_updates": 10}}' >"$TMP/bad.json"
expect_exit 2 "a decay that ends before its warm-up" "$SL" run $small -c "$TMP/bad.json" --steps 3
expect_grep "lr_schedule.decay_updates: must be past the warm-up" "... naming lr_schedule.decay_updates" "$LAST_OUT"
printf '{"lr_schedule": {"kind": "cosine", "warmpu": 5}}' >"$TMP/bad.json"
expect_exit 2 "a typo in lr_schedule" "$SL" run $small -c "$TMP/bad.json" --steps 3
expect_grep "lr_schedule.warmpu: unknown field.*did you mean 'lr_schedule.warmup'" "... suggests warmup" "$LAST_OUT"
expect_exit 2 "beta2 of 1" "$SL" run $small -c /dev/stdin --steps 3 <<'EOF'
{"optimizer": "adam", "beta2": 1}
EOF
expect_grep "beta2: must be in \[0, 1\)" "... naming beta2 and its range" "$LAST_OUT"

# the schedule: warm-up 10, cosine to 0.1 x lr at 50; the log's lr at each
# evaluation is lr x the factor of the next update
printf '{"lr": 0.02, "optimizer": "adamw", "weight_decay": 0.1, "eval_every": 10, "lr_schedule": {"kind": "cosine", "warmup": 10, "decay_updates": 50, "floor": 0.1}}' >"$TMP/sched.json"
expect_exit 0 "a cosine schedule runs" "$SL" run $small -c "$TMP/sched.json" --steps 60 --log "$TMP/sched.jsonl"
out=$(python3 - "$TMP/sched.jsonl" <<'PY' 2>&1
import json, math, sys
recs = [json.loads(l) for l in open(sys.argv[1])][1:]
seen = 0
for r in recs:
    v = r["v"]
    if v < 10:
        f = (v + 1) / 11
    elif v >= 50:
        f = 0.1
    else:
        f = 0.1 + 0.5 * (1 + math.cos(math.pi * (v - 10) / 40)) * 0.9
    assert abs(r["lr"] - 0.02 * f) < 1e-8, (v, r["lr"], 0.02 * f)
    seen += 1
assert seen >= 6, seen
print("ok")
PY
)
[ "$out" = ok ] && ok "the log's lr follows warm-up and cosine at every record" || bad "the log's lr" "$out"

# live: the scheduled lr in /status and /metrics, a PATCH of the optimiser
printf '{"model": "mlp:784-32-10", "dataset": "synthetic:2000", "clock": "virtual", "threads": 1, "lr": 0.01, "workers": 2, "lr_schedule": {"kind": "linear", "warmup": 0, "decay_updates": 100000000, "floor": 0.5}}' >"$TMP/live.json"
start --config "$TMP/live.json"
wait_api 60 /api/v1/status 'd["version"] > 20' && ok "the run trains" || bad "the run trains" "$(cat "$TMP/body")"
wait_api 10 /api/v1/status 'd["lr_now"] < 0.01 and d["lr_now"] > 0.005 and d["config"]["lr"] == 0.01' &&
	ok "/status: lr_now is the scheduled lr, config.lr the run's" || bad "/status lr_now" "$(cat "$TMP/body")"
m=$(curl -s "$URL/metrics")
expect_grep '^stalelab_learning_rate 0\.00[5-9]' "/metrics: the learning rate is the scheduled one" "$m"
expect_http "PATCH optimizer nesterov without momentum: refused" 400 PATCH /api/v1/run '{"optimizer": "nesterov"}'
expect_grep "momentum: optimizer nesterov needs momentum > 0" "... naming momentum" "$LAST_OUT"
expect_http "PATCH optimizer adam" 202 PATCH /api/v1/run '{"optimizer": "adam"}'
wait_api 30 /api/v1/status 'd["config"].get("optimizer") == "adam"' &&
	ok "/status: config.optimizer is adam" || bad "config.optimizer" "$(cat "$TMP/body")"
wait_api 30 /api/v1/runs/1/changes 'any(c.get("set", {}).get("optimizer") == "adam" for c in d["changes"])' &&
	ok "the change is listed" || bad "the change is listed" "$(cat "$TMP/body")"
expect_http "PATCH rule hogwild under adam: refused" 400 PATCH /api/v1/run '{"rule": "hogwild"}'
expect_grep "optimizer: hogwild steps the shared weights|rule: hogwild needs" "... naming the field" "$LAST_OUT"
expect_http "PATCH rule localsgd under adam: its workers take adam" 202 PATCH /api/v1/run '{"rule": "localsgd"}'
wait_api 30 /api/v1/status 'd["rule"] == "localsgd"' && ok "/status: rule localsgd" || bad "rule localsgd" "$(cat "$TMP/body")"
expect_http "PATCH clip 0.5" 202 PATCH /api/v1/run '{"clip": 0.5}'
wait_api 30 /api/v1/status 'd["config"].get("clip") == 0.5' && ok "/status: clip 0.5" || bad "clip" "$(cat "$TMP/body")"
v0=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$TMP/body")
wait_api 30 /api/v1/status "d['version'] > $v0 + 20 and d['state'] == 'running'" &&
	ok "it trains on under adam with clipping" || bad "trains on" "$(cat "$TMP/body")"
kill "$PID" 2>/dev/null
wait "$PID" 2>/dev/null
finish optim
