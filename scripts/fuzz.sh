#!/usr/bin/env bash
# scripts/fuzz.sh: builds the libFuzzer targets of tests/fuzz with clang
# (configure --enable-fuzzers, in _build-fuzz or $SLUICE_FUZZ_DIR) and runs
# each on a seed corpus made from the project's recordings
# (tests/fuzz/seeds.py); new inputs libFuzzer finds stay in the build
# folder's corpus/<target>/.  A crash stops the run and leaves its input in
# _build-fuzz/crash-*; reproduce it with _build-fuzz/tests/fuzz/<target> FILE.
#
#   scripts/fuzz.sh [RUNS]              each target for RUNS inputs (default 20000)
#   scripts/fuzz.sh --time SECONDS      each target for SECONDS seconds
#   scripts/fuzz.sh ... TARGET...       only these targets (e.g. fuzz_binlog)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${SLUICE_FUZZ_DIR:-$top/_build-fuzz}
limit=(-runs=20000)
if [ "${1:-}" = --time ]; then
	limit=(-max_total_time="${2:?--time needs SECONDS}")
	shift 2
elif [[ "${1:-}" =~ ^[0-9]+$ ]]; then
	limit=(-runs="$1")
	shift
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
	targets=(fuzz_pgoutput fuzz_binlog fuzz_config fuzz_ocf fuzz_ch_rowbin fuzz_manifest)
fi
if ! command -v clang >/dev/null 2>&1; then
	echo "scripts/fuzz.sh: clang is not installed (Debian: clang)" >&2
	exit 3
fi

CC=clang CFLAGS="-g -O1" SLUICE_BUILD_DIR=$build SLUICE_CONFIGURE_FLAGS="--enable-fuzzers" \
	"$top/scripts/build.sh" >/dev/null
cd "$build"
rm -rf seeds
/usr/bin/python3 "$top/tests/fuzz/seeds.py" seeds
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
rc=0
for t in "${targets[@]}"; do
	mkdir -p "corpus/$t"
	t0=$(date +%s)
	# avro-c (libavro, not sluice) asks for an allocation of a negative
	# string or bytes length read from a damaged record: its malloc then
	# fails and avro_read.c reports the record as undecodable.  ASan would
	# abort on the request itself.
	# It also leaks the buffer of a value cut short by its block's end
	# (tests/fuzz/lsan-ocf.supp).
	asan=$ASAN_OPTIONS
	lsan=${LSAN_OPTIONS:-}
	if [ "$t" = fuzz_ocf ]; then
		asan=$asan:allocator_may_return_null=1
		lsan=suppressions=$top/tests/fuzz/lsan-ocf.supp
	fi
	if ! ASAN_OPTIONS=$asan LSAN_OPTIONS=$lsan "tests/fuzz/$t" "${limit[@]}" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix="$build/crash-$t-" "corpus/$t" "seeds/$t" >"$t.log" 2>&1; then
		echo "$t: FAILED (its output: $build/$t.log)"
		tail -40 "$t.log"
		rc=1
		continue
	fi
	done_line=$(grep -E '^Done [0-9]+ runs' "$t.log" | tail -1)
	cov=$(grep -oE 'cov: [0-9]+' "$t.log" | tail -1)
	echo "$t: ${done_line:-done} (${cov:-cov: ?}, corpus $(ls "corpus/$t" | wc -l) inputs, $(( $(date +%s) - t0 )) s)"
done
exit "$rc"
