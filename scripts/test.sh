#!/usr/bin/env bash
# scripts/test.sh: the whole test suite: installs what is missing, builds,
# runs the unit tests (make check) and the integration tests against
# throwaway PostgreSQL and MariaDB servers, then the unit tests and a short integration
# subset again under AddressSanitizer and UndefinedBehaviorSanitizer, the
# threaded unit tests under ThreadSanitizer, and a short pass of the libFuzzer
# targets (scripts/fuzz.sh).
# Exits non-zero on any failure.
#
#   scripts/test.sh [-k PATTERN ...]     integration tests matching PATTERN only
#   scripts/test.sh --quick              the fast tier (a few minutes): a build with
#                                        warnings as errors under ASan and UBSan, its
#                                        unit tests, and the integration tests tagged
#                                        "quick" (one smoke test per source and sink)
#   SLUICE_SANITIZERS=0 scripts/test.sh  skip the sanitizer, ThreadSanitizer and fuzz passes
#   SLUICE_TEST_JOBS=1 scripts/test.sh   integration modules one at a time (default 2)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
quick=0
if [ "${1:-}" = --quick ]; then
	quick=1
	shift
fi
"$top/scripts/deps.sh"
# CI builds treat every compiler warning as an error.
if [ "${CI:-}" = true ]; then
	export SLUICE_CONFIGURE_FLAGS="${SLUICE_CONFIGURE_FLAGS:-} --enable-werror"
fi
"$top/scripts/build.sh"
build=${SLUICE_BUILD_DIR:-$top/_build}

# The unit tests that run threads, which the ThreadSanitizer pass runs.
TSAN_TESTS="tests/unit/test_pipeline tests/unit/test_avro_ocf tests/unit/test_avro_dir tests/unit/test_ch_sink"

# Runs make check in build dir $1 (only the tests $3 when given); prints a
# summary; returns its status.
unit_tests() {
	local dir=$1 label=$2 only=${3:-} rc=0 pass=0 fail=0 skip=0
	if [ -n "$only" ]; then
		( cd "$dir" && make -s -j"$(nproc)" check TESTS="$only" >/dev/null 2>&1 ) || rc=$?
	else
		( cd "$dir" && make -s -j"$(nproc)" check >/dev/null 2>&1 ) || rc=$?
	fi
	for f in $(find "$dir/tests" -name '*.log' 2>/dev/null); do
		pass=$((pass + $(grep -c '^ok ' "$f" || true)))
		fail=$((fail + $(grep -c '^not ok ' "$f" || true)))
		skip=$((skip + $(grep -c '^ok .*# SKIP' "$f" || true)))
	done
	if [ "$rc" -ne 0 ]; then
		echo "$label unit tests failed:"
		cat "$dir/test-suite.log" || true
		for f in $(find "$dir/tests" -name '*.log' 2>/dev/null); do
			grep -q '^not ok \|^ERROR\|Bail out' "$f" && { echo "--- $f"; tail -60 "$f"; }
		done
	fi
	echo "$label unit: $((pass - skip)) passed, $fail failed, $skip skipped"
	return "$rc"
}

# Without cmocka no unit test can be built: make check must fail and say why,
# never pass with zero tests.  A pkg-config that hides cmocka shows it.
no_cmocka() {
	local d rc=0
	d=$(mktemp -d)
	mkdir "$d/bin" "$d/build"
	printf '#!/bin/sh\nfor a in "$@"; do case "$a" in cmocka*) exit 1;; esac; done\nexec pkg-config "$@"\n' \
		>"$d/bin/pkg-config"
	chmod +x "$d/bin/pkg-config"
	if ( cd "$d/build" && PKG_CONFIG="$d/bin/pkg-config" "$top/configure" -q && make check-local ) \
		>"$d/out" 2>&1; then
		echo "make check passed without cmocka"; rc=1
	elif ! grep -q "cmocka was not found by configure" "$d/out"; then
		echo "make check without cmocka did not say why:"; cat "$d/out"; rc=1
	else
		echo "build: make check without cmocka fails and says why"
	fi
	rm -rf "$d"
	return "$rc"
}

if [ "$quick" = 1 ]; then
	san=$top/_build-asan-werror
	t0=$(date +%s)
	SLUICE_BUILD_DIR=$san SLUICE_CONFIGURE_FLAGS="--enable-sanitizers --enable-werror" "$top/scripts/build.sh"
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
	export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
	rc=0
	unit_tests "$san" "asan+ubsan" || rc=$?
	SLUICE_BIN="$san/sluice" /usr/bin/python3 "$top/tests/integration/run.py" -j 2 --tag quick "$@" || rc=$?
	echo "quick tier: $(( $(date +%s) - t0 )) s"
	exit "$rc"
fi

unit_rc=0
no_cmocka || unit_rc=$?
unit_tests "$build" "" || unit_rc=$?

int_rc=0
# Two test modules at a time: most tests wait on servers, timeouts and
# alerts far more than they compute (SLUICE_TEST_JOBS=1: one at a time).
SLUICE_BIN="$build/sluice" /usr/bin/python3 "$top/tests/integration/run.py" -j "${SLUICE_TEST_JOBS:-2}" "$@" ||
	int_rc=$?

san_rc=0
if [ "${SLUICE_SANITIZERS:-1}" != 0 ]; then
	san=$top/_build-asan
	SLUICE_BUILD_DIR=$san SLUICE_CONFIGURE_FLAGS="${SLUICE_CONFIGURE_FLAGS:-} --enable-sanitizers" "$top/scripts/build.sh"
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
	export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
	unit_tests "$san" "asan+ubsan" || san_rc=$?
	# A short subset, tagged "sanitizers" in the test modules (harness.tag on
	# a method, tags on a class, TAGS in a module): every change type, restart
	# and drain, every data type (PostgreSQL and MariaDB), a purged binlog,
	# the ClickHouse sink's types, changes and unchanged TOAST values, the
	# operator's paths (signals, the lock, slot-creation waits, the exit-4
	# recoveries), the s3 destination (uploads, multipart after a kill,
	# refused credentials) and the operations layer's quick tests.
	# (The large-transaction RSS bound does not hold under ASan's quarantine.)
	SLUICE_BIN="$san/sluice" /usr/bin/python3 "$top/tests/integration/run.py" --tag sanitizers || san_rc=$?

	# ThreadSanitizer on the unit tests that run threads: the pipeline and
	# its queue, the Avro writer's compression threads, the ClickHouse sink.
	tsan=$top/_build-tsan
	SLUICE_BUILD_DIR=$tsan SLUICE_CONFIGURE_FLAGS="${SLUICE_CONFIGURE_FLAGS:-} --enable-sanitizers=thread" \
		"$top/scripts/build.sh"
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 unit_tests "$tsan" "tsan" \
		"$TSAN_TESTS" || san_rc=$?

	# The fuzz targets (tests/fuzz), a short fixed pass (under a minute: the
	# config and Avro targets run about 300 inputs a second): scripts/fuzz.sh.
	if command -v clang >/dev/null 2>&1 || [ "${CI:-}" = true ]; then
		"$top/scripts/fuzz.sh" 5000 || san_rc=$?
	else
		echo "fuzz: skipped: clang is not installed (scripts/deps.sh installs it)"
	fi
fi

if [ "$unit_rc" -ne 0 ] || [ "$int_rc" -ne 0 ] || [ "$san_rc" -ne 0 ]; then
	exit 1
fi
