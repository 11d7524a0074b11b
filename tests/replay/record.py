#!/usr/bin/python3
"""
tests/replay/record.py: records the pgoutput stream of a varied workload
from a throwaway PostgreSQL 15 into tests/replay/, for the replay test
(tests/unit/test_pg_replay.c; see README.md beside this file).

  SLUICE_BIN=_build/sluice /usr/bin/python3 tests/replay/record.py [--out-dir DIR]

It starts a server with the integration harness (tests/integration/
harness.py), creates the tables below and a publication, starts the
recorder (tests/tools/pg_record, built beside sluice), which creates its
slot, runs WORKLOAD, and has the recorder stream and record everything up
to the end of it.  It writes:

  workload.rec     every CopyData frame the server sent (pg_record's file)
  workload.tables  "schema<TAB>table<TAB>key,columns" per published table:
                   the primary keys the catalog holds, which the replay
                   gives the decoder in place of sluice's catalog lookup
  workload.final   "schema<TAB>table<TAB>rows<TAB>keys" per published table
                   after the workload, read from the server: the truth the
                   replay test compares the replayed records with

Re-recording changes commit timestamps, xids and LSNs, so expected.txt
must then be regenerated and reviewed again (README.md says how).
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import harness  # noqa: E402

PUBLICATION = "rec_pub"
SLOT = "rec_slot"

# Before the slot exists: none of this is in the stream.
SETUP = r"""
CREATE EXTENSION citext;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TYPE pair AS (x int, y text);
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE SCHEMA sales;
CREATE TABLE kv (id int PRIMARY KEY, v text, n int);
CREATE TABLE full_t (id int PRIMARY KEY, a text, b int);
ALTER TABLE full_t REPLICA IDENTITY FULL;
CREATE TABLE toasty (id int PRIMARY KEY, small int, big text);
ALTER TABLE toasty ALTER COLUMN big SET STORAGE EXTERNAL;
CREATE TABLE types_t (
  id int PRIMARY KEY,
  c_int2 int2, c_int4 int4, c_int8 int8,
  c_num numeric(12,2), c_numbig numeric(40,20), c_numfree numeric, c_numodd numeric(3,5), c_numneg numeric(5,-2),
  c_f4 float4, c_f8 float8, c_bool bool,
  c_text text, c_varchar varchar(20), c_char char(5), c_name name, c_citext citext,
  c_bytea bytea, c_date date, c_time time, c_timetz timetz, c_ts timestamp, c_tstz timestamptz,
  c_interval interval, c_uuid uuid, c_json json, c_jsonb jsonb, c_enum mood, c_arr int[], c_tarr text[],
  c_range int4range, c_money money, c_point point, c_inet inet, c_cidr cidr, c_mac macaddr,
  c_bit bit(4), c_varbit varbit, c_pair pair, c_dom posint, c_xml xml
);
CREATE TABLE alt (id int PRIMARY KEY, a text);
CREATE TABLE trunc_a (id int PRIMARY KEY, v text);
CREATE TABLE trunc_b (id int PRIMARY KEY, v text);
CREATE TABLE nokey (a int, b text);
ALTER TABLE nokey REPLICA IDENTITY FULL;
CREATE TABLE sales."order items" (id bigint PRIMARY KEY, "Qty" int);
CREATE TABLE unpub (id int PRIMARY KEY);
CREATE PUBLICATION rec_pub FOR TABLE kv, full_t, toasty, types_t, alt, trunc_a, trunc_b, nokey,
  sales."order items";
INSERT INTO kv VALUES (100, 'before the slot', 0);
"""

TYPES_COLS = ("id, c_int2, c_int4, c_int8, c_num, c_numbig, c_numfree, c_numodd, c_numneg, c_f4, c_f8, c_bool, "
              "c_text, c_varchar, c_char, c_name, c_citext, c_bytea, c_date, c_time, c_timetz, c_ts, c_tstz, "
              "c_interval, c_uuid, c_json, c_jsonb, c_enum, c_arr, c_tarr, c_range, c_money, c_point, c_inet, "
              "c_cidr, c_mac, c_bit, c_varbit, c_pair, c_dom, c_xml")

# One row per tuple, SQL literals in TYPES_COLS order.
TYPES_ROWS = [
    # 1: ordinary values
    ("1", "1", "42", "1234567890123", "'1234.50'", "'1.5'", "'3.14159'", "'0.00123'", "'12300'",
     "'3.14'", "'2.718281828459045'", "true",
     "'hello'", "'world'", "'abc'", "'a_name'", "'MiXeD'",
     "'\\x0102feff'", "'2024-02-29'", "'13:45:00.123456'", "'13:45:00+02'", "'2024-02-29 13:45:00.123456'",
     "'2024-02-29 13:45:00.123456+02'",
     "'1 year 2 mons 3 days 04:05:06.5'", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'",
     """'{"b": 1,  "a": [1, 2]}'""", """'{"b": 1,  "a": [1, 2]}'""", "'ok'", "'{1,2,3}'",
     """'{a,"b c",NULL,"d\\"e"}'""", "'[1,10)'", "'12.34'", "'(1.5,-2)'", "'192.168.0.1/24'", "'10.0.0.0/8'",
     "'08:00:2b:01:02:03'", "B'1010'", "B'101'", "ROW(1, 'one')", "5", "'<a>x</a>'"),
    # 2: lower edges
    ("2", "-32768", "-2147483648", "-9223372036854775808", "'-9999999999.99'",
     "'-12345678901234567890.12345678901234567890'", "'-123456789012345678901234567890.123456789'",
     "'-0.00099'", "'-9999900'",
     "'NaN'", "'Infinity'", "false",
     "E'h\\u00e9llo \\u2713 \"q\" \\\\ tab\\t newline\\n end'", "''", "'ab'", "''", "''",
     "'\\x00'", "'0044-03-15 BC'", "'00:00:00'", "'00:00:00-12'", "'-infinity'", "'-infinity'",
     "'-178000000 years'", "'00000000-0000-0000-0000-000000000000'", "'null'", "'[]'", "'sad'", "'{}'",
     "'{}'", "'empty'", "'-92233720368547758.08'", "'(0,0)'", "'::1'", "'::/0'",
     "'00:00:00:00:00:00'", "B'0000'", "B''", "ROW(NULL, NULL)", "1", "''"),
    # 3: upper edges
    ("3", "32767", "2147483647", "9223372036854775807", "'9999999999.99'",
     "'99999999999999999999.99999999999999999999'", "'1e-300'", "'0.00999'", "'9999900'",
     "'-Infinity'", "'NaN'", "true",
     "'x'", "'twenty chars exactly'", "'abcde'", "repeat('n', 63)", "'ÄÖÜ'",
     "'\\x5c27226e'", "'infinity'", "'24:00:00'", "'24:00:00+14'", "'infinity'", "'infinity'",
     "'178000000 years'", "'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF'", "'[1, \"two\", {\"3\": null}]'",
     "'{\"k\": \"v\", \"a\": true}'", "'happy'", "'{-2147483648,2147483647}'", "'{{a,b},{c,d}}'",
     "'(,5]'", "'92233720368547758.07'", "'(1e+300,-1e-300)'", "'255.255.255.255'",
     "'2001:db8::/32'", "'ff:ff:ff:ff:ff:ff'", "B'1111'", "B'1010101010101010101'",
     "ROW(2147483647, 'x,y \"z\"')", "2147483647", "'<?xml version=\"1.0\"?><r/>'"),
    # 4: small values, odd dates and offsets
    ("4", "0", "0", "0", "'-0.01'", "'0.00000000000000000001'", "'0'", "'0.00001'", "'100'",
     "'1e-45'", "'-0'", "false",
     "'trailing  '", "'x y'", "'  a'", "'Name With Spaces'", "'a b'",
     "''", "'10000-01-01'", "'12:34:56.5'", "'12:34:56.5+05:30'", "'0001-01-01 00:00:00'",
     "'1969-12-31 23:59:59.999999+00'",
     "'-1 days +02:00:00'", "'123e4567-e89b-12d3-a456-426614174000'", "'\"str\"'", "'1.50'", "'ok'",
     "'{0}'", "'{\"\"}'", "'[-5,-5]'", "'0'", "'(-0,0)'", "'10.1.2.3'", "'10.1.2.0/24'",
     "'01:23:45:67:89:ab'", "B'0001'", "B'0'", "ROW(0, '')", "42", "'text only'"),
    # 5: every column NULL
    ("5",) + ("NULL",) * 40,
    # 6: numeric NaN where a decimal cannot hold it, large and tiny numbers
    ("6", "7", "7", "7", "'NaN'", "'-0.00000000000000000001'", "'NaN'", "'0.00000'", "'0'",
     "'3.4028235e+38'", "'1.7976931348623157e308'", "true",
     "'v'", "'v'", "'c'", "'n'", "'c'",
     "decode(repeat('ab', 300), 'hex')", "'2000-02-29'", "'00:00:00.000001'", "'23:59:59.999999+00'",
     "'2038-01-19 03:14:08'", "'0044-03-15 12:00:00+00 BC'",
     "'00:00:00.000001'", "'00000000-0000-0000-0000-000000000001'", "'{}'", "'{}'", "'sad'", "'{NULL}'",
     "'{NULL}'", "'(1,2)'", "'-0.01'", "'(1,2)'", "'0.0.0.0'", "'0.0.0.0/0'", "'08:00:2b:01:02:04'",
     "B'0110'", "B'11'", "NULL", "3", "NULL"),
]
assert all(len(r) == 41 for r in TYPES_ROWS), [len(r) for r in TYPES_ROWS]


def types_insert():
    return (f"INSERT INTO types_t ({TYPES_COLS}) VALUES\n" +
            ",\n".join("(" + ", ".join(r) + ")" for r in TYPES_ROWS))


BIG1 = "repeat('0123456789abcdef', 190)"      # 3040 bytes, stored out of line (STORAGE EXTERNAL)
BIG2 = "repeat('fedcba9876543210', 200)"      # 3200 bytes

# After the slot: every statement is one transaction (autocommit) unless it
# says BEGIN ... COMMIT.  The replay test asserts facts of this workload
# directly (tests/unit/test_pg_replay.c); change both together.
WORKLOAD = [
    # INSERT with NULLs, several rows in one transaction
    "INSERT INTO kv VALUES (1, 'one', 1), (2, 'two', NULL), (3, NULL, 3)",
    # UPDATE of non-key columns under the default replica identity: new row only
    "UPDATE kv SET v = 'uno', n = n + 1 WHERE id = 1",
    # a key change: old key, then the new row
    "UPDATE kv SET id = 30 WHERE id = 3",
    # DELETE: the key only
    "DELETE FROM kv WHERE id = 2",
    # a row from before the slot
    "UPDATE kv SET n = n + 1 WHERE id = 100",
    # rolled back: nothing
    "BEGIN; INSERT INTO kv VALUES (4, 'rolled back', 4); ROLLBACK",
    # a subtransaction rolled back inside a committed transaction
    "BEGIN; INSERT INTO kv VALUES (5, 'kept', 5); SAVEPOINT s; INSERT INTO kv VALUES (6, 'undone', 6); "
    "ROLLBACK TO s; INSERT INTO kv VALUES (7, 'kept too', 7); COMMIT",
    # twenty rows in one transaction: sequence numbers 1..20
    "INSERT INTO kv SELECT g, 'bulk ' || g, g FROM generate_series(1000, 1019) g",
    # REPLICA IDENTITY FULL: old rows in full
    "INSERT INTO full_t VALUES (1, 'a', 10), (2, 'b', NULL)",
    "UPDATE full_t SET b = 11 WHERE id = 1",
    "UPDATE full_t SET id = 3 WHERE id = 2",
    "DELETE FROM full_t WHERE id = 1",
    # TOAST: a value stored out of line, left unchanged by updates
    f"INSERT INTO toasty VALUES (1, 1, {BIG1})",
    "UPDATE toasty SET small = 2 WHERE id = 1",
    "UPDATE toasty SET id = 2 WHERE id = 1",
    f"UPDATE toasty SET big = {BIG2} WHERE id = 2",
    "UPDATE toasty SET small = 3, big = NULL WHERE id = 2",
    # every type, edge values (a TYPE message precedes the first use of
    # mood, pair, posint and citext)
    types_insert(),
    "UPDATE types_t SET c_text = 'changed', c_int4 = c_int4 + 1 WHERE id = 1",
    "DELETE FROM types_t WHERE id = 5",
    # ALTER TABLE mid-stream: new RELATION messages, also inside a transaction
    "INSERT INTO alt VALUES (1, 'a1')",
    "ALTER TABLE alt ADD COLUMN b int DEFAULT 7",
    "INSERT INTO alt VALUES (2, 'a2', 20)",
    "UPDATE alt SET b = 10 WHERE id = 1",
    "ALTER TABLE alt DROP COLUMN a",
    "INSERT INTO alt VALUES (3, 30)",
    "ALTER TABLE alt ALTER COLUMN b TYPE bigint",
    "UPDATE alt SET b = b + 1 WHERE id = 3",
    "BEGIN; INSERT INTO alt VALUES (4, 40); ALTER TABLE alt ADD COLUMN c text; "
    "INSERT INTO alt VALUES (5, 50, 'c5'); COMMIT",
    # TRUNCATE of two tables in one statement, then with RESTART IDENTITY
    "INSERT INTO trunc_a VALUES (1, 'a'), (2, 'b')",
    "INSERT INTO trunc_b VALUES (1, 'x')",
    "TRUNCATE trunc_a, trunc_b",
    "INSERT INTO trunc_a VALUES (3, 'c')",
    "INSERT INTO trunc_b VALUES (5, 'z')",
    "TRUNCATE trunc_b RESTART IDENTITY",
    # no primary key, REPLICA IDENTITY FULL, duplicate rows
    "INSERT INTO nokey VALUES (1, 'x'), (1, 'x'), (2, NULL)",
    "UPDATE nokey SET b = 'y' WHERE a = 2",
    "DELETE FROM nokey WHERE b = 'x'",
    # a schema and a table name that need quoting
    "INSERT INTO sales.\"order items\" VALUES (9000000000, 5)",
    # a table outside the publication: nothing, not even an empty transaction
    "INSERT INTO unpub VALUES (1)",
    # logical decoding messages: outside any transaction, alone in one, and
    # in a multi-table transaction
    "SELECT pg_logical_emit_message(false, 'sluice', 'not transactional')",
    "SELECT pg_logical_emit_message(true, 'sluice', '\\x00ff'::bytea)",
    "BEGIN; INSERT INTO kv VALUES (8, 'multi', 8); UPDATE full_t SET a = 'm' WHERE id = 3; "
    "INSERT INTO trunc_b VALUES (2, 'y'); DELETE FROM kv WHERE id = 7; "
    "SELECT pg_logical_emit_message(true, 'sluice', 'in a transaction'); "
    "INSERT INTO sales.\"order items\" VALUES (1, NULL); COMMIT",
]

TABLES = [("public", "kv"), ("public", "full_t"), ("public", "toasty"), ("public", "types_t"),
          ("public", "alt"), ("public", "trunc_a"), ("public", "trunc_b"), ("public", "nokey"),
          ("sales", "order items")]


def pg_record_bin():
    return os.path.join(os.path.dirname(os.path.abspath(harness.sluice_bin())), "tests", "tools", "pg_record")


def key_columns(pg, ns, name):
    return [r[0] for r in pg.sql(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = (quote_ident(%s) || '.' || quote_ident(%s))::regclass "
        "AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)", (ns, name))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default=HERE)
    a = ap.parse_args()
    reason = harness.pg_available()
    if reason:
        sys.exit(f"record.py: {reason}")
    rec = pg_record_bin()
    if not os.access(rec, os.X_OK):
        sys.exit(f"record.py: {rec} not found: build sluice first (scripts/build.sh), or set SLUICE_BIN")
    out = os.path.join(a.out_dir, "workload.rec")
    with harness.PgServer({"synchronous_commit": "on"}) as pg:
        pg.execute(SETUP)
        p = subprocess.Popen([rec, "--host", "127.0.0.1", "--port", str(pg.port), "--user", "postgres",
                              "--dbname", "postgres", "--slot", SLOT, "--publication", PUBLICATION,
                              "--out", out], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            ready = p.stdout.readline().split()
            if not ready or ready[0] != "ready":
                sys.exit(f"record.py: pg_record did not start (exit {p.wait()})")
            for stmt in WORKLOAD:
                pg.execute(stmt)
            pg.wait_wal_flushed()
            stop = pg.one("SELECT pg_current_wal_flush_lsn()::text")
            p.stdin.write(stop + "\n")
            p.stdin.close()
            if p.wait(timeout=90) != 0:
                sys.exit(f"record.py: pg_record failed (exit {p.returncode})")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        with open(os.path.join(a.out_dir, "workload.tables"), "w") as f:
            for ns, name in TABLES:
                f.write(f"{ns}\t{name}\t{','.join(key_columns(pg, ns, name))}\n")
        with open(os.path.join(a.out_dir, "workload.final"), "w") as f:
            for ns, name in TABLES:
                keys = key_columns(pg, ns, name)
                q = f"SELECT count(*) FROM {harness.qident(ns)}.{harness.qident(name)}"
                n = pg.one(q)
                ks = ""
                if keys:
                    ks = ",".join(str(r[0]) for r in pg.sql(
                        f"SELECT {harness.qident(keys[0])} FROM {harness.qident(ns)}.{harness.qident(name)} "
                        f"ORDER BY 1"))
                f.write(f"{ns}\t{name}\t{n}\t{ks}\n")
    print(f"record.py: wrote {out} ({os.path.getsize(out)} bytes), workload.tables, workload.final")


if __name__ == "__main__":
    main()
