#!/usr/bin/env bash
# `make test`: the unit tests run beside the tests on the local stack, on two cores.
#
# The stack's tests mostly wait (on the emulators, the functions, Pub/Sub push) and the
# unit tests mostly compute: one after the other they took 699 s and 144 s on this
# 2-core machine; side by side, about the longer of the two. Both must pass, and pytest's
# exit 5 (nothing collected) fails like any other. With arguments (a path, -k ...), one
# pytest run with them, as before.
set -uo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
if [ "$#" -gt 0 ]; then
    exec "$python" -m pytest -q --durations=20 "$@"
fi
mkdir -p .local
unit_log=.local/unit-tests.log
echo "the unit tests run beside the stack's tests; their output: $unit_log (shown at the end)"
# Job control: without it bash starts a background job with Ctrl-C ignored, and the tests
# of tarsy's own interrupt handling would see that instead of Python's default.
set -m
"$python" -m pytest -q -p no:cacheprovider -m "not integration" --durations=10 \
    >"$unit_log" 2>&1 &
unit=$!
trap 'kill "$unit" 2>/dev/null' INT TERM
"$python" -m pytest -q -m integration --durations=20
integration=$?
wait "$unit"
unit_status=$?
echo "── the unit tests, run beside the stack's tests ($unit_log) ──"
cat "$unit_log"
echo "stack's tests: exit $integration; unit tests: exit $unit_status"
[ "$integration" -eq 0 ] && [ "$unit_status" -eq 0 ]
