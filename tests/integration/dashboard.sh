#!/bin/sh
# Integration tests of the web dashboard: GET / answers the embedded page to
# browsers and the text index to curl, the /ui/ assets with their types;
# then the browser test (tests/browser/dashboard.mjs: Debian's chromium,
# headless, driven by playwright-core from web/node_modules) with its two
# measurements, and tests/browser/models.mjs (the new-run form's models,
# graphs given as JSON, optimizers and lr schedules), tests/browser/lm.mjs
# (a language model's header) and tests/browser/dylu.mjs (async-diloco:
# a worker slowed from its row, its H and the outer staleness answer). Screenshots go to
# dashboard/ beside the binary.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: dashboard"

cat >"$TMP/run.json" <<'JSON'
{"model": "mlp:784-32-10", "dataset": "synthetic:6000", "lr": 0.01, "batch": 16,
 "workers": 2, "threads": 1, "delay": {"dist": "exp", "mean_ms": 5}}
JSON
start --config "$TMP/run.json"
get() { # ACCEPT PATH -> "STATUS TYPE" and the body in $TMP/body
	curl -s -o "$TMP/body" -w '%{http_code} %{content_type}' ${1:+-H "Accept: $1"} "$URL$2"
}
expect_grep '^200 text/plain' "GET / for curl: the text index" "$(get '' /)"
expect_grep '/api/v1/status' "the index lists the endpoints" "$(cat "$TMP/body")"
expect_grep '^200 text/html' "GET / for a browser: the dashboard" \
	"$(get 'text/html,application/xhtml+xml,*/*;q=0.8' /)"
expect_grep '<script type="module" src="/ui/app.js">' "the page loads its module" "$(cat "$TMP/body")"
expect_grep '^200 text/javascript' "/ui/app.js" "$(get '' /ui/app.js)"
expect_grep '^200 text/javascript' "uPlot, embedded" "$(get '' /ui/vendor/uPlot.iife.min.js)"
expect_grep '^200 text/css' "uPlot's CSS, embedded" "$(get '' /ui/vendor/uPlot.min.css)"
expect_grep '^404 ' "an unknown /ui/ file" "$(get 'text/html' /ui/nope.js)"
expect_grep '^200 application/json' "the API still answers a browser" "$(get 'text/html' /api/v1/status)"
kill "$PID"; wait "$PID" 2>/dev/null

# the browser tests: the dashboard, then the new-run form's models,
# optimizers and lr schedules (tests/browser/models.mjs)
out=$(dirname "$SL")/dashboard
browser_test 300 tests/browser/dashboard.mjs "$SL" "$out"
browser_test 180 tests/browser/models.mjs "$SL" "$out"
browser_test 120 tests/browser/lm.mjs "$SL"
browser_test 300 tests/browser/dylu.mjs "$SL"
finish dashboard
