#!/usr/bin/env bash
# scripts/demo.sh: a throwaway PostgreSQL with a small shop schema and a
# running workload, streamed by sluice into ./demo-out as Avro files.
# Installs what is missing, builds, runs, prints a summary, cleans up.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh" demo
"$top/scripts/build.sh"
SLUICE=${SLUICE_BIN:-${SLUICE_BUILD_DIR:-$top/_build}/sluice}
OUT=${DEMO_OUT:-$PWD/demo-out}
PGBIN=/usr/lib/postgresql/15/bin
WORKLOAD_SECONDS=${WORKLOAD_SECONDS:-8}

tmp=$(mktemp -d /tmp/sluice-demo.XXXXXX)
chmod 755 "$tmp"
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
if [ "$(id -u)" -eq 0 ]; then chown postgres "$tmp"; fi
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sluice_pid=""
cleanup() {
	[ -n "$sluice_pid" ] && kill "$sluice_pid" 2>/dev/null || true
	as_pg "$PGBIN/pg_ctl" -D "$tmp/data" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

echo "== starting a throwaway PostgreSQL 15 on 127.0.0.1:$port"
as_pg "$PGBIN/initdb" -D "$tmp/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
cat >> "$tmp/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$tmp'
wal_level = logical
max_replication_slots = 10
max_wal_senders = 10
CONF
echo "host replication all 127.0.0.1/32 trust" >> "$tmp/data/pg_hba.conf"
as_pg "$PGBIN/pg_ctl" -D "$tmp/data" -l "$tmp/pg.log" -w start >/dev/null
PSQL=(psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d postgres)

echo "== creating the shop schema with some rows"
"${PSQL[@]}" <<'SQL'
CREATE SCHEMA shop;
CREATE TYPE shop.status AS ENUM ('new', 'paid', 'shipped');
CREATE TABLE shop.customers (id bigint PRIMARY KEY, name text NOT NULL, email varchar(200),
  created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE shop.orders (id bigserial PRIMARY KEY, customer_id bigint REFERENCES shop.customers,
  amount numeric(12,2) NOT NULL, status shop.status NOT NULL DEFAULT 'new', placed_on date NOT NULL DEFAULT current_date,
  token uuid NOT NULL DEFAULT gen_random_uuid(), details jsonb, counter int NOT NULL DEFAULT 0);
INSERT INTO shop.customers (id, name, email)
  SELECT g, 'customer ' || g, 'c' || g || '@example.com' FROM generate_series(1, 100) g;
INSERT INTO shop.orders (customer_id, amount, details)
  SELECT 1 + g % 100, round((g * 7.31)::numeric % 500, 2), jsonb_build_object('items', g % 5 + 1)
  FROM generate_series(1, 1000) g;
SQL

mkdir -p "$tmp/state"
rm -rf "$OUT"
cat > "$tmp/sluice.ini" <<INI
[agent]
state_dir = $tmp/state
metrics_listen =

[source.shop]
type = postgres
host = 127.0.0.1
port = $port
user = postgres
dbname = postgres

[destination.lake]
type = avro_dir
path = $OUT
codec = deflate
compression_level = 1
max_file_seconds = 2

[stream.shop]
source = shop
destination = lake
tables = shop.*
backfill = auto
write_mode = append
INI

echo "== sluice check"
"$SLUICE" check -c "$tmp/sluice.ini"

echo "== sluice run (backfill, then streaming) while a workload runs for ${WORKLOAD_SECONDS}s"
"$SLUICE" run -c "$tmp/sluice.ini" 2> "$tmp/sluice.log" &
sluice_pid=$!
end=$((SECONDS + WORKLOAD_SECONDS))
i=0
while [ $SECONDS -lt $end ]; do
	i=$((i + 1))
	"${PSQL[@]}" <<SQL
BEGIN;
INSERT INTO shop.orders (customer_id, amount, details) VALUES (1 + $i % 100, $i.25, '{"items": 1}');
UPDATE shop.orders SET status = 'paid', counter = counter + 1 WHERE id = (SELECT max(id) FROM shop.orders WHERE status = 'new');
DELETE FROM shop.orders WHERE id = (SELECT min(id) FROM shop.orders);
UPDATE shop.customers SET email = 'changed$i@example.com' WHERE id = 1 + $i % 100;
COMMIT;
SQL
	sleep 0.2
done
echo "== workload done ($i transactions); draining sluice with SIGTERM"
kill -TERM "$sluice_pid"
wait "$sluice_pid" || { echo "sluice exited with $?"; cat "$tmp/sluice.log"; exit 1; }
sluice_pid=""
echo "== sluice run --until-caught-up (picks up anything not yet durable)"
"$SLUICE" run -c "$tmp/sluice.ini" --until-caught-up 2>> "$tmp/sluice.log"
echo "== sluice status"
"$SLUICE" status -c "$tmp/sluice.ini" || true

echo "== summary of $OUT"
/usr/bin/python3 "$top/demo/summary.py" "$OUT"
