#!/bin/sh
# A name typed wrong is answered with the nearest one (engine/base/suggest.h):
# an unknown command, a long option of `stalelab bench`, a key of the run
# object at any level (--config, sweep files, POST and PATCH bodies), a
# rule or another choice; garbage gets no suggestion. And `stalelab bench`
# says what is wrong with its usage before it prints any header or figure.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: did you mean (nearest names), bench's errors first"

# expect_line CODE NAME WANT CMD...: CMD exits CODE and its first line of
# output (stderr, then stdout, line by line) is WANT exactly
# (expect_exit sets name and want: these have names of their own)
expect_line() {
	_el_code=$1; _el_name=$2; _el_want=$3; shift 3
	expect_exit "$_el_code" "$_el_name: exit $_el_code" "$@"
	first=$(printf '%s\n' "$LAST_OUT" | head -n 1)
	[ "$first" = "$_el_want" ] && ok "$_el_name: says so" || bad "$_el_name: says so" "got:  $first
want: $_el_want"
}

# --- commands ------------------------------------------------------------------
expect_line 2 "srve" "stalelab: unknown command 'srve' (did you mean 'serve'?)" "$SL" srve
expect_line 2 "bnech" "stalelab: unknown command 'bnech' (did you mean 'bench'?)" "$SL" bnech
expect_line 2 "help srve" "stalelab: help: no command 'srve' (did you mean 'serve'?)" "$SL" help srve
expect_line 2 "garbage command" "stalelab: unknown command 'frobnicate' (try 'stalelab --help')" \
	"$SL" frobnicate

# --- the run object, from a file ---------------------------------------------------
# config NAME JSON WANT: `run --config` with JSON exits 2, its message
# (after "stalelab run: FILE: ") is WANT exactly
config() {
	printf '%s\n' "$2" >"$TMP/c.json"
	expect_line 2 "config $1" "stalelab run: $TMP/c.json: $3" \
		"$SL" run --config "$TMP/c.json" --log /dev/null
}
rules="ssgd, asgd, softsync, ssp, sasgd, dcasgd, odsgd, localsgd, easgd, hogwild, diloco, async-diloco, async-gated, streaming-diloco, sparta, demo"
config bacth '{"bacth": 64}' "bacth: unknown field (did you mean 'batch'?)"
config stop.epoch '{"stop": {"epoch": 1}}' "stop.epoch: unknown field (did you mean 'stop.epochs'?)"
config rule_params.lamda '{"rule_params": {"lamda": 0.1}}' \
	"rule_params.lamda: unknown field (did you mean 'rule_params.lambda'?)"
config worker_overrides[0].sped '{"worker_overrides": [{"id": 0, "sped": 0.5}]}' \
	"worker_overrides[0].sped: unknown field for a worker (delay, spb_depth, speed, step_ms, paused, link; did you mean 'worker_overrides[0].speed'?)"
config "garbage key" '{"learning_rate": 0.1}' "learning_rate: unknown field"
config "rule sspp" '{"rule": "sspp"}' "rule: unknown \"sspp\" (expected $rules; did you mean 'ssp'?)"
config "rule adam" '{"rule": "adam"}' "rule: unknown \"adam\" (expected $rules)"

# --- flags that set choices -------------------------------------------------------
expect_exit 2 "run --rule sspp: exit 2" "$SL" run --rule sspp --log /dev/null
expect_grep "^stalelab run: --rule: rule: unknown \"sspp\" .*; did you mean 'ssp'\?\)$" \
	"run --rule sspp: the nearest rule" "$LAST_OUT"
expect_exit 2 "run --clock virtul: exit 2" "$SL" run --clock virtul --log /dev/null
expect_grep "clock: unknown \"virtul\" \(expected wall, virtual; did you mean 'virtual'\?\)$" \
	"run --clock virtul: the nearest clock" "$LAST_OUT"

# --- a sweep file -------------------------------------------------------------------
printf '%s\n' '{"wrokers": [1, 2]}' >"$TMP/sweep.json"
expect_exit 2 "sweep wrokers: exit 2" "$SL" sweep "$TMP/sweep.json" --out "$TMP/sw"
expect_grep "cell 0 \(wrokers=1\): wrokers: unknown field \(did you mean 'workers'\?\)" \
	"sweep wrokers: the nearest key" "$LAST_OUT"

# --- bench's long options --------------------------------------------------------
expect_line 2 "bench --modle" "stalelab bench: unknown option '--modle' (did you mean '--model'?)" \
	"$SL" bench --modle lenet5
expect_line 2 "bench --asycn=1" "stalelab bench: unknown option '--asycn' (did you mean '--async'?)" \
	"$SL" bench --asycn=1
expect_line 2 "bench --nope" "stalelab bench: unknown option '--nope'" "$SL" bench --nope
# every command's long options
expect_line 2 "run --lrr" "stalelab run: unknown option '--lrr' (did you mean '--lr'?)" "$SL" run --lrr 0.1
expect_line 2 "serve --listn" "stalelab serve: unknown option '--listn' (did you mean '--listen'?)" \
	"$SL" serve --listn 127.0.0.1:0
expect_line 2 "sweep --outt" "stalelab sweep: unknown option '--outt' (did you mean '--out'?)" "$SL" sweep --outt x
expect_line 2 "worker --conect" "stalelab worker: unknown option '--conect' (did you mean '--connect'?)" \
	"$SL" worker --conect tcp://127.0.0.1:1
expect_line 2 "cluster --polcy" "stalelab cluster: unknown option '--polcy' (did you mean '--policy'?)" \
	"$SL" cluster --polcy fifo

# --- bench: usage errors before any header ------------------------------------------
# stdout line-buffered (as on a terminal): the header was written before the
# error was found; stdout and stderr apart: nothing on stdout at all
bench_first() { # NAME WANT-FIRST-LINE ARGS...
	_bf_name=$1; _bf_want=$2; shift 2
	stdbuf -oL "$SL" bench "$@" >"$TMP/both" 2>&1
	code=$?
	[ "$code" -eq 2 ] && ok "bench $_bf_name: exit 2" || bad "bench $_bf_name: exit 2 (got $code)" "$(cat "$TMP/both")"
	first=$(head -n 1 "$TMP/both")
	[ "$first" = "$_bf_want" ] && ok "bench $_bf_name: the error comes first" ||
		bad "bench $_bf_name: the error comes first" "$(head -n 3 "$TMP/both")"
	"$SL" bench "$@" >"$TMP/out" 2>"$TMP/err"
	[ ! -s "$TMP/out" ] && ok "bench $_bf_name: nothing on stdout" ||
		bad "bench $_bf_name: nothing on stdout" "$(head -n 3 "$TMP/out")"
}
command -v stdbuf >/dev/null 2>&1 || bad "stdbuf (coreutils) is needed"
bench_first "-m nosuch" \
	'stalelab bench: model: unknown "nosuch" (expected logreg, mlp:<in>-<hidden>...-<out>, lenet5, resnet20, resnet:N, gpt:L<layers>-H<heads>-E<width>-T<context>, or {"nodes": [...]})' \
	-m nosuch -d synthetic:600 -S 0.1 -t 1
bench_first "-m nosuch -P" \
	'stalelab bench: model: unknown "nosuch" (expected logreg, mlp:<in>-<hidden>...-<out>, lenet5, resnet20, resnet:N, gpt:L<layers>-H<heads>-E<width>-T<context>, or {"nodes": [...]})' \
	-m nosuch -P -d synthetic:600 -S 0.1 -t 1
bench_first "a model the data does not fit" \
	"$("$SL" bench -m mlp:100-10 -d synthetic:600 -S 0.1 -t 1 2>&1 >/dev/null | head -n 1)" \
	-m mlp:100-10 -d synthetic:600 -S 0.1 -t 1
grep -q '^stalelab bench: model: ' "$TMP/err" && ok "bench mlp:100-10: a model error" ||
	bad "bench mlp:100-10: a model error" "$(cat "$TMP/err")"
bench_first "--device ref -m nosuch" \
	'stalelab bench: model: unknown "nosuch" (expected logreg, mlp:<in>-<hidden>...-<out>, lenet5, resnet20, resnet:N, gpt:L<layers>-H<heads>-E<width>-T<context>, or {"nodes": [...]})' \
	--device ref -m nosuch -d synthetic:600 -S 0.1 -t 1
[ "$(grep -c . "$TMP/err")" -eq 1 ] && ok "bench --device ref -m nosuch: said once" ||
	bad "bench --device ref -m nosuch: said once" "$(cat "$TMP/err")"
bench_first "--device tpu" \
	"$("$SL" bench --device tpu -d synthetic:600 2>&1 >/dev/null | head -n 1)" \
	--device tpu -d synthetic:600 -S 0.1 -t 1
grep -q "^stalelab bench: device: unknown \"tpu\"" "$TMP/err" && ok "bench --device tpu: named" ||
	bad "bench --device tpu: named" "$(cat "$TMP/err")"
bench_first "--threads 0" 'stalelab bench: --threads: expected 1 to 64, got "0"' --threads 0 -d synthetic:600
bench_first "-d nosuch" "$("$SL" bench -d nosuch 2>&1 >/dev/null | head -n 1)" -d nosuch
grep -q '^stalelab bench: dataset: ' "$TMP/err" && ok "bench -d nosuch: a dataset error" ||
	bad "bench -d nosuch: a dataset error" "$(cat "$TMP/err")"

# --- the daemon: POST and PATCH bodies ----------------------------------------------
cat >"$TMP/run.json" <<'JSON'
{"model": "logreg", "dataset": "synthetic:600", "workers": 1, "batch": 16,
 "delay": {"dist": "const", "mean_ms": 50}}
JSON
start --config "$TMP/run.json" --log "$TMP/serve.jsonl"
if [ -n "$port" ]; then
	ok "daemon listens"
	expect_http "PATCH lrr" 400 PATCH /api/v1/run '{"lrr": 0.1}'
	expect_grep "\"lrr: unknown field \(did you mean 'lr'\?\)\"" "PATCH lrr: the nearest" "$LAST_OUT"
	expect_http "PATCH rule_params.lamda" 400 PATCH /api/v1/run '{"rule_params": {"lamda": 0.1}}'
	expect_grep "\"rule_params.lamda: unknown field \(did you mean 'rule_params.lambda'\?\)\"" \
		"PATCH rule_params.lamda: the nearest" "$LAST_OUT"
	expect_http "PATCH rule" 400 PATCH /api/v1/run '{"rule": "dcasdg"}'
	expect_grep "did you mean 'dcasgd'\?\)\"" "PATCH rule dcasdg: the nearest rule" "$LAST_OUT"
	expect_http "PATCH a worker" 400 PATCH /api/v1/workers/0 '{"sped": 0.5}'
	expect_grep "did you mean 'speed'\?\)\"" "PATCH a worker's sped: the nearest" "$LAST_OUT"
	expect_http "POST bacth" 400 POST /api/v1/run '{"bacth": 16}'
	expect_grep "\"bacth: unknown field \(did you mean 'batch'\?\)\"" "POST bacth: the nearest" "$LAST_OUT"
	expect_http "PATCH garbage" 400 PATCH /api/v1/run '{"learning_rate": 0.1}'
	expect_grep '"learning_rate: unknown field"' "PATCH garbage: nothing suggested" "$LAST_OUT"
else
	bad "daemon listens" "$(cat "$TMP/serve.err")"
fi
[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null

finish didyoumean
