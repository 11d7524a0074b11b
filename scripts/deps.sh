#!/usr/bin/env bash
# scripts/deps.sh [PROFILE]: installs the Debian 12 packages sluice needs, when
# any is missing.  Runs apt-get update first.  Needs root (or sudo) only when
# something has to be installed.
#
# PROFILE:
#   all (default)  everything to build, test and benchmark: the build
#                  dependencies, PostgreSQL 15, MariaDB, ClickHouse, the test
#                  tools; then the local S3 server of the tests (s3rver,
#                  pinned by tests/integration/s3server/package-lock.json)
#                  from npm into tests/integration/s3server/node_modules, and
#                  the ClickHouse 26 engine of tests/tools/clickhouse26 (chdb,
#                  pinned by tests/integration/ch26/package-lock.json) into
#                  tests/integration/ch26/node_modules, never globally
#   build          what building sluice needs, nothing else
#   demo           what scripts/demo.sh needs: the build dependencies,
#                  PostgreSQL 15 and python3-avro (no MariaDB, ClickHouse,
#                  Node or s3rver, whose Debian packages would also start
#                  servers the demo does not use)
#
# DEPS_DRY_RUN=1 prints what would be installed and installs nothing.
set -euo pipefail

profile=${1:-all}

BUILD_PACKAGES=(
	build-essential autoconf automake libtool pkg-config
	libpq-dev libmariadb-dev libavro-dev libcurl4-openssl-dev zlib1g-dev libdeflate-dev libsnappy-dev libzstd-dev
	nettle-dev libjansson-dev libmicrohttpd-dev uuid-dev libcmocka-dev
)
DEMO_PACKAGES=(
	postgresql-15 postgresql-client-15
	python3-avro            # demo/summary.py reads the Avro files back
)
TEST_PACKAGES=(
	clickhouse-server openssl
	zookeeper               # test_ch_cluster.py: the coordinator of two ClickHouse replicas (starts no service)
	mariadb-server mariadb-client  # the MySQL/MariaDB source's tests and benchmark (mariadbd, mariadb-binlog)
	python3-snappy python3-zstandard python3-psycopg2 python3-mysqldb
	python3-boto3           # the s3 tests read objects back with an independent client
	procps
	clang libclang-rt-14-dev  # the libFuzzer targets of tests/fuzz (scripts/fuzz.sh)
	systemd                 # systemd-analyze verifies the unit in contrib/systemd
	iproute2 iptables       # the network fault tests: ip netns, veth, tc; DROP and NFQUEUE rules
)

case "$profile" in
all)	PACKAGES=("${BUILD_PACKAGES[@]}" "${DEMO_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
build)	PACKAGES=("${BUILD_PACKAGES[@]}") ;;
demo)	PACKAGES=("${BUILD_PACKAGES[@]}" "${DEMO_PACKAGES[@]}") ;;
-h|--help)
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 0 ;;
*)	echo "scripts/deps.sh: unknown profile \"$profile\" (all, build or demo)" >&2
	exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
# node and npm run the local S3 server of the tests; a machine may have them
# from elsewhere (nodesource's nodejs ships npm), so look for the commands.
if [ "$profile" = all ]; then
	if ! command -v node >/dev/null 2>&1; then
		missing+=(nodejs)
	fi
	if ! command -v npm >/dev/null 2>&1; then
		missing+=(npm)
	fi
fi
dry=${DEPS_DRY_RUN:-0}
if [ "$dry" = 1 ]; then
	echo "profile $profile: would install: ${missing[*]:-nothing}"
elif [ ${#missing[@]} -gt 0 ]; then
	echo "installing: ${missing[*]}"
	SUDO=""
	if [ "$(id -u)" -ne 0 ]; then
		SUDO="sudo"
	fi
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm_install DIR PACKAGE: installs DIR's package-lock.json into
# DIR/node_modules when PACKAGE is missing there or the lock file changed.
npm_install() {
	if [ ! -f "$1/node_modules/$2/package.json" ] ||
		[ "$1/package-lock.json" -nt "$1/node_modules/.package-lock.json" ]; then
		echo "installing $2 into $1/node_modules"
		(cd "$1" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
	fi
}

# The tests' S3 server and ClickHouse 26 engine (about 550 MB, most of it
# chdb's libchdb.so), into the project's own folders.
[ "$profile" = all ] || exit 0
tests=$(cd "$(dirname "$0")/.." && pwd)/tests/integration
if [ "$dry" = 1 ]; then
	echo "profile $profile: would run npm ci in $tests/s3server and $tests/ch26 when their lock files changed"
	exit 0
fi
npm_install "$tests/s3server" s3rver
npm_install "$tests/ch26" chdb
