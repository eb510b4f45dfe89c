#!/bin/sh
# A bounded fuzz of the HTTP API (tests/fuzz/http_fuzz.py): random bodies
# for every endpoint for a few seconds against a live daemon.
. "$(dirname "$0")/lib.inc"
SL=${1:-build/stalelab}
echo "integration: http fuzz"
out=$(python3 "$(dirname "$0")/../fuzz/http_fuzz.py" "$SL" "${FUZZ_SECONDS:-8}" "$TMP" 2>&1)
expect_grep '^fuzz-ok' "daemon survives random requests, no 5xx, clean exit" "$out"
finish fuzz
