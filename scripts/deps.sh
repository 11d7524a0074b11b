#!/usr/bin/env bash
# scripts/deps.sh: installs the Debian 12 packages sluice needs to build, test
# and run its demo, when any is missing.  Runs apt-get update first.  Needs root
# (or sudo) only when something has to be installed.  Then installs the local
# S3 server of the tests (s3rver, pinned by tests/integration/s3server/
# package-lock.json) from npm into tests/integration/s3server/node_modules,
# and the ClickHouse 26 engine of tests/tools/clickhouse26 (chdb, pinned by
# tests/integration/ch26/package-lock.json) into
# tests/integration/ch26/node_modules, never globally.
set -euo pipefail

PACKAGES=(
	build-essential autoconf automake libtool pkg-config
	libpq-dev libmariadb-dev libavro-dev libcurl4-openssl-dev zlib1g-dev libdeflate-dev libsnappy-dev libzstd-dev
	nettle-dev libjansson-dev libmicrohttpd-dev uuid-dev libcmocka-dev
	postgresql-15 postgresql-client-15
	clickhouse-server openssl
	mariadb-server mariadb-client  # the MySQL/MariaDB source's tests and benchmark (mariadbd, mariadb-binlog)
	python3-avro python3-snappy python3-zstandard python3-psycopg2 python3-mysqldb
	python3-boto3           # the s3 tests read objects back with an independent client
	procps
	systemd                 # systemd-analyze verifies the unit in contrib/systemd
	iproute2 iptables       # the network fault tests: ip netns, veth, tc; DROP and NFQUEUE rules
)

missing=()
for p in "${PACKAGES[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
# node and npm run the local S3 server; a machine may have them from
# elsewhere (nodesource's nodejs ships npm), so look for the commands.
if ! command -v node >/dev/null 2>&1; then
	missing+=(nodejs)
fi
if ! command -v npm >/dev/null 2>&1; then
	missing+=(npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
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
tests=$(cd "$(dirname "$0")/.." && pwd)/tests/integration
npm_install "$tests/s3server" s3rver
npm_install "$tests/ch26" chdb
