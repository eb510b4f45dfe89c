#!/bin/sh
# A model given node by node in the run object (issue 31, part 1):
# "model": {"nodes": [...]} builds the same model as the named spec it
# spells out (bit for bit), echoes back as given in the log (and the log
# runs again), a residual graph trains, and a bad graph is refused naming
# the node and the field: on the command line and over the API.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: models given as graphs"

small='"dataset": "synthetic:2000", "device": "ref", "clock": "virtual", "threads": 1, "workers": 2'
hash() { tail -n 1 "$1" | grep -o '"weights":"[0-9a-f]*"'; }

# the named specs, spelled out
printf '{"model": {"nodes": [{"op": "dense", "units": 64, "relu": true}, {"op": "dense", "units": 10}]}, %s}' \
	"$small" >"$TMP/mlp.json"
printf '{"model": "mlp:784-64-10", %s}' "$small" >"$TMP/mlp-named.json"
printf '{"model": {"nodes": [{"op": "conv2d", "units": 6, "k": 5, "pad": 2, "relu": true}, {"op": "maxpool", "k": 2, "stride": 2}, {"op": "conv2d", "units": 16, "k": 5, "relu": true}, {"op": "maxpool", "k": 2, "stride": 2}, {"op": "flatten"}, {"op": "dense", "units": 120, "relu": true}, {"op": "dense", "units": 84, "relu": true}, {"op": "dense", "units": 10}]}, %s}' \
	"$small" >"$TMP/lenet.json"
printf '{"model": "lenet5", %s}' "$small" >"$TMP/lenet-named.json"
for m in mlp lenet; do
	expect_exit 0 "$m as nodes: runs" "$SL" run -c "$TMP/$m.json" --steps 12 -q --log "$TMP/$m.jsonl"
	expect_exit 0 "$m by name: runs" "$SL" run -c "$TMP/$m-named.json" --steps 12 --log "$TMP/$m-named.jsonl"
	case $m in lenet) expect_grep "^stalelab run: model: 8 nodes, 61706 parameters in 5 layers, 0.839 MFLOPs per sample forward" \
		"lenet5: stalelab run's model line" "$LAST_OUT" ;; esac
	a=$(hash "$TMP/$m.jsonl") b=$(hash "$TMP/$m-named.jsonl")
	[ -n "$a" ] && [ "$a" = "$b" ] && ok "$m as nodes = $m by name, bit for bit ($a)" ||
		bad "$m as nodes = by name" "nodes $a, named $b"
done

# the log's run object holds the model as given, and runs again to the same bits
out=$(python3 - "$TMP/lenet.json" "$TMP/lenet.jsonl" <<'PY' 2>&1
import json, sys
want = json.load(open(sys.argv[1]))["model"]
got = json.loads(open(sys.argv[2]).readline())["model"]
assert got == want, (got, want)
print("ok")
PY
)
[ "$out" = ok ] && ok "the log's first record holds the nodes as given" || bad "the log's model" "$out"
head -n 1 "$TMP/lenet.jsonl" >"$TMP/first.json"
expect_exit 0 "the log's run object runs again as a config" "$SL" run -c "$TMP/first.json" --steps 12 -q \
	--log "$TMP/again.jsonl"
[ "$(hash "$TMP/again.jsonl")" = "$(hash "$TMP/lenet.jsonl")" ] && ok "... to the same weights" ||
	bad "the log again" "$(hash "$TMP/again.jsonl") against $(hash "$TMP/lenet.jsonl")"

# a residual block: node 3 adds node 2 to node 0's output (two readers)
printf '{"model": {"nodes": [{"op": "dense", "units": 64, "relu": true}, {"op": "dense", "units": 64, "relu": true}, {"op": "dense", "units": 64}, {"op": "add", "inputs": [2, 0]}, {"op": "relu"}, {"op": "dense", "units": 10}]}, %s, "lr": 0.02, "eval_every": 30}' \
	"$small" >"$TMP/res.json"
expect_exit 0 "a residual graph trains" "$SL" run -c "$TMP/res.json" --steps 90 -q --log "$TMP/res.jsonl"
out=$(python3 - "$TMP/res.jsonl" <<'PY' 2>&1
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])][1:]
ev = [x for x in r if "test_loss" in x]
assert len(ev) >= 2 and ev[-1]["test_loss"] < ev[0]["test_loss"], [x.get("test_loss") for x in ev]
print("ok")
PY
)
[ "$out" = ok ] && ok "... its test loss falls" || bad "residual graph's loss" "$out"

# each kind of bad graph, refused by name (exit 2)
refuse() { # NAME PATTERN MODEL-JSON
	printf '{"model": %s, %s}' "$3" "$small" >"$TMP/bad.json"
	expect_exit 2 "$1: refused" "$SL" run -c "$TMP/bad.json" --steps 2 -q
	expect_grep "$2" "$1: the message names it" "$LAST_OUT"
}
refuse "a cycle (a node reads a later one)" 'model.nodes\[1\].inputs\[0\]: "2" is not an earlier node' \
	'{"nodes": [{"op": "dense", "units": 64}, {"op": "dense", "units": 10, "inputs": [2]}, {"op": "relu"}]}'
refuse "a node reading itself" 'model.nodes\[1\].inputs\[0\]: "1" is not an earlier node' \
	'{"nodes": [{"op": "dense", "units": 64}, {"op": "dense", "units": 10, "inputs": [1]}]}'
refuse "an unknown op" "model.nodes\[0\].op: unknown \"dnse\".*did you mean 'dense'" \
	'{"nodes": [{"op": "dnse", "units": 10}]}'
refuse "a missing op" 'model.nodes\[0\].op: missing' '{"nodes": [{"units": 10}]}'
refuse "a missing input" 'model.nodes\[1\].inputs: add reads 2 inputs, given 1' \
	'{"nodes": [{"op": "dense", "units": 10}, {"op": "add", "inputs": [0]}]}'
refuse "a shape mismatch" 'model.nodes\[2\] \(add\): add of a 64x1x1 and a 10x1x1 output' \
	'{"nodes": [{"op": "dense", "units": 64}, {"op": "dense", "units": 10}, {"op": "add", "inputs": [0, 1]}]}'
refuse "a dense layer on a feature map" 'model.nodes\[1\] \(dense\): .*needs a flatten' \
	'{"nodes": [{"op": "conv2d", "units": 4, "k": 3}, {"op": "dense", "units": 10}]}'
refuse "an output that is not the classes" 'expected 10 classes \(the last node, nodes\[0\] \(dense\)' \
	'{"nodes": [{"op": "dense", "units": 64}]}'
refuse "an unread node" 'nodes\[0\]|node 0 .*nothing reads its output' \
	'{"nodes": [{"op": "dense", "units": 10}, {"op": "dense", "units": 10, "inputs": [-1]}]}'
refuse "an init_std out of (0, 1]" 'model.nodes\[1\].init_std: must be a number in \(0, 1\], got 2' \
	'{"nodes": [{"op": "dense", "units": 64}, {"op": "linear", "units": 10, "init_std": 2}]}'
refuse "a misspelt attribute" "model.nodes\[0\].unit: unknown field.*did you mean 'units'" \
	'{"nodes": [{"op": "dense", "unit": 10}]}'
refuse "an attribute of the wrong type" 'model.nodes\[0\].units: must be an integer in \[1, ' \
	'{"nodes": [{"op": "dense", "units": "10"}]}'
refuse "no nodes" 'model.nodes: expected a non-empty array' '{"nodes": []}'
refuse "a misspelt nodes" "model.node: unknown field.*did you mean 'nodes'" '{"node": []}'

# the same over the API: POST /api/v1/run
start --config "$TMP/mlp-named.json"
wait_api 60 /api/v1/status 'd["state"] in ("running", "finished")' && ok "the daemon runs" || bad "daemon" "$(cat "$TMP/body")"
expect_http "POST a graph with a cycle: 400" 400 POST /api/v1/run \
	'{"model": {"nodes": [{"op": "dense", "units": 10, "inputs": [0]}]}, "dataset": "synthetic:2000", "clock": "virtual"}'
expect_grep 'model.nodes\[0\].inputs\[0\]' "... naming the node and the field" "$LAST_OUT"
expect_http "POST a residual graph: accepted" 201 POST /api/v1/run "$(cat "$TMP/res.json")"
wait_api 60 /api/v1/status '"nodes" in d["config"]["model"] and d["version"] > 5' &&
	ok "/status: config.model holds its nodes, and it trains" || bad "/status model" "$(cat "$TMP/body")"
# 784*64+64 + 2*(64*64+64) + 64*10+10: its model_summary counts them
wait_api 10 /api/v1/status 'd["model_summary"]["nodes"] == 6 and d["model_summary"]["params"] == 59210 and d["model_summary"]["param_layers"] == 4 and d["model_summary"]["step_flops"] > 3 * 59210' &&
	ok "/status: model_summary (6 nodes, 59210 parameters, 4 layers, FLOPs)" ||
	bad "/status model_summary" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("model_summary"))' "$TMP/body")"
# its block (nodes 1 to 3, node 0's output read twice): spb_depth 2 would
# end inside it; 0, 1 (the head) and 3 (the block from its first layer)
wait_api 10 /api/v1/status 'd["model_summary"]["spb_depths"] == [0, 1, 3]' &&
	ok "/status: model_summary.spb_depths [0, 1, 3]" ||
	bad "/status spb_depths" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("model_summary"))' "$TMP/body")"
expect_http "PATCH spb_depth inside the block: 400" 400 PATCH /api/v1/workers/0 '{"spb_depth": 2}'
expect_grep 'spb_depth: 2 ends inside a block of a graph of 6 nodes: expected 0 \(full backprop\) or a block boundary: 1, 3 \(the nearest: 1 and 3\)' \
	"... naming the field and the depths it takes" "$LAST_OUT"
expect_http "PATCH spb_depth 3, the block's start: 202" 202 PATCH /api/v1/workers/0 '{"spb_depth": 3}'
# the schema's example graph (what the dashboard's form offers) trains as given
http GET /api/v1/schema >/dev/null
python3 -c 'import json,sys; json.dump(next(f for f in json.load(open(sys.argv[1]))["fields"] if f["key"] == "model")["graph"]["example"], open(sys.argv[2], "w"))' \
	"$TMP/body" "$TMP/example.json"
expect_http "POST the schema's example graph: accepted" 201 POST /api/v1/run \
	"{\"model\": $(cat "$TMP/example.json"), \"dataset\": \"synthetic:2000\", \"clock\": \"virtual\", \"threads\": 1, \"workers\": 1, \"batch\": 8}"
wait_api 60 /api/v1/status "d['config']['model'] == json.load(open('$TMP/example.json')) and d['model_summary']['nodes'] == 7 and d['version'] > 3" &&
	ok "... /status holds it as given, and it trains" || bad "the example graph" "$(cat "$TMP/body")"
kill "$PID" 2>/dev/null
wait "$PID" 2>/dev/null
finish graph
