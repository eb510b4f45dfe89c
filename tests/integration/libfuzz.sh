#!/bin/sh
# The libFuzzer harnesses (tests/fuzz/*_fuzz.c), each for LIBFUZZ_SECONDS
# (5) on a copy of its seed corpus, two at a time, after replaying the
# inputs that once crashed it: no crash, leak or sanitizer report, and a
# count of executions (tests/fuzz/run.sh). `make fuzz` runs them longer.
# Needs clang (make deps installs it); without it this fails, it does not
# skip.
secs=${LIBFUZZ_SECONDS:-5}
echo "integration: libFuzzer harnesses, $secs s each, two at a time"
if ! command -v clang >/dev/null 2>&1; then
	echo "  FAIL clang not found: the fuzz harnesses need clang and libclang-rt-14-dev (run 'make deps')"
	echo "libfuzz: 0 passed, 1 failed"
	exit 1
fi
log=$(mktemp "${TMPDIR:-/tmp}/sllibfuzz.XXXXXX")
trap 'rm -f "$log"' EXIT
# the harnesses and their own ASan+UBSan build of the tree, in build-fuzz/,
# on every core
if ! MAKEFLAGS= make --no-print-directory -j"$(nproc 2>/dev/null || echo 2)" fuzz-build >"$log" 2>&1; then
	echo "  FAIL make fuzz-build (clang, -fsanitize=fuzzer,address,undefined)"
	tail -n 20 "$log" | sed 's/^/       /'
	echo "libfuzz: 0 passed, 1 failed"
	exit 1
fi
exec sh "$(dirname "$0")/../fuzz/run.sh" build-fuzz "$secs" 2 libfuzz
