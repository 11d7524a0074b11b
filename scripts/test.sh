#!/usr/bin/env bash
# scripts/test.sh: the whole test suite: installs what is missing, builds,
# runs the unit tests (make check) and the integration tests against
# throwaway PostgreSQL servers.  Exits non-zero on any failure.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh"
"$top/scripts/build.sh"
build=${SLUICE_BUILD_DIR:-$top/_build}

unit_rc=0
( cd "$build" && make -s -j"$(nproc)" check >/dev/null 2>&1 ) || unit_rc=$?
unit_pass=$(grep -h '^# PASS:' "$build/test-suite.log" 2>/dev/null | awk '{print $3}' | head -1)
# Summarise per-test TAP results from the automake logs.
pass=0; fail=0; skip=0
for f in $(find "$build/tests" -name '*.log' 2>/dev/null); do
	pass=$((pass + $(grep -c '^ok ' "$f" || true)))
	fail=$((fail + $(grep -c '^not ok ' "$f" || true)))
	skip=$((skip + $(grep -c '^ok .*# SKIP' "$f" || true)))
done
if [ "$unit_rc" -ne 0 ]; then
	echo "unit tests failed:"
	cat "$build/test-suite.log" || true
fi
echo "unit: $((pass - skip)) passed, $fail failed, $skip skipped"

int_rc=0
SLUICE_BIN="$build/sluice" /usr/bin/python3 "$top/tests/integration/run.py" "$@" || int_rc=$?

if [ "$unit_rc" -ne 0 ] || [ "$int_rc" -ne 0 ]; then
	exit 1
fi
