#!/usr/bin/env bash
# scripts/deps.sh: installs the Debian 12 packages sluice needs to build, test
# and run its demo, when any is missing.  Runs apt-get update first.  Needs root
# (or sudo) only when something has to be installed.
set -euo pipefail

PACKAGES=(
	build-essential autoconf automake libtool pkg-config
	libpq-dev libmariadb-dev libavro-dev libcurl4-openssl-dev zlib1g-dev libdeflate-dev libsnappy-dev
	nettle-dev libjansson-dev libmicrohttpd-dev uuid-dev libcmocka-dev
	postgresql-15 postgresql-client-15
	mariadb-server mariadb-client  # the MySQL/MariaDB source's tests and benchmark (mariadbd, mariadb-binlog)
	python3-avro python3-snappy python3-psycopg2 python3-mysqldb
	procps
	iproute2 iptables       # the network fault tests: ip netns, veth, tc; DROP and NFQUEUE rules
)

missing=()
for p in "${PACKAGES[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
echo "installing: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
