#!/bin/sh
# Security of `stalelab serve` driven with curl: no path in a request reaches
# the filesystem outside --checkpoint-dir (absolute paths, '..', symbolic
# links out of it: 400 naming the field), while the operator's --resume and
# --checkpoint-on-exit name any file; the token on every call that changes
# something, with near misses refused; loopback unless told otherwise, and a
# warning when listening beyond it without a token. See docs/reliability.md,
# "Security".
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: security"

cat >"$TMP/run.json" <<'JSON'
{"model": "mlp:784-16-10", "dataset": "synthetic:3000", "lr": 0.01, "batch": 16,
 "workers": 2, "eval_every": 100, "delay": {"dist": "uniform", "mean_ms": 2}}
JSON
CK=$TMP/ck
mkdir -p "$CK/sub"

absent() { # NAME FILE: the request left no file there
	if [ -e "$2" ] || [ -L "$2" ]; then bad "$1: $2 exists"; else ok "$1"; fi
}

start --config "$TMP/run.json" --checkpoint-dir "$CK" --token s3cret \
	--checkpoint-on-exit "$TMP/exit.ckpt"
[ -n "$port" ] && ok "daemon listens" || { bad "daemon listens" "$(cat "$TMP/serve.err")"; finish security; exit 1; }
# the workers started (the run's first snapshot may come before them)
wait_api 60 /api/v1/status 'len(d["workers"]) == 2' || bad "two workers within 60 s" "$(cat "$TMP/body")"

# --- the token ------------------------------------------------------------------
expect_http "no token: 401" 401 PATCH /api/v1/run '{"lr": 0.02}'
for t in s3cre s3cret1 s3crex S3cret x ' s3cret'; do
	AUTH=$t expect_http "near miss '$t': 401" 401 PATCH /api/v1/run '{"lr": 0.02}'
done
out=$(curl -s -o /dev/null -w '%{http_code}' -X PATCH -H 'Authorization: Bearer' --data '{"lr": 0.02}' "$URL/api/v1/run")
[ "$out" = 401 ] && ok "empty bearer: 401" || bad "empty bearer: $out"
out=$(curl -s -o /dev/null -w '%{http_code}' -X PATCH -H 'Authorization: Basic s3cret' --data '{"lr": 0.02}' "$URL/api/v1/run")
[ "$out" = 401 ] && ok "another scheme: 401" || bad "another scheme: $out"
# every call that changes something, unauthorised: 401 and nothing done
expect_http "PUT workers without the token" 401 PUT /api/v1/workers '{"count": 3}'
expect_http "PATCH a worker without the token" 401 PATCH /api/v1/workers/0 '{"paused": true}'
expect_http "POST run without the token" 401 POST /api/v1/run '{"model": "logreg"}'
expect_http "POST checkpoint without the token" 401 POST /api/v1/checkpoint '{"path": "t.ckpt"}'
absent "an unauthorised checkpoint writes nothing" "$CK/t.ckpt"
expect_http "reads need no token" 200 GET /api/v1/status
[ "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["run"], len(d["workers"]), d["workers"][0]["state"] != "paused", d["config"]["lr"])' "$TMP/body")" = "1 2 True 0.01" ] &&
	ok "nothing changed" || bad "nothing changed" "$(head -c 300 "$TMP/body")"
AUTH=s3cret expect_http "the token: 202" 202 PATCH /api/v1/run '{"lr": 0.02}'
# the scheme is case-insensitive (RFC 7235), the token is not
out=$(curl -s -o /dev/null -w '%{http_code}' -X PATCH -H 'Authorization: bearer s3cret' --data '{"lr": 0.02}' "$URL/api/v1/run")
[ "$out" = 202 ] && ok "scheme 'bearer': 202" || bad "scheme 'bearer': $out"
export AUTH=s3cret

# --- paths: POST /api/v1/checkpoint -------------------------------------------------
expect_http "checkpoint: absolute path refused" 400 POST /api/v1/checkpoint "{\"path\": \"$TMP/abs.ckpt\"}"
expect_grep '"path: .*absolute path' "the 400 names path" "$LAST_OUT"
absent "no file at the absolute path" "$TMP/abs.ckpt"
for p in ../up.ckpt sub/../../up.ckpt .. sub/.. ./../up.ckpt; do
	expect_http "checkpoint: '$p' refused" 400 POST /api/v1/checkpoint "{\"path\": \"$p\"}"
	expect_grep "path: .*'\\.\\.' components" "'$p': the 400 names path" "$LAST_OUT"
done
absent "no file above the directory" "$TMP/up.ckpt"
ln -s "$TMP" "$CK/out"
expect_http "checkpoint through a link out of the directory: refused" 400 POST /api/v1/checkpoint '{"path": "out/x.ckpt"}'
expect_grep 'path: .*leads outside the checkpoint directory' "the 400 says so" "$LAST_OUT"
absent "no file through the link" "$TMP/x.ckpt"
ln -s "$TMP/planted.ckpt" "$CK/dangling.ckpt"
expect_http "checkpoint onto a link to nowhere: refused" 400 POST /api/v1/checkpoint '{"path": "dangling.ckpt"}'
absent "no file at the link's target" "$TMP/planted.ckpt"
expect_http "checkpoint: a name inside" 201 POST /api/v1/checkpoint '{"path": "good.ckpt"}'
[ -s "$CK/good.ckpt" ] && ok "written inside the directory" || bad "written inside the directory"
expect_http "checkpoint: a subdirectory inside" 201 POST /api/v1/checkpoint '{"path": "sub/./g.ckpt"}'
[ -s "$CK/sub/g.ckpt" ] && ok "written in the subdirectory" || bad "written in the subdirectory"
expect_http "checkpoint: no path" 201 POST /api/v1/checkpoint '{}'
expect_grep "\"path\":\"$CK/stalelab-run1-v" "the default name is in the directory" "$LAST_OUT"
expect_http "checkpoint: no body at all (curl -X POST)" 201 POST /api/v1/checkpoint
# a request replaces checkpoints only, never another file there (the
# daemon's log, a note): it once overwrote them
echo precious >"$CK/notes.txt"
expect_http "checkpoint onto a file that is no checkpoint: refused" 400 POST /api/v1/checkpoint '{"path": "notes.txt"}'
expect_grep 'path: .*notes.txt exists and is not a checkpoint' "the 400 says so" "$LAST_OUT"
expect_http "PATCH checkpoint onto it: refused" 400 PATCH /api/v1/run '{"checkpoint": "notes.txt"}'
expect_http "checkpoint onto a directory: refused" 400 POST /api/v1/checkpoint '{"path": "sub"}'
[ "$(cat "$CK/notes.txt")" = precious ] && ok "the file is left as it was" || bad "notes.txt overwritten"
expect_http "checkpoint onto a checkpoint: replaced" 201 POST /api/v1/checkpoint '{"path": "good.ckpt"}'

# --- paths: {"resume": path} -------------------------------------------------------
cp "$CK/good.ckpt" "$TMP/outside.ckpt"
expect_http "resume: absolute path refused" 400 POST /api/v1/run "{\"resume\": \"$TMP/outside.ckpt\"}"
expect_grep '"resume: .*absolute path' "the 400 names resume" "$LAST_OUT"
expect_http "resume: '..' refused" 400 POST /api/v1/run '{"resume": "../outside.ckpt"}'
expect_grep "resume: .*'\\.\\.' components" "the 400 names resume" "$LAST_OUT"
ln -s "$TMP/outside.ckpt" "$CK/leak.ckpt"
expect_http "resume through a link out of the directory: refused" 400 POST /api/v1/run '{"resume": "leak.ckpt"}'
expect_grep 'resume: .*leads outside' "the 400 says so" "$LAST_OUT"
expect_http "resume through a directory link out: refused" 400 POST /api/v1/run '{"resume": "out/outside.ckpt"}'
expect_http "resume /etc/passwd: refused" 400 POST /api/v1/run '{"resume": "/etc/passwd"}'
expect_grep 'resume: ' "named" "$LAST_OUT"
ln -s good.ckpt "$CK/alias.ckpt"
expect_http "resume through a link inside: allowed" 201 POST /api/v1/run '{"resume": "alias.ckpt"}'
expect_http "resume a name inside" 201 POST /api/v1/run '{"resume": "sub/g.ckpt"}'

# --- paths: a run's checkpoints (PATCH and a schedule) -----------------------------
expect_http "PATCH checkpoint: absolute refused" 400 PATCH /api/v1/run "{\"checkpoint\": \"$TMP/p.ckpt\"}"
expect_grep '"checkpoint: .*absolute path' "the 400 names checkpoint" "$LAST_OUT"
expect_http "PATCH checkpoint: through a link out refused" 400 PATCH /api/v1/run '{"checkpoint": "out/p.ckpt"}'
expect_http "PATCH checkpoint: inside" 202 PATCH /api/v1/run '{"checkpoint": "p.ckpt"}'
wait_until 30 test -s "$CK/p.ckpt"
[ -s "$CK/p.ckpt" ] && ok "the run wrote it inside" || bad "the run wrote it inside"
absent "nothing at the refused paths" "$TMP/p.ckpt"
expect_http "a schedule's absolute checkpoint: refused" 400 POST /api/v1/run \
	"{\"model\": \"logreg\", \"dataset\": \"synthetic:3000\", \"schedule\": [{\"at\": {\"v\": 5}, \"set\": {\"checkpoint\": \"$TMP/s.ckpt\"}}]}"
expect_grep 'schedule\[0\]\.set\.checkpoint: .*absolute' "the 400 names the schedule entry" "$LAST_OUT"
expect_http "a schedule's '..' checkpoint: refused" 400 POST /api/v1/run \
	'{"model": "logreg", "dataset": "synthetic:3000", "schedule": [{"at": {"v": 5}, "set": {"lr": 0.1}}, {"at": {"v": 5}, "set": {"checkpoint": "../s.ckpt"}}]}'
expect_grep 'schedule\[1\]\.set\.checkpoint' "the 400 names the entry" "$LAST_OUT"
expect_http "the run goes on after the refusals" 200 GET /api/v1/status
expect_grep '"run":3' "still the last good run" "$LAST_OUT"

# --- the operator's own flags name any file -----------------------------------------
kill -TERM $PID; wait $PID
[ -s "$TMP/exit.ckpt" ] && ok "--checkpoint-on-exit writes outside the directory" || bad "--checkpoint-on-exit" "$(cat "$TMP/serve.err")"
unset AUTH
start --resume "$TMP/exit.ckpt" --checkpoint-dir "$CK"
[ -n "$port" ] && ok "--resume reads outside the directory" || bad "--resume outside" "$(cat "$TMP/serve.err")"
kill -TERM $PID; wait $PID

# --- where it listens -----------------------------------------------------------------
"$SL" serve --help | grep -q 'default 127.0.0.1:8470' && ok "--help: loopback by default" || bad "--help: loopback by default"
listening() { # ARGS...: the first lines of a daemon's stderr, stopped once it listens
	: >"$TMP/l.err"
	"$SL" serve --config "$TMP/run.json" --quiet "$@" 2>"$TMP/l.err" &
	lp=$!
	wait_until 60 grep -q 'listening on http' "$TMP/l.err"
	kill -TERM $lp; wait $lp
	cat "$TMP/l.err"
}
out=$(listening --listen 0)
expect_grep 'listening on http://127\.0\.0\.1:[0-9]+/' "a bare port is loopback" "$out"
# (only this warning: another daemon on the bus's default port gets one of its own)
printf '%s\n' "$out" | grep -q 'without a token' && bad "no warning on loopback" "$out" || ok "no warning on loopback"
out=$(listening --listen 0.0.0.0:0)
expect_grep 'warning: listening on 0\.0\.0\.0:0 without a token' "every interface without a token: a warning" "$out"
out=$(listening --listen 0.0.0.0:0 --token s3cret)
printf '%s\n' "$out" | grep -q 'listening on http' && ! printf '%s\n' "$out" | grep -q 'without a token' &&
	ok "every interface with a token: no warning" || bad "with a token: no warning" "$out"
finish security
