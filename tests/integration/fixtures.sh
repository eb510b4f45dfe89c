#!/bin/sh
# The log fixtures: a short virtual-clock run per rule and per feature
# combination on the portable reference backend, compared bit for bit with
# the logs recorded in tests/fixtures/logs/ (see tests/fixtures/check.py;
# re-record with `python3 tests/fixtures/check.py build/stalelab --record`
# only when a change of the arithmetic is meant).
SL=${1:-build/stalelab}
echo "integration: log fixtures (--device ref)"
python3 "$(dirname "$0")/../fixtures/check.py" "$SL"
