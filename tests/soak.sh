#!/usr/bin/env bash
# tests/soak.sh: the property harness (tests/integration/test_property.py)
# with new random seeds over the matrix {PostgreSQL, MariaDB} x {append,
# merge} x {avro_dir, s3, ClickHouse}, batch after batch, until SECONDS have
# passed (a batch already started runs to its end).  Prints every seed it
# ran and, for a failure, its seed, cell and first differing row.
#
#   tests/soak.sh SECONDS
#   SLUICE_SOAK_SEED=N       the first seed (then N+1, N+2, ...); default random
#   SLUICE_SOAK_BATCH=N      seeds per batch, each run in every cell (default 2)
#   SLUICE_SOAK_PATTERN=P    the cells to run, as run.py -k (default: every cell,
#                            test_property.*.test_append and .test_merge)
#   SLUICE_BIN               the binary (default _build/sluice)
#
# Repeat a failing seed with
#   SLUICE_TEST_SEED=SEED run.py -k test_property.CLASS.test_MODE
# Exits 1 if any batch failed.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ne 1 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
	echo "usage: tests/soak.sh SECONDS" >&2
	exit 2
fi
end=$(($(date +%s) + $1))
batch=${SLUICE_SOAK_BATCH:-2}
if [ -n "${SLUICE_SOAK_PATTERN:-}" ]; then
	patterns=(-k "$SLUICE_SOAK_PATTERN")
else
	patterns=(-k 'test_property.*.test_append' -k 'test_property.*.test_merge')
fi
seed=${SLUICE_SOAK_SEED:-$(($(od -An -N3 -tu4 /dev/urandom | tr -d ' ') + 1000))}
export SLUICE_BIN=${SLUICE_BIN:-$top/_build/sluice}
log=$(mktemp -d /tmp/sluice-soak.XXXXXX)
ran=() failed=() n=0
while [ "$(date +%s)" -lt "$end" ]; do
	seeds=$seed
	for ((i = 1; i < batch; i++)); do seeds="$seeds,$((seed + i))"; done
	seed=$((seed + batch))
	n=$((n + 1))
	echo "soak: batch $n, seeds $seeds"
	if SLUICE_TEST_SEED=$seeds /usr/bin/python3 "$top/tests/integration/run.py" "${patterns[@]}" \
		>"$log/batch$n.log" 2>&1; then
		echo "soak: seeds $seeds passed"
	else
		failed+=("$seeds")
		echo "soak: seeds $seeds FAILED (log $log/batch$n.log):"
		grep -E "^ *(seed [0-9]+ cell|first differing row)|FAIL|ERROR" "$log/batch$n.log" | head -40
	fi
	ran+=("$seeds")
done
echo "soak: ran seeds ${ran[*]:-none} in $n batch(es); failed: ${failed[*]:-none}"
[ ${#failed[@]} -eq 0 ] && rm -rf "$log"
[ ${#failed[@]} -eq 0 ]
